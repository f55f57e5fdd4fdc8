"""Faults on the virtual clock: 30% of the nodes die mid-run, some come back from checkpoints."""

from __future__ import annotations

import random

import numpy as np
import pytest

from p2pnode.config import RunConfig
from p2pnode.data import checkpoint
from p2pnode.runners.sim import Simulation


def mean_test_rank(sim: Simulation, nodes: list[int]) -> float:
    """Mean rank of the held-out item among its negatives (0 best): a smooth HR@K."""
    return float(np.mean([sim.host.nodes[i].learner.test_rank() for i in nodes]))


def used_dead_links(sim: Simulation, survivors: list[int], dead: set[int]) -> int:
    """(survivor, dead peer) pairs the survivor would still send to: in its view, not suspected."""
    total = 0
    for i in survivors:
        sampler = sim.host.nodes[i].node.sampler
        total += len((set(sampler.out_view()) - sampler.suspected()) & dead)
    return total


@pytest.mark.parametrize("sampling", ["peerswap", "cyclon"])
def test_survivors_keep_learning_when_30_percent_die_and_some_return(sampling: str) -> None:
    cfg = RunConfig(nodes=80, rounds=24, seed=4, sampling=sampling).replace(**{"learning.lr": 0.01})
    sim = Simulation(cfg)
    for _ in range(6):
        sim.run_round()
    rng = random.Random(0)
    dead = set(rng.sample(range(80), 24))  # 30%
    back = sorted(dead)[:8]  # a third restart from their checkpoint
    survivors = [i for i in range(80) if i not in dead]
    saved = {i: checkpoint.loads(checkpoint.dumps(sim.host.nodes[i].checkpoint_state())) for i in back}
    for i in dead:  # killed: no timers, unreachable
        sim.host.nodes[i].pause()
        sim.network.down.add(i)
    rank_at_kill = mean_test_rank(sim, survivors)
    links_at_kill = used_dead_links(sim, survivors, dead)
    for _ in range(8):
        sim.run_round()
    assert links_at_kill > 0
    assert used_dead_links(sim, survivors, dead) <= links_at_kill // 4  # dropped or skipped
    for i in back:  # restart: the saved state, reachable again, timers running
        runtime = sim.host.nodes[i]
        runtime.restore_state(saved[i])
        sim.network.down.discard(i)
        runtime.start()
    received = {i: sim.host.nodes[i].node.protocol.stats.models_received for i in back}
    for _ in range(10):
        sim.run_round()
    assert mean_test_rank(sim, survivors) < rank_at_kill - 0.02  # the survivors kept learning
    rejoined = [i for i in back if sim.host.nodes[i].node.protocol.stats.models_received > received[i]]
    assert len(rejoined) >= len(back) // 2  # returned nodes get models again


def test_a_run_whose_nodes_diverge_counts_the_recoveries_in_its_summary_and_per_node() -> None:
    """GMF at lr 1e30 overflows within a round: each node that went non-finite went back to its
    last good model, and the summary says how often and at how many nodes (the Gowalla-shape
    PRME run at lr 0.2 had 21,938 at 304 nodes, which no report showed)."""
    from p2pnode.runners.report import metric_for, summary
    from p2pnode.runners.sim import simulate

    config = RunConfig(nodes=8, rounds=3, dataset="synthetic", seed=3).replace(**{"learning.lr": 1e30})
    with np.errstate(all="ignore"):
        result = simulate(config)
    per_node = [row["recoveries"] for row in result["per_node"]]
    assert result["recoveries"] == {"events": sum(per_node), "nodes": sum(1 for r in per_node if r)}
    assert result["recoveries"]["events"] > result["recoveries"]["nodes"] > 0
    line = summary(result, metric_for(config))
    assert f"{result['recoveries']['events']} non-finite models recovered at" in line

    calm = simulate(RunConfig(nodes=8, rounds=3, dataset="synthetic", seed=3))
    assert calm["recoveries"] == {"events": 0, "nodes": 0}
    assert "non-finite" not in summary(calm, metric_for(config))
