"""What the CIA costs a gossip adversary, as a share of its own training time, measured in place.

Every node of a simulated Base GL network on ML-100k is an adversary with its own training items
as V_target (CIA paper §V-C). Timers wrap, in the same run, the attack's work (eq. 4 and
EvaluateModel on each received model, colluder folds, the Share-less e_A refresh) and the node's
own training (``local_update``), so machine noise hits both alike. The per-round evaluation of
the lab (top-K against the ground truth) is timed apart: it is the experimenter's cost, not the
adversary's.

    .venv/bin/python -m bench.cia_cost [--nodes 943] [--rounds 5]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import torch

from adversary.cia import CIAObserver
from learning.learner import BaseLearner
from p2pnode.attacks.attack import lab_for
from p2pnode.config import RunConfig
from p2pnode.runners.process import tune_process
from p2pnode.runners.sim import Simulation


class Clock:
    """Seconds per group (nested calls of one group are timed once, at the outermost) and calls
    per wrapped function."""

    def __init__(self) -> None:
        self.secs: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._depth: dict[str, int] = {}

    def wrap(self, owner: Any, name: str, group: str) -> Callable[[], None]:
        original = getattr(owner, name)

        def timed(*args: Any, **kw: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            depth = self._depth.get(group, 0)
            self._depth[group] = depth + 1
            t = time.perf_counter()
            try:
                return original(*args, **kw)
            finally:
                self._depth[group] = depth
                if depth == 0:
                    self.secs[group] = self.secs.get(group, 0.0) + time.perf_counter() - t

        setattr(owner, name, timed)
        return lambda: setattr(owner, name, original)


def measure(config: RunConfig, rounds: int, learner_cls: type[BaseLearner]) -> dict[str, Any]:
    sim = Simulation(config)
    lab = lab_for(sim.prep)
    clock = Clock()
    undo = [
        clock.wrap(CIAObserver, "observe", "attack"),
        clock.wrap(CIAObserver, "fold", "attack"),  # observe calls fold: timed once
        clock.wrap(CIAObserver, "set_reference", "attack"),
        clock.wrap(learner_cls, "local_update", "training"),
    ]
    lab_secs = 0.0
    t0 = time.perf_counter()
    try:
        for r in range(1, rounds + 1):
            sim.run_round()
            t = time.perf_counter()
            lab.evaluate(r, sim.host.nodes.values())
            lab_secs += time.perf_counter() - t
    finally:
        for u in undo:
            u()
    wall = time.perf_counter() - t0
    return {"clock": clock, "lab": lab_secs, "wall": wall, "nodes": config.nodes}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=943)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    tune_process()
    from learning.learner import GMFLearner
    from learning.prme_learner import PRMELearner

    base = RunConfig(nodes=args.nodes, rounds=args.rounds, protocol="base").replace(
        **{"learning.lr": 0.01, "attack.kind": "cia"}
    )
    variants: list[tuple[str, RunConfig, type[BaseLearner]]] = [
        ("GMF", base, GMFLearner),
        ("GMF, Share less", base.replace(**{"learning.share_less": True}), GMFLearner),
        ("PRME", base.replace(model="prme"), PRMELearner),
        (  # every member an observer (Algorithm 2's multicast); forwarders keep no attack state
            "GMF, 10% colluders x 1 group, v",
            base.replace(**{"attack.colluders": 0.1, "attack.multicast": "v"}),
            GMFLearner,
        ),
    ]
    print(f"{args.nodes} nodes, Base GL, PeerSwap, {args.rounds} rounds; every node (or group) an adversary")
    print(
        f"{'variant':30s} {'obs/node/rnd':>12s} {'us/obs':>7s} {'train ms/node/rnd':>18s} "
        f"{'attack ms/node/rnd':>19s} {'attack/train':>13s} {'lab s/rnd':>10s}"
    )
    for name, config, cls in variants:
        m = measure(config, args.rounds, cls)
        c: Clock = m["clock"]
        folds = c.calls.get("observe", 0) + c.calls.get("fold", 0)  # received + from colluders
        attack = c.secs.get("attack", 0.0)
        train = c.secs.get("training", 0.0)
        per = m["nodes"] * args.rounds
        print(
            f"{name:30s} {folds / per:12.2f} {attack / max(folds, 1) * 1e6:7.0f} {train / per * 1e3:18.2f} "
            f"{attack / per * 1e3:19.3f} {attack / max(train, 1e-12):12.1%} {m['lab'] / args.rounds:10.2f}"
        )


if __name__ == "__main__":
    main()
