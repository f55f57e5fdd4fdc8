"""How far apart honest models are: the measurement behind ``--max-model-distance``'s default.

A node refuses a received model whose distance to its own, ‖θ_recv − θ_own‖ / ‖θ_own‖ over the
parameters both carry, exceeds the bound (one member's frame of 1e6 values wrecked a
network). The default must never fire on honest traffic, so this script runs honest simulations
(no bound) and records that ratio for every model a node takes: per configuration the largest
ratio seen, its 99.9th percentile, and how many models were measured. The default is then set
well above the largest.

    .venv/bin/python -m bench.model_distance [--nodes 943] [--rounds 100]
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import time
from typing import Any

import numpy as np

from learning.params import relative_distance
from p2pnode.config import RunConfig
from p2pnode.runners.sim import simulate
from protocols.gossip import GossipNode
from protocols.messages import FedMessage, ModelMessage

CONFIGS: dict[str, dict[str, Any]] = {
    "Base GL, PeerSwap, GMF lr 0.001": {},
    "Base GL, GMF lr 0.01": {"learning": {"lr": 0.01}},
    "SAMO, GMF lr 0.01": {"protocol": "samo", "learning": {"lr": 0.01}},
    "Base GL, Cyclon, PRME": {"model": "prme", "sampling": "cyclon"},
    "Base GL, DP-SGD ε = 10, lr 0.01": {"learning": {"lr": 0.01, "dp_epsilon": 10.0}},
    "Base GL, Share less, lr 0.01": {"learning": {"lr": 0.01, "share_less": True}},
    "FedAvg, GMF lr 0.01": {"protocol": "fedavg", "learning": {"lr": 0.01}},
}


def measure(overrides: dict[str, Any], nodes: int, rounds: int) -> list[float]:
    ratios: list[float] = []
    original = GossipNode.on_message

    def recording(self: GossipNode, sender: int, message: object, now: float, rng: random.Random) -> Any:
        if isinstance(message, ModelMessage | FedMessage):
            own = self.protocol.learner.params
            ratios.append(relative_distance(own, message.params))
        return original(self, sender, message, now, rng)

    config = RunConfig(nodes=nodes, rounds=rounds)
    for key, value in overrides.items():
        if isinstance(value, dict):
            value = dataclasses.replace(getattr(config, key), **value)
        config = dataclasses.replace(config, **{key: value})
    GossipNode.on_message = recording  # type: ignore[method-assign]
    try:
        simulate(config)
    finally:
        GossipNode.on_message = original  # type: ignore[method-assign]
    return ratios


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=943)
    parser.add_argument("--rounds", type=int, default=100)
    args = parser.parse_args(argv)
    print(f"{args.nodes} nodes, {args.rounds} rounds, honest (no bound); ratio = ‖θ_recv − θ_own‖ / ‖θ_own‖")
    print(f"{'configuration':<34} {'models':>8} {'p99.9':>7} {'max':>7} {'seconds':>8}")
    worst = 0.0
    for name, overrides in CONFIGS.items():
        t0 = time.perf_counter()
        ratios = np.asarray(measure(overrides, args.nodes, args.rounds))
        worst = max(worst, float(ratios.max()))
        print(
            f"{name:<34} {len(ratios):8d} {np.quantile(ratios, 0.999):7.3f} {ratios.max():7.3f} "
            f"{time.perf_counter() - t0:8.1f}",
            flush=True,
        )
    print(f"largest ratio over all configurations: {worst:.3f}")


if __name__ == "__main__":
    main()
