"""``p2pnode experiment NAME``: run a reproduced table or figure, resumably, then report it.

Every (row, seed) of the experiment (p2plab/experiment_spec.py) is one run; its summary is
written atomically to ``OUT/runs/`` as soon as it ends, so an interrupted experiment resumes where
it stopped. Runs go one at a time, in worker processes (``--workers``) or on a Ray cluster
(``--ray``). At the end p2plab/experiment_report.py aggregates them into ``results.json``,
``results.csv``, ``report.md`` and PNG plots.

The names of the two other modules are re-exported here: ``p2plab.experiment`` stays the one
import of scripts and tests.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from p2plab.experiment_report import (
    aggregate,
    report,
    report_finished,
    write_csv,
    write_plots,
    write_report,
)
from p2plab.experiment_spec import (
    EXPERIMENTS_DIR,
    LEGACY_DEFAULTS,
    PAPER_DATASETS,
    UNUSED_BY_MODEL,
    Column,
    Experiment,
    Row,
    code_digest,
    command_line,
    load,
    lookup,
    lookup_at_max,
    lookup_list,
    names,
    paper_dataset_of,
    plan_of,
    reusable_runs,
    run_key,
    stored_runs,
)
from p2plab.fanout import Footprint
from p2plab.machine import machine
from p2plab.portable import portable_config
from p2pnode.config import ConfigError, RunConfig
from p2pnode.data.atomic import write_text

__all__ = [
    "EXPERIMENTS_DIR",
    "LEGACY_DEFAULTS",
    "PAPER_DATASETS",
    "UNUSED_BY_MODEL",
    "Column",
    "Experiment",
    "Row",
    "aggregate",
    "command_line",
    "footprint",
    "load",
    "lookup",
    "lookup_at_max",
    "lookup_list",
    "names",
    "paper_dataset_of",
    "real_network",
    "report",
    "report_finished",
    "run_experiment",
    "run_key",
    "simulator",
    "throttled",
    "write_csv",
    "write_plots",
]


def _slim(result: dict[str, Any]) -> dict[str, Any]:
    """What a run file keeps: the summary without per-node and per-adversary lists (they can be
    large), its configuration portable (p2plab/portable.py)."""
    out = {k: v for k, v in result.items() if k != "per_node"}
    if isinstance(out.get("config"), dict):  # the file by name, nothing of this machine's folders
        out["config"] = portable_config(out["config"])
    cia = out.get("cia")
    if isinstance(cia, dict):
        out["cia"] = {k: v for k, v in cia.items() if k not in ("per_round", "per_round_bounds")}
        proxy = cia.get("mia_proxy")
        if isinstance(proxy, dict):
            out["cia"]["mia_proxy"] = {k: v for k, v in proxy.items() if k != "per_round"}
    return out


Progress = Callable[[str], None]
Runner = Callable[[RunConfig, Progress | None], dict[str, Any]]


def simulator(config: RunConfig, progress: Progress | None = None) -> dict[str, Any]:
    from p2pnode.runners.process import release_memory
    from p2pnode.runners.sim import simulate

    try:  # checked for memory with the experiment's other runs (run_experiment), not alone
        return simulate(config, progress, memory_check=False)
    finally:
        release_memory()  # the next run of this process starts on an empty heap


def real_network(processes: int) -> Runner:
    def run(config: RunConfig, progress: Progress | None = None) -> dict[str, Any]:
        from p2plab.launch import launch

        return asyncio.run(launch(config, processes, None, progress))

    return run


def throttled(progress: Progress, seconds: float = 15.0) -> Progress:
    """Pass on a run's per-round lines at most every ``seconds`` (long runs are never silent)."""
    last = [time.perf_counter()]

    def out(line: str) -> None:
        now = time.perf_counter()
        if now - last[0] >= seconds:
            last[0] = now
            progress("    " + line.strip())

    return out


#: model bytes per model and data: an experiment's rows and seeds share them (a prepare is ~0.4 s)
_FOOTPRINTS: dict[tuple[object, ...], Footprint] = {}


def footprint(config: RunConfig) -> Footprint:
    """What one run of ``config`` holds per node and per observer (p2pnode.runners.footprint), prepared
    once per model and data: an experiment's rows and seeds share them."""
    from p2pnode.nodes.prepare import prepare
    from p2pnode.runners.footprint import footprint_of

    lc = config.learning
    key = (config.model, config.dataset, config.data_dir, config.table_options(), config.nodes,
           lc.factors, lc.prme_dim, config.synthetic, config.seed, config.attack, config.protocol,
           config.fraction)  # fmt: skip
    if key not in _FOOTPRINTS:
        _FOOTPRINTS[key] = footprint_of(config, prepare(config))
    return _FOOTPRINTS[key]


