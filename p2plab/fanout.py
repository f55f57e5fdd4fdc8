"""Experiments fanned out over worker processes on this machine (``experiment --workers N``) or
over a Ray cluster (``experiment --ray ADDRESS``, the ``cluster`` extra).

Each worker runs whole simulations, one at a time, and hands back the summary; the parent writes
every run file, so a run is on disk only when it is complete, as in a sequential run (an
interrupted experiment resumes from the files). The simulator is deterministic given its
configuration and its code, so the results are the ones a sequential run gives.

Memory is checked before anything starts (an OOM kill halfway through loses every run under way).
On this machine, a run that alone does not fit in free memory is refused. Otherwise at most
``workers`` runs go at once, and a run starts only when its estimate fits beside those under way
(:func:`next_fitting`): two PRME runs that do not fit together run one after the other, each
beside a smaller GMF run where there is one, instead of the experiment being refused. On Ray,
every run reserves its expected memory as Ray's ``memory`` resource, so the scheduler never
places more runs on a machine than it offers; a run larger than every machine is refused before
anything is submitted. Every Ray run also reports a digest of the code and libraries it ran with
(:func:`code_digest`): a machine that runs different code is named, and its result is not written.
"""

from __future__ import annotations

import hashlib
import logging
import multiprocessing
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any

from p2pnode.config import ConfigError, RunConfig
from p2pnode.runners.footprint import BASE_BYTES, NODE_BYTES, Footprint, available_bytes, run_bytes, too_big

__all__ = ["BASE_BYTES", "NODE_BYTES", "Footprint", "available_bytes", "check_memory", "run_bytes"]


def check_memory(
    configs: Sequence[RunConfig], footprint: Callable[[RunConfig], Footprint], refuse: bool = True
) -> tuple[list[int], int | None]:
    """The estimated bytes of each of ``configs`` and the free memory they share (None where it
    cannot be read). Refuses (ConfigError) when the largest run alone does not fit: better said
    before it starts than an OOM kill halfway through, or a machine brought down. Runs that do
    not fit together are not refused: :func:`run_parallel` starts each one only
    where it fits beside those under way. ``refuse`` False (``--no-memory-check``) only measures."""
    needs = [run_bytes(c, footprint(c)) for c in configs]
    free = available_bytes()
    if not configs or free is None or not refuse:
        return needs, free
    need, largest = max(zip(needs, configs, strict=True), key=lambda nc: nc[0])
    if need > free:
        raise ConfigError(too_big(largest, need, free) + " (--ray)")
    return needs, free


def fits_at_once(needs: Sequence[int], workers: int, budget: int | None) -> int:
    """How many of the largest runs fit at once (at most ``workers``): what a user is told."""
    if budget is None or not needs:
        return workers
    return max(1, min(workers, budget // max(max(needs), 1)))


def next_fitting(
    pending: Sequence[int], running: Sequence[int], workers: int, budget: int | None
) -> int | None:
    """Which of the ``pending`` runs (their estimated bytes, in plan order) to start next beside
    the ``running`` ones: the first that fits in ``budget`` beside them, or None (wait for one to
    end). With nothing running the first always starts (check_memory refused any run that alone
    does not fit), so the runs always finish."""
    if not pending or len(running) >= workers:
        return None
    if not running or budget is None:
        return 0
    room = budget - sum(running)
    return next((i for i, need in enumerate(pending) if need <= room), None)


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
    from p2pnode.runners.process import release_memory, tune_process
    from p2pnode.runners.sim import simulate

    tune_process()
    t0 = time.perf_counter()
    summary = simulate(config, memory_check=False)  # checked before the runs were handed out
    seconds = time.perf_counter() - t0
    release_memory()  # this worker's next run starts on an empty heap
    return summary, seconds


def run_parallel(
    tasks: Sequence[tuple[str, RunConfig]],
    workers: int,
    needs: Sequence[int] | None = None,
    budget: int | None = None,
) -> Iterator[tuple[str, dict[str, Any], float]]:
    """Run every (key, config) in ``workers`` processes; yields (key, summary, seconds of the run)
    as each run ends (in the order they end). ``needs`` (estimated bytes per task) and ``budget``
    (the free memory): a run starts only where it fits beside those under way (:func:`next_fitting`)."""
    context = multiprocessing.get_context("spawn")  # torch and forked threads do not mix
    pending = list(zip(tasks, needs if needs is not None else [0] * len(tasks), strict=True))
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        running: dict[Future[tuple[dict[str, Any], float]], tuple[str, int]] = {}
        while pending or running:
            while (
                i := next_fitting([n for _, n in pending], [n for _, n in running.values()], workers, budget)
            ) is not None:
                (key, config), need = pending.pop(i)
                running[pool.submit(_simulate, config)] = (key, need)
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                key, _need = running.pop(future)
                summary, seconds = future.result()
                yield key, summary, seconds


def _simulate_on_ray(config: RunConfig) -> tuple[dict[str, Any], float, str, str]:
    from p2plab.machine import machine

    summary, seconds = _simulate(config)
    summary["_machine"] = machine()  # the Ray node's, not the driver's
    return summary, seconds, code_digest(), socket.gethostname()


def _digest_on_ray() -> tuple[str, str]:
    return code_digest(), socket.gethostname()


def _check_machines(ray: Any, here: str) -> None:
    """Ask every live machine of the cluster for its :func:`code_digest` before any run is
    submitted: one that runs other code is refused by name now, not after it spent a run's
    hours. (Each result is checked again, for machines that join later.)"""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    probe = ray.remote(_digest_on_ray)
    refs = [
        probe.options(
            num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
        ).remote()
        for node in ray.nodes()
        if node["Alive"]
    ]
    for digest, host in ray.get(refs):
        if digest != here:
            raise ConfigError(_other_code(host, digest, here))


def _other_code(host: str, digest: str, here: str) -> str:
    return (
        f"--ray: {host} runs other p2pnode code or libraries (digest {digest}, here {here}); "
        "install this checkout there, or its results would not be this machine's"
    )


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
    _check_machines(ray, here)
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
            raise ConfigError(_other_code(host, digest, here))
        yield key, summary, seconds
