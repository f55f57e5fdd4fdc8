"""Experiments fanned out over worker processes on this machine (``experiment --workers N``).

Each worker runs whole simulations, one at a time, and hands back the summary; the parent writes
every run file, so a run is on disk only when it is complete, as in a sequential run. The
simulator is deterministic given its configuration, so the results are the ones a sequential run
gives. Before anything starts, the memory the runs need is checked against what the machine has
free: ``workers`` runs of the largest configuration must fit, or the experiment is refused with
the number of workers that would fit (an OOM kill halfway through loses every run under way).
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from p2pnode.config import ConfigError, RunConfig

#: bytes per node per byte of model, measured: 943-node ML-100k GMF runs with every node an
#: adversary take 2.3-2.9 GB (model, optimizer state, delta bases, what adversaries keep)
BYTES_PER_MODEL_BYTE = 14
BASE_BYTES = 400 << 20  #: the interpreter, torch, the dataset


def run_bytes(config: RunConfig, model_bytes: int) -> int:
    """The memory one simulation of ``config`` is expected to take at its largest."""
    return BASE_BYTES + BYTES_PER_MODEL_BYTE * model_bytes * config.nodes


def available_bytes(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """``MemAvailable`` of this machine (None where it cannot be read)."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_memory(configs: Sequence[RunConfig], workers: int, model_bytes: Callable[[RunConfig], int]) -> None:
    """Refuse ``workers`` parallel runs of ``configs`` that would not fit in free memory."""
    if workers <= 1 or not configs:
        return
    largest = max(configs, key=lambda c: c.nodes)
    need = run_bytes(largest, model_bytes(largest))
    free = available_bytes()
    if free is None:
        return
    parallel = min(workers, len(configs))
    if parallel * need > free:
        fits = max(1, free // need)
        raise ConfigError(
            f"--workers {workers}: {parallel} runs of {largest.nodes} nodes need about "
            f"{parallel * need / 2**30:.1f} GiB and {free / 2**30:.1f} GiB is free; "
            f"use --workers {fits} or fewer"
        )


def _simulate(config: RunConfig) -> tuple[dict[str, Any], float]:
    from p2pnode.process import tune_process
    from p2pnode.sim import simulate

    tune_process()
    t0 = time.perf_counter()
    summary = simulate(config)
    return summary, time.perf_counter() - t0


def run_parallel(
    tasks: Sequence[tuple[str, RunConfig]], workers: int
) -> Iterator[tuple[str, dict[str, Any], float]]:
    """Run every (key, config) in ``workers`` processes; yields (key, summary, seconds of the run)
    as each run ends (in the order they end)."""
    context = multiprocessing.get_context("spawn")  # torch and forked threads do not mix
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        started = {pool.submit(_simulate, config): key for key, config in tasks}
        for future in as_completed(started):
            summary, seconds = future.result()
            yield started[future], summary, seconds
