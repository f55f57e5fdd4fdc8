"""Adversary placement from plain inputs (adversary/plan.py; CIA paper §IV-A, §V-C)."""

from __future__ import annotations

import numpy as np
import pytest

from adversary.plan import PlanError, PlanSettings, make_plan

N, ITEMS = 20, 30


def _own() -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    return [np.unique(rng.choice(ITEMS, size=6, replace=False)).astype(np.int64) for _ in range(N)]


def test_single_adversaries_target_their_own_items_and_exclude_themselves() -> None:
    own = _own()
    plan = make_plan(PlanSettings(nodes=N, seed=0, fedavg=False, target_k=5, attackers="2,7"), own, ITEMS)
    assert sorted(plan.adversaries) == [2, 7]
    spec = plan.adversaries[7]
    assert np.array_equal(spec.targets[0], own[7]) and spec.exclude == [{7}]
    ((_, community),) = spec.evaluated
    assert len(community) == 5 and 7 not in community


def test_fedavg_server_plays_every_target() -> None:
    plan = make_plan(PlanSettings(nodes=N, seed=0, fedavg=True, target_k=5), _own(), ITEMS)
    (server,) = plan.adversaries.values()
    assert server.node_id == N and len(server.targets) == N
    assert all(u not in c for u, c in server.evaluated)


@pytest.mark.parametrize("multicast", ["theta", "v"])
def test_colluder_groups_are_disjoint_and_read_once(multicast: str) -> None:
    settings = PlanSettings(
        nodes=N, seed=1, fedavg=False, target_k=5, colluders=0.2, colluder_groups=2, multicast=multicast
    )
    plan = make_plan(settings, _own(), ITEMS)
    assert len(plan.adversaries) == 8  # 2 groups of 4
    readers = [s for s in plan.adversaries.values() if s.evaluated]
    assert len(readers) == 2 and not set(readers[0].exclude[0]) & set(readers[1].exclude[0])
    for reader in readers:
        group = reader.exclude[0]
        others = [plan.adversaries[m] for m in group if m != reader.node_id]
        if multicast == "theta":  # forwarders: no observer, send to the reader only
            assert all(o.forwarder and o.send_to == (reader.node_id,) for o in others)
        else:  # Algorithm 2: every member observes and multicasts to the whole group
            assert all(not o.forwarder and set(o.partners) == group for o in others)


@pytest.mark.parametrize("attackers", ["x", "", "0,20", "-1"])
def test_bad_attacker_lists_are_refused_with_the_setting_named(attackers: str) -> None:
    with pytest.raises(PlanError, match="attackers"):
        make_plan(PlanSettings(nodes=N, seed=0, fedavg=False, target_k=5, attackers=attackers), _own(), ITEMS)
