"""How the C allocator hands large blocks back: glibc's mmap threshold, set for a whole process.

glibc serves a block of at least the *mmap threshold* with its own ``mmap`` and unmaps it on
``free``; smaller blocks come from the heap, whose freed space stays with the process until
it sits at the top. The threshold starts at 128 KiB and, by default, rises to the size of any
mmapped block freed (up to 32 MiB). A FedAvg round frees thousands of model-sized blocks (frames,
decoded updates, snapshots; 4-16 MB at the POI shapes), so after the first round they all come
from the heap, where small long-lived allocations made between them (scores, the fictive user's
per-target state) split the holes they leave: the process then grows past what it holds.
Setting the threshold fixes it (no more rising): blocks of that size and above are mmapped and
go back to the system when freed. The figures are the same: only where blocks live changes.
Measured by ``python -m bench.fedavg_memory --mmap-threshold-mib ...``.
"""

from __future__ import annotations

import ctypes
import ctypes.util

M_MMAP_THRESHOLD = -3  #: mallopt's parameter number (malloc.h)


def set_mmap_threshold(mib: float) -> bool:
    """Blocks of at least ``mib`` MiB are mmapped from now on (glibc's dynamic threshold off).
    False where the C library is not glibc or refuses the value (nothing changed)."""
    if not 0 < mib <= 32:  # glibc's HEAP_MAX/2 cap on 64-bit systems is 32 MiB
        raise ValueError("the mmap threshold must be in (0, 32] MiB")
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, int(mib * 2**20)))
