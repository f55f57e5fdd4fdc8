"""A coalesced gradient, compiled: the distinct rows of a batch and the sum of each one's rows.

``numpy.add.reduceat`` over the stably sorted rows is what the numpy steps used (learning/gmf_numpy.py,
learning/prme_numpy.py); called on a few hundred rows it costs ~35-80 µs, mostly in numpy's call
overheads. This kernel does the same additions in the same order, so the sums are bit for bit
numpy's: a segment's first row, plus the rest summed as numpy's pairwise summation sums a strided
reduction (fewer than 8 values: one by one from -0.0; up to 128: eight interleaved partial sums,
then the remainder). A segment of more than 129 equal rows (numpy would recurse) falls back to
numpy; none occurs in a batch of a recommender's rows, and the test checks both paths.
"""

from __future__ import annotations

import numba
import numpy as np
import numpy.typing as npt

from learning.params import Array

#: numpy's pairwise-summation block (PW_BLOCKSIZE): longer reductions recurse; the kernel leaves them
#: to numpy
_BLOCK = 128


def sum_rows(idx: npt.NDArray[np.int64], values: Array) -> tuple[npt.NDArray[np.int64], Array]:
    """Distinct ``idx`` (ascending) and the sum of ``values`` rows for each, as
    ``np.add.reduceat(values[order], starts, axis=0)`` over the stable sort gives them."""
    if values.dtype == np.float32 and values.ndim == 2 and len(idx):
        rows, sums, ok = _coalesce(np.ascontiguousarray(idx, dtype=np.int64), np.ascontiguousarray(values))
        if ok:
            return rows, sums
    return reduceat_rows(idx, values)


def reduceat_rows(idx: npt.NDArray[np.int64], values: Array) -> tuple[npt.NDArray[np.int64], Array]:
    """The numpy reference (and the fallback)."""
    order = np.argsort(idx, kind="stable")
    sorted_idx = idx[order]
    starts = np.flatnonzero(np.concatenate(([True], sorted_idx[1:] != sorted_idx[:-1])))
    return sorted_idx[starts], np.add.reduceat(values[order], starts, axis=0)


@numba.njit(cache=True, nogil=True)
def _segment_sum(values: Array, order: npt.NDArray[np.int64], lo: int, n: int, c: int) -> np.float32:
    """Σ values[order[lo + i], c] for i < n in numpy's pairwise order (n ≤ 128)."""
    if n < 8:
        res = np.float32(-0.0)
        for i in range(n):
            res += values[order[lo + i], c]
        return res
    r0 = values[order[lo], c]
    r1 = values[order[lo + 1], c]
    r2 = values[order[lo + 2], c]
    r3 = values[order[lo + 3], c]
    r4 = values[order[lo + 4], c]
    r5 = values[order[lo + 5], c]
    r6 = values[order[lo + 6], c]
    r7 = values[order[lo + 7], c]
    i = 8
    while i < n - (n % 8):
        r0 += values[order[lo + i], c]
        r1 += values[order[lo + i + 1], c]
        r2 += values[order[lo + i + 2], c]
        r3 += values[order[lo + i + 3], c]
        r4 += values[order[lo + i + 4], c]
        r5 += values[order[lo + i + 5], c]
        r6 += values[order[lo + i + 6], c]
        r7 += values[order[lo + i + 7], c]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += values[order[lo + i], c]
        i += 1
    return np.float32(res)


@numba.njit(cache=True, nogil=True)
def _coalesce(idx: npt.NDArray[np.int64], values: Array) -> tuple[npt.NDArray[np.int64], Array, bool]:
    """(distinct rows, their sums, True), or False where a segment is longer than the kernel sums."""
    order = np.argsort(idx, kind="mergesort")  # stable, as numpy's kind="stable"
    n = idx.shape[0]
    starts = np.empty(n + 1, np.int64)
    distinct = 0
    for k in range(n):
        if k == 0 or idx[order[k]] != idx[order[k - 1]]:
            starts[distinct] = k
            distinct += 1
    starts[distinct] = n
    d = values.shape[1]
    rows = np.empty(distinct, np.int64)
    sums = np.empty((distinct, d), values.dtype)
    rest = np.empty(d, values.dtype)
    for j in range(distinct):
        lo, hi = starts[j], starts[j + 1]
        m = hi - lo - 1  # the rows after the first
        if m > _BLOCK:
            return rows, sums, False
        first = order[lo]
        rows[j] = idx[first]
        if m == 0:
            sums[j] = values[first]
        elif m < 8:  # numpy's short case, row by row (the same additions per column, in order)
            rest[:] = np.float32(-0.0)
            for i in range(m):
                r = order[lo + 1 + i]
                for c in range(d):
                    rest[c] += values[r, c]
            for c in range(d):
                sums[j, c] = values[first, c] + rest[c]
        else:
            for c in range(d):
                sums[j, c] = values[first, c] + _segment_sum(values, order, lo + 1, m, c)
    return rows, sums, True
