"""Experiments fanned out over worker processes on this machine (``experiment --workers N``) or
over a Ray cluster (``experiment --ray ADDRESS``, the ``cluster`` extra).

Each worker runs whole simulations, one at a time, and hands back the summary; the parent writes
every run file, so a run is on disk only when it is complete, as in a sequential run (an
interrupted experiment resumes from the files). The simulator is deterministic given its
configuration and its code, so the results are the ones a sequential run gives.

Memory is checked before anything starts (an OOM kill halfway through loses every run under way).
On this machine, ``workers`` runs of the largest configuration must fit in free memory, or the
experiment is refused with the number of workers that would fit. On Ray, every run reserves its
expected memory as Ray's ``memory`` resource, so the scheduler never places more runs on a
machine than it offers; a run larger than every machine is refused before anything is submitted.
Every Ray run also reports a digest of the code and libraries it ran with (:func:`code_digest`):
a machine that runs different code is named, and its result is not written.
"""

from __future__ import annotations

import hashlib
import logging
import multiprocessing
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from p2pnode.config import ConfigError, RunConfig
from p2pnode.footprint import BASE_BYTES, NODE_BYTES, Footprint, available_bytes, run_bytes, too_big

__all__ = ["BASE_BYTES", "NODE_BYTES", "Footprint", "available_bytes", "check_memory", "run_bytes"]


def check_memory(
    configs: Sequence[RunConfig], workers: int, footprint: Callable[[RunConfig], Footprint]
) -> None:
    """Refuse ``workers`` parallel runs of ``configs`` that would not fit in free memory: as many
    runs as the largest needs (a POI run of fewer nodes can outweigh an ML-100k run of more). One
    run at a time is refused too when the largest alone does not fit: better said before it starts
    than an OOM kill halfway through, or a machine brought down."""
    if not configs:
        return
    needs = [(run_bytes(c, footprint(c)), c) for c in configs]
    need, largest = max(needs, key=lambda nc: nc[0])
    free = available_bytes()
    if free is None:
        return
    if need > free:
        raise ConfigError(too_big(largest, need, free) + " (--ray)")
    parallel = min(max(workers, 1), len(configs))
    if parallel * need > free:
        fits = max(1, free // need)
        raise ConfigError(
            f"--workers {workers}: {parallel} runs of {largest.nodes} nodes need about "
            f"{parallel * need / 2**30:.1f} GiB and {free / 2**30:.1f} GiB is free; "
            f"use --workers {fits} or fewer"
        )


#: the packages a simulation executes, whose code must match across the machines of a cluster
SIM_PACKAGES = ("p2pnode", "p2pcore", "learning", "protocols", "peer_sampling", "adversary")


def code_digest() -> str:
    """A digest of the simulator's source files and of the numerical libraries' versions: two
    machines with the same digest give the same run for the same configuration."""
    import numba
    import numpy
    import torch

    import p2pnode

    root = Path(p2pnode.__file__).resolve().parents[1]
    h = hashlib.sha256(f"{numpy.__version__} {numba.__version__} {torch.__version__}".encode())
    for pkg in SIM_PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            h.update(path.relative_to(root).as_posix().encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _simulate(config: RunConfig) -> tuple[dict[str, Any], float]:
    from p2pnode.process import release_memory, tune_process
    from p2pnode.sim import simulate

    tune_process()
    t0 = time.perf_counter()
    summary = simulate(config, memory_check=False)  # checked before the runs were handed out
    seconds = time.perf_counter() - t0
    release_memory()  # this worker's next run starts on an empty heap
    return summary, seconds


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


def _simulate_on_ray(config: RunConfig) -> tuple[dict[str, Any], float, str, str]:
    summary, seconds = _simulate(config)
    return summary, seconds, code_digest(), socket.gethostname()


def run_on_ray(
    tasks: Sequence[tuple[str, RunConfig]],
    address: str,
    workers: int | None,
    footprint: Callable[[RunConfig], Footprint],
) -> Iterator[tuple[str, dict[str, Any], float]]:
    """Run every (key, config) on the Ray cluster at ``address`` (``auto``: the one this machine
    belongs to), at most ``workers`` at once (default: the cluster's CPUs), each reserving its
    expected memory; yields as :func:`run_parallel` does."""
    try:
        import ray
    except ImportError:
        raise ConfigError("--ray needs Ray: pip install 'p2pnode[cluster]'") from None
    _reachable(address)
    try:
        ray.init(address=address, logging_level=logging.ERROR, log_to_driver=False)
    except (ConnectionError, ValueError, RuntimeError) as e:
        raise ConfigError(f"--ray {address}: no Ray cluster there ({e})") from None
    try:
        yield from _ray_runs(ray, tasks, workers, footprint)
    finally:
        ray.shutdown()


def _reachable(address: str, timeout: float = 5.0) -> None:
    """Refuse a ``host:port`` nobody listens on (Ray's own connect retries for a minute or more)."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return  # auto, or a ray:// client address: Ray resolves and reports those itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as e:
        raise ConfigError(f"--ray {address}: no Ray cluster there ({e.strerror or e})") from None


def _ray_runs(
    ray: Any,
    tasks: Sequence[tuple[str, RunConfig]],
    workers: int | None,
    footprint: Callable[[RunConfig], Footprint],
) -> Iterator[tuple[str, dict[str, Any], float]]:
    offered = max((n["Resources"].get("memory", 0.0) for n in ray.nodes() if n["Alive"]), default=0.0)
    needs = {key: run_bytes(config, footprint(config)) for key, config in tasks}
    for key, config in tasks:
        if needs[key] > offered:
            raise ConfigError(
                f"--ray: a run of {config.nodes} nodes needs about {needs[key] / 2**30:.1f} GiB and the "
                f"largest machine of the cluster offers {offered / 2**30:.1f} GiB to Ray tasks "
                "(ray start --memory)"
            )
    limit = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
    here = code_digest()
    remote = ray.remote(_simulate_on_ray)
    queue = list(tasks)
    in_flight: dict[Any, str] = {}
    while queue or in_flight:
        while queue and len(in_flight) < limit:
            key, config = queue.pop(0)
            ref = remote.options(num_cpus=1, memory=needs[key], max_retries=0).remote(config)
            in_flight[ref] = key
        done, _ = ray.wait(list(in_flight), num_returns=1)
        key = in_flight.pop(done[0])
        summary, seconds, digest, host = ray.get(done[0])
        if digest != here:
            raise ConfigError(
                f"--ray: {host} runs other p2pnode code or libraries (digest {digest}, here {here}); "
                "install this checkout there, or its results would not be this machine's"
            )
        yield key, summary, seconds
