"""Compiled passes over whole models: the copy a node sends, and the two-model mean.

Every model a node sends is a copy of its shared parameters (the model keeps training while the
message travels); ``copy_checked`` copies and checks finiteness in one pass over the source, with
the same bits as ``ndarray.copy`` and ``np.isfinite(...).all()``. ``mean_pair_rows`` is Base
Gossip Learning's merge (002 Algorithm 1, line 7) in one pass that also names the rows it changed,
for the bases of earlier versions a node keeps (learning/history.py).
"""

from __future__ import annotations

import numba
import numpy as np
import numpy.typing as npt

from learning.params import Array

_EXP = np.uint32(0x7F800000)  #: float32 exponent bits: all set for inf and NaN


@numba.njit(cache=True, nogil=True)
def _copy_checked(src: Array, dst: Array) -> bool:
    bits = src.view(np.uint32)
    out = dst.view(np.uint32)
    bad = np.uint32(0)
    for i in range(bits.shape[0]):
        b = bits[i]
        out[i] = b
        bad |= np.uint32((b & _EXP) == _EXP)
    return bool(bad == 0)


def _flat(arr: Array) -> Array | None:
    """The 1-D view of a C-contiguous float32 tensor (None for anything else)."""
    if arr.dtype == np.float32 and arr.flags.c_contiguous:
        return arr.reshape(-1)
    return None


def copy_checked(src: Array) -> tuple[Array, bool]:
    """A copy of ``src`` and whether every value of it is finite."""
    flat = _flat(src)
    if flat is None or flat.size == 0:
        return src.copy(), bool(np.isfinite(src).all())
    dst = np.empty_like(src)
    return dst, bool(_copy_checked(flat, dst.reshape(-1)))


def warm() -> None:
    """Compile (or load from the cache) the kernels."""
    x = np.arange(4, dtype=np.float32)
    copy_checked(x)
    mean_pair_rows(x.reshape(2, 2).copy(), x.reshape(2, 2), 1)


@numba.njit(cache=True, nogil=True)
def _mean_pair(
    own: Array, other: Array, scale: np.float32, rows_out: npt.NDArray[np.int64], old_out: Array
) -> tuple[int, bool]:
    """``own = (own + other) * scale`` (float32, numpy's order of operations), one row at a time;
    the rows whose bits change go to ``rows_out`` and, while there is room, their old values to
    ``old_out``. Returns (rows changed, every new value finite).

    Flat indexing and a row's three steps (mean, compare, write) as separate loops, so that each
    vectorises: half the time of one loop doing all three through per-row views (0.38 against
    0.72 ms on a 38,334 x 32 table, bit for bit the same)."""
    n_rows, n_cols = own.shape
    cap = old_out.shape[0]
    mine = own.reshape(-1)
    theirs = other.reshape(-1)
    mine_bits = mine.view(np.uint32)
    new = np.empty(n_cols, dtype=np.float32)
    new_bits = new.view(np.uint32)
    changed = 0
    bad = np.uint32(0)
    for r in range(n_rows):
        at = r * n_cols
        for j in range(n_cols):
            new[j] = (mine[at + j] + theirs[at + j]) * scale
        diff = np.uint32(0)
        for j in range(n_cols):
            b = new_bits[j]
            bad |= np.uint32((b & _EXP) == _EXP)
            diff |= b ^ mine_bits[at + j]
        if diff != 0:
            if changed < rows_out.shape[0]:
                rows_out[changed] = r
            if changed < cap:
                for j in range(n_cols):
                    old_out[changed, j] = mine[at + j]
            changed += 1
        for j in range(n_cols):
            mine[at + j] = new[j]
    return changed, bool(bad == 0)


def mean_pair_rows(own: Array, other: Array, keep: int) -> tuple[npt.NDArray[np.int64], Array, int, bool]:
    """The mean of two float32 2-D tensors written into ``own`` (bit for bit what ``own += other;
    own *= 0.5`` gives), with the rows that changed and the old values of the first ``keep`` of
    them (``keep`` -1: all). Returns (rows, old rows, how many changed, finite)."""
    n = own.shape[0]
    cap = n if keep < 0 else min(keep, n)
    rows = np.empty(n if keep != 0 else 0, dtype=np.int64)
    old = np.empty((cap, own.shape[1]), dtype=np.float32)
    changed, finite = _mean_pair(own, np.ascontiguousarray(other), np.float32(0.5), rows, old)
    kept = min(changed, cap)
    return rows[:kept], old[:kept], changed, finite
