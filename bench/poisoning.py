"""Members who poison: what each attack of issue #31 does to a 40-node network, with and without
ClippedGossip (``--clip-factor``), in the simulator (the same node code as over HTTP).

Nodes 0-19 play process A, 20-39 process B. The attacks, each for every round of the run:

- ``flood-90x``: the attacker's 3 ids (37-39) post to every A node a model at 90x an initial
  model's norm (under the fixed distance bound of 100);
- ``escalate``: the same ids post to every A node its own current model times 30 (the fixed bound
  is relative to the receiver, so each accepted frame raises the next bound);
- ``poison-10%``: 4 of 40 members (36-39) each post one such 90x model a round to a random node,
  the rate an honest node gossips at.

Each row: mean HR@20 over all nodes and over A's, and the models clipped or refused, against a
clean run of the same length and seed; the same seeds with and without the clip.

    .venv/bin/python -m bench.poisoning [--rounds 30] [--seeds 1 2] [--clip 0 2]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import numpy as np

from p2pnode.config import RunConfig
from p2pnode.sim import Simulation
from p2pnode.wire.codec import encode_model_frame
from p2pnode.wire.delta import DeltaEncoder
from p2pnode.wire.schema import Channel

ATTACKS = ("clean", "flood-90x", "escalate", "poison-10%")
A = range(20)


def run(attack: str, clip: float, seed: int, rounds: int) -> dict[str, float]:
    config = RunConfig(nodes=40, rounds=rounds, seed=seed).replace(
        **{"learning.lr": 0.01, "clip_factor": clip}
    )
    sim = Simulation(config)
    init = {k: v.copy() for k, v in sim.host.nodes[0].learner.snapshot().items()}
    rng = random.Random(seed)
    versions: dict[int, int] = {}
    outcomes: dict[str, int] = {}

    def post(src: int, dst: int, params: dict[str, np.ndarray]) -> None:
        versions[src] = versions.get(src, 2**40) + 1
        frame = bytes(encode_model_frame(src, dst, DeltaEncoder(False).encode(dst, versions[src], params)))
        outcome = sim.host.receive(dst, Channel.GOSSIP, frame, sender=src)
        key = outcome.reason or "taken"
        outcomes[key] = outcomes.get(key, 0) + 1

    for _ in range(rounds):
        sim.run_round()
        if attack == "flood-90x":
            for src in (37, 38, 39):
                for dst in A:
                    post(src, dst, {k: v * 90 for k, v in init.items()})
        elif attack == "escalate":
            for src in (37, 38, 39):
                for dst in A:
                    own = sim.host.nodes[dst].learner.snapshot()
                    post(src, dst, {k: v * 30 for k, v in own.items()})
        elif attack == "poison-10%":
            for src in (36, 37, 38, 39):
                post(src, rng.randrange(36), {k: v * 90 for k, v in init.items()})
    sim.stats()  # evaluates every node
    hits = {u: n.last_hit for u, n in sim.host.nodes.items() if n.last_hit is not None}
    clipped = sum(n.node.protocol.stats.clipped for n in sim.host.nodes.values())
    return {
        "hr": float(np.mean(list(hits.values()))),
        "hr_a": float(np.mean([hits[u] for u in A if u in hits])),
        "clipped": clipped,
        "refused": sum(v for k, v in outcomes.items() if k != "taken"),
        "taken": outcomes.get("taken", 0),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--clip", type=float, nargs="+", default=[0.0, 2.0], help="clip factors to compare")
    parser.add_argument("--attacks", nargs="+", default=list(ATTACKS), choices=ATTACKS)
    args = parser.parse_args(argv)
    print(f"40 nodes (A: 0-19), Base GL, GMF lr 0.01, {args.rounds} rounds, seeds {args.seeds}")
    print(f"{'attack':<12} {'clip':>5}  {'HR@20 all':>16}  {'HR@20 A':>16}  {'clipped':>8}  attack frames")
    for attack in args.attacks:
        for clip in args.clip:
            t0 = time.perf_counter()
            runs = [run(attack, clip, seed, args.rounds) for seed in args.seeds]
            hr = [r["hr"] for r in runs]
            hr_a = [r["hr_a"] for r in runs]
            spread = statistics.pstdev(hr) if len(hr) > 1 else 0.0
            spread_a = statistics.pstdev(hr_a) if len(hr_a) > 1 else 0.0
            frames = (
                f"taken {sum(r['taken'] for r in runs):.0f}, refused {sum(r['refused'] for r in runs):.0f}"
                if attack != "clean"
                else "-"
            )
            print(
                f"{attack:<12} {clip:>5.1f}  {statistics.mean(hr):.3f} ± {spread:.3f}    "
                f"{statistics.mean(hr_a):.3f} ± {spread_a:.3f}    {sum(r['clipped'] for r in runs):>8.0f}  "
                f"{frames}  ({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
