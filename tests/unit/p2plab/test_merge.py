"""Per-process attack summaries merged into one network summary (``launch``, ``run --peers``)."""

from __future__ import annotations

import pytest

from adversary.evaluation import proxy_summary
from p2plab.merge import merge_aia, merge_attack, merge_mia


def test_mia_accuracy_is_weighted_by_hosted_nodes_over_common_rounds() -> None:
    a = {"rounds": [1, 2, 3], "accuracy": [0.9, 0.8, 0.7], "nodes": [3, 3, 3]}
    b = {"rounds": [1, 2], "accuracy": [0.5, 0.6], "nodes": [1, 1]}  # stopped a round early
    merged = merge_mia([a, b])
    assert merged is not None
    assert merged["rounds"] == [1, 2] and merged["nodes"] == [4, 4]
    assert merged["accuracy"] == pytest.approx([(2.7 + 0.5) / 4, (2.4 + 0.6) / 4])
    assert merged["max"] == pytest.approx(0.8) and merged["final"] == pytest.approx(0.75)
    assert merge_mia([]) is None


def test_a_placed_observer_comes_whole_from_its_process_and_a_split_group_is_left_out() -> None:
    server = {"observed": [40], "final_auc": 0.7}
    a = {"rounds": [1], "accuracy": [0.9], "nodes": [3], "observers": {"server": server, "colluders 0": {}}}
    b = {"rounds": [1], "accuracy": [0.5], "nodes": [1], "observers": {"colluders 0": {}}}
    merged = merge_mia([a, b])
    assert merged is not None and merged["observers"] == {"server": server}
    assert "observers" not in (merge_mia([{k: v for k, v in a.items() if k != "observers"}]) or {})


def part(
    rounds: list[int],
    accs: list[list[float]],
    proxy: list[list[list[float]]],
    tp: list[list[int]],
    p: list[list[int]],
) -> dict:  # type: ignore[type-arg]
    return {
        "rounds": rounds,
        "per_round": accs,
        "per_round_bounds": [[1.0] * len(a) for a in accs],
        "k": 2,
        "mia_proxy": proxy_summary([0.5, 1.0], rounds, proxy, tp, p),
    }


def test_cia_and_proxy_pool_adversaries_of_every_process() -> None:
    one = part([1, 2], [[0.5], [1.0]], [[[0.0], [0.5]], [[1.0], [0.5]]], [[0, 2], [2, 2]], [[0, 4], [2, 4]])
    two = part([1, 2], [[0.0], [0.5]], [[[0.5], [0.0]], [[0.5], [0.0]]], [[1, 1], [1, 1]], [[2, 8], [1, 8]])
    merged = merge_attack([one, two], n_users=20)
    assert merged is not None
    assert merged["aac"] == pytest.approx([0.25, 0.75]) and merged["max_aac"] == pytest.approx(0.75)
    proxy = merged["mia_proxy"]
    assert proxy["aac"] == [[0.25, 0.25], [0.75, 0.25]]
    assert proxy["max_aac"] == pytest.approx([0.75, 0.25])
    assert proxy["round_of_max"] == [2, 1]
    # precision pooled at the round of each ρ's maximum: ρ=0.5 round 2 (3/3), ρ=1 round 1 (3/12)
    assert proxy["precision"] == pytest.approx([1.0, 0.25])


def test_recoveries_add_up_over_processes_and_an_older_summary_counts_none() -> None:
    from p2plab.merge import aggregate

    def process(nodes: int, recoveries: dict[str, int] | None) -> dict:  # type: ignore[type-arg]
        out = {"nodes": nodes, "round": 5, "rounds": 5, "hr": 0.5, "rejected": {}}
        out.update({k: 1 for k in ("messages", "model_messages", "delta_messages", "bytes")})
        out.update({k: 1 for k in ("merges", "local_steps", "send_failures")})
        if recoveries is not None:
            out["recoveries"] = recoveries
        return out

    merged = aggregate(
        [process(3, {"events": 7, "nodes": 2}), process(2, {"events": 1, "nodes": 1}), process(1, None)], "hr"
    )
    assert merged["recoveries"] == {"events": 8, "nodes": 3}


