"""The self-check's arithmetic: a real run's rates against the simulator's seeds (issue #63)."""

from __future__ import annotations

from p2plab.selfcheck import Rates, compare, rates
from p2pnode.config import RunConfig

CONFIG = RunConfig(nodes=100, rounds=30, tick_seconds=0.01)
SIM = [Rates(0.20, 0.00), Rates(0.22, 0.01), Rates(0.19, 0.0, {"old-model": 0.002})]


def test_rates_are_per_node_and_round_and_leave_start_up_refusals_out() -> None:
    r = rates(
        {
            "nodes": 100,
            "round": 30,
            "view_swaps": {"committed": 300, "aborted": 100},
            "rejected": {"starting": 40, "no-base": 9, "busy": 30},
            "late_rounds": 3,
        }
    )
    assert r.committed == 0.1 and r.aborted_share == 0.25 and r.late == 0.1
    assert r.refused == {"busy": 0.01}


def test_a_run_within_the_seeds_range_is_as_the_simulator() -> None:
    verdict = compare(Rates(0.18, 0.05, {"old-model": 0.004}), SIM, CONFIG, processes=2)
    assert not verdict.diverged and verdict.line.startswith("self-check: as the simulator (3 seeds)")


def test_a_run_that_fell_behind_is_told_so_with_the_flag_that_helps() -> None:
    verdict = compare(Rates(0.02, 0.72, {"busy": 0.05}, late=0.3), SIM, CONFIG, processes=2)
    assert verdict.diverged
    assert [f.split(" ")[0] for f in verdict.findings] == ["72%", "0.02", "'busy'", "30%"]
    assert (
        "could not keep up with 1 s rounds" in verdict.line and "--tick-seconds (e.g. 0.02)" in verdict.line
    )


def test_refusals_of_another_kind_point_at_the_network_not_the_machine() -> None:
    verdict = compare(Rates(0.2, 0.0, {"old-model": 0.05}), SIM, CONFIG)
    assert verdict.diverged and verdict.findings == (
        "'old-model' refusals 0.050 a node-round (simulator 0.002)",
    )
    assert "delays messages beyond the simulator's" in verdict.line


def test_fedavg_without_swaps_is_judged_on_refusals_and_late_rounds_alone() -> None:
    fed = [Rates(0.0, 0.0), Rates(0.0, 0.0), Rates(0.0, 0.0)]
    assert not compare(Rates(0.0, 0.0), fed, CONFIG).diverged
    assert compare(Rates(0.0, 0.0, late=0.5), fed, CONFIG).diverged
