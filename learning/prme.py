"""PRME: Personalized Ranking Metric Embedding (Feng et al., IJCAI 2015) as named parameters.

For user u with previous item l_c (at time t_c) and candidate l (at time t):

    D(u, l_c, l) = α‖X^P_u − X^P_l‖² + (1−α)‖X^S_l − X^S_{l_c}‖²   if t − t_c ≤ τ
                 = ‖X^P_u − X^P_l‖²                                otherwise

with α = 0.2, τ = 6 h; the smallest D is the most relevant (docs/design.md, PRME). A node holds its own
preference row ``user_p`` (X^P_u), every item's preference row ``item_p`` (X^P) and sequential row
``item_s`` (X^S).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from learning.params import Array, Params

USER_P, ITEM_P, ITEM_S = "user_p", "item_p", "item_s"
PARAM_NAMES: tuple[str, ...] = (USER_P, ITEM_P, ITEM_S)
SHARE_LESS_NAMES: tuple[str, ...] = (ITEM_P, ITEM_S)
ALPHA = 0.2
TAU_SECONDS = 6 * 3600.0


@dataclass(frozen=True)
class UserSide:
    """What PRME needs about the user to rank candidates: X^P_u, the previous item and the gap."""

    user_p: Array  # shape (d,)
    previous_item: int
    gap_seconds: float


def init_params(n_items: int, dim: int, seed: int) -> Params:
    """The shared initial model θ_0 (same seed, same model on every node)."""
    rng = np.random.default_rng([seed, 0x9E3E])
    scale = 0.1 / np.sqrt(dim)
    return {
        USER_P: rng.normal(0.0, scale, (1, dim)).astype(np.float32),
        ITEM_P: rng.normal(0.0, scale, (n_items, dim)).astype(np.float32),
        ITEM_S: rng.normal(0.0, scale, (n_items, dim)).astype(np.float32),
    }


def weights(
    gap_seconds: npt.NDArray[np.float64] | float,
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    """(w_pref, w_seq) per example: (α, 1−α) within τ of the previous item, else (1, 0)."""
    within = np.asarray(gap_seconds) <= TAU_SECONDS
    w_p = np.where(within, ALPHA, 1.0).astype(np.float32)
    return w_p, (1.0 - w_p).astype(np.float32) * within


def distance(
    params: Params,
    user_p: Array,
    previous: npt.NDArray[np.int64],
    items: npt.NDArray[np.int64] | slice,
    gap_seconds: npt.NDArray[np.float64] | float,
) -> npt.NDArray[np.float32]:
    """D(u, l_c, l) for each (previous[k], items[k]) pair (``previous`` may be a scalar array)."""
    if np.ndim(gap_seconds) == 0 and float(gap_seconds) > TAU_SECONDS:  # one gap, beyond τ
        a = user_p - params[ITEM_P][items]
        return np.asarray((a * a).sum(axis=-1), dtype=np.float32)
    w_p, w_s = weights(gap_seconds)
    a = user_p - params[ITEM_P][items]
    pref = w_p * (a * a).sum(axis=-1)
    if not np.any(w_s):  # beyond τ: preference space only (``params`` may then lack ITEM_S)
        return np.asarray(pref, dtype=np.float32)
    b = params[ITEM_S][items] - params[ITEM_S][previous]
    return np.asarray(pref + w_s * (b * b).sum(axis=-1), dtype=np.float32)


def score(
    params: Params, user_side: UserSide, items: npt.NDArray[np.int64] | slice
) -> npt.NDArray[np.float32]:
    """Relevance of ``items`` (ids, or a slice of the tables; higher is better): −D. The attacks
    rank with this."""
    previous = np.asarray(user_side.previous_item, dtype=np.int64)  # broadcasts over items
    return -distance(params, user_side.user_p, previous, items, user_side.gap_seconds)
