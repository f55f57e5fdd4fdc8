"""Simulator: seconds per round of all 943 ML-100k nodes, next to the machine's floor.

Each round every node wakes about once, trains, sends and merges (Base GL trains on receipt,
SAMO on wake-up, FedAvg clients on the server's round). The floor (bench/floor.py) is every
user's local epoch as one batched computation plus one copy of every model, on the same users;
its rounds run between the simulator's, so machine noise hits both alike, and the ratio of the
medians is printed. Memory is the process's peak RSS.

With ``--attack`` every protocol also runs with every node a CIA adversary (Table III's
setting), in the same process between the same floor rounds, and the ratio of the two medians is
printed against its own target (the attack may cost at most 30% more).

    .venv/bin/python -m bench.sim_round [--nodes 943] [--rounds 4] [--protocol base,samo,fedavg]
        [--backend fused|numpy] [--attack]
"""

from __future__ import annotations

import argparse
import gc
import resource
import time

import numpy as np
import torch

from bench.floor import BatchedModels, StackedModels, compiled_round, floor_round, inputs
from p2pnode.config import RunConfig
from p2pnode.runners.process import tune_allocator
from p2pnode.runners.sim import Simulation

TARGET = 1.5  #: a Base GL round may cost at most this many floors
ATTACK_TARGET = 1.3  #: a round with the CIA on every node may cost this many rounds without it


def measure(
    args: argparse.Namespace, protocol: str, attack: bool = False
) -> tuple[list[float], list[float], list[float], list[float], Simulation, float]:
    """Build one simulation; then warm-up rounds, then simulator and floor rounds alternating."""
    t0 = time.perf_counter()
    config = RunConfig(
        nodes=args.nodes, rounds=args.warmup + args.rounds, protocol=protocol, sampling=args.sampling
    ).replace(
        **{
            "learning.share_less": args.share_less,
            "learning.dp_noise": args.dp_noise,
            "learning.backend": args.backend,
        }
    )
    if attack:
        config = config.replace(**{"attack.kind": "cia", "attack.attackers": "all"})
    sim = Simulation(config)
    build_s = time.perf_counter() - t0
    users = [n.learner.data for i, n in sorted(sim.host.nodes.items()) if i < args.nodes]
    positives, excluded = inputs(users)
    models = BatchedModels.create(len(users), users[0].n_items, config.learning.factors, seed=0)
    stacked = StackedModels.create(len(users), users[0].n_items, config.learning.factors, seed=0)
    rng = np.random.default_rng(0)
    for _ in range(args.warmup):  # first rounds also allocate optimizer state and delta bases
        sim.run_round()
        floor_round(models, positives, excluded, rng)
        compiled_round(stacked, positives, excluded, rng)
    sim_s, floor_s, compiled_s, copy_s = [], [], [], []
    for _ in range(args.rounds):
        t = time.perf_counter()
        sim.run_round()
        sim_s.append(time.perf_counter() - t)
        floor_s.append(floor_round(models, positives, excluded, rng)[0])
        compiled_s.append(compiled_round(stacked, positives, excluded, rng)[0])
        t = time.perf_counter()
        stacked.copy_all()  # one more copy of every model, priced for protocols that move more
        copy_s.append(time.perf_counter() - t)
    return sim_s, floor_s, compiled_s, copy_s, sim, build_s


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=943)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=2, help="rounds run before measuring")
    ap.add_argument("--protocol", default="base", help="comma-separated: base, samo, fedavg")
    ap.add_argument("--sampling", default="peerswap")
    ap.add_argument("--share-less", action="store_true")
    ap.add_argument("--backend", default="fused", help="local training: fused or numpy")
    ap.add_argument("--dp-noise", type=float, default=0.0, help="DP-SGD noise multiplier (0: off)")
    ap.add_argument("--no-tune", action="store_true", help="leave glibc malloc at its defaults")
    ap.add_argument("--attack", action="store_true", help="also every node a CIA adversary (Table III)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if not args.no_tune:
        tune_allocator()
    rows = []
    attacks: dict[str, float] = {}
    for protocol in args.protocol.split(","):
        for attack in (False, True) if args.attack else (False,):
            sim_s, floor_s, compiled_s, copy_s, sim, build_s = measure(args, protocol, attack)
            s = sim.stats()
            per_round, floor = float(np.median(sim_s)), float(np.median(floor_s))
            # the compiled floor moves one model per node; a protocol that moves more (SAMO sends
            # to every neighbour, FedAvg's server sends the global model and takes every update)
            # has a floor with one more copy of every model per extra model a node
            extra = max(0.0, s["model_messages"] / sim.round / args.nodes - 1.0)
            compiled = float(np.median(compiled_s)) + extra * float(np.median(copy_s))
            name = f"{protocol}+cia" if attack else protocol
            print(
                f"{name:10s} nodes {args.nodes}  sampling {args.sampling}  backend {args.backend}  "
                f"share-less {args.share_less}  build {build_s:.1f}s"
            )
            for label, xs, med in (
                ("simulator rounds", sim_s, per_round),
                ("batched floor", floor_s, floor),
                ("compiled floor", compiled_s, float(np.median(compiled_s))),
                ("one more copy", copy_s, float(np.median(copy_s))),
            ):
                print(f"  {label + ':':17s} {', '.join(f'{x:.2f}' for x in xs)} s  (median {med:.2f})")
            if extra:
                print(f"  its compiled floor: + {extra:.2f} copies of every model = {compiled:.2f} s")
            print(
                f"  per round: {s['merges'] / sim.round:.0f} merges, {s['local_steps'] / sim.round:.0f} "
                f"optimizer steps, {s['model_messages'] / sim.round:.0f} models, "
                f"{s['bytes'] / sim.round / 1e6:.0f} MB"
            )
            rows.append((name, per_round, floor, compiled))
            if attack:
                # the same round without the attack, scaled by the floors each ran beside (noise)
                plain = next(r for r in rows if r[0] == protocol)
                attacks[protocol] = (per_round / compiled) / (plain[1] / plain[3])
            del sim
            gc.collect()
    rss_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"\n{'protocol':10s} {'s/round':>8s} {'batched':>8s} {'ratio':>6s} {'compiled':>9s} {'ratio':>6s}")
    for name, per_round, floor, compiled in rows:
        print(
            f"{name:10s} {per_round:8.2f} {floor:8.2f} {per_round / floor:5.2f}x {compiled:9.2f} "
            f"{per_round / compiled:5.2f}x"
        )
    print(
        f"target: every round <= {TARGET}x its compiled floor: one epoch per node (Base GL trains on "
        "each receipt, SAMO once per wake-up, FedAvg's clients once per server round) and a copy of "
        "every model per model it moves a node (Base GL ~1, SAMO and FedAvg ~2)."
    )
    for name, per_round, _floor, compiled in rows:
        verdict = "met" if per_round <= TARGET * compiled else "not met"
        print(f"  {name:10s} {per_round / compiled:5.2f}x: {verdict}")
    for protocol, ratio in attacks.items():
        print(
            f"CIA on every node, {protocol}: {ratio:.2f}x the round without it (each taken against the "
            f"compiled floor it ran beside); target <= {ATTACK_TARGET}x"
        )
    print(f"peak RSS {rss_gib:.2f} GiB (the floors' stacked models included, about 1.6 GiB)")


if __name__ == "__main__":
    main()
