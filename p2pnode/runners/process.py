"""Per-process tuning for node processes: one torch thread, an allocator that keeps model buffers
(and gives them back between runs).

Every model frame is a fresh ~200 kB buffer. glibc serves those with mmap and unmaps them on
free, so each one page-faults in anew; on virtual machines that costs more than the copy itself
(bench/sim_round.py shows the difference). Raising the mmap and trim thresholds keeps freed
buffers in the heap for reuse.
"""

from __future__ import annotations

import ctypes
import sys

M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3


def _glibc() -> ctypes.CDLL | None:
    """The C library where it is glibc (Linux), else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


def tune_allocator(mmap_threshold: int = 32 << 20, trim_threshold: int = 1 << 30) -> bool:
    """Ask glibc to keep buffers up to ``mmap_threshold`` on the heap. False where not glibc."""
    libc = _glibc()
    if libc is None:
        return False
    ok = libc.mallopt(M_MMAP_THRESHOLD, mmap_threshold)
    ok &= libc.mallopt(M_TRIM_THRESHOLD, trim_threshold)
    ok &= libc.mallopt(M_TOP_PAD, 64 << 20)
    return bool(ok)


def set_mmap_threshold(mib: float) -> bool:
    """Blocks of at least ``mib`` MiB are mmapped from now on, and go back to the system when
    freed (``sim.mmap_threshold_mib``); False where not glibc.

    The 32 MiB of :func:`tune_allocator` suits models of ~200 kB. A FedAvg round at the POI shapes
    frees thousands of 4-16 MB blocks (frames, decoded updates, snapshots); on the heap, small
    long-lived allocations made between them (scores, the fictive user's state) split the holes
    they leave, and the process grows past what it holds: Table II GMF with e_A on the Gowalla
    shape peaks at 13.81 GiB against parts of 11.84, and at 11.81 with 1 MiB here, at 1.79x the
    rounds' time (page faults of fresh mmaps; ``python -m bench.fedavg_memory --mmap-threshold-mib
    0,1``). Only where blocks live changes, never a number."""
    if not 0 < mib <= 32:  # glibc's cap on 64-bit systems is 32 MiB
        raise ValueError("the mmap threshold must be in (0, 32] MiB")
    libc = _glibc()
    return libc is not None and bool(libc.mallopt(M_MMAP_THRESHOLD, int(mib * 2**20)))


def release_memory() -> bool:
    """Give the heap's free pages back to the system (glibc ``malloc_trim``), as after a whole
    simulation: with the thresholds above, the next run in the same process would otherwise
    start beside the last one's freed buffers and, with other sizes, fragment them further (a
    second 718-node Gowalla-shaped run of one ``experiment`` grew past 19 GiB, the first peaked
    at 10). False where not glibc."""
    import gc

    gc.collect()
    libc = _glibc()
    return libc is not None and bool(libc.malloc_trim(0))


def tune_process() -> None:
    """What every node process does first."""
    import torch

    torch.set_num_threads(1)
    tune_allocator()
