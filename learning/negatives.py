"""Uniform negative sampling: items the user has not interacted with (NCF §3.1, 4 per positive)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def sample_negatives(
    rng: np.random.Generator,
    excluded: npt.NDArray[np.bool_],
    count: int,
    free: int | None = None,
) -> npt.NDArray[np.int64]:
    """``count`` item ids drawn uniformly (with replacement) among items where ``excluded`` is False.

    Rejection sampling: each pass draws about enough ids for what is missing and keeps the allowed
    ones in the order drawn. ``free`` is the number of allowed items, when the caller knows it.
    learning.gmf_fused.draw_negatives draws the same ids with one compiled pass per draw."""
    n_items = excluded.shape[0]
    if free is None:
        free = n_items - int(np.count_nonzero(excluded))
    if free <= 0:
        raise ValueError("no item is left to sample negatives from")
    out = np.empty(count, dtype=np.int64)
    filled = 0
    while filled < count:
        want = count - filled
        draw = rng.integers(0, n_items, size=int(want * n_items / free) + 8)
        draw = draw[~excluded[draw]][:want]
        out[filled : filled + len(draw)] = draw
        filled += len(draw)
    return out
