"""How much the README's main job varies from run to run, over real processes and in the simulator.

The README's first command launches real node processes over loopback. Their events interleave as
the operating system schedules them, so two runs of one seed give different numbers (the attack's
Max AAC moves by several points). The simulator runs the same configuration on a virtual clock and
gives one number per seed. This script takes the README's own command (the ``p2pnode launch ...``
of its first code block, so the two cannot drift apart), runs it ``--runs`` times for each seed
and once in the simulator, and prints per seed the real runs' values, their mean ± sd and range,
and the simulator's value. Run it on a quiet machine: a busy one makes rounds late, which is a
different experiment.

    .venv/bin/python experiments/main_job_spread.py [--seeds 0,1,2] [--runs 5] [--out FILE.json]

The README's figures come from the run kept in experiments/reports/main-job/ (its output and runs).
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def readme_main_job(readme: Path = ROOT / "README.md") -> list[str]:
    """The flags of the ``p2pnode launch`` in the README's first code block."""
    text = readme.read_text(encoding="utf-8")
    block = re.search(r"```bash\n(.*?)```", text, re.S)
    if block is None:
        raise SystemExit(f"{readme}: no bash code block")
    for line in block.group(1).splitlines():
        words = shlex.split(line)
        for i, word in enumerate(words):
            if word.endswith("p2pnode") and words[i + 1 : i + 2] == ["launch"]:
                return words[i + 2 :]
    raise SystemExit(f"{readme}: the first bash block has no `p2pnode launch`")


def simulator_flags(flags: Sequence[str]) -> list[str]:
    """The launch's flags as ``simulate`` takes them for the same configuration: ``launch`` starts
    from the daemon's safe defaults (the clip, the norm band and the steady-pull memory on),
    ``simulate`` from the papers' plain merge, so the daemon's defaults are given as
    ``--preset safe`` unless the command names a preset or one of the three itself."""
    named = ("--clip-factor", "--norm-band", "--steady-pull", "--preset")
    if any(f in named or f.startswith(tuple(n + "=" for n in named)) for f in flags):
        return list(flags)
    return [*flags, "--preset", "safe"]


def run_once(command: str, flags: Sequence[str], seed: int) -> dict[str, float]:
    """One run's Max AAC, best-10% AAC, upper bound, HR@20 and late rounds, from ``--json``."""
    argv = [str(ROOT / ".venv/bin/p2pnode"), command, *flags, "--seed", str(seed), "--json"]
    if command == "launch":
        argv.append("--quiet")
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{shlex.join(argv)} exited {done.returncode}:\n{done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    cia = result["cia"]
    return {
        "max_aac": 100 * cia["max_aac"],
        "best10_aac": 100 * cia["best10_aac"],
        "upper_bound": 100 * cia["upper_bound"],
        "hit_ratio_at_20": result["hit_ratio_at_20"],
        "late_rounds": float(result.get("late_rounds", 0)),
    }


def spread(values: Sequence[float]) -> str:
    """``mean ± sd (min–max)`` of a few values."""
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.1f} ± {sd:.1f} ({min(values):.0f}–{max(values):.0f})"


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="0,1,2", help="comma-separated seeds")
    ap.add_argument("--runs", type=int, default=5, help="real-process runs per seed")
    ap.add_argument("--out", type=Path, help="write every run's numbers here as JSON")
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    flags = readme_main_job()
    print("main job: p2pnode launch " + shlex.join(flags), flush=True)
    record: dict[str, object] = {"flags": flags, "seeds": {}}
    rows = []
    for seed in seeds:
        real = []
        for i in range(args.runs):
            start = time.monotonic()
            one = run_once("launch", flags, seed)
            real.append(one)
            print(
                f"seed {seed} run {i + 1}: Max AAC {one['max_aac']:.1f}%  best-10% {one['best10_aac']:.1f}%"
                f"  HR@20 {one['hit_ratio_at_20']:.3f}  late rounds {one['late_rounds']:.0f}"
                f"  ({time.monotonic() - start:.0f} s)",
                flush=True,
            )
        sim = run_once("simulate", simulator_flags(flags), seed)
        print(
            f"seed {seed} simulator: Max AAC {sim['max_aac']:.1f}%  HR@20 {sim['hit_ratio_at_20']:.3f}",
            flush=True,
        )
        record["seeds"][str(seed)] = {"real": real, "simulator": sim}  # type: ignore[index]
        rows.append((seed, real, sim))
    print()
    print(f"| seed | real Max AAC % ({args.runs} runs) | simulator | real HR@20 | simulator | late rounds |")
    print("|---|---|---|---|---|---|")
    for seed, real, sim in rows:
        aac = spread([r["max_aac"] for r in real])
        hr = [r["hit_ratio_at_20"] for r in real]
        late = sum(r["late_rounds"] for r in real)
        print(
            f"| {seed} | {aac} | {sim['max_aac']:.0f} | {statistics.fmean(hr):.3f} "
            f"({min(hr):.2f}–{max(hr):.2f}) | {sim['hit_ratio_at_20']:.3f} | {late:.0f} |"
        )
    every = [r["max_aac"] for _, real, _ in rows for r in real]
    print(f"| all | {spread(every)} | {spread([s['max_aac'] for _, _, s in rows])} | | | |")
    if args.out is not None:
        args.out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        print(f"runs written to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
