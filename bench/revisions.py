"""Two revisions of p2pnode side by side: simulator seconds per round, interleaved, as a ratio.

A refactor must not slow the node down. This checks out ``--base`` (default: the commit before
this branch of work) into a temporary worktree, then runs the same simulator round in the base
and in this working tree, alternating (base, here, base, here, ...) so that a busy machine slows
both alike, and prints each revision's median and here/base.

    .venv/bin/python -m bench.revisions --base 74a99cc [--nodes 943] [--repeats 3] [--protocol base]
        [--model gmf|prme] [--attack] [--set KEY=VALUE ...]

``--set`` changes the configuration as ``p2pnode experiment --set`` does (a dotted key, a TOML
value), e.g. a FedAvg round with the CIA at the server under Share less: ``--protocol fedavg
--set attack.kind=cia --set learning.share_less=true``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: run in a fresh interpreter with ``root`` first on the path (the editable install's finder,
#: which points at this checkout, is taken out), then time rounds of a simulation
PROBE = """
import sys, time
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in str(getattr(f, "__module__", ""))]
sys.path.insert(0, {root!r})
import numpy as np, torch
torch.set_num_threads(1)
from p2pnode.config import RunConfig
from p2pnode.runners.sim import Simulation
import p2pnode
assert p2pnode.__file__.startswith({root!r}), p2pnode.__file__
config = RunConfig(nodes={nodes}, rounds={total}, protocol={protocol!r}, model={model!r})
if {model!r} == "prme":
    config = config.replace(**{{"learning.prme_lr": 0.2}})
if {attack!r}:
    config = config.replace(**{{"attack.kind": "cia", "attack.attackers": "all"}})
if {sets!r}:
    config = config.replace(**{sets!r})
sim = Simulation(config)
for _ in range({warmup}):
    sim.run_round()
times = []
for _ in range({rounds}):
    t = time.perf_counter(); sim.run_round(); times.append(time.perf_counter() - t)
print(float(np.median(times)))
"""


def measure(root: Path, args: argparse.Namespace) -> float:
    code = PROBE.format(
        root=str(root),
        nodes=args.nodes,
        total=args.warmup + args.rounds,
        protocol=args.protocol,
        model=args.model,
        attack=args.attack,
        warmup=args.warmup,
        rounds=args.rounds,
        sets=parse_sets(args.set),
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"{root}: {out.stderr.strip().splitlines()[-1]}")
    return float(out.stdout.strip().splitlines()[-1])


def parse_sets(items: list[str]) -> dict[str, object]:
    """``KEY=VALUE`` items as RunConfig.replace arguments, read as ``p2pnode experiment --set``."""
    from p2plab.cli import parse_set
    from p2pnode.config import ConfigError

    try:
        return dict(parse_set(item) for item in items)
    except ConfigError as err:
        raise SystemExit(str(err)) from None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", default="74a99cc", help="the revision to compare with")
    ap.add_argument("--nodes", type=int, default=943)
    ap.add_argument("--rounds", type=int, default=3, help="measured rounds per run")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3, help="runs of each revision, interleaved")
    ap.add_argument("--protocol", default="base")
    ap.add_argument("--model", default="gmf", choices=("gmf", "prme"))
    ap.add_argument("--attack", action="store_true", help="every node a CIA adversary (Table III)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a configuration change")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="p2pnode-base-") as tmp:
        base = Path(tmp) / "tree"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(base), args.base],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        try:
            runs: dict[str, list[float]] = {"base": [], "here": []}
            for _ in range(args.repeats):
                runs["base"].append(measure(base, args))
                runs["here"].append(measure(ROOT, args))
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT, check=False)
    b, h = statistics.median(runs["base"]), statistics.median(runs["here"])
    said = f"{args.nodes} nodes, {args.protocol}, {args.model}{', CIA on every node' if args.attack else ''}"
    if args.set:
        said += f", {' '.join(args.set)}"
    print(f"{said}, median of {args.repeats} runs x {args.rounds} rounds")
    print(f"base {args.base}: {b:.3f} s/round  ({', '.join(f'{x:.3f}' for x in runs['base'])})")
    print(f"here:          {h:.3f} s/round  ({', '.join(f'{x:.3f}' for x in runs['here'])})")
    print(f"here / base = {h / b:.3f}")


if __name__ == "__main__":
    main()
