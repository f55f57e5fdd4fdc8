"""How long `bash experiments/reproduce.sh` takes: every experiment it runs, projected from short
probes of its runs, or taken from the seconds its finished runs recorded.

For each distinct run of each experiment (rows and seeds; a configuration shared between rows
runs once, as ``p2plab.experiment`` keys it), in order:

- a run that an experiment before it in the list makes too (the same run key) costs nothing:
  reproduce.sh copies it (``--reuse-runs results``);
- a finished run in ``results/NAME/runs`` that recorded its seconds (``_seconds``) counts
  those: **measured**;
- otherwise one probe per row (seeds cost alike): the run is built and its first
  ``--probe-rounds`` rounds run with the configuration's own evaluations, the first round left
  out as warm-up; the run counts build + rounds × the mean of the others: **projected**.

Each experiment's runs are then handed to W workers in order, each to the first one free (what
``--workers W``'s process pool does), and the experiment's wall time is the last to finish;
reproduce.sh runs the experiments one after another, so the total is their sum. The mixing
computation is timed whole.

A projection is a lower bound where the attack is on: the CIA's observers hold more users'
models as rounds go by, so later rounds of an attacked run cost more than its first ones. Build
and probes run one at a time on one thread here, like each worker.

    .venv/bin/python -m bench.reproduction_time [--workers 1,2,16] [--probe-rounds 3] [--set K=V]...
        [NAME ...]

``--floor`` projects nothing: it counts the rounds of every distinct run (each as a share of a
943-node round: rounds x nodes / 943; runs an experiment before it makes are counted once) by
protocol, times the compiled floor of one 943-node round (``bench.floor.compiled_round``: every
user's local epoch in one compiled loop and one copy of every model, no merges, no messages, no
attack), and prints the least time any simulator that trains every node each round needs for the
whole reproduction, and the seconds a round the reproduction may average to fit a budget.
"""

from __future__ import annotations

import os

# one BLAS thread, as experiments/reproduce.sh sets for every simulation (before numpy loads)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import dataclasses
import heapq
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from learning.reuseknn import folds as rk_folds
from p2plab.cli import parse_set
from p2plab.experiment import Experiment, load, plan_of, run_key, stored_runs
from p2plab.mixing import run_mixing
from p2pnode.config import RunConfig, nested
from p2pnode.runners.process import tune_allocator
from p2pnode.runners.rounds import RoundLog, RoundRunner
from p2pnode.runners.sim import ROUND_TICKS, Simulation

#: what experiments/reproduce.sh runs, in its order
EXPERIMENTS = (
    *("mixing", "table2", "table3", "samo-vs-base", "static-vs-dynamic", "table8", "fig3", "table7"),
    *("table6", "table4", "table5", "fig5", "colluder-probes", "fl-probes", "dp-probes", "eq4-readings"),
    *(
        "churn",
        "aia-fl",
        "aia-gossip",
        "pard-table3",
        "pard-planted",
        "pard-ablation",
        "pard-eta",
        "pard-lambda",
        "defences-gossip",
        "eval-full",
        "reuseknn",
        "knn-p2p",
        "exposure",
        "dp-selective",
        "dp-audit",
        "mia-roc",
    ),
)


def reuseknn_time(exp: Experiment, results: Path) -> tuple[list[float], int, int]:
    """003's evaluation is one computation on one core: its recorded seconds where a finished
    report has them (``results/NAME`` or the kept one), else one fold at the report's k timed
    and scaled to every k and fold."""
    import json

    from p2plab.reuseknn_lab import load_ratings, run_fold

    for folder in (
        results / exp.name,
        Path(__file__).resolve().parents[1] / "experiments" / "reports" / exp.name,
    ):
        f = folder / "results.json"
        if f.is_file():
            return [float(json.loads(f.read_text())["seconds"])], 1, 0
    spec = exp.reuseknn
    assert spec is not None
    data = load_ratings(spec.dataset)
    train, test = rk_folds(len(data), spec.folds, spec.seed)[0]
    t = time.perf_counter()
    run_fold(data, train, test, dataclasses.replace(spec, ks=(spec.report_k,)), 0)
    return [(time.perf_counter() - t) * len(spec.ks) * spec.folds], 0, 1


