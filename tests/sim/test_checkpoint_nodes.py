"""A node's checkpoint restores learner, optimizer, DP accountant, view, observer and RNGs."""

from __future__ import annotations

import numpy as np
import pytest

from p2pnode.config import RunConfig
from p2pnode.data import checkpoint
from p2pnode.runners.sim import Simulation


@pytest.mark.parametrize(
    "changes",
    [
        {"protocol": "samo", "sampling": "peerswap", "attack.kind": "cia", "attack.attackers": "all"},
        {"protocol": "base", "sampling": "cyclon", "learning.dp_noise": 0.8},
        {"protocol": "base", "sampling": "pers", "model": "prme"},
        {"protocol": "fedavg", "sim.shared_tables": False},  # a parked client has no tables to save
    ],
)
def test_every_node_state_survives_a_checkpoint(changes: dict[str, object]) -> None:
    cfg = RunConfig(nodes=16, rounds=3, seed=1, dataset="synthetic").replace(
        **{"learning.lr": 0.01, "attack.target_k": 3, **changes}
    )
    sim = Simulation(cfg)
    for _ in range(3):
        sim.run_round()
    saved = {i: checkpoint.loads(checkpoint.dumps(n.checkpoint_state())) for i, n in sim.host.nodes.items()}
    fresh = Simulation(cfg)
    for i, n in fresh.host.nodes.items():
        n.restore_state(saved[i])
    for i, a in sim.host.nodes.items():
        b = fresh.host.nodes[i]
        la, lb = a.learner, b.learner
        for k in la.params:  # type: ignore[attr-defined]
            np.testing.assert_array_equal(la.params[k], lb.params[k])  # type: ignore[attr-defined]
        assert la.version == lb.version and la.epsilon() == lb.epsilon()
        assert a.node.sampler.out_view() == b.node.sampler.out_view()
        assert a.node.protocol.stats == b.node.protocol.stats
        assert a.counters == b.counters and a.counters.models_sent > 0  # the models carry on as merges do
        assert a.last_version == b.last_version
        assert a.rng.random() == b.rng.random()
        if hasattr(a.node, "observer"):
            va, vb = a.node.observer.v, b.node.observer.v  # type: ignore[attr-defined]
            assert set(va) == set(vb) and va
            for u in va:
                for k in va[u]:
                    np.testing.assert_array_equal(va[u][k], vb[u][k])
            assert list(a.node.observer.predicted_ids()) == list(b.node.observer.predicted_ids())  # type: ignore[attr-defined]
    if "learning.dp_noise" in changes:  # the accountants that were restored had spent budget
        assert max(n.learner.epsilon() or 0.0 for n in fresh.host.nodes.values()) > 0


def test_a_fedavg_client_that_gave_the_shared_tables_up_refuses_a_checkpoint() -> None:
    from learning.workbench import WorkbenchError

    sim = Simulation(RunConfig(nodes=8, rounds=1, seed=1, dataset="synthetic", protocol="fedavg"))
    sim.run_round()
    holders = [n for n in sim.host.nodes.values() if n.node_id < 8]
    with pytest.raises(WorkbenchError, match="does not hold the workbench"):
        holders[0].checkpoint_state()
    assert holders[-1].checkpoint_state()["node"] == 7  # the last client of the round holds them


def test_a_checkpoint_from_another_configuration_is_refused() -> None:
    gmf = Simulation(RunConfig(nodes=8, rounds=1, dataset="synthetic"))
    prme = Simulation(RunConfig(nodes=8, rounds=1, dataset="synthetic", model="prme"))
    state = gmf.host.nodes[0].checkpoint_state()
    with pytest.raises(ValueError, match="gmf"):
        prme.host.nodes[0].restore_state(state)
    with pytest.raises(ValueError, match="node 0"):
        gmf.host.nodes[1].restore_state(state)


def test_a_checkpoints_counters_are_checked_before_any_is_taken() -> None:
    cfg = RunConfig(nodes=8, rounds=1, seed=1, dataset="synthetic")
    sim = Simulation(cfg)
    sim.run_round()
    node = sim.host.nodes[0]
    state = checkpoint.loads(checkpoint.dumps(node.checkpoint_state()))
    fresh = Simulation(cfg).host.nodes[0]
    for bad in ({"models_sent": -1}, {"models_sent": "9"}, {"nope": 1}, {"rejected": {"busy": 1.5}}):
        with pytest.raises(ValueError, match="checkpoint's"):
            fresh.restore_state({**state, "counters": {**state["counters"], **bad}})
        assert fresh.round == 0 and fresh.counters.models_sent == 0  # refused whole: nothing taken
    old = {k: v for k, v in state.items() if k != "counters"}  # a checkpoint from before they were kept
    fresh = Simulation(cfg).host.nodes[0]
    fresh.restore_state(old)
    assert fresh.counters.models_sent == 0
