"""The CIA's cost in a simulated network: rounds with and without the attack, side by side.

Same config and seed, run one after the other in this process; the attack's share is the extra
time per round over the honest run's time. The FedAvg server plays all N targets every round
(Algorithm 1 with every user's items as V_target); in gossip every node is an adversary.

    .venv/bin/python -m bench.cia_round [--protocol fedavg|base] [--nodes 943] [--rounds 4]
"""

from __future__ import annotations

import argparse
import time

import torch

from p2pnode.config import RunConfig
from p2pnode.runners.process import tune_process
from p2pnode.runners.sim import Simulation


def timed(config: RunConfig, rounds: int, warmup: int) -> tuple[float, float]:
    """(median seconds per measured round including the attack's evaluation, setup seconds)."""
    t0 = time.perf_counter()
    sim = Simulation(config)
    from p2pnode.attacks.attack import lab_for

    lab = lab_for(sim.prep)
    setup = time.perf_counter() - t0
    times = []
    for r in range(1, warmup + rounds + 1):
        t = time.perf_counter()
        sim.run_round()
        sim.stats()
        lab.evaluate(r, sim.host.nodes.values())
        if r > warmup:
            times.append(time.perf_counter() - t)
    times.sort()
    return times[len(times) // 2], setup


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=943)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--protocol", default="fedavg")
    args = ap.parse_args()
    torch.set_num_threads(1)
    tune_process()
    base = RunConfig(nodes=args.nodes, rounds=args.rounds, protocol=args.protocol).replace(
        **{"learning.lr": 0.01}
    )
    honest, s0 = timed(base, args.rounds, args.warmup)
    attacked, s1 = timed(base.replace(**{"attack.kind": "cia"}), args.rounds, args.warmup)
    print(f"{args.nodes} nodes, {args.protocol}, median of {args.rounds} rounds after {args.warmup} warm-up")
    print(f"honest   {honest:6.2f} s/round   (setup {s0:.1f} s)")
    print(f"with CIA {attacked:6.2f} s/round   (setup {s1:.1f} s, ground truth included)")
    print(f"attack share of the round: {(attacked - honest) / attacked:.0%}  ({attacked / honest:.2f}x)")


if __name__ == "__main__":
    main()
