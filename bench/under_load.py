"""The real network beside other work: the README's main job and a ``launch --knn gain``, each
with 0, 1 and 2 busy processes beside it, set against the simulator's run of the same setting.

A busy process is ``python -c "while True: pass"``: on a 2-core machine two of them take what a
browser and a notebook take of a researcher's laptop. For each run it prints, side by side with
the simulator's: how the rounds stretched (the processes' clocks hold back while they run
behind: p2pnode.clock.ElasticClock) and how many started late, view swaps committed and aborted,
failed sends, refusals by reason, KNN queries answered and late answers, HR@20, Max AAC, and the
self-check's verdict (p2plab/selfcheck.py). Every row of one table is measured in the same run of
this script; each row is one run (real runs differ run to run: the README gives the spread over
5 runs of each seed).

    .venv/bin/python -m bench.under_load [--jobs main,knn] [--busy 0,1,2] [--rounds 20]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

MAIN = [
    "--nodes", "100", "--lr", "0.01", "--attack", "cia", "--target-k", "10",
    "--colluders", "0.2", "--colluder-groups", "5", "--fictive-user",
]  # fmt: skip
KNN = ["--nodes", "100", "--knn", "gain"]
JOBS = {"main": MAIN, "knn": KNN}


@contextlib.contextmanager
def busy(n: int) -> Iterator[None]:
    """``n`` processes that spin on a core each while the block runs."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for h in hogs:
            h.kill()
            h.wait()


def run(command: str, args: Sequence[str], out: Path) -> dict[str, Any]:
    argv = [sys.executable, "-m", "p2plab", command, *args, "--json", "--out", str(out)]
    if command == "launch":
        argv.append("--quiet")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return dict(json.loads(done.stdout))


def row(label: str, s: dict[str, Any]) -> dict[str, str]:
    swaps = s.get("view_swaps") or {}
    refused = {k: v for k, v in (s.get("rejected") or {}).items() if v}
    knn = s.get("knn") or {}
    cia = s.get("cia") or {}
    pace = s.get("pace") or {}
    check = s.get("self_check") or {}
    verdict = "diverged" if check.get("diverged") else ("slow" if check.get("slow") else "as sim")
    return {
        "run": label,
        "stretch": f"{pace.get('stretch', 1.0):.2f}" if pace else "-",
        "late": str(s.get("late_rounds", 0)),
        "swaps ok/aborted": f"{swaps.get('committed', 0)}/{swaps.get('aborted', 0)}",
        "failed sends": str(s.get("send_failures", 0)),
        "refused": ", ".join(f"{k} {v}" for k, v in sorted(refused.items(), key=lambda kv: -kv[1])) or "-",
        "KNN answered": f"{knn['done']}/{knn['queries']} (late {knn.get('late', 0)})" if knn else "-",
        "MAE": f"{knn['mae']:.4f}" if knn.get("mae") is not None else "-",
        "HR@20": f"{s.get('hit_ratio_at_20', 0.0):.3f}",
        "Max AAC": f"{100 * cia['max_aac']:.1f}%" if cia.get("max_aac") is not None else "-",
        "self-check": verdict if check else "-",
    }


def table(rows: Sequence[dict[str, str]]) -> str:
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(r[k] for k in keys) + " |" for r in rows]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", default="main,knn", help="which jobs: main, knn (comma-separated)")
    p.add_argument("--busy", default="0,1,2", help="busy processes beside each run (comma-separated)")
    p.add_argument("--rounds", type=int, default=20)
    args = p.parse_args(argv)
    busies = [int(b) for b in args.busy.split(",")]
    with tempfile.TemporaryDirectory(prefix="p2pnode-under-load-") as tmp:
        root = Path(tmp)
        for job in args.jobs.split(","):
            flags = [*JOBS[job], "--rounds", str(args.rounds)]
            # the daemon's merge defaults (clip, norm band, steady pull), as launch runs them
            rows = [row("simulator", run("simulate", [*flags, "--preset", "safe"], root / f"{job}-sim"))]
            for n in busies:
                with busy(n):
                    summary = run("launch", flags, root / f"{job}-busy{n}")
                rows.append(row(f"{n} busy", summary))
                check = summary.get("self_check") or {}
                print(f"{job}, {n} busy: {check.get('line', '(no self-check)')}", file=sys.stderr)
            print(f"\n{job}: p2pnode launch {' '.join(flags)}\n")
            print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
