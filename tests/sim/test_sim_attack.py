"""The CIA in whole simulated networks: FedAvg server, honest wire behaviour, colluders."""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import numpy as np
import pytest

from p2pnode.attacks import attack as attack_mod
from p2pnode.attacks.attack import plan_for
from p2pnode.config import ConfigError, RunConfig
from p2pnode.nodes.prepare import prepare
from p2pnode.runners.sim import Simulation, simulate
from p2pnode.transport.memory import MemoryNetwork
from p2pnode.wire.schema import Channel


def synthetic(**kw: Any) -> RunConfig:
    base = RunConfig(nodes=100, rounds=6, seed=3, dataset="synthetic").replace(
        **{"learning.lr": 0.01, "attack.kind": "cia", "attack.target_k": 10}
    )
    return base.replace(**kw)


def test_fedavg_server_finds_planted_communities_far_above_random() -> None:
    result = simulate(synthetic(protocol="fedavg"))
    cia = result["cia"]
    assert cia["adversaries"] == 100 and cia["random_bound"] == pytest.approx(0.1)
    assert cia["upper_bound"] == 1.0  # the server sees every client
    assert cia["max_aac"] > 4 * cia["random_bound"], cia["aac"]
    assert cia["best10_aac"] >= cia["max_aac"]
    assert len(cia["aac"]) == 6 and cia["aac"][cia["rounds"].index(cia["round_of_max"])] == cia["max_aac"]


def test_gossip_adversaries_see_only_their_neighbours() -> None:
    result = simulate(synthetic(rounds=4))
    cia = result["cia"]
    assert cia["adversaries"] == 100
    assert 0 < cia["upper_bound"] < 0.6  # a few neighbours, not the whole network
    assert cia["max_aac"] <= cia["upper_bound"] + 1e-9
    bounds = cia["upper_bounds"]
    assert bounds == sorted(bounds)  # observations only accumulate


def frames(config: RunConfig, monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int, int, str]]:
    sent: list[tuple[int, int, int, str]] = []
    original = MemoryNetwork.send

    def spy(
        self: MemoryNetwork, src: int, dst: int, channel: Any, data: Any, on_done: Any, memo: Any = None
    ) -> None:
        sent.append((src, dst, int(channel), hashlib.sha256(bytes(data)).hexdigest()[:16]))
        original(self, src, dst, channel, data, on_done, memo)

    monkeypatch.setattr(MemoryNetwork, "send", spy)
    simulate(config)
    monkeypatch.undo()
    return sent


