"""A membership attack calibrated per example with reference models, in the manner of RMIA, sans I/O.

RMIA (Zarifzadeh et al., ICML 2024, "Low-Cost High-Power Membership Inference Attacks", §3)
scores an example x by how often its likelihood ratio LR(x) = Pr(x | θ) / Pr(x) beats that of
population examples z: score(x) = Pr_z[LR(x) / LR(z) > γ], with Pr(x) the average of x's
likelihood over reference models the attacker trains on data it could have. Both of MPE's
confounders are divided out: an item every model scores high (Pr(x) large) and a user whose
model scores everything high (the comparison is with z of the same model).

Here an example is an interaction (u, i) of a GMF: Pr(x | θ_u) = σ(score) under u's model as the
observer holds it. The reference is one GMF the attacker trains centrally on the interactions of
the users whose data it has (:func:`train_reference`: its own and public users'); Pr(x) is the
mean over those users of σ(e_r · v_i) (:func:`population_likelihood`). The population z of u
are items u never touched, drawn by the attacker (it cannot know u's non-members; untouched items
are the population RMIA compares with). Where the reading departs from RMIA: one reference model,
not several, and its Pr(x) an average over its users instead of over models (an offline
reference, RMIA §4's "offline" setting with a single OUT model; no IN models are trained).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]


def _sigmoid(x: Floats) -> Floats:
    out: Floats = 1.0 / (1.0 + np.exp(-np.clip(x, -30.0, 30.0)))
    return out


def train_reference(
    items: list[Ints],
    n_items: int,
    rng: np.random.Generator,
    factors: int = 16,
    epochs: int = 20,
    lr: float = 0.05,
    negatives: int = 4,
    l2: float = 1e-4,
) -> tuple[Floats, Floats]:
    """A GMF (user rows U, item rows V; score e_u · v_i) trained on the reference users'
    ``items`` with the binary cross-entropy of each interaction against ``negatives`` items drawn
    from those the user did not touch, by minibatch SGD. Pure: the generator is the only
    randomness."""
    if not items or not any(len(x) for x in items):
        raise ValueError("a reference model needs at least one user with interactions")
    n_users = len(items)
    users_ = np.repeat(np.arange(n_users), [len(x) for x in items])
    pos = np.concatenate(items).astype(np.int64)
    touched = np.zeros((n_users, n_items), dtype=bool)
    touched[users_, pos] = True
    U = rng.normal(0.0, 0.1, (n_users, factors))
    V = rng.normal(0.0, 0.1, (n_items, factors))
    batch = 1024
    for _ in range(epochs):
        order = rng.permutation(len(pos))
        for start in range(0, len(order), batch):
            idx = order[start : start + batch]
            u = np.repeat(users_[idx], 1 + negatives)
            neg = rng.integers(0, n_items, (len(idx), negatives))
            it = np.concatenate((pos[idx, None], neg), axis=1).ravel()
            label = np.tile(np.r_[1.0, np.zeros(negatives)], len(idx))
            keep = (label == 1.0) | ~touched[u, it]  # a drawn negative the user touched is dropped
            u, it, label = u[keep], it[keep], label[keep]
            err = _sigmoid(np.sum(U[u] * V[it], axis=1)) - label  # d BCE / d score
            gu = err[:, None] * V[it] + l2 * U[u]
            gv = err[:, None] * U[u] + l2 * V[it]
            np.add.at(U, u, -lr * gu)
            np.add.at(V, it, -lr * gv)
    return U, V


def population_likelihood(U: Floats, V: Floats) -> Floats:
    """Pr(x) for every item: the mean over the reference users of σ(e_r · v_i)."""
    out: Floats = _sigmoid(U @ V.T).mean(axis=0)
    return out


def rmia_scores(
    probability: npt.ArrayLike,
    examples: Ints,
    population: Ints,
    reference: Floats,
    gamma: float = 1.0,
    smooth: bool = True,
) -> Floats:
    """score(x) = Pr_z[LR(x) / LR(z) > γ] for each item x of ``examples``, LR = Pr(x | θ) / Pr(x),
    over the items z of ``population``, under one model's per-item probabilities ``probability``.

    ``smooth`` (the default) breaks the fraction's ties, which leave no threshold at a low FPR:
    with n population items the fraction takes n + 1 values, and every example past the highest
    z scores 1.0 (on ML-100k many members and non-members do, so TPR at 1% FPR read 0 in every
    row, finding 25). The smoothed score is (k + f) / (n + 1), k the z beaten and f ∈ [0, 1] where
    LR(x) / γ lies between the z it falls between, in log LR, linearly; past the highest z,
    1 − LR(z_max) / (LR(x) / γ); below the lowest, (LR(x) / γ) / LR(z_min). It is continuous and
    strictly increasing in LR(x), and never reorders two examples whose fractions differ by a
    whole z; without ``smooth`` the fraction as RMIA writes it."""
    p = np.clip(np.asarray(probability, dtype=np.float64), 1e-12, 1.0)
    if not len(population):
        raise ValueError("RMIA needs population items to compare with")
    ratio = p / np.clip(reference, 1e-12, 1.0)
    lr_x = ratio[np.asarray(examples, dtype=np.int64)] / gamma
    lr_z = np.sort(ratio[np.asarray(population, dtype=np.int64)])
    n = len(lr_z)
    # how many z have LR(z) < LR(x) / γ
    beaten = np.searchsorted(lr_z, lr_x, side="left")
    if not smooth:
        fraction: Floats = beaten / n
        return fraction
    log_x, log_z = np.log(lr_x), np.log(lr_z)
    f = np.empty(len(lr_x))
    top, bottom = beaten == n, beaten == 0
    f[top] = 1.0 - np.exp(log_z[-1] - log_x[top])
    f[bottom] = np.exp(log_x[bottom] - log_z[0])
    mid = ~(top | bottom)
    lo, hi = log_z[beaten[mid] - 1], log_z[beaten[mid]]
    width = hi - lo
    f[mid] = np.where(width > 0, (log_x[mid] - lo) / np.where(width > 0, width, 1.0), 0.0)
    out: Floats = (beaten + np.clip(f, 0.0, 1.0)) / (n + 1)
    return out
