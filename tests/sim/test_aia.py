"""Attribute inference in the simulator (paper 004 §II-B): on a planted attribute the omniscient
observer reads it far above the majority baseline, and not at all when it is planted with
strength 0; the result, history and summary carry it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from adversary.plan import colluder_groups
from p2pnode.config import ConfigError, RunConfig
from p2pnode.runners.report import metric_for, summary
from p2pnode.runners.sim import simulate


def _run(strength: float) -> dict[str, Any]:
    # FedAvg: every client's model is the global one after a local epoch, so a user's features
    # are its items' rows in one table (in gossip each node's rows are its own, and blur more)
    config = RunConfig(nodes=120, rounds=3, seed=2, dataset="synthetic", protocol="fedavg").replace(
        **{
            "learning.lr": 0.05,
            "attack.kind": "aia",
            "attack.aia_epochs": 60,
            "attack.aia_every": 1,
            "attack.aia_public": 0.3,
            "synthetic.attribute_strength": strength,
            "synthetic.communities": 2,
            "synthetic.in_pool_share": 0.9,
            "synthetic.pool_overlap": 0,
        }
    )
    return simulate(config.validate())


def test_a_planted_attribute_is_read_and_an_independent_one_is_not() -> None:
    tied = _run(1.0)
    best = tied["aia"]["omniscient"]["best"]["planted"]
    assert best["auc"] > 0.9 and best["majority"]["auc"] == 0.5
    assert [h["aia"]["omniscient"]["round"] for h in tied["history"]] == [1, 2, 3]
    server = tied["aia"]["server"]["best"]["planted"]  # 004's adversary: the uploads it received
    assert server["auc"] > 0.9 and tied["aia"]["server"]["last"]["observed"] == 120
    assert tied["aia"]["omniscient"]["last"]["observed"] == 120
    line = summary(tied, metric_for(RunConfig(dataset="synthetic")))
    assert "AIA (omniscient, I'_u oracle; observed 120 users, 36 public): planted AUC" in line
    free = _run(0.0)
    last = free["aia"]["omniscient"]["last"]["attributes"]["planted"]
    assert abs(last["auc"] - 0.5) < 0.15  # nothing to read: near the constant guess


def test_a_file_without_attributes_is_refused_in_one_line(tmp_path: Path) -> None:
    data = tmp_path / "plays.csv"
    rows = "".join(f"u{u},i{u * 12 + k},{k}\n" for u in range(12) for k in range(12))
    data.write_text("user,item,time\n" + rows)
    config = RunConfig(nodes=12, rounds=1, view_size=2, dataset=str(data)).replace(**{"attack.kind": "aia"})
    with pytest.raises(ConfigError, match="brings no user attributes; give --attributes FILE"):
        simulate(config.validate())


def test_a_gossip_observer_reads_only_the_users_it_heard_from() -> None:
    config = RunConfig(nodes=60, rounds=4, seed=1, dataset="synthetic").replace(
        **{"attack.kind": "aia", "attack.attackers": "3", "attack.aia_epochs": 20, "synthetic.communities": 2}
    )
    result = simulate(config.validate())
    mine = result["aia"]["node 3"]["last"]
    omniscient = result["aia"]["omniscient"]["last"]
    assert 0 < mine["observed"] < omniscient["observed"] == 60  # its in-neighbours, over 4 rounds
    assert mine["coverage"] == mine["observed"] / 60


@pytest.mark.parametrize(("kind", "multicast"), [("aia", "theta"), ("cia,aia", "theta"), ("cia,aia", "v")])
def test_colluders_pool_what_each_of_them_heard(kind: str, multicast: str) -> None:
    config = RunConfig(nodes=60, rounds=4, seed=1, dataset="synthetic").replace(
        **{"attack.aia_epochs": 5, "synthetic.communities": 2, "attack.aia_every": 4}
    )
    group = colluder_groups(60, 1, 0.2, 1)[0]
    pooled = simulate(
        config.replace(
            **{"attack.kind": kind, "attack.colluders": 0.2, "attack.multicast": multicast}
        ).validate()
    )["aia"]["colluders 0"]["last"]
    # the same members as lone observers: each keeps what it heard; the group's read member holds
    # the union (the multicasts change no protocol traffic: the same users are heard)
    alone = simulate(
        config.replace(**{"attack.kind": "aia", "attack.attackers": ",".join(map(str, group))}).validate()
    )
    assert pooled["observed"] > alone["aia"][f"node {group[0]}"]["last"]["observed"]
    observed_by_members = [alone["aia"][f"node {m}"]["last"]["observed"] for m in group]
    assert pooled["observed"] >= max(observed_by_members)
    assert pooled["observed"] <= min(60, sum(observed_by_members))


def test_the_fedavg_server_reads_attributes_from_the_rows_an_upload_moved() -> None:
    # no oracle: the rows a client's update moved from the global model are its training items
    config = RunConfig(nodes=120, rounds=2, seed=2, dataset="synthetic", protocol="fedavg").replace(
        **{
            "learning.lr": 0.05,
            "attack.kind": "aia",
            "attack.aia_items": "changed",
            "attack.aia_top_m": 30,
            "attack.aia_epochs": 60,
            "attack.aia_every": 1,
            "attack.aia_public": 0.3,
            "synthetic.communities": 2,
            "synthetic.in_pool_share": 0.9,
            "synthetic.pool_overlap": 0,
        }
    )
    result = simulate(config.validate())
    server = result["aia"]["server"]
    assert server["items"] == "changed (the 30 rows that moved most)"
    assert server["best"]["planted"]["auc"] > 0.9
    with pytest.raises(ConfigError, match="Share less keeps home: use --aia-items changed or oracle"):
        config.replace(**{"attack.aia_items": "inferred", "learning.share_less": True}).validate()
    shared_less = simulate(config.replace(**{"learning.share_less": True}).validate())["aia"]["server"]
    # the moved item rows alone still carry it (AUC 0.77 here, against 0.91 with the user row)
    assert shared_less["best"]["planted"]["auc"] > 0.65