@pytest.mark.parametrize("protocol", ["base", "fedavg"])
def test_adversaries_send_exactly_what_honest_nodes_send(
    protocol: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    honest = synthetic(nodes=30, rounds=3, protocol=protocol).replace(**{"attack.kind": ""})
    attacked = synthetic(nodes=30, rounds=3, protocol=protocol)
    a, b = frames(honest, monkeypatch), frames(attacked, monkeypatch)
    assert len(a) > 50 and a == b


@pytest.mark.parametrize("multicast", ["v", "theta"])
def test_colluders_protocol_frames_are_an_honest_networks(
    multicast: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Observers and forwarders add collusion frames and nothing else: every gossip and sampling
    frame is the honest run's, in the same order."""
    honest = synthetic(nodes=30, rounds=3).replace(**{"attack.kind": ""})
    attacked = synthetic(nodes=30, rounds=3).replace(
        **{"attack.colluders": 0.2, "attack.colluder_groups": 2, "attack.multicast": multicast}
    )
    a = frames(honest, monkeypatch)
    b = frames(attacked, monkeypatch)
    collude = int(Channel.COLLUDE)
    assert any(f[2] == collude for f in b)
    assert len(a) > 50 and a == [f for f in b if f[2] != collude]


def test_colluders_see_more_and_multicast_what_they_receive() -> None:
    single = simulate(synthetic(rounds=5))["cia"]
    group = simulate(synthetic(rounds=5).replace(**{"attack.colluders": 0.2, "attack.colluder_groups": 2}))
    cia = group["cia"]
    assert cia["adversaries"] == 2
    assert cia["upper_bound"] > 2 * single["upper_bound"]
    assert cia["max_aac"] > single["max_aac"]
    assert group["messages"] > simulate(synthetic(rounds=5).replace(**{"attack.kind": ""}))["messages"]


def _reader_state(config: RunConfig, rounds: int) -> tuple[dict[int, Any], int, int, dict[int, int]]:
    """The first group's read observer after ``rounds``: v_u, multicast frames, the group's
    received models, and the reader's observation counts."""
    sim = Simulation(config)
    for _ in range(rounds):
        sim.run_round()
    plan = plan_for(sim.prep)
    assert plan is not None
    reader = min(n for n, spec in plan.adversaries.items() if spec.evaluated)
    group = plan.adversaries[reader].exclude[0]
    node: Any = sim.host.nodes[reader].node
    received = sum(sim.host.nodes[m].node.protocol.stats.models_received for m in group)
    frames_sent = sum(sim.host.nodes[m].counters.multicasts_sent for m in sim.host.nodes)
    return node.observer.state()["v"], frames_sent, received, dict(node.observer.counts)


def test_forwarders_give_the_reader_what_a_multicast_to_every_member_gives(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With Θ_u multicast, only the group's first member is read; the others forward to it and
    keep no state. Its v_u are byte for byte those of Algorithm 2's multicast to every member
    (every member an observer), at a fraction of the frames, and it folds every model the group
    received."""
    config = synthetic(rounds=4).replace(
        **{"attack.colluders": 0.2, "attack.colluder_groups": 2, "attack.multicast": "theta"}
    )
    forwarded, few, received, counts = _reader_state(config, 4)
    assert sum(counts.values()) == received > 0  # every group observation reached the reader

    original = attack_mod.make_plan

    def every_member_observes(*args: Any) -> Any:
        plan = original(*args)
        for m, spec in plan.adversaries.items():
            group = tuple(sorted(spec.exclude[0]))
            plan.adversaries[m] = dataclasses.replace(spec, partners=group, send_to=None, forwarder=False)
        return plan

    monkeypatch.setattr(attack_mod, "make_plan", every_member_observes)
    everyone, many, _, _ = _reader_state(config, 4)
    assert forwarded.keys() == everyone.keys()
    assert all(np.array_equal(forwarded[u], everyone[u]) for u in everyone)
    assert many > 5 * few  # 20 members: each forward goes to 1 node, not 19


def test_fictive_user_scores_full_models_with_a_trained_user_and_finds_communities() -> None:
    """``fictive_user`` pairs every received item table with e_A (as under Share less, §IV-C)."""
    group = synthetic(rounds=6).replace(**{"attack.colluders": 0.2, "attack.colluder_groups": 2})
    cia = simulate(group.replace(**{"attack.fictive_user": True}))["cia"]
    assert cia["max_aac"] > 1.5 * cia["random_bound"], cia["aac"]
    plain = simulate(group)["cia"]
    assert cia["aac"] != plain["aac"] and cia["per_round_bounds"] == plain["per_round_bounds"]


@pytest.mark.parametrize("variant", [{"learning.share_less": True}, {"attack.fictive_user": True}])
def test_fedavg_server_retrains_its_fictive_user_on_every_global_model(variant: dict[str, Any]) -> None:
    sim = Simulation(synthetic(protocol="fedavg", rounds=3).replace(**variant))
    server = sim.host.nodes[sim.config.nodes].node
    refs = []
    for _ in range(3):
        sim.run_round()
        refs.append(server.observer._refs.copy())  # type: ignore[attr-defined]
    assert server.refreshes == 1 + 3  # type: ignore[attr-defined]  # at start, then after each aggregation
    assert not np.array_equal(refs[0], refs[2])  # trained against a model that moved


def test_mpe_attack_reads_membership_off_every_client_model() -> None:
    result = simulate(synthetic(protocol="fedavg", rounds=4).replace(**{"attack.mia": True}))
    mia = result["mia"]
    assert mia["rounds"] == [1, 2, 3, 4] and mia["nodes"] == [100] * 4  # clients only, not the server
    assert all(0.5 <= a <= 1.0 for a in mia["accuracy"])
    assert mia["final"] > 0.7, mia  # local training memorises: held-out items score below trained ones
    assert result["history"][-1]["mia"]["accuracy"] == mia["final"]


def test_mpe_attack_on_prme_gossip_without_cia() -> None:
    result = simulate(synthetic(model="prme", rounds=2).replace(**{"attack.kind": "", "attack.mia": True}))
    assert "cia" not in result and result["mia"]["nodes"] == [100, 100]
    assert 0.5 <= result["mia"]["final"] <= 1.0


def test_mia_proxy_precision_at_an_open_threshold_is_the_base_rate() -> None:
    """ρ = 1e9 calls every (user, target item) a member, so its precision must equal the share of
    target items that other users really hold; a tight ρ must be more precise than that."""
    config = synthetic(protocol="fedavg", rounds=8).replace(
        **{"learning.lr": 0.05, "attack.mia_proxy": "1,1e9"}
    )
    result = simulate(config)
    proxy = result["cia"]["mia_proxy"]
    users = [u.train_items for u in prepare(config).users]
    held = sum(len(np.intersect1d(a, b)) for i, a in enumerate(users) for j, b in enumerate(users) if i != j)
    base = held / sum(len(a) * (len(users) - 1) for a in users)
    assert proxy["thresholds"] == [1.0, 1e9]
    assert proxy["precision"][1] == pytest.approx(base, rel=1e-9)
    assert proxy["precision"][0] > 1.5 * base, proxy["precision"]
    assert proxy["max_aac"][0] > 2 * result["cia"]["random_bound"], proxy["max_aac"]
    assert len(proxy["aac"]) == 8 and all(len(row) == 2 for row in proxy["aac"])


def test_a_dataset_file_names_its_attackers_by_its_own_user_ids(tmp_path: Any) -> None:
    rows = [f"u{u},movie_{(u * 7 + j) % 200}" for u in range(30) for j in range(12)]
    data = tmp_path / "mine.csv"
    data.write_text("user,item\n" + "\n".join(rows) + "\n")
    cfg = RunConfig(nodes=30, rounds=2, seed=1, dataset=str(data)).replace(
        **{
            "attack.kind": "cia",
            "attack.target_k": 5,
            "attack.attackers": "u3,u17",
            "attack.target_items": "movie_3,movie_10",  # an explicit target: predictions are listed
            "learning.lr": 0.01,
        }
    )
    result = simulate(cfg.validate())
    assert sorted(p["adversary_user"] for p in result["cia"]["predictions"]) == ["u17", "u3"]
    assert all(u.startswith("u") for p in result["cia"]["predictions"] for u in p["community_users"])
    with pytest.raises(ConfigError, match="--attackers zz: no such user"):
        prepare_plan = cfg.replace(**{"attack.attackers": "u3,zz"}).validate()
        plan_for(prepare(prepare_plan))


def test_the_colluder_route_takes_only_a_partner_and_finite_near_rows_of_network_users() -> None:
    """A member flooded an observer with user ids up to 2^40 and 1e30 values. A
    multicast is now taken only from a partner of the observer's own group, for a user of the
    network, finite and within the distance bound of the observer's own rows; the observer's
    state is bounded by the network's users."""
    from adversary.messages import CollusionMessage
    from p2pnode.wire.codec import encode_collusion_frame

    config = synthetic(rounds=2).replace(**{"attack.colluders": 0.2, "attack.colluder_groups": 2})
    sim = Simulation(config)
    sim.run_round()
    plan = plan_for(sim.prep)
    assert plan is not None
    reader = min(n for n, spec in plan.adversaries.items() if spec.evaluated)
    node: Any = sim.host.nodes[reader].node
    partner = node.partners[0]
    stranger = next(m for m in plan.adversaries if m not in node.partners and m != reader)
    own = node.observer.keep(node.protocol.learner.params)

    def post(src: int, user: int, scale: float = 1.0, value: float | None = None) -> str:
        rows = {k: (v * scale if value is None else np.full_like(v, value)) for k, v in own.items()}
        frame = encode_collusion_frame(src, reader, CollusionMessage(user, rows))
        return sim.host.receive(reader, Channel.COLLUDE, frame, sender=src).reason or "taken"

    before = len(node.observer.v)
    assert post(stranger, 5) == "not-partner"  # another group's colluder, or any member
    assert post(partner, 100) == "unknown-id" and post(partner, 2**40 - 1) == "unknown-id"
    assert post(partner, 5, value=float("nan")) == "non-finite"
    assert post(partner, 5, value=1e30) == "too-far"
    assert post(partner, 5, scale=500.0) == "too-far"  # beyond 100x the own rows' norm
    assert len(node.observer.v) == before  # nothing refused touched the observer
    assert post(partner, 5, scale=1.1) == "taken"
    assert 5 in node.observer.v


def test_placed_observers_read_membership_off_what_they_received() -> None:
    """The FedAvg server holds every client's update: it reads what the omniscient observer
    reads of the clients, within a few points (it scores the upload, the omniscient observer the
    model after the server's next mean). A colluding group in gossip holds only the senders it
    heard from, more of them each round, and reads them under models older than their own."""
    fed = simulate(
        synthetic(protocol="fedavg", rounds=2, nodes=60).replace(**{"attack.kind": "", "attack.mia": True})
    )
    server = fed["mia"]["observers"]["server"]
    assert server["observed"] == [60] * 2 and server["coverage"] == 1.0 and server["unreadable"] == 0
    assert abs(server["final_auc"] - fed["mia"]["pooled"]["auc"][-1]) < 0.1
    assert fed["history"][-1]["mia"]["observers"]["server"]["auc"] == server["final_auc"]
    gossip = simulate(
        synthetic(rounds=4).replace(**{"attack.kind": "", "attack.mia": True, "attack.colluders": 0.1})
    )
    group = gossip["mia"]["observers"]["colluders 0"]
    seen = group["observed"]
    assert seen == sorted(seen) and 0 < seen[0] < seen[-1] < 100, seen  # it hears from more each round
    assert group["members"] > 0 and group["final_roc"]
    assert set(gossip["mia"]["observers"]) == {"colluders 0"}  # one group: one observer, pooled
    adversaries = [row for row in gossip["per_node"] if row["adversary"]]
    assert len(adversaries) == 10  # each member keeps its own watch


def test_a_groups_shared_rows_give_the_view_its_members_own_rows_gave(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A colluding group's members keep one store (adversary/mia_observer.SharedRows: a row per
    sender, not one per member and sender); its figures are those of each member keeping its own
    latest rows and the scorer pooling them, to the last digit."""
    config = synthetic(rounds=4).replace(**{"attack.kind": "", "attack.mia": True, "attack.colluders": 0.2})
    sim = Simulation(config)
    members = list(attack_mod.watches(sim.host.nodes.values()))
    assert len(members) == 20 and len({id(w.pool) for w in members}) == 1 and members[0].pool is not None
    pooled = simulate(config)
    monkeypatch.setattr(attack_mod, "SharedRows", _NoPool)
    own = simulate(config)
    assert pooled["mia"]["observers"] == own["mia"]["observers"]
    assert pooled["mia"]["observers"]["colluders 0"]["observed"][-1] > 0


class _NoPool:
    """In place of SharedRows: every member keeps its own rows (the watch before the store)."""

    def __new__(cls) -> None:  # type: ignore[misc]
        return None
