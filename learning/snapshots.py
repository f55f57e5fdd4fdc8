"""A learner's snapshots: the copy it sends and the 16-bit recovery point, in compiled passes.

Every model a node sends is a copy of its shared parameters (the model keeps training while the
message travels), checked for finiteness (a non-finite model is never sent). The last finite
snapshot is also the point a node goes back to when training or a merge leaves a non-finite
value (CIA paper threat model, THREAT_MODEL.md), kept as the upper 16 bits of every float32
(``learning.params.truncate16``): a second float32 copy of every model would be a quarter of a
large simulation's memory (``bench/scale.py``).

``copy_checked`` copies and checks in one pass over the source; ``truncate_into`` writes the
recovery point into the buffer the learner reuses, reading the copy while it is still in cache.
Both are exact: the same bits as ``ndarray.copy``, ``np.isfinite(...).all()`` and ``truncate16``.
"""

from __future__ import annotations

import numba
import numpy as np

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


@numba.njit(cache=True, nogil=True)
def _truncate_into(src: Array, dst: Array) -> None:
    bits = src.view(np.uint32)
    for i in range(bits.shape[0]):
        dst[i] = np.uint16(bits[i] >> np.uint32(16))


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


def truncate_into(src: Array, kept: Array | None) -> Array:
    """``truncate16`` of ``src``, written into ``kept`` when it has the right shape and dtype."""
    flat = _flat(src)
    if flat is None:
        return src.copy()
    if kept is None or kept.dtype != np.uint16 or kept.shape != src.shape or not kept.flags.c_contiguous:
        kept = np.empty(src.shape, dtype=np.uint16)
    if flat.size:
        _truncate_into(flat, kept.reshape(-1))
    return kept


def warm() -> None:
    """Compile (or load from the cache) both kernels."""
    x = np.arange(4, dtype=np.float32)
    copy, _ = copy_checked(x)
    truncate_into(copy, None)
