"""Many nodes in memory on the virtual clock: learning, determinism, lossy links."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from learning.metrics import random_hit_ratio
from p2pnode.config import RunConfig
from p2pnode.runners.report import metric_for, summary
from p2pnode.runners.sim import Simulation, simulate

RANDOM_HR = random_hit_ratio(20, 100)


def small(**kw: object) -> RunConfig:
    base = RunConfig(nodes=60, rounds=10, seed=4).replace(**{"learning.lr": 0.01})
    return base.replace(**kw)


@pytest.mark.parametrize("protocol", ["base", "samo"])
@pytest.mark.parametrize("sampling", ["peerswap", "static", "cyclon", "pers"])
def test_hr_rises_well_above_random(protocol: str, sampling: str) -> None:
    result = simulate(small(protocol=protocol, sampling=sampling))
    first = result["history"][0]["hit_ratio_at_20"]
    last3 = [h["hit_ratio_at_20"] for h in result["history"][-3:]]
    assert sum(last3) / 3 > 2 * RANDOM_HR, result["history"]
    assert sum(last3) / 3 > first
    assert result["model_messages"] > 0 and result["bytes"] > 0
    # the only refusals are deltas whose base the receiver evicted (it then gets the full model)
    assert set(result["rejected"]) <= {"no-base"}


def test_same_seed_same_result_different_seed_different_result() -> None:
    a = simulate(small(rounds=4))
    b = simulate(small(rounds=4))
    c = simulate(small(rounds=4, seed=5))
    key = lambda r: [(h["hit_ratio_at_20"], h["bytes"], h["merges"]) for h in r["history"]]  # noqa: E731
    assert key(a) == key(b)
    assert key(a) != key(c)


def test_learning_survives_lossy_delayed_links() -> None:
    cfg = small(rounds=8).replace(**{"sim.drop": 0.2, "sim.delay_min": 1.0, "sim.delay_max": 20.0})
    result = simulate(cfg)
    assert result["send_failures"] > 0
    assert result["hit_ratio_at_20"] > 2 * RANDOM_HR


def test_deltas_are_used_and_counted() -> None:
    result = simulate(small(rounds=6, protocol="base"))
    assert 0 < result["delta_messages"] < result["model_messages"]
    off = simulate(small(rounds=6, protocol="base").replace(**{"wire.delta": False}))
    assert off["delta_messages"] == 0
    assert off["bytes"] > result["bytes"]
    assert off["hit_ratio_at_20"] == result["hit_ratio_at_20"]  # deltas are exact


def test_learns_on_synthetic_planted_communities() -> None:
    cfg = RunConfig(nodes=60, rounds=8, seed=1, dataset="synthetic").replace(**{"learning.lr": 0.01})
    result = simulate(cfg)
    assert result["hit_ratio_at_20"] > 2 * RANDOM_HR, result["history"]


def test_share_less_messages_carry_no_user_embedding_and_network_learns() -> None:
    import msgpack

    from p2pnode.runners.sim import Simulation

    cfg = small(rounds=6).replace(**{"learning.share_less": True})
    sim = Simulation(cfg)
    seen: list[set[str]] = []
    send = sim.network.send

    def spy(src, dst, channel, data, on_done, memo=None):  # type: ignore[no-untyped-def]
        frame = msgpack.unpackb(bytes(data), raw=False)
        if frame["t"] == 1:
            seen.append(set(frame["b"]["p"]) | set(frame["b"].get("r", {})))
        send(src, dst, channel, data, on_done, memo)

    sim.network.send = spy  # type: ignore[method-assign]
    users_before = {n: r.learner.params["user"].copy() for n, r in sim.host.nodes.items()}
    for _ in range(cfg.rounds):
        sim.run_round()
    assert len(seen) > 50 and all(names == {"item", "h", "b"} for names in seen)
    stats = sim.stats()
    assert stats["hit_ratio_at_20"] > 2 * RANDOM_HR
    assert stats["rejected"].keys() <= {"no-base"}
    # user embeddings only moved by local training, never by a merge: a node that never trained
    # (Base GL trains on receipt) still has its initial user row
    for node_id, runtime in sim.host.nodes.items():
        if runtime.node.protocol.stats.local_steps == 0:
            np.testing.assert_array_equal(runtime.learner.params["user"], users_before[node_id])


def test_full_model_from_a_peer_is_refused_by_a_share_less_node() -> None:
    from learning import gmf
    from p2pnode.runners.sim import Simulation
    from p2pnode.transport.base import Outcome
    from p2pnode.wire.codec import encode_model_frame
    from p2pnode.wire.delta import DeltaEncoder
    from p2pnode.wire.schema import Channel

    sim = Simulation(small(rounds=1).replace(**{"learning.share_less": True}))
    target = sim.host.nodes[3]
    before = {k: v.copy() for k, v in target.learner.params.items()}
    full = gmf.init_params(1682, 32, seed=9)  # carries "user"
    sender = target.node.sampler.in_view()[0]  # an in-neighbour: the sender gate lets it through
    frame = encode_model_frame(sender, 3, DeltaEncoder(enabled=False).encode(3, 1, full))
    outcome = sim.host.receive(3, Channel.GOSSIP, frame)
    assert outcome == Outcome(400, "schema")
    for k, v in before.items():
        np.testing.assert_array_equal(target.learner.params[k], v)


def test_fedavg_learns_and_share_less_updates_keep_the_user_embedding_home() -> None:
    import msgpack

    from p2pnode.runners.sim import Simulation

    result = simulate(small(protocol="fedavg", rounds=6))
    assert result["hit_ratio_at_20"] > 2 * RANDOM_HR, result["history"]
    assert result["nodes"] == 60  # the server is not a user: no HR of its own

    sim = Simulation(
        small(protocol="fedavg", rounds=2, fraction=0.5).replace(**{"learning.share_less": True})
    )
    kinds: dict[int, list[set[str]]] = {11: [], 12: []}
    send = sim.network.send

    def spy(src, dst, channel, data, on_done, memo=None):  # type: ignore[no-untyped-def]
        frame = msgpack.unpackb(bytes(data), raw=False)
        kinds[frame["t"]].append(set(frame["b"]["p"]))
        send(src, dst, channel, data, on_done, memo)

    sim.network.send = spy  # type: ignore[method-assign]
    sim.run_round()
    sim.run_round()
    assert len(kinds[11]) == 60 and len(kinds[12]) >= 30  # 30 clients a round
    assert all(names == {"item", "h", "b"} for names in kinds[11] + kinds[12])


def test_a_fedavg_update_on_its_way_does_not_keep_the_clients_snapshot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every client of a round trains and sends before the server takes the first update (they
    all hear the global model at the same tick), so a snapshot kept beside each frame held a
    second model a client (bench.fedavg_memory). When the server takes the first update, no
    client's snapshot is alive any more, and the server still takes every update (each into its
    sum as it comes, in client order: none is held, protocols/fedavg.py)."""
    import gc
    import weakref

    from p2pcore.effects import Send
    from protocols.fedavg import FedAvgClient, FedAvgServer
    from protocols.messages import FedMessage

    snapshots: list[weakref.ref[np.ndarray]] = []
    alive_at_first: list[int] = []
    client_on_model, server_on_model = FedAvgClient.on_model, FedAvgServer.on_model

    def trained(self, sender, message, now, rng):  # type: ignore[no-untyped-def]
        effects = client_on_model(self, sender, message, now, rng)
        for e in effects:
            if isinstance(e, Send) and isinstance(e.message, FedMessage):
                snapshots.append(weakref.ref(e.message.params["item"]))
        return effects

    def taken(self, sender, message, now, rng):  # type: ignore[no-untyped-def]
        if not alive_at_first:
            gc.collect()
            alive_at_first.append(sum(ref() is not None for ref in snapshots))
        return server_on_model(self, sender, message, now, rng)

    monkeypatch.setattr(FedAvgClient, "on_model", trained)
    monkeypatch.setattr(FedAvgServer, "on_model", taken)
    sim = Simulation(small(protocol="fedavg", rounds=2))
    sim.run_round()
    assert len(snapshots) == 60 and alive_at_first == [0]
    server = sim.host.nodes[60].node.protocol
    assert isinstance(server, FedAvgServer) and server.stats.models_received == 60
    assert server.pending == {}


