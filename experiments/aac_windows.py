"""Mean CIA accuracy per window of rounds, per run: when an attack peaks, and whether it holds.

Max AAC (CIA paper (000) §V-C) is the best round's accuracy; two runs with the same maximum can
differ in whether they peak early and fall back as the models converge, or rise and hold
(REPRODUCTION.md finding 6: momentum against β = 0 with colluders). This reads an experiment
folder's finished runs (``OUT/runs/*.json``, each with ``cia.rounds`` and ``cia.aac``) and prints,
per run, its Max AAC and the round of it, then the mean AAC over each window of ``--window``
rounds (the window a round r falls in is ``(r - 1) // window``; round 0, before any training,
is left out).

    .venv/bin/python experiments/aac_windows.py results/table6-r200 --window 40
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any


def windows(rounds: Sequence[int], aac: Sequence[float], window: int) -> dict[int, float]:
    """Mean AAC (a fraction) per window index, over the evaluated rounds after round 0."""
    if window < 1:
        raise ValueError(f"--window must be at least 1 round, not {window}")
    found: dict[int, list[float]] = {}
    for r, a in zip(rounds, aac, strict=True):
        if r >= 1:
            found.setdefault((int(r) - 1) // window, []).append(float(a))
    return {w: statistics.fmean(v) for w, v in sorted(found.items())}


def row_of(run: Mapping[str, Any], window: int) -> tuple[str, int, float, int, dict[int, float]]:
    """(row label, seed, Max AAC %, its round, mean AAC % per window) of one run's summary."""
    cia = run["cia"]
    means = windows(cia["rounds"], cia["aac"], window)
    return (
        str(run.get("_row", "?")),
        int(run["_seed"] if "_seed" in run else run["config"]["seed"]),
        100 * float(cia["max_aac"]),
        int(cia["round_of_max"]),
        {w: 100 * m for w, m in means.items()},
    )


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", type=Path, help="an experiment's --out folder (it has runs/)")
    ap.add_argument("--window", type=int, default=20, help="rounds per window (default 20)")
    args = ap.parse_args(argv)
    if args.window < 1:
        raise SystemExit(f"--window must be at least 1 round, not {args.window}")
    files = sorted((args.folder / "runs").glob("*.json")) if (args.folder / "runs").is_dir() else []
    rows = []
    for f in files:
        run = json.loads(f.read_text())
        if not isinstance(run.get("cia"), Mapping) or "aac" not in run["cia"]:
            continue  # a run without the CIA (or a summary from before per-round AAC) has no windows
        rows.append(row_of(run, args.window))
    if not rows:
        raise SystemExit(f"{args.folder}: no finished run with per-round CIA accuracy in runs/")
    rows.sort(key=lambda r: (r[0], r[1]))
    spans = sorted({w for *_, means in rows for w in means})
    names = [f"{w * args.window + 1}–{(w + 1) * args.window}" for w in spans]
    print("| row | seed | Max AAC % (round) | " + " | ".join(names) + " |")
    print("|---|---|---|" + "---|" * len(names))
    for label, seed, best, at, means in rows:
        cells = " | ".join(f"{means[w]:.1f}" if w in means else "–" for w in spans)
        print(f"| {label} | {seed} | {best:.1f} ({at}) | {cells} |")


if __name__ == "__main__":
    main()
