"""Simulator: seconds per round of all 943 ML-100k nodes, next to the machine's floor.

Each round every node wakes about once, trains, sends and merges (Base GL trains on receipt,
SAMO on wake-up). The floor is the same round with everything but memory traffic taken away:
reading and writing every node's model once. Memory is the process's peak RSS.

    .venv/bin/python -m bench.sim_round [--nodes 943] [--rounds 3] [--protocol base]
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np
import torch

from p2pnode.config import RunConfig
from p2pnode.process import tune_allocator
from p2pnode.sim import Simulation


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=943)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=2, help="rounds run before measuring")
    ap.add_argument("--protocol", default="base")
    ap.add_argument("--sampling", default="peerswap")
    ap.add_argument("--share-less", action="store_true")
    ap.add_argument("--model", default="gmf")
    ap.add_argument("--dp-noise", type=float, default=0.0, help="DP-SGD noise multiplier (0: off)")
    ap.add_argument("--no-tune", action="store_true", help="leave glibc malloc at its defaults")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if not args.no_tune:
        tune_allocator()
    t0 = time.perf_counter()
    config = RunConfig(
        nodes=args.nodes,
        rounds=args.rounds,
        protocol=args.protocol,
        sampling=args.sampling,
        model=args.model,
    ).replace(**{"learning.share_less": args.share_less, "learning.dp_noise": args.dp_noise})
    sim = Simulation(config)
    build_s = time.perf_counter() - t0
    warm = []
    for _ in range(args.warmup):  # first rounds also allocate optimizer state and delta bases
        t = time.perf_counter()
        sim.run_round()
        warm.append(time.perf_counter() - t)
    times = []
    for _ in range(args.rounds):
        t = time.perf_counter()
        sim.run_round()
        times.append(time.perf_counter() - t)
    s = sim.stats()
    nodes = list(sim.host.nodes.values())
    t = time.perf_counter()
    for n in nodes:  # the floor: read and write every model once
        for v in n.learner.params.values():
            v[...] = v.copy()
    floor = time.perf_counter() - t
    rss_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    per_round = float(np.median(times))
    print(
        f"nodes {args.nodes}  protocol {args.protocol}  sampling {args.sampling}  "
        f"share-less {args.share_less}  build {build_s:.1f}s"
    )
    print(f"warm-up rounds: {', '.join(f'{x:.2f}' for x in warm)} s")
    print(f"measured rounds: {', '.join(f'{x:.2f}' for x in times)} s  (median {per_round:.2f})")
    print(
        f"per round: {s['merges'] / sim.round:.0f} merges, "
        f"{s['local_steps'] / sim.round:.0f} optimizer steps, "
        f"{s['model_messages'] / sim.round:.0f} models, {s['bytes'] / sim.round / 1e6:.0f} MB"
    )
    print(f"floor (read+write all models once): {floor:.3f}s  round/floor = {per_round / floor:.0f}x")
    print(f"target 2.0 s/round: {'met' if per_round <= 2.0 else 'NOT met'} ({per_round / 2.0:.2f} of it)")
    print(f"peak RSS {rss_gib:.2f} GiB  (target <= 4 GiB: {'met' if rss_gib <= 4 else 'NOT met'})")


if __name__ == "__main__":
    main()