def probe(config: RunConfig, rounds: int) -> tuple[float, float]:
    """(seconds to build, seconds a round) of ``config``, from its first ``rounds`` rounds."""
    t0 = time.perf_counter()
    sim = Simulation(config.validate())
    build = time.perf_counter() - t0
    runner = RoundRunner(RoundLog(config, sim.prep, sim.host.nodes, None), config.rounds)
    times = []
    while (r := runner.next_round()) is not None and r <= rounds:
        t = time.perf_counter()
        sim.clock.run_until(r * ROUND_TICKS)
        sim.round = r
        runner.end_round(r, 0.0)
        times.append(time.perf_counter() - t)
    per_round = sum(times[1:]) / max(1, len(times) - 1) if len(times) > 1 else times[0]
    return build, per_round


def makespan(durations: list[float], workers: int) -> float:
    """The wall time of ``durations`` handed in order to ``workers``, each to the first free."""
    free = [0.0] * min(workers, max(1, len(durations)))
    for d in durations:
        heapq.heapreplace(free, free[0] + d)
    return max(free)


def runs_of(
    exp: Experiment, results: Path, probe_rounds: int, earlier: set[str], overrides: dict[str, Any]
) -> tuple[list[float], int, int, int]:
    """Seconds of every distinct run of ``exp``, in the order it runs them; how many were
    measured, projected and reused. A run that an experiment before it (``earlier``: their run
    keys, grown here) or a finished one in ``results`` already made costs nothing: reproduce.sh
    copies it (``--reuse-runs``)."""
    stored, _ = stored_runs(plan_of(exp, exp.seeds, overrides), results / exp.name / "runs", "simulate")
    finished = {
        k: float(r["_seconds"])
        for k, r in stored.items()
        if isinstance(r.get("_seconds"), int | float) and "_reused_from" not in r
    }
    seconds: list[float] = []
    seen: set[str] = set()
    measured = projected = reused = 0
    for row in exp.rows:
        cost: float | None = None
        for seed in exp.seeds:
            config = exp.config(row, seed, overrides)
            key = run_key(config)
            if key in seen:
                continue
            seen.add(key)
            if key in finished:
                seconds.append(finished[key])
                measured += 1
                earlier.add(key)
                continue
            if key in earlier or key in stored or any(results.glob(f"*/runs/simulate-{key}.json")):
                earlier.add(key)
                reused += 1
                continue
            earlier.add(key)
            if cost is None:
                build, per_round = probe(config, probe_rounds)
                cost = build + config.rounds * per_round
                print(
                    f"    {row.label}: build {build:.1f} s, {per_round:.3f} s a round x {config.rounds} "
                    f"-> {cost:.0f} s a run"
                )
            seconds.append(cost)
            projected += 1
    return seconds, measured, projected, reused


