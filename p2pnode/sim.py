"""The in-process simulator: every node on one virtual clock and an in-memory network.

The nodes are the same ``NodeRuntime`` objects as in real runs, with the same wire encoding;
only the transport (``MemoryNetwork``) and the clock (``VirtualClock``) differ.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from p2pnode.build import make_node, make_server
from p2pnode.clock import VirtualClock
from p2pnode.config import RunConfig
from p2pnode.host import Host, body_limit
from p2pnode.metrics import Metrics
from p2pnode.prepare import Prepared, prepare
from p2pnode.report import metric_for, round_stats
from p2pnode.rounds import RoundLog, RoundRunner
from p2pnode.transport.memory import LinkConfig, MemoryNetwork
from protocols.gossip import TimingConfig

ROUND_TICKS = TimingConfig().round_ticks


class Simulation:
    """A whole network in memory. ``run_round`` advances the virtual clock by one round."""

    def __init__(self, config: RunConfig, prepared: Prepared | None = None) -> None:
        self.config = config.validate()
        self.prep = prepared or prepare(self.config)
        self.clock = VirtualClock()
        s = self.config.sim
        self.network = MemoryNetwork(
            self.clock, LinkConfig(s.delay_min, s.delay_max, s.drop), seed=self.config.seed
        )
        self.metrics = Metrics()
        self.host = Host(self.metrics, body_limit(self.prep.model_bytes))
        n = self.config.nodes
        for node_id in range(n):
            seed_peer = 1 if node_id == 0 else 0
            runtime = make_node(
                self.prep,
                node_id,
                self.clock,
                self.network,
                self.metrics,
                seeds=[(seed_peer, f"{seed_peer}@sim")],
            )
            self.host.add(runtime)
            self.network.register(node_id, self.host)
        if self.config.protocol == "fedavg":
            server = make_server(self.prep, self.clock, self.network, self.metrics)
            self.host.add(server)
            self.network.register(server.node_id, self.host)
        for runtime in self.host.nodes.values():
            runtime.start()
        self.round = 0

    def run_round(self) -> None:
        self.round += 1
        self.clock.run_until(self.round * ROUND_TICKS)

    def stats(self) -> dict[str, Any]:
        return round_stats(self.round, self.host.nodes.values(), metric_for(self.config))


def simulate(config: RunConfig, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Run ``config.rounds`` rounds; return the final summary with per-round history."""
    t0 = time.perf_counter()
    sim = Simulation(config)
    runner = RoundRunner(RoundLog(config, sim.prep, sim.host.nodes, progress), config.rounds)
    while (r := runner.next_round()) is not None:
        sim.clock.run_until(r * ROUND_TICKS)  # the virtual clock jumps to the round's end
        sim.round = r
        runner.end_round(r, time.perf_counter() - t0)
    return runner.result(time.perf_counter() - t0, mode="simulate")
