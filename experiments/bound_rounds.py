"""At which round the adversaries' accuracy upper bound first reached the paper's, per run.

The CIA's upper bound (§V-C) is the share of a target's community an adversary has heard from;
in gossip it grows with the rounds (REPRODUCTION.md, finding 1). This reads the finished runs of an
experiment folder (``results/table3-bound`` by default; while the experiment is still running,
those finished so far), takes each run's evaluated rounds and bounds (``cia.rounds``,
``cia.upper_bounds``) and prints, per run, the first evaluated round whose bound is at least the
row's paper bound, the bound and Max AAC at that round, and the run's last. The experiment is
the one ``results.json`` names, or, before there is one, the folder's name (``--experiment``
names it otherwise).

    .venv/bin/python experiments/bound_rounds.py [results/table3-bound]
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Sequence
from pathlib import Path

from p2plab.experiment_spec import load
from p2pnode.config import ConfigError


def first_round_at(rounds: Sequence[int], bounds: Sequence[float], target: float) -> int | None:
    """The first of ``rounds`` whose bound is at least ``target`` (a fraction), or None."""
    for r, b in zip(rounds, bounds, strict=True):
        if b >= target:
            return int(r)
    return None


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", nargs="?", type=Path, default=Path("results/table3-bound"))
    ap.add_argument(
        "--experiment",
        help="the experiment the runs belong to (default: results.json's, or the folder's name)",
    )
    args = ap.parse_args(argv)
    if not (args.folder / "runs").is_dir():
        raise SystemExit(
            f"{args.folder}: no runs/ folder "
            f"(`p2pnode experiment table3-bound --out {args.folder}` makes one)"
        )
    name = args.experiment
    if name is None:
        report = args.folder / "results.json"
        name = str(json.loads(report.read_text()).get("experiment", "")) if report.is_file() else ""
        name = name or args.folder.name
    try:
        exp = load(name)
    except ConfigError as err:
        raise SystemExit(f"{args.folder}: {err} (give --experiment NAME)") from None
    papers = {r.label: r.paper.get("bound") for r in exp.rows}
    reached: dict[str, list[int]] = {}
    print(
        "| row | seed | paper bound | first round at it | bound then | Max AAC by then "
        "| last round | bound | Max AAC |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for path in sorted((args.folder / "runs").glob("simulate-*.json")):
        run = json.loads(path.read_text())
        label, paper = run.get("_row", ""), papers.get(run.get("_row", ""))
        cia = run.get("cia") or {}
        rounds, bounds, aac = cia.get("rounds", []), cia.get("upper_bounds", []), cia.get("aac", [])
        if paper is None or not rounds:
            continue
        at = first_round_at(rounds, bounds, paper / 100)
        upto = [a for r, a in zip(rounds, aac, strict=True) if at is not None and r <= at]
        then = bounds[rounds.index(at)] if at is not None else None
        print(
            f"| {label} | {run.get('_seed')} | {paper:g} | {at if at is not None else 'not reached'} | "
            f"{'' if then is None else f'{100 * then:.1f}'} | {f'{100 * max(upto):.1f}' if upto else ''} | "
            f"{rounds[-1]} | {100 * bounds[-1]:.1f} | {100 * cia.get('max_aac', 0.0):.1f} |"
        )
        if at is not None:
            reached.setdefault(label, []).append(at)
    for label, values in reached.items():
        sd = statistics.stdev(values) if len(values) > 1 else 0.0
        mean = statistics.fmean(values)
        print(f"{label}: the bound reached the paper's at round {mean:.0f} ± {sd:.0f} ({len(values)} runs)")


if __name__ == "__main__":
    main()
