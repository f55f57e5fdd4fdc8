"""Recommendation learning: interactions, splits, negative sampling, GMF, PRME, local training,
DP-SGD, utility.

Two halves, checked by tests/unit/test_layering.py. numpy only (the pure packages may import
these): ``params``, ``gmf``, ``prme``, ``interactions``, ``split``, ``negatives``, ``metrics``,
``synthetic``, ``pard`` (PARD's estimators, numpy with analytic gradients) (``negatives`` also
compiles two small loops with numba). With torch (imported by the shell only): ``dp`` (the DP-SGD
noise generator and Opacus's accountant), ``learner`` (the torch reference backend),
``attribute_mlp`` (the attribute inference attack's classifier), and through them ``gmf_numpy``,
``gmf_fused``, ``prme_numpy``, ``prme_learner`` and ``pard_learner``.
"""

#: the modules that import torch themselves (everything importing them loads it too)
TORCH_MODULES = (
    "learning.dp",
    "learning.learner",
    "learning.attribute_mlp",
)
