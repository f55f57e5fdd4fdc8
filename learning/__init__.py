"""Recommendation learning: interactions, splits, negative sampling, GMF, PRME, local training,
DP-SGD, utility.

Two halves, checked by tests/unit/test_layering.py. numpy only (the pure packages may import
these): ``params``, ``gmf``, ``prme``, ``interactions``, ``split``, ``negatives``, ``metrics``,
``synthetic`` (``negatives`` also compiles two small loops with numba). With torch (imported by
the shell only): ``dp`` (the DP-SGD noise generator and Opacus's accountant), ``learner`` (the
torch reference backend), ``attribute_mlp`` (the attribute inference attack's classifier),
``pard`` and ``pard_learner`` (PARD's estimators and learner), and through them ``gmf_numpy``,
``gmf_fused``, ``prme_numpy`` and ``prme_learner``.
"""

#: the modules that import torch themselves (everything importing them loads it too)
TORCH_MODULES = (
    "learning.dp",
    "learning.learner",
    "learning.attribute_mlp",
    "learning.pard",
    "learning.pard_learner",
)
