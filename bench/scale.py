"""Simulator scale: seconds per round and peak memory against the number of nodes, with fits.

Synthetic data of ML-100k's shape (1,682 items, 106 interactions a user; 20 planted communities
with pools of 100 items), Base GL over PeerSwap, GMF, one thread. Each size runs in its own
process, so its peak RSS is its own. Prints a table, the least-squares line of time and of memory
against N, and the log-log slope (1.0 is linear growth).

    .venv/bin/python -m bench.scale [--nodes 1000,2000,4000,10000] [--rounds 2] [--no-delta]

Per node a GMF run holds its model (216 kB) and Adam's moments for it (432 kB); the delta bases
and the recovery point are kept by rows (learning/history.py), so they cost the rows changed
since their version; ``--no-delta`` measures without delta bases.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np


def one(nodes: int, rounds: int, delta: bool = True) -> dict[str, float]:
    """Build and run one simulation of ``nodes`` nodes; its timings and peak RSS."""
    import torch

    from p2pnode.config import RunConfig
    from p2pnode.process import tune_allocator
    from p2pnode.sim import Simulation

    torch.set_num_threads(1)
    tune_allocator()
    t = time.perf_counter()
    config = RunConfig(nodes=nodes, rounds=rounds + 1, dataset="synthetic").replace(
        **{
            "synthetic.items": 1682,
            "synthetic.per_user": 106,
            "synthetic.communities": 20,
            "synthetic.pool_size": 100,
            "synthetic.pool_overlap": 20,
            "wire.delta": delta,
        }
    )
    sim = Simulation(config)
    build = time.perf_counter() - t
    sim.run_round()  # allocates optimizer state and delta bases
    times = []
    for _ in range(rounds):
        t = time.perf_counter()
        sim.run_round()
        times.append(time.perf_counter() - t)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    return {"nodes": nodes, "build_s": build, "round_s": float(np.median(times)), "rss_gib": rss}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", default="1000,2000,4000", help="comma-separated sizes")
    ap.add_argument("--rounds", type=int, default=2, help="measured rounds per size (after one)")
    ap.add_argument("--no-delta", action="store_true", help="full models only (no delta bases kept)")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.rounds, not args.no_delta)))
        return
    print("row deltas " + ("off (--no-delta)" if args.no_delta else "on (the default)"), flush=True)
    rows = []
    for n in (int(x) for x in args.nodes.split(",")):
        out = subprocess.run(
            [sys.executable, "-m", "bench.scale", "--one", str(n), "--rounds", str(args.rounds)]
            + (["--no-delta"] if args.no_delta else []),
            capture_output=True,
            text=True,
            check=True,
        )
        row = json.loads(out.stdout.strip().splitlines()[-1])
        rows.append(row)
        print(
            f"{n:6d} nodes  build {row['build_s']:6.1f} s  round {row['round_s']:6.2f} s  "
            f"peak RSS {row['rss_gib']:5.2f} GiB",
            flush=True,
        )
    if len(rows) < 2:
        return
    n = np.array([r["nodes"] for r in rows], float)
    for key, unit in (("round_s", "s/round"), ("rss_gib", "GiB")):
        y = np.array([r[key] for r in rows])
        a, b = np.polyfit(n, y, 1)
        k = np.polyfit(np.log(n), np.log(y), 1)[0]
        print(
            f"{unit:8s} ≈ {a * 1000:.3f} per 1,000 nodes + {b:.2f}   log-log slope {k:.2f}   "
            f"at 10,000 nodes: {a * 10000 + b:.1f}"
        )


if __name__ == "__main__":
    main()
