"""Members who poison: what each member attack (THREAT_MODEL.md) does to a 40-node network under each defence,
in the simulator (the same node code and the same decode as over HTTP).

Nodes 0-19 play process A, 20-39 process B. The attacker holds B's identity, so it signs only as
B's ids. The attacks, each for every round of the run:

- ``flood-90x``: the attacker's 3 ids (37-39) post to every A node a model at 90x an initial
  model's norm (under the fixed distance bound of 100);
- ``escalate``: the same ids post to every A node its own current model times 30 (the fixed bound
  is relative to the receiver, so each accepted frame raises the next bound);
- ``poison-10%``: 4 of 40 members (36-39) each post one such 90x model a round to a random node,
  the rate an honest node gossips at;
- ``neighbour-90x`` and ``neighbour-escalate``: the ids 36-39 post 5 frames a round (90x, or 30x
  the receiver's model) to every node whose in-view holds them: the places a member gets
  honestly, which no gate can take from it.
- ``member-90x``, ``member-escalate``, ``member-flip``, ``member-zero``: the member holds all of
  B's ids (20-39, half the network, as in ``bench.hostile_members``' 2 x 20 cluster) and posts one
  frame a round from every place they hold in an A node's in-view: 90x an initial model, 30x,
  −30x or 0x the receiver's model. Each node is told who stands behind each id (A or B), as
  processes with identities are, so the clip's window gives the member its 4 places.
  ``member-clean`` is their clean run: owners told, no frames.

Defences: ``none`` (the fixed bound only: ``--no-sender-gate``), ``gate`` (in-neighbours only,
about one model per sender per wake-up: the default), ``gate+clipC`` (and ClippedGossip with
``--clip-factor C``), any of them ``+bandB`` (and the norm band, ``--norm-band B``), then
``+pullL`` (and the steady-pull memory, ``--steady-pull L``). Each row: mean HR@20 over all
nodes and over A's, models clipped, models damped, and the attack's frames taken and refused; a
clean run of the same seeds beside it.

    .venv/bin/python -m bench.poisoning [--rounds 30] [--seeds 1 2] [--defences none gate gate+clip2]
    .venv/bin/python -m bench.poisoning --attacks clean member-90x member-escalate member-flip \
        member-zero --defences gate+clip1 gate+clip1+band0.05
    .venv/bin/python -m bench.poisoning --seeds 1 2 3 4 5 --attacks member-clean member-90x \
        member-escalate member-flip member-zero --defences gate+clip1+band0.05 \
        gate+clip1+band0.05+pull0.7
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
import time

import numpy as np

from p2pnode.config import RunConfig
from p2pnode.runners.build import set_owner
from p2pnode.runners.sim import Simulation
from p2pnode.wire.codec import encode_model_frame
from p2pnode.wire.delta import DeltaEncoder
from p2pnode.wire.schema import Channel

ATTACKS = (
    *("clean", "flood-90x", "escalate", "poison-10%", "neighbour-90x", "neighbour-escalate"),
    *("member-clean", "member-90x", "member-escalate", "member-flip", "member-zero"),
)
MEMBER = range(20, 40)  #: the member-* attacks: process B's ids, half the network
A = range(20)


def defence(name: str) -> dict[str, object]:
    """The configuration keys of a defence named on the command line."""
    if "+pull" in name:
        head, limit = name.rsplit("+pull", 1)
        return {**defence(head), "steady_pull": float(limit)}
    if "+band" in name:
        head, band = name.rsplit("+band", 1)
        return {**defence(head), "norm_band": float(band)}
    if name == "none":
        return {"sender_gate": False, "clip_factor": 0.0}
    if name == "gate":
        return {"sender_gate": True, "clip_factor": 0.0}
    if name.startswith("gate+clip"):
        return {"sender_gate": True, "clip_factor": float(name.removeprefix("gate+clip"))}
    if name.startswith("clip"):
        return {"sender_gate": False, "clip_factor": float(name.removeprefix("clip"))}
    raise SystemExit(f"unknown defence {name!r}: none, gate, gate+clipC or clipC (+bandB, then +pullL)")


def run(attack: str, defence_name: str, seed: int, rounds: int) -> dict[str, float]:
    config = RunConfig(nodes=40, rounds=rounds, seed=seed).replace(
        **{"learning.lr": 0.01, **defence(defence_name)}
    )
    sim = Simulation(config)
    if attack.startswith("member-"):  # member-clean too: the same owners, no frames
        for n in sim.host.nodes.values():
            set_owner(n.node, lambda i: "B" if i in MEMBER else "A")
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

    member = {"member-90x": 90.0, "member-escalate": 30.0, "member-flip": -30.0, "member-zero": 0.0}
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
        elif attack in member:
            for dst in A:
                node = sim.host.nodes[dst]
                for src in sorted(set(node.node.sampler.in_view()) & set(MEMBER)):
                    base = init if attack == "member-90x" else node.learner.snapshot()
                    post(src, dst, {k: v * np.float32(member[attack]) for k, v in base.items()})
        elif attack.startswith("neighbour-"):
            for dst, node in sim.host.nodes.items():
                for src in sorted(set(node.node.sampler.in_view()) & {36, 37, 38, 39}):
                    for _ in range(5):
                        far = attack == "neighbour-90x"
                        base = init if far else node.learner.snapshot()
                        post(src, dst, {k: v * (90 if far else 30) for k, v in base.items()})
    sim.stats()  # evaluates every node
    hits = {u: n.last_hit for u, n in sim.host.nodes.items() if n.last_hit is not None}
    clipped = sum(n.node.protocol.stats.clipped for n in sim.host.nodes.values())
    damped = sum(n.node.protocol.stats.damped for n in sim.host.nodes.values())
    return {
        "hr": float(np.mean(list(hits.values()))),
        "hr_a": float(np.mean([hits[u] for u in A if u in hits])),
        "clipped": clipped,
        "damped": damped,
        "refused": sum(v for k, v in outcomes.items() if k != "taken"),
        **{f"refused:{k}": v for k, v in outcomes.items() if k != "taken"},
        "taken": outcomes.get("taken", 0),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    parser.add_argument(
        "--defences", nargs="+", default=["none", "gate", "gate+clip2"], help="none, gate, gate+clipC, clipC"
    )
    parser.add_argument("--attacks", nargs="+", default=list(ATTACKS), choices=ATTACKS)
    args = parser.parse_args(argv)
    logging.getLogger("p2pnode.node").setLevel(logging.ERROR)  # each recovery of a poisoned node
    np.seterr(over="ignore", invalid="ignore")
    print(f"40 nodes (A: 0-19), Base GL, GMF lr 0.01, {args.rounds} rounds, seeds {args.seeds}")
    print(
        f"{'attack':<18} {'defence':<11}  {'HR@20 all':>14}  {'HR@20 A':>14}  {'clipped':>7}  "
        f"{'damped':>6}  attack frames"
    )
    for attack in args.attacks:
        for name in args.defences:
            t0 = time.perf_counter()
            runs = [run(attack, name, seed, args.rounds) for seed in args.seeds]
            hr = [r["hr"] for r in runs]
            hr_a = [r["hr_a"] for r in runs]
            spread = statistics.pstdev(hr) if len(hr) > 1 else 0.0
            spread_a = statistics.pstdev(hr_a) if len(hr_a) > 1 else 0.0
            reasons = sorted({k for r in runs for k in r if k.startswith("refused:")})
            why = ", ".join(f"{k[8:]} {sum(r.get(k, 0) for r in runs):.0f}" for k in reasons)
            frames = (
                f"taken {sum(r['taken'] for r in runs):.0f}, refused {sum(r['refused'] for r in runs):.0f}"
                + (f" ({why})" if why else "")
                if attack not in ("clean", "member-clean")
                else "-"
            )
            print(
                f"{attack:<18} {name:<11}  {statistics.mean(hr):.3f} ± {spread:.3f}  "
                f"{statistics.mean(hr_a):.3f} ± {spread_a:.3f}  {sum(r['clipped'] for r in runs):>7.0f}  "
                f"{sum(r['damped'] for r in runs):>6.0f}  "
                f"{frames}  ({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )


if __name__ == "__main__":
    main()