def test_selective_dp_of_each_process_is_weighted_by_its_nodes() -> None:
    from p2plab.merge import aggregate
    from p2pnode.runners.report import selective_stats

    def process(nodes: list[tuple[int, bool, int]]) -> dict:  # type: ignore[type-arg]
        out = {"nodes": len(nodes), "round": 5, "rounds": 5, "hr": 0.5, "rejected": {}}
        out.update({k: 1 for k in ("messages", "model_messages", "delta_messages", "bytes")})
        out.update({k: 1 for k in ("merges", "local_steps", "send_failures")})
        out["dp_selective"] = selective_stats(nodes)
        return out

    a = [(4, True, 4), (4, True, 4), (4, False, 3)]
    b = [(4, False, 1)]
    merged = aggregate([process(a), process(b)], "hr")["dp_selective"]
    assert merged == selective_stats(a + b)  # the processes together are the network's nodes
    assert merged["switched"] == 0.5 and merged["unprotected"] == {"mean": 3.0, "max": 4}


def test_attribute_inference_keeps_each_observer_and_each_process_omniscient_view_apart() -> None:
    def summary(observed: int) -> dict[str, object]:
        return {"last": {"observed": observed}, "best": {}}

    parts = [
        {"omniscient": summary(20), "server": summary(40)},
        None,  # a process without attribute inference
        {"omniscient": summary(20), "colluders 0": summary(9)},
    ]
    merged = merge_aia(parts)
    assert merged == {
        "omniscient (process 0)": summary(20),
        "server": summary(40),
        "omniscient (process 2)": summary(20),
        "colluders 0": summary(9),
    }
    assert merge_aia([{"omniscient": summary(5)}]) == {"omniscient": summary(5)}  # one process: as is
    assert merge_aia([None, None]) is None


def _process(stretch: float, busy_at_first: int, trips: list[float]) -> dict:  # type: ignore[type-arg]
    from p2pcore.roundtrips import RoundTrips

    rt = RoundTrips()
    for t in trips:
        rt.add(t)
    row = {"nodes": 2, "hit_ratio_at_20": 0.5, "messages": 1, "bytes": 1}
    return {
        "nodes": 2, "round": 2, "rounds": 2, "hit_ratio_at_20": 0.5, "messages": 1, "model_messages": 1,
        "delta_messages": 0, "bytes": 1, "merges": 1, "local_steps": 1, "send_failures": 0,
        "rejected": {"busy": busy_at_first + 1}, "swap_rtt": rt.to_dict(),
        "pace": {"stretch": stretch, "held_s": stretch - 1, "holds": 1, "worst_lag_s": 0.1},
        "history": [
            {**row, "round": 1, "rejected": {"busy": busy_at_first}},
            {**row, "round": 2, "rejected": {}},
        ],
    }  # fmt: skip


def test_a_network_runs_at_its_slowest_process_pace_and_pools_its_round_trips() -> None:
    from p2plab.merge import aggregate

    total = aggregate([_process(1.2, 3, [0.5, 1.0]), _process(1.6, 0, [2.0])], "hit_ratio_at_20")
    assert total["pace"]["stretch"] == 1.6 and total["pace"]["held_s"] == pytest.approx(0.6)
    assert sum(total["swap_rtt"]["counts"]) == 3 and total["swap_rtt"]["total"] == pytest.approx(3.5)
    assert total["history"][0]["rejected"] == {"busy": 3}  # the first round's refusals, summed
    unpaced = {k: v for k, v in _process(1.0, 0, []).items() if k != "pace"}
    assert "pace" not in aggregate([unpaced], "hit_ratio_at_20")


def test_a_launchs_history_carries_each_rounds_attribute_inference() -> None:
    from p2plab.merge import aggregate

    a, b = _process(1.0, 0, [0.1]), _process(1.0, 0, [0.1])
    scores = {"round": 2, "attributes": {"gender": {"auc": 0.6, "majority": {"auc": 0.5}}}}
    a["history"][1]["aia"] = {"omniscient": scores}
    b["history"][1]["aia"] = {"omniscient": scores, "node 7": scores}
    history = aggregate([a, b], "hit_ratio_at_20")["history"]
    assert "aia" not in history[0]  # round 1 was not evaluated
    # (a launch's history used to have no AIA at all, so its aia.png was never drawn)
    assert history[1]["aia"] == {
        "omniscient (process 0)": scores,
        "omniscient (process 1)": scores,
        "node 7": scores,
    }
