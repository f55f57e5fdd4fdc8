"""Churn in the simulator: nodes leave, crash and come back with the same node code,
and every live view stays consistent under random delays."""

from __future__ import annotations

from typing import Any

import pytest

from p2pnode.config import ConfigError, RunConfig
from p2pnode.runners.sim import ROUND_TICKS, Simulation, simulate
from peer_sampling.cyclon import CyclonConfig

MAX_AGE = CyclonConfig().max_age
VIEW = 10  #: a large cache: entries of departed nodes linger in it, so the age bound is what clears them
BOUND_TICKS = (MAX_AGE + 2) * ROUND_TICKS  #: the stated bound: out of every live cache by then


def _config(**changes: Any) -> RunConfig:
    return (
        RunConfig(nodes=40, rounds=40, seed=3, sampling="cyclon", view_size=VIEW)
        .replace(
            **{
                "learning.lr": 0.01,
                "sim.delay_min": 0.0,
                "sim.delay_max": 30.0,  # up to 0.3 rounds one way
                "churn.model": "exp",
                "churn.uptime": 8.0,
                "churn.downtime": 4.0,
                "churn.late": 0.2,
                **changes,
            }
        )
        .validate()
    )


def test_views_hold_no_departed_node_past_the_bound_and_no_duplicates() -> None:
    sim = Simulation(_config())
    churn = sim.churn
    assert churn is not None
    checked = stale_seen = 0
    live_sizes: list[int] = []
    for _ in range(sim.config.rounds):
        sim.run_round()
        now = sim.clock.now()
        long_gone = {n for n, since in churn.down_since.items() if now - since > BOUND_TICKS}
        recently_gone = set(churn.down_since) - long_gone
        live = [rt for rt in sim.host.nodes.values() if rt.node_id not in churn.down_since]
        for rt in live:
            cache = rt.node.sampler.out_view()
            assert len(cache) == len(set(cache)) <= sim.config.view_size
            assert all(0 <= n < sim.config.nodes and n != rt.node_id for n in cache)
            assert not set(cache) & long_gone, (rt.node_id, sorted(set(cache) & long_gone), now)
            stale_seen += len(set(cache) & recently_gone)
            checked += 1
        live_sizes.append(len(live))
    assert checked > 500
    assert min(live_sizes) < sim.config.nodes - 5  # the run did churn
    assert stale_seen > 0  # departed nodes were in views for a while: the bound was put to work
    # the live nodes still know live peers at the end
    now_live = {rt.node_id for rt in sim.host.nodes.values() if rt.node_id not in churn.down_since}
    knowing = [bool(set(sim.host.nodes[n].node.sampler.out_view()) & now_live) for n in now_live]
    assert sum(knowing) >= 0.9 * len(knowing)


def test_the_schedule_is_applied_and_reported() -> None:
    result = simulate(_config(rounds=30, **{"churn.crash": 0.5}))
    churn = [h["churn"] for h in result["history"]]
    assert all(0 < c["live"] <= 40 for c in churn)
    joins = sum(c["joins"] for c in churn)
    leaves = sum(c["leaves"] for c in churn)
    crashes = sum(c["crashes"] for c in churn)
    assert joins > 10 and leaves > 5 and crashes > 5
    # every change is counted once: live(end) = live(start) + joins − departures
    sim = Simulation(_config(rounds=30))
    assert sim.churn is not None
    start = 40 - len(sim.churn.schedule.absent)
    assert churn[-1]["live"] == start + joins - leaves - crashes
    assert result["hit_ratio_at_20"] > 0.3  # the network still learns


def test_a_run_with_churn_is_reproducible_and_churn_changes_it() -> None:
    config = _config(rounds=8)
    a, b = simulate(config), simulate(config)
    assert a["history"] == [{**h, "seconds": a["history"][i]["seconds"]} for i, h in enumerate(b["history"])]
    calm = simulate(config.replace(**{"churn.model": "off", "churn.late": 0.0}))
    assert "churn" not in calm["history"][-1]
    assert calm["messages"] != a["messages"]


def test_churn_needs_open_membership() -> None:
    with pytest.raises(ConfigError, match="--churn needs --sampling cyclon"):
        RunConfig(nodes=40, sampling="peerswap").replace(**{"churn.model": "exp"}).validate()
    with pytest.raises(ConfigError, match="--late-joiners needs --sampling cyclon"):
        RunConfig(nodes=40, sampling="cyclon", protocol="fedavg").replace(**{"churn.late": 0.1}).validate()
