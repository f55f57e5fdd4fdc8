"""The churn model (p2pcore/churn.py) and what Cyclon does for nodes that come and go."""

from __future__ import annotations

import random
import statistics

import pytest

from p2pcore.churn import ChurnModel, schedule
from peer_sampling.cyclon import Cyclon, CyclonConfig

NODES = range(2000)


def _online_share(model: ChurnModel, rounds: float, seed: int = 1) -> float:
    """The time-averaged share of nodes online over the run, from the schedule alone."""
    s = schedule(model, NODES, rounds, random.Random(seed))
    online_time = 0.0
    state = {n: n not in s.absent for n in NODES}
    since = dict.fromkeys(NODES, 0.0)
    for e in s.events:
        if state[e.node]:
            online_time += e.at - since[e.node]
        state[e.node] = e.kind == "join"
        since[e.node] = e.at
    online_time += sum(rounds - since[n] for n in NODES if state[n])
    return online_time / (rounds * len(NODES))


@pytest.mark.parametrize("kind", ["exp", "weibull"])
def test_nodes_are_online_for_uptime_over_the_cycle_from_round_zero(kind: str) -> None:
    model = ChurnModel(kind, uptime=30.0, downtime=10.0, shape=0.6)
    assert model.availability == 0.75
    # steady state from the start: the first rounds already have the long-run share online
    assert _online_share(model, rounds=5) == pytest.approx(0.75, abs=0.03)
    assert _online_share(model, rounds=200) == pytest.approx(0.75, abs=0.03)


def test_weibull_draws_have_the_asked_mean_and_a_heavy_tail() -> None:
    model = ChurnModel("weibull", shape=0.5)
    rng = random.Random(0)
    draws = [model.draw(20.0, rng) for _ in range(40_000)]
    assert statistics.fmean(draws) == pytest.approx(20.0, rel=0.05)
    assert statistics.median(draws) < 10.0  # most sessions are short, a few very long


def test_events_alternate_per_node_and_departures_split_into_crashes_and_leaves() -> None:
    model = ChurnModel("exp", uptime=5.0, downtime=5.0, crash=0.3)
    s = schedule(model, NODES, 50, random.Random(2))
    assert list(s.events) == sorted(s.events)
    online = {n: n not in s.absent for n in NODES}
    for e in s.events:
        assert 0 <= e.at < 50
        assert online[e.node] == (e.kind != "join"), e  # a join only when away, a departure only when on
        online[e.node] = e.kind == "join"
    departures = [e for e in s.events if e.kind != "join"]
    crashes = sum(e.kind == "crash" for e in departures)
    assert crashes / len(departures) == pytest.approx(0.3, abs=0.02)
    assert s.live_at(50, NODES) == {n for n in NODES if online[n]}


def test_late_joiners_alone_join_once_in_the_first_half() -> None:
    s = schedule(ChurnModel("off", late=0.25), NODES, 40, random.Random(3))
    assert len(s.absent) / len(NODES) == pytest.approx(0.25, abs=0.03)
    assert {e.node for e in s.events} == set(s.absent)
    assert all(e.kind == "join" and 0 <= e.at <= 20 for e in s.events)
    assert schedule(ChurnModel("off"), NODES, 40, random.Random(3)).events == ()


def test_the_schedule_depends_on_the_seed_only() -> None:
    model = ChurnModel("weibull", uptime=10.0, downtime=3.0)
    assert schedule(model, NODES, 30, random.Random(7)) == schedule(model, NODES, 30, random.Random(7))
    assert schedule(model, NODES, 30, random.Random(7)) != schedule(model, NODES, 30, random.Random(8))


def test_bad_models_are_refused() -> None:
    with pytest.raises(ValueError, match="churn model"):
        ChurnModel("pareto")
    with pytest.raises(ValueError, match="> 0"):
        ChurnModel("exp", uptime=0.0)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        ChurnModel("exp", crash=1.5)


def _cyclon(node: int = 0, seeds: tuple[tuple[int, str], ...] = ()) -> Cyclon:
    return Cyclon(node, f"{node}@a", seeds, CyclonConfig(capacity=3, max_age=10))


def test_a_node_back_from_away_ages_its_cache_by_the_shuffles_it_missed() -> None:
    c = _cyclon()
    c.cache = {1: ("1@a", 0), 2: ("2@a", 4), 3: ("3@a", 9)}
    c.away(250.0)  # two and a half periods: three shuffles' worth, rounded up
    assert c.cache == {1: ("1@a", 3), 2: ("2@a", 7)}
    c.away(10_000.0)
    assert c.cache == {}


def test_fresh_contacts_come_first_and_a_seed_that_fails_goes_last() -> None:
    c = _cyclon(seeds=((1, "1@a"), (2, "2@a")))
    c.cache = {}
    c.add_seeds([(5, "5@b")])
    assert [n for n, _ in c.seeds] == [5, 1, 2]
    assert set(c.cache) == {5, 1, 2}
    c.on_unreachable(5, 0.0, random.Random(0))
    assert [n for n, _ in c.seeds] == [1, 2, 5]
    for peer in (1, 2):
        c.on_unreachable(peer, 0.0, random.Random(0))
    assert set(c.cache) == {5, 1, 2}  # dry: reseeded from the seeds, the failed ones last
