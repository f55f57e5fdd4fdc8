"""NCF as paper 004 trains it (FedNCF, §IV-A; the authors' code): a user and an item embedding
concatenated into an MLP head, as plain named parameters with an analytic gradient.

ŷ_ui = σ(w2ᵀ ReLU(W1ᵀ [p_u ; q_i] + b1) + b2), with d = 64 and one hidden layer of 32
(``Linear(128, 32) → ReLU → Linear(32, 1) → sigmoid``). A node holds its own user row ``user``,
every item row ``item``, and the head ``w1``, ``b1``, ``w2``, ``b2``. Under Share less the user row
stays home, as GMF's does. The loss is GMF's (binary cross-entropy on sampled negatives, NCF §4.1).

``W1`` is stored as (2d, hidden): its first d rows read the user, the last d the item, so a user's
part of the hidden layer is computed once per batch (``p @ W1[:d]``) and an item's once per row.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from learning.params import Array, Params

USER, ITEM, W1, B1, W2, B2 = "user", "item", "w1", "b1", "w2", "b2"
PARAM_NAMES: tuple[str, ...] = (USER, ITEM, W1, B1, W2, B2)
SHARE_LESS_NAMES: tuple[str, ...] = (ITEM, W1, B1, W2, B2)  #: Share less: the user row stays home


def init_params(n_items: int, dim: int, hidden: int, seed: int, std: float = 0.01) -> Params:
    """θ_0, the same on every node: embeddings N(0, ``std``) (0.01 as GMF's; 004's code keeps
    torch's ``nn.Embedding`` draw, N(0, 1)), the head as torch's ``nn.Linear`` draws it
    (U(±1/√fan_in) for weights and biases)."""
    rng = np.random.default_rng([seed, 0x6E6366])
    b_in, b_hid = 1.0 / np.sqrt(2 * dim), 1.0 / np.sqrt(hidden)
    return {
        USER: rng.normal(0.0, std, (1, dim)).astype(np.float32),
        ITEM: rng.normal(0.0, std, (n_items, dim)).astype(np.float32),
        W1: rng.uniform(-b_in, b_in, (2 * dim, hidden)).astype(np.float32),
        B1: rng.uniform(-b_in, b_in, (hidden,)).astype(np.float32),
        W2: rng.uniform(-b_hid, b_hid, (hidden,)).astype(np.float32),
        B2: rng.uniform(-b_hid, b_hid, (1,)).astype(np.float32),
    }


def _hidden(params: Params, user_side: Array, q: Array) -> Array:
    """The hidden layer's pre-activation W1ᵀ[p ; q] + b1 for rows ``q`` (user_side (d,) or one
    row per item)."""
    w1 = params[W1]
    k = w1.shape[0] - q.shape[1]  # the user side's width: d, or 2d for PARD's two rows side by side
    return np.asarray(user_side @ w1[:k] + q @ w1[k:] + params[B1], dtype=np.float32)


def logits(params: Params, user_side: Array, items: npt.NDArray[np.int64] | slice) -> Array:
    """w2ᵀ ReLU(W1ᵀ[p ; q_i] + b1) + b2 of ``items`` (ids, or a slice of the table)."""
    z = _hidden(params, user_side, params[ITEM][items])
    return np.asarray(np.maximum(z, 0.0) @ params[W2] + params[B2][0], dtype=np.float32)


def score(params: Params, user_side: Array, items: npt.NDArray[np.int64] | slice) -> npt.NDArray[np.float32]:
    """Relevance ŷ_ui of ``items`` for the user embedding ``user_side``."""
    with np.errstate(over="ignore"):  # σ's limit, 0, where exp(-logit) overflows
        return np.asarray(1.0 / (1.0 + np.exp(-logits(params, user_side, items))), dtype=np.float32)


def gradients(
    params: Params, user_row: Array, idx: npt.NDArray[np.int64], y: npt.NDArray[np.float32]
) -> tuple[dict[str, Array], Array]:
    """The gradients of the batch's mean BCE: the dense tensors' (``user``, ``w1``, ``b1``,
    ``w2``, ``b2``), and one row per example for the item table (to be summed by item)."""
    q = params[ITEM][idx]
    z = _hidden(params, user_row, q)
    a = np.maximum(z, 0.0)
    out = a @ params[W2] + params[B2][0]
    with np.errstate(over="ignore"):
        g = ((1.0 / (1.0 + np.exp(-out))) - y) * np.float32(1.0 / len(idx))
    g = g.astype(np.float32, copy=False)
    dz = (g[:, None] * params[W2]) * (z > 0)  # (B, hidden)
    dz_sum = dz.sum(axis=0)
    w1 = params[W1]
    k = w1.shape[0] - q.shape[1]  # the user side's width
    grads = {
        USER: (w1[:k] @ dz_sum)[None, :].astype(np.float32),
        W1: np.concatenate((np.outer(user_row, dz_sum), q.T @ dz)).astype(np.float32),
        B1: dz_sum.astype(np.float32),
        W2: (a.T @ g).astype(np.float32),
        B2: np.array([g.sum()], dtype=np.float32),
    }
    return grads, (dz @ w1[k:].T).astype(np.float32)
