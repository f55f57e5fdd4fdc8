"""The in-process simulator: every node on one virtual clock and an in-memory network.

The nodes are the same ``NodeRuntime`` objects as in real runs, with the same wire encoding;
only the transport (``MemoryNetwork``) and the clock (``VirtualClock``) differ.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from p2pcore.churn import ChurnEvent, Schedule, schedule
from p2pnode.clock import VirtualClock
from p2pnode.config import RunConfig
from p2pnode.nodes.host import Host, body_limit
from p2pnode.nodes.prepare import Prepared, prepare
from p2pnode.runners.build import make_node, make_server, workbench_for
from p2pnode.runners.footprint import check_fits
from p2pnode.runners.process import set_mmap_threshold
from p2pnode.runners.report import metric_for, round_stats
from p2pnode.runners.rounds import RoundLog, RoundRunner
from p2pnode.telemetry.exposure import ExposureLedger
from p2pnode.telemetry.metrics import Metrics
from p2pnode.transport.memory import LinkConfig, MemoryNetwork
from p2pnode.transport.spill import Spill
from protocols.gossip import TimingConfig

ROUND_TICKS = TimingConfig().round_ticks


class Simulation:
    """A whole network in memory. ``run_round`` advances the virtual clock by one round.
    ``link``: the frames' delays and drops instead of the configuration's (``sim.delay_min`` ...)."""

    def __init__(
        self, config: RunConfig, prepared: Prepared | None = None, link: LinkConfig | None = None
    ) -> None:
        self.config = config.validate()
        if self.config.sim.mmap_threshold_mib:  # the whole process's allocator, from now on
            set_mmap_threshold(self.config.sim.mmap_threshold_mib)
        self.prep = prepared or prepare(self.config)
        self.clock = VirtualClock()
        s = self.config.sim
        spill = Spill(s.spill_dir) if s.spill_dir else None
        self.network = MemoryNetwork(
            self.clock,
            link or LinkConfig(s.delay_min, s.delay_max, s.drop),
            seed=self.config.seed,
            spill=spill,
        )
        self.metrics = Metrics()
        self.host = Host(self.metrics, body_limit(self.prep.model_bytes))
        self.host.spill = spill
        if self.config.protocol != "fedavg":  # who merged whose models (p2pnode/telemetry/exposure.py)
            self.host.ledger = ExposureLedger(self.config.nodes)
        n = self.config.nodes
        self.churn = Churn(self, n) if self.config.churn.active else None
        live = [i for i in range(n) if self.churn is None or i not in self.churn.schedule.absent]
        first, second = live[:2] if len(live) >= 2 else (0, 1)
        #: FedAvg's honest clients share one copy of the item tables: a client's turn (load,
        #: train, answer) runs to its end before another's begins on this clock
        workbench = workbench_for(self.prep)
        for node_id in range(n):
            seed_peer = second if node_id == first else first  # a node online at the start
            runtime = make_node(
                self.prep,
                node_id,
                self.clock,
                self.network,
                self.metrics,
                seeds=[(seed_peer, f"{seed_peer}@sim")],
                workbench=workbench,
            )
            self.host.add(runtime)
            self.network.register(node_id, self.host)
        if self.config.protocol == "fedavg":
            server = make_server(self.prep, self.clock, self.network, self.metrics)
            self.host.add(server)
            self.network.register(server.node_id, self.host)
        for runtime in self.host.nodes.values():
            if self.churn is None or runtime.node_id not in self.churn.schedule.absent:
                runtime.start()
        if self.churn is not None:
            self.churn.begin()
        self.round = 0

    def run_round(self) -> None:
        self.round += 1
        self.clock.run_until(self.round * ROUND_TICKS)

    def stats(self) -> dict[str, Any]:
        return round_stats(self.round, self.host.nodes.values(), metric_for(self.config))


class Churn:
    """Applies the run's churn schedule (p2pcore/churn.py) to the simulated nodes, with the node
    code's own departure and return: a leaving node tells its peers (a crashing one does not),
    then stops and is unreachable; a returning node restores the checkpoint it had when it went,
    is given a few live contacts (as a restarted process is given ``--peers``) and starts again."""

    def __init__(self, sim: Simulation, nodes: int) -> None:
        cfg = sim.config
        self.sim = sim
        self.rng = random.Random(f"churn-{cfg.seed}")
        self.schedule: Schedule = schedule(cfg.churn.schedule_model(), range(nodes), cfg.rounds, self.rng)
        self.down = sim.network.down
        self.saved: dict[int, tuple[dict[str, Any], float]] = {}  #: checkpoint, and when it went
        #: the nodes down now, and since when (ticks; 0: absent from the start)
        self.down_since: dict[int, float] = dict.fromkeys(self.schedule.absent, 0.0)
        self.counts = dict.fromkeys(("joins", "leaves", "crashes"), 0)
        self.gauge = sim.metrics.live_nodes
        self.events = sim.metrics.churn_events
        self.users = nodes

    def begin(self) -> None:
        """Mark the nodes absent at the start and put every event on the virtual clock."""
        self.down.update(self.schedule.absent)
        self.gauge.set(self.users - len(self.down))
        for event in self.schedule.events:
            self.sim.clock.call_at(event.at * ROUND_TICKS, partial(self.apply, event))

    def apply(self, event: ChurnEvent) -> None:
        runtime = self.sim.host.nodes[event.node]
        if event.kind == "join":
            if event.node not in self.down:
                return
            self.down.discard(event.node)
            del self.down_since[event.node]
            saved = self.saved.pop(event.node, None)
            if saved is not None:
                state, left_at = saved
                runtime.restore_state(state)
                runtime.node.sampler.away(self.sim.clock.now() - left_at)
            runtime.resume()
            live = sorted(set(range(self.users)) - self.down - {event.node})
            contacts = self.rng.sample(live, min(len(live), self.sim.config.view_size))
            runtime.node.sampler.add_seeds([(c, f"{c}@sim") for c in contacts])
            runtime.start()
            self.counts["joins"] += 1
        else:
            if event.node in self.down:
                return
            if event.kind == "leave":
                runtime.leave()
            self.saved[event.node] = (runtime.checkpoint_state(), self.sim.clock.now())
            runtime.stop()
            self.down.add(event.node)
            self.down_since[event.node] = self.sim.clock.now()
            self.counts["leaves" if event.kind == "leave" else "crashes"] += 1
        self.events.labels(event.kind).inc()
        self.gauge.set(self.users - len(self.down))

    def report(self) -> dict[str, Any]:
        """Live nodes now, and the joins, leaves and crashes since the last report."""
        out = {"live": self.users - len(self.down), **self.counts}
        self.counts = dict.fromkeys(self.counts, 0)
        return {"churn": out}


def simulate(
    config: RunConfig,
    progress: Callable[[str], None] | None = None,
    memory_check: bool = True,
    on_round: Callable[[int, dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run ``config.rounds`` rounds; return the final summary with per-round history.

    ``memory_check``: first refuse (ConfigError) a run estimated not to fit in free memory
    (p2pnode.runners.footprint), before anything is built. ``on_round(round, latest)``: called after
    every round with the latest evaluation (empty before the first; a progress bar's hook)."""
    t0 = time.perf_counter()
    config = config.validate()
    prep = prepare(config)
    if memory_check:
        check_fits(config, prep)
    sim = Simulation(config, prep)
    extra = sim.churn.report if sim.churn is not None else None
    log = RoundLog(config, sim.prep, sim.host.nodes, progress, extra=extra)
    hooks = () if on_round is None else (lambda r: on_round(r, log.last),)
    runner = RoundRunner(log, config.rounds, hooks=hooks)
    while (r := runner.next_round()) is not None:
        sim.clock.run_until(r * ROUND_TICKS)  # the virtual clock jumps to the round's end
        sim.round = r
        runner.end_round(r, time.perf_counter() - t0)
    return runner.result(time.perf_counter() - t0, mode="simulate")
