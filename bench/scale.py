"""Simulator scale: seconds per round and peak memory against the number of nodes and the data's shape.

Two kinds of run, each size in its own process (so its peak RSS is its own, and capped by
``bench/guard.py``):

- ``--shape ml-100k`` (the default): synthetic data of ML-100k's shape (1,682 items, 106
  interactions a user; 20 planted communities with pools of 100 items), Base GL over PeerSwap,
  GMF, one thread, at each size of ``--nodes``; prints the least-squares line of time and of memory
  against N and the log-log slope (1.0 is linear growth).
- ``--shape foursquare-nyc`` or ``gowalla-nyc``: a check-in file of the CIA paper's POI shape
  (learning/synthetic.py, written in the TSMC2014 format and loaded as a user's file is), every user
  a node, in Table III's setting: every node a CIA adversary (K = 50), lr 0.01, PeerSwap, row
  deltas on. Prints RSS after each round, the peak, the seconds a round, and what the attack's
  state (v_u of every user each observer has heard from) holds at the end.

Every line sets the peak against the float32 floor: each node's model and Adam's two moments for
it (3 × model bytes × nodes), what any run of those nodes must hold. The delta bases and the
recovery point are kept by rows (learning/history.py), so they cost the rows changed since their
version; ``--no-delta`` measures without delta bases.

    .venv/bin/python -m bench.scale [--nodes 1000,2000,4000,10000] [--rounds 2] [--no-delta]
    .venv/bin/python -m bench.scale --shape foursquare-nyc [--rounds 25] [--cap-gib 20]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

POI = ("foursquare-nyc", "gowalla-nyc")


def _attack_state_bytes(sim: Any) -> int:
    """Bytes of every CIA observer's v_u buffers (adversary/cia.py)."""
    total = 0
    for runtime in sim.host.nodes.values():
        observer = getattr(runtime.node, "observer", None)
        if observer is not None:
            total += sum(buf.nbytes for buf in observer._buf.values())
    return total


def one(nodes: int, rounds: int, delta: bool, file: str | None, cap: float) -> dict[str, Any]:
    """Build and run one simulation; its timings, RSS per round and peak RSS."""
    from bench.guard import cap_rss, peak_rss_gib, rss_gib

    cap_rss(cap)
    import torch

    from p2pnode.config import RunConfig
    from p2pnode.runners.process import tune_allocator
    from p2pnode.runners.sim import Simulation

    torch.set_num_threads(1)
    tune_allocator()
    if file is not None:
        config = RunConfig(dataset=file, nodes=nodes, rounds=rounds + 1).replace(
            **{"learning.lr": 0.01, "attack.kind": "cia", "attack.target_k": 50, "wire.delta": delta}
        )
    else:
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
    t = time.perf_counter()
    sim = Simulation(config)
    build = time.perf_counter() - t
    floor = 3 * sim.prep.model_bytes * nodes / 2**30
    built_rss = rss_gib()
    sim.run_round()  # allocates optimizer state and delta bases
    times, by_round = [], [round(rss_gib(), 3)]
    for _ in range(rounds):
        t = time.perf_counter()
        sim.run_round()
        times.append(time.perf_counter() - t)
        by_round.append(round(rss_gib(), 3))
    return {
        "nodes": nodes,
        "build_s": build,
        "round_s": float(np.median(times)),
        "rss_gib": peak_rss_gib(),
        "built_gib": built_rss,
        "floor_gib": floor,
        "by_round": by_round,
        "attack_gib": _attack_state_bytes(sim) / 2**30,
    }


def _run(n: int, args: argparse.Namespace, file: str | None) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "bench.scale", "--one", str(n), "--rounds", str(args.rounds)]
        + ["--cap-gib", str(args.cap_gib)]
        + (["--file", file] if file else [])
        + (["--no-delta"] if args.no_delta else []),
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        sys.exit(f"{n} nodes failed (exit {out.returncode}): {out.stderr.strip()[-400:]}")
    row: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="ml-100k", choices=("ml-100k", *POI), help="the data's shape")
    ap.add_argument("--nodes", help="comma-separated sizes (default 1000,2000,4000; a POI shape: its users)")
    ap.add_argument("--rounds", type=int, help="measured rounds per size, after one (default 2; POI 25)")
    ap.add_argument("--no-delta", action="store_true", help="full models only (no delta bases kept)")
    ap.add_argument("--cap-gib", type=float, default=20.0, help="end a run whose RSS passes this (GiB)")
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--file", help=argparse.SUPPRESS)
    args = ap.parse_args()
    poi = args.shape in POI
    if args.rounds is None:
        args.rounds = 25 if poi else 2
    if args.one:
        print(json.dumps(one(args.one, args.rounds, not args.no_delta, args.file, args.cap_gib)))
        return
    if args.nodes is None:
        if poi:
            from learning.synthetic import POI_SHAPES

            args.nodes = str(POI_SHAPES[args.shape].users)
        else:
            args.nodes = "1000,2000,4000"
    setting = "Table III's setting (every node a CIA adversary, K = 50, lr 0.01)" if poi else "Base GL"
    print(
        f"{args.shape} shape, {setting}, PeerSwap, GMF, row deltas "
        + ("off (--no-delta)" if args.no_delta else "on (the default)"),
        flush=True,
    )
    rows = []
    tmp = tempfile.TemporaryDirectory()
    file = None
    if poi:  # written here, so the measured process only loads it, as a user's run does
        from learning import synthetic

        path = Path(tmp.name) / f"{args.shape}.txt"
        path.write_text(
            "".join(synthetic.tsmc_lines(synthetic.poi_checkins(synthetic.POI_SHAPES[args.shape])))
        )
        file = str(path)
    for n in (int(x) for x in args.nodes.split(",")):
        row = _run(n, args, file)
        rows.append(row)
        over = row["rss_gib"] - row["floor_gib"]
        print(
            f"{n:6d} nodes  build {row['build_s']:6.1f} s  round {row['round_s']:6.2f} s  "
            f"peak RSS {row['rss_gib']:5.2f} GiB  floor {row['floor_gib']:5.2f} GiB "
            f"(peak/floor {row['rss_gib'] / row['floor_gib']:.3f}, +{over:.2f} GiB)",
            flush=True,
        )
        if poi:
            trace = row["by_round"]
            print(f"   RSS after the build {row['built_gib']:.2f} GiB; after each round (GiB):")
            for at in range(0, len(trace), 10):
                print("   " + " ".join(f"{x:5.2f}" for x in trace[at : at + 10]))
            print(f"   the attack's v_u buffers at the end: {row['attack_gib']:.3f} GiB")
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