def floor(names: Sequence[str], workers: Sequence[int], budget: float, repeats: int = 3) -> None:
    """The reproduction's training floor (``--floor``): see the module's docstring."""
    import numpy as np

    from bench.floor import StackedModels, compiled_round, inputs
    from learning.split import leave_one_out
    from p2pnode.data.datasets import load_ml100k

    seen: set[str] = set()
    by_protocol: dict[str, float] = {}
    for name in names:
        exp = load(name)
        if exp.mixing is not None or exp.reuseknn is not None:
            continue
        for row in exp.rows:
            for seed in exp.seeds:
                config = exp.config(row, seed, {})
                key = run_key(config)
                if key not in seen:
                    seen.add(key)
                    share = config.rounds * (config.nodes or 943) / 943
                    by_protocol[config.protocol] = by_protocol.get(config.protocol, 0.0) + share
    data = load_ml100k().subset_users(943)
    positives, excluded = inputs(leave_one_out(data, seed=0))
    stacked = StackedModels.create(943, data.n_items, 32, seed=0)
    rng = np.random.default_rng(0)
    times = [compiled_round(stacked, positives, excluded, rng)[0] for _ in range(repeats + 1)][1:]
    per_round = float(np.median(times))
    rounds = sum(by_protocol.values())
    print(
        f"  {len(seen)} distinct runs, {rounds:,.0f} rounds of 943 nodes ("
        + ", ".join(f"{p} {r:,.0f}" for p, r in sorted(by_protocol.items()))
        + ")"
    )
    print(f"  compiled floor of one 943-node round: {', '.join(f'{t:.3f}' for t in times)} s (median)")
    print(
        f"  the reproduction at that floor: {clock(rounds * per_round)} of one thread, "
        + ", ".join(f"{w} workers {clock(rounds * per_round / w)}" for w in workers)
    )
    for w in workers:
        allowed = budget * w / rounds
        print(
            f"  to fit {clock(budget)} with {w} workers a round may average {allowed:.3f} s: "
            f"{allowed / per_round:.2f}x the floor, everything (merges, messages, attacks, DP, "
            "evaluation, builds) included"
        )


def clock(seconds: float) -> str:
    s = round(seconds)
    return f"{s // 3600}h{s % 3600 // 60:02d}m{s % 60:02d}s"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="experiments (default: all that reproduce.sh runs)")
    parser.add_argument("--workers", default="1,2,16", help="worker counts to project for")
    parser.add_argument("--probe-rounds", type=int, default=3)
    parser.add_argument("--results", default="results", help="where reproduce.sh writes")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="project every run with this config change (as experiments take it), e.g. "
        "learning.dp_backend=fused",
    )
    parser.add_argument(
        "--floor", action="store_true", help="the reproduction's training floor instead of a projection"
    )
    parser.add_argument("--budget", type=float, default=7200.0, help="seconds, for --floor (default 2 h)")
    args = parser.parse_args(argv)
    overrides: dict[str, Any] = nested(dict(parse_set(item) for item in args.set))
    torch.set_num_threads(1)
    tune_allocator()
    workers = [int(w) for w in args.workers.split(",")]
    if args.floor:
        floor(args.names or EXPERIMENTS, workers, args.budget)
        return
    totals = dict.fromkeys(workers, 0.0)
    cpu = 0.0
    lines = []
    earlier: set[str] = set()  # run keys of the experiments before: reused, not run again
    for name in args.names or EXPERIMENTS:
        exp = load(name)
        print(f"== {name}", flush=True)
        if exp.mixing is not None:
            spec = exp.mixing
            t = time.perf_counter()
            with tempfile.TemporaryDirectory() as out:
                run_mixing(exp.title, spec, Path(out), exp.seeds[0], "bench.reproduction_time")
            durations, measured, projected, reused = [time.perf_counter() - t], 1, 0, 0
        elif exp.reuseknn is not None:
            durations, measured, projected = reuseknn_time(exp, Path(args.results))
            reused = 0
        else:
            durations, measured, projected, reused = runs_of(
                exp, Path(args.results), args.probe_rounds, earlier, overrides
            )
        walls = {w: makespan(durations, w) for w in workers}
        for w in workers:
            totals[w] += walls[w]
        cpu += sum(durations)
        lines.append(
            f"  {name:18s} {len(durations):4d} runs ({measured} measured, {projected} projected, "
            f"{reused} reused)  " + "  ".join(f"{w:2d} workers {clock(walls[w])}" for w in workers)
        )
    print("\n".join(lines))
    print(
        f"  {'total':18s} one thread's work {clock(cpu)}  "
        + "  ".join(f"{w:2d} workers {clock(totals[w])}" for w in workers)
    )


if __name__ == "__main__":
    main()
