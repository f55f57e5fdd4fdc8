"""Memory of "every node plays the adversary" (CIA paper §V-C) in a 943-node simulation.

Each variant runs in its own child process so that peak RSS is its own: an honest Base GL network,
the same network with every node an adversary (GMF and PRME), and FedAvg with the server playing
all 943 targets. Besides RSS the children count what the observers hold: v_u buffers per
(adversary, observed user) pair. An observer's memory grows with the users it has seen, so the
run also projects the pairs to the share of the network an adversary sees in the paper's
Rand-Gossip runs (upper bound 81%, Table III) and to everyone. Each line also prints what the
memory check estimates for that run (p2pnode/runners/footprint.py) and per pair, beside the measurement.

    .venv/bin/python -m bench.cia_memory [--nodes 943] [--rounds 20]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from typing import Any

import numpy as np
import torch

from adversary.node import AdversaryNode
from p2pnode.attacks.attack import lab_for
from p2pnode.config import RunConfig
from p2pnode.runners.footprint import footprint_of, run_bytes
from p2pnode.runners.process import tune_process
from p2pnode.runners.sim import Simulation

VARIANTS = ("honest", "gossip-gmf", "fedavg-server", "honest-prme", "gossip-prme")
BASELINE = {"gossip-gmf": "honest", "gossip-prme": "honest-prme"}  #: same network, no attack


def config_for(variant: str, nodes: int, rounds: int, factors: int) -> RunConfig:
    base = RunConfig(nodes=nodes, rounds=rounds, protocol="base").replace(
        **{"learning.lr": 0.01, "learning.factors": factors}
    )
    if variant == "honest":
        return base
    if variant == "honest-prme":
        return base.replace(model="prme")
    attacked = base.replace(**{"attack.kind": "cia"})
    if variant == "gossip-prme":
        return attacked.replace(model="prme")
    if variant == "fedavg-server":
        return attacked.replace(protocol="fedavg")
    return attacked


def child(variant: str, nodes: int, rounds: int, factors: int) -> dict[str, Any]:
    torch.set_num_threads(1)
    tune_process()
    config = config_for(variant, nodes, rounds, factors)
    t0 = time.perf_counter()
    sim = Simulation(config)
    lab = lab_for(sim.prep)
    for r in range(1, rounds + 1):
        sim.run_round()
        lab.evaluate(r, sim.host.nodes.values())
    pairs = held = 0
    adversaries = 0
    for runtime in sim.host.nodes.values():
        node = runtime.node
        if isinstance(node, AdversaryNode):
            adversaries += 1
            obs = node.observer
            pairs += len(obs.v)
            held += sum(int(b.nbytes) for b in obs._buf.values())
            held += sum(int(s.nbytes) for s in obs.scores.values())
    fp = footprint_of(config, sim.prep)  # what the memory check estimates, beside what was measured
    return {
        "variant": variant,
        "estimate_mib": run_bytes(config, fp) / 2**20,
        "estimate_per_pair": fp.observer_bytes,
        "seconds": time.perf_counter() - t0,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "adversaries": adversaries,
        "pairs": pairs,
        "observer_mib": held / 2**20,
        "bytes_per_pair": held / pairs if pairs else 0.0,
        "aac": float(np.mean(lab.accuracies[-1])) if lab.accuracies and lab.accuracies[-1] else None,
        "upper_bound": float(np.mean(lab.bounds[-1])) if lab.bounds and lab.bounds[-1] else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=943)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--factors", type=int, default=32, help="GMF embedding size")
    ap.add_argument("--child", choices=VARIANTS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args.nodes, args.rounds, args.factors)))
        return
    rows = []
    for variant in VARIANTS:
        cmd = [sys.executable, "-m", "bench.cia_memory", "--child", variant]
        cmd += ["--nodes", str(args.nodes), "--rounds", str(args.rounds), "--factors", str(args.factors)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
    n = args.nodes
    rss = {r["variant"]: r["peak_rss_mib"] for r in rows}
    print(f"{n} nodes, {args.rounds} rounds, GMF factors {args.factors}, PRME dim 60; one process each")
    print(
        f"{'variant':14s} {'peak RSS MiB':>12s} {'estimate MiB':>12s} {'over honest':>11s} {'pairs':>8s} "
        f"{'observers MiB':>13s} {'kB/pair':>8s} {'estimated':>9s}"
    )
    for r in rows:
        name = BASELINE.get(r["variant"])
        over = f"{r['peak_rss_mib'] - rss[name]:11.0f}" if name else f"{'-':>11s}"
        print(
            f"{r['variant']:14s} {r['peak_rss_mib']:12.0f} {r['estimate_mib']:12.0f} {over} "
            f"{r['pairs']:8d} {r['observer_mib']:13.1f} {r['bytes_per_pair'] / 1e3:8.1f} "
            f"{r['estimate_per_pair'] / 1e3:9.1f}"
        )
    print("every node an adversary, projected (honest RSS + pairs × kB/pair):")
    for r in rows:
        if not r["variant"].startswith("gossip"):
            continue
        per_adv = r["pairs"] / max(r["adversaries"], 1)
        print(
            f"  {r['variant']}: now {per_adv:.1f} users seen per adversary "
            f"({per_adv / (n - 1):.1%} of the network), "
            f"AAC {r['aac']:.3f}, upper bound {r['upper_bound']:.3f}"
        )
        honest = rss[BASELINE[r["variant"]]]
        for share in (0.1, 0.81, 1.0):
            total = honest + n * share * (n - 1) * r["bytes_per_pair"] / 2**20
            print(f"    at {share:.0%} seen: {total / 1024:5.1f} GiB")


if __name__ == "__main__":
    main()
