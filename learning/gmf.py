"""Generalized Matrix Factorization (He et al., NCF 2017 §3.2) as plain named parameters.

ŷ_ui = σ(hᵀ(p_u ⊙ q_i) + b). A node holds one user row ``user`` (its own p_u), every item row
``item``, the output weights ``h`` and bias ``b``. docs/design.md, Learning.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from learning.params import Params

USER, ITEM, H, B = "user", "item", "h", "b"
PARAM_NAMES: tuple[str, ...] = (USER, ITEM, H, B)
SHARE_LESS_NAMES: tuple[str, ...] = (ITEM, H, B)  #: Share less: the user embedding stays home


def init_params(n_items: int, factors: int, seed: int) -> Params:
    """The shared initial model θ_0 (002 Algorithm 1 line 1): same seed, same model on every node."""
    rng = np.random.default_rng([seed, 0x6D66])
    bound = np.sqrt(3.0 / factors)
    return {
        USER: rng.normal(0.0, 0.01, (1, factors)).astype(np.float32),
        ITEM: rng.normal(0.0, 0.01, (n_items, factors)).astype(np.float32),
        H: rng.uniform(-bound, bound, (factors,)).astype(np.float32),
        B: np.zeros((1,), dtype=np.float32),
    }


def score(
    params: Params, user_side: npt.NDArray[np.float32], items: npt.NDArray[np.int64] | slice
) -> npt.NDArray[np.float32]:
    """Relevance σ(hᵀ(p ⊙ q_i) + b) of ``items`` (ids, or a slice of the table) for the user
    embedding ``user_side`` (shape (d,), or one row per item)."""
    q = params[ITEM][items]
    if user_side.ndim == 1:  # one user: (q ⊙ p)·h = q·(p ⊙ h), one (n × d) pass
        logits = q @ (user_side * params[H]) + params[B][0]
    elif isinstance(items, slice) or np.result_type(q, user_side) != q.dtype:  # one user row per item
        logits = (q * user_side) @ params[H] + params[B][0]  # (q is a view of the table, or 16-bit)
    else:  # q is the gather's own copy: the product in place, the same values, no temporary
        logits = np.multiply(q, user_side, out=q) @ params[H] + params[B][0]
    with np.errstate(over="ignore"):  # exp(-logit) = inf past logit -88 in float32: σ is then 0, exactly
        return np.asarray(1.0 / (1.0 + np.exp(-logits)), dtype=np.float32)