def test_a_fedavg_servers_global_model_is_packed_once_a_round_for_all_its_clients(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """In the simulator the server's global model goes to the round's clients as one body behind
    a head each (wire.schema.SharedFrame): packed once a round and held once while its frames are
    on their way (its bytes are those of the frames it stands for: tests/unit/p2pnode/wire/test_codec.py, and
    the golden runs count them)."""
    import p2pnode.nodes.node
    from p2pnode.transport.memory import MemoryNetwork
    from p2pnode.wire.schema import SharedFrame

    packed: list[int] = []
    bodies: list[object] = []
    pack, send_shared = p2pnode.nodes.node.encode_model_body, MemoryNetwork.send_shared

    def counted(model, fed_round=None):  # type: ignore[no-untyped-def]
        packed.append(fed_round)
        return pack(model, fed_round)

    def carried(self, src, dst, channel, frame, on_done, memo):  # type: ignore[no-untyped-def]
        assert isinstance(frame, SharedFrame) and memo is not None
        bodies.append(frame.body)  # kept alive, so that two bodies never share an id
        return send_shared(self, src, dst, channel, frame, on_done, memo)

    monkeypatch.setattr(p2pnode.nodes.node, "encode_model_body", counted)
    monkeypatch.setattr(MemoryNetwork, "send_shared", carried)
    sim = Simulation(small(protocol="fedavg", rounds=2))
    for _ in range(2):
        sim.run_round()
    assert packed == [1, 2] and len(bodies) == 120 and len({id(b) for b in bodies}) == 2


def test_prme_learns_on_synthetic_data_and_reports_f1() -> None:
    # lr 0.2, not the paper's 0.005: a short run gets one local epoch per wake-up (docs/design.md)
    cfg = RunConfig(nodes=80, rounds=10, seed=4, dataset="synthetic", model="prme")
    result = simulate(cfg.replace(**{"learning.prme_lr": 0.2}))
    assert "f1_at_20" in result and "hit_ratio_at_20" not in result
    random_f1 = RANDOM_HR * 2 / 21
    tail = sum(h["f1_at_20"] for h in result["history"][-3:]) / 3
    assert tail > 1.8 * random_f1, result["history"]  # measured 2.3-2.7x over seeds 4-6


_DP_NET = RunConfig(nodes=40, rounds=6, seed=4, dataset="synthetic").replace(
    **{"learning.lr": 0.01, "learning.dp_epsilon": 8.0}
)


@pytest.fixture(scope="module")
def dp_network() -> dict[str, Any]:
    """A DP-SGD network's summary, shared by the tests of DP-SGD for all and selective DP-SGD."""
    return simulate(_DP_NET)


@pytest.mark.xdist_group("dp-network")
def test_dp_sgd_network_spends_at_most_its_target_epsilon(dp_network: dict[str, Any]) -> None:
    result = dp_network
    eps = result["dp_epsilon_by_node"]
    assert len(eps) == 40 and result["dp_epsilon"]["max"] == max(eps.values())
    assert all(0 < e <= 8.0 for e in eps.values())
    assert max(eps.values()) > 7.0  # the busiest nodes spend (nearly) all of it
    spent = [h["dp_epsilon"]["mean"] for h in result["history"]]
    assert spent == sorted(spent) and spent[0] < spent[-1]  # ε only grows
    # every coordinate moves each step, so no row delta is ever smaller than the full model
    assert result["delta_messages"] <= result["model_messages"] // 10


@pytest.mark.xdist_group("dp-network")
def test_selective_dp_sgd_switches_each_node_on_after_its_models_were_taken(
    dp_network: dict[str, Any],
) -> None:
    """``--dp-past 3``: a node trains plainly until peers took 3 of its models, then under
    DP-SGD; the summary says how many switched and how many models left unprotected."""
    cfg = _DP_NET.replace(**{"learning.dp_past": 3})
    result = simulate(cfg)
    rows = {r["node"]: r for r in result["per_node"]}
    sel = result["dp_selective"]
    assert sel["past"] == 3 and sel["nodes"] == 40 and sel["unprotected"]["max"] == 3
    switched = [r for r in rows.values() if r["dp_unprotected"] == 3]
    assert sel["switched"] == len(switched) / 40 > 0.5
    # a node spends ε only after its switch (one that switched after its last update spent none)
    assert sum(r["dp_epsilon"] > 0 for r in switched) > len(switched) // 2
    assert all(r["dp_epsilon"] == 0 for r in rows.values() if r["dp_unprotected"] < 3)
    plain = dp_network  # the same σ for every node: a selective node spends less of it
    assert "dp_selective" not in plain and result["dp_epsilon"]["mean"] < plain["dp_epsilon"]["mean"]
    line = summary(result, metric_for(cfg))
    assert "since the switch (selective, past 3 models taken" in line


def test_samo_buffer_drops_are_counted_as_rejections_by_the_runtime() -> None:
    """SAMO reports a model its full buffer pushed out as a ``Dropped`` effect; the runtime
    counts exactly those, per node, under ``buffer-full``."""
    sim = Simulation(RunConfig(nodes=30, rounds=3, seed=2, protocol="samo", samo_buffer=1, view_size=4))
    for _ in range(3):
        sim.run_round()
    drops = {n: r.node.protocol.stats.buffer_drops for n, r in sim.host.nodes.items()}
    counted = {n: r.counters.rejected.get("buffer-full", 0) for n, r in sim.host.nodes.items()}
    assert sum(drops.values()) > 0 and counted == drops


def test_the_python_entry_point_runs_what_its_docstring_shows() -> None:
    """The example at the top of p2pnode/__init__.py, run as written."""
    import textwrap

    import p2pnode

    doc = p2pnode.__doc__ or ""
    lines = []
    for line in doc.split("::\n", 1)[1].splitlines():
        if line and not line.startswith(" "):
            break  # the prose after the indented block
        lines.append(line)
    example = textwrap.dedent("\n".join(lines))
    assert "p2pnode.simulate(" in example and "r.plot()" in example
    scope: dict[str, object] = {}
    exec(example, scope)
    r = scope["r"]
    assert isinstance(r, dict)
    assert 0 <= r["hit_ratio_at_20"] <= 1 and len(r["history"]) == r["rounds"] == 10
    assert 0 <= r["cia"]["max_aac"] <= 1