def run_experiment(
    exp: Experiment,
    out: Path,
    overrides: Mapping[str, Any] | None = None,
    seeds: Sequence[int] | None = None,
    runner: Runner = simulator,
    mode: str = "simulate",
    command: str = "",
    progress: Callable[[str], None] | None = None,
    report_only: bool = False,
    workers: int = 1,
    ray_address: str | None = None,
    memory_check: bool = True,
    reuse: Sequence[Path] = (),
) -> dict[str, Any]:
    """Run every (row, seed) not yet on disk, then write the results and the report.

    ``report_only``: run nothing; report the runs already on disk (rows may have fewer seeds).
    ``workers``: simulations run in that many processes at once (p2plab/fanout.py).
    ``ray_address``: the simulations run on that Ray cluster instead, ``workers`` at once (0: as
    many as the cluster has CPUs).
    ``memory_check``: False starts a simulation whose estimate is above the free memory (a run
    capped from outside, e.g. in a memory cgroup); parallel workers still start a run only where
    it fits beside those under way.
    ``reuse``: folders holding other experiments' ``--out`` folders (``results``); a run finished
    there with the same run key is copied in instead of run again (:func:`reusable_runs`), marked
    with ``_reused_from`` and its own ``_seconds`` (where it ran).
    """
    t_all = time.perf_counter()
    overrides = dict(overrides or {})
    seeds = tuple(seeds) if seeds is not None else exp.seeds
    if report_only:
        return report_finished(exp, out, overrides, seeds, mode, command, progress)
    code = code_digest()  # now, before any run: the sources may be edited while the runs go on
    here = machine()  # a run on a Ray node brings its own (p2plab/fanout.py)
    runs_dir = out / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    plan = plan_of(exp, seeds, overrides)
    results, pending = stored_runs(plan, runs_dir, mode, progress)
    total = len(results) + len(pending)
    for key, (stored, source) in reusable_runs(list(pending), reuse, mode, runs_dir).items():
        row, seed, _config, path = pending.pop(key)
        copied = {**stored, "_row": row.label, "_reused_from": source.parent.parent.name}
        write_text(path, json.dumps(copied))
        results[key] = copied
        if progress:
            progress(f"[{len(results)}/{total}] {row.label}, seed {seed}: reused, the same run as {source}")
    done = len(results)

    def finished(key: str, summary: dict[str, Any], seconds: float) -> None:
        nonlocal done
        row, seed, _config, path = pending[key]
        summary = _slim(summary)
        summary["_row"] = row.label
        summary["_seed"] = seed
        summary["_seconds"] = round(seconds, 1)  #: the run's own time (bench.reproduction_time reads it)
        summary["_code"] = code  #: the code that ran it (p2plab/experiment_summary.py)
        summary.setdefault("_machine", here)  #: the machine it ran on (p2plab/machine.py)
        write_text(path, json.dumps(summary))
        results[key] = summary
        done += 1
        if progress:
            progress(f"[{done}/{total}] {row.label}, seed {seed}: {seconds:.0f} s")

    if (ray_address or workers > 1) and runner is not simulator:
        raise ConfigError("--workers and --ray run simulations; real-network runs go one at a time")
    if ray_address and pending:
        from p2plab.fanout import run_on_ray

        if progress:
            progress(f"{len(pending)} runs on the Ray cluster at {ray_address}")
        tasks = [(k, v[2]) for k, v in pending.items()]
        for key, summary, seconds in run_on_ray(tasks, ray_address, workers or None, footprint):
            finished(key, summary, seconds)
    elif workers > 1 and len(pending) > 1:
        from p2plab.fanout import check_memory, fits_at_once, run_parallel

        configs = [c for _r, _s, c, _p in pending.values()]
        needs, budget = check_memory(configs, footprint, memory_check)
        if progress:
            at_once = min(workers, len(pending))
            said = f"{len(pending)} runs in {at_once} worker processes"
            if fits_at_once(needs, at_once, budget) < at_once and budget is not None:
                said += (
                    f"; {at_once} of the largest ({max(needs) / 2**30:.1f} GiB each) do not fit in the "
                    f"{budget / 2**30:.1f} GiB free: a run starts only where it fits beside those under way"
                )
            progress(said)
        tasks = [(k, v[2]) for k, v in pending.items()]
        for key, summary, seconds in run_parallel(tasks, workers, needs, budget):
            finished(key, summary, seconds)
    else:
        if runner is simulator and pending and memory_check:
            from p2plab.fanout import check_memory

            one_per_row = {id(r): c for r, _s, c, _p in reversed(pending.values())}  # seeds alike
            check_memory(list(one_per_row.values()), footprint)
        for key, (_row, _seed, config, _path) in pending.items():
            t0 = time.perf_counter()
            summary = runner(config, throttled(progress) if progress else None)
            finished(key, summary, time.perf_counter() - t0)
    return write_report(exp, out, plan, results, overrides, seeds, mode, command, False, t_all)
