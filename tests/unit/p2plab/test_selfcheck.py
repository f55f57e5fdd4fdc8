"""The self-check's arithmetic: a real run's rates against the simulator's seeds, the invariants
apart from the machine's pace."""

from __future__ import annotations

import pytest

from p2pcore.roundtrips import RoundTrips
from p2plab.selfcheck import MIN_TRIPS, QUANTILES, Rates, compare, measured_link, rates
from p2pnode.config import RunConfig
from p2pnode.runners.real import hold_tick

CONFIG = RunConfig(nodes=100, rounds=30, tick_seconds=0.01)
SIM = [Rates(0.20, 0.00), Rates(0.22, 0.01), Rates(0.19, 0.0, {"old-model": 0.002})]


def test_rates_are_per_node_and_round_and_leave_start_up_refusals_out() -> None:
    r = rates(
        {
            "nodes": 100,
            "round": 30,
            "view_swaps": {"committed": 300, "aborted": 100},
            "rejected": {"starting": 40, "no-base": 9, "busy": 30, "old-model": 3},
            "late_rounds": 3,
            "pace": {"stretch": 1.4},
            # what the first round refused is start-up too (every node's first model at once)
            "history": [{"round": 1, "rejected": {"busy": 20}}, {"round": 2}],
        }
    )
    assert r.committed == 0.1 and r.aborted_share == 0.25 and r.late == 0.1 and r.stretch == 1.4
    assert r.refused == {"busy": 10 / 3000, "old-model": 0.001}


def test_a_run_within_the_seeds_range_is_as_the_simulator() -> None:
    verdict = compare(Rates(0.18, 0.05, {"old-model": 0.004}), SIM, CONFIG, processes=2)
    assert not verdict.diverged and verdict.line.startswith("self-check: as the simulator (3 seeds)")
    assert "rounds 1.00x their tick" in verdict.line


def test_a_slow_machine_is_told_apart_from_a_divergence_with_the_tick_that_would_hold() -> None:
    slow = Rates(0.19, 0.20, {"busy": 0.05}, late=0.0, stretch=1.8)
    verdict = compare(slow, SIM, CONFIG, processes=2, delays="with this run's delays: x")
    assert not verdict.diverged and not verdict.findings
    assert verdict.slow == (
        "rounds took 1.8x their 1 s (100 ticks of 0.01 s)",
        "'busy' refusals 0.050 a node-round (simulator 0.000)",
    )
    assert "on a slow machine" in verdict.line and "(3 seeds, with this run's delays: x)" in verdict.line
    assert f"--tick-seconds {hold_tick(0.01, 1.8):g} would hold" in verdict.line
    assert hold_tick(0.01, 1.8) == 0.022


def test_a_run_that_broke_the_invariants_diverged_and_a_slow_one_says_the_machine() -> None:
    verdict = compare(Rates(0.02, 0.72, {"busy": 0.05}, late=0.3, stretch=2.0), SIM, CONFIG, processes=2)
    assert verdict.diverged
    assert [f.split(" ")[0] for f in verdict.findings] == ["72%", "0.02"]
    assert "could not keep up with 1 s rounds" in verdict.line and "--tick-seconds 0.024" in verdict.line


def test_aborts_the_seeds_explain_are_not_a_divergence_while_the_swaps_commit() -> None:
    assert not compare(Rates(0.19, 0.30), [Rates(0.2, 0.08)] * 3, CONFIG).diverged  # 30 < 8 + 25
    assert compare(Rates(0.19, 0.40), [Rates(0.2, 0.08)] * 3, CONFIG).diverged
    assert compare(Rates(0.12, 0.10), [Rates(0.2, 0.08)] * 3, CONFIG).diverged  # under 70% committed


def test_refusals_of_another_kind_point_at_the_network_not_the_machine() -> None:
    verdict = compare(Rates(0.2, 0.0, {"old-model": 0.05}), SIM, CONFIG)
    assert verdict.diverged and verdict.findings == (
        "'old-model' refusals 0.050 a node-round (simulator 0.002)",
    )
    assert "delays or loses messages beyond what this run measured" in verdict.line


def test_fedavg_without_swaps_is_judged_on_refusals_alone_and_late_rounds_are_slowness() -> None:
    fed = [Rates(0.0, 0.0), Rates(0.0, 0.0), Rates(0.0, 0.0)]
    assert not compare(Rates(0.0, 0.0), fed, CONFIG).diverged
    late = compare(Rates(0.0, 0.0, late=0.5), fed, CONFIG)
    assert not late.diverged and late.slow == ("50% of rounds started late",)
    assert compare(Rates(0.0, 0.0, {"not-neighbour": 0.2}), fed, CONFIG).diverged


def test_the_simulator_takes_the_delays_the_run_measured_halved() -> None:
    trips = RoundTrips()
    for k in range(100):
        trips.add(0.5 + k / 100)  # round trips 0.5 .. 1.5 ticks
    link = measured_link({"swap_rtt": trips.to_dict()})
    assert link is not None and len(link.delays) == QUANTILES
    assert 0.2 <= link.delays[0] <= link.delays[QUANTILES // 2] <= link.delays[-1] <= 1.0
    few = RoundTrips()
    for _ in range(MIN_TRIPS - 1):
        few.add(1.0)
    assert measured_link({"swap_rtt": few.to_dict()}) is None and measured_link({}) is None


@pytest.mark.parametrize(
    ("tick", "stretch", "want"), [(0.01, 1.0, 0.012), (0.02, 3.3, 0.08), (0.004, 1.5, 0.0072)]
)
def test_the_tick_that_would_hold_leaves_a_fifth_to_spare(tick: float, stretch: float, want: float) -> None:
    assert hold_tick(tick, stretch) == pytest.approx(want)
