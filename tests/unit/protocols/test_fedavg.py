"""FedAvg server and client state machines on hand-computed tables."""

from __future__ import annotations

import random

import numpy as np
import pytest

from p2pcore.effects import Send, SetTimer
from peer_sampling.base import StaticView
from protocols.fedavg import ROUND_TIMER, FedAvgClient, FedAvgServer, ParamStore, average
from protocols.gossip import GossipNode, TimingConfig
from protocols.messages import FedMessage
from tests.unit.fakes import FakeLearnerBase


def table(v: float) -> dict[str, np.ndarray]:
    return {"w": np.full((2, 3), v, np.float32), "b": np.array([v], np.float32)}


def server(fraction: float = 1.0, clients: int = 4) -> FedAvgServer:
    ids = list(range(clients))
    return FedAvgServer(99, ParamStore(table(0.0)), StaticView(99, ids, ids), TimingConfig(), ids, fraction)


def test_server_average_equals_the_hand_computed_mean() -> None:
    srv = server()
    rng = random.Random(0)
    effects = srv.on_timer(ROUND_TIMER, 0.0, rng)
    sends = [e for e in effects if isinstance(e, Send)]
    assert sorted(e.to for e in sends) == [0, 1, 2, 3]
    assert all(e.message.kind == "global" and e.message.round == 1 for e in sends)  # type: ignore[attr-defined]
    for client, value in ((0, 1.0), (1, 2.0), (2, 6.0)):  # client 3 never answers
        srv.on_model(client, FedMessage("update", 1, 1, table(value)), 10.0, rng)
    srv.on_timer(ROUND_TIMER, 100.0, rng)
    np.testing.assert_array_equal(srv.store.params["w"], np.full((2, 3), 3.0))  # (1+2+6)/3
    np.testing.assert_array_equal(srv.store.params["b"], [3.0])
    assert srv.round == 2 and srv.aggregated_rounds == 1


def test_late_and_unselected_updates_are_dropped() -> None:
    srv = server(fraction=0.5)
    rng = random.Random(1)
    srv.on_timer(ROUND_TIMER, 0.0, rng)
    assert len(srv.selected) == 2
    outsider = next(c for c in range(4) if c not in srv.selected)
    srv.on_model(outsider, FedMessage("update", 1, 1, table(50.0)), 1.0, rng)
    chosen = min(srv.selected)
    srv.on_model(chosen, FedMessage("update", 0, 1, table(70.0)), 1.0, rng)  # stale round
    assert srv.pending == {} and srv.late == 2


def test_server_rounds_follow_its_timer() -> None:
    node = GossipNode(server())
    rng = random.Random(0)
    assert node.start(5.0, rng) == [SetTimer(ROUND_TIMER, 5.0)]
    effects = node.on_timer(ROUND_TIMER, 5.0, rng)
    assert SetTimer(ROUND_TIMER, 105.0) in effects


class CountingLearner(FakeLearnerBase):
    def __init__(self) -> None:
        self.params = table(0.0)
        self.version = 0

    def merge(self, models, how="mean") -> None:  # type: ignore[no-untyped-def]
        raise AssertionError("a FedAvg client never merges")

    def local_update(self) -> int:
        for v in self.params.values():
            v += 1.0
        return 2


def test_client_takes_global_trains_and_answers_the_server() -> None:
    learner = CountingLearner()
    client = FedAvgClient(3, learner, StaticView(3, [99], [99]), TimingConfig())
    effects = client.on_model(99, FedMessage("global", 7, 1, table(4.0)), 0.0, random.Random(0))
    assert len(effects) == 1 and isinstance(effects[0], Send) and effects[0].to == 99
    update = effects[0].message
    assert isinstance(update, FedMessage) and (update.kind, update.round) == ("update", 7)
    np.testing.assert_array_equal(update.params["w"], np.full((2, 3), 5.0))
    assert client.stats.local_steps == 2


def random_tables(n: int, seed: int) -> list[dict[str, np.ndarray]]:
    """Updates of mixed magnitudes, whose float32 sums round differently in another order."""
    gen = np.random.default_rng(seed)
    return [
        {
            "w": (gen.standard_normal((5, 7)) * 10.0 ** gen.integers(-3, 4)).astype(np.float32),
            "b": gen.random(3, dtype=np.float32),
        }
        for _ in range(n)
    ]


def wide_server(clients: int, how: str = "mean") -> FedAvgServer:
    ids = list(range(clients))
    store = ParamStore({"w": np.zeros((5, 7), np.float32), "b": np.zeros(3, np.float32)})
    return FedAvgServer(99, store, StaticView(99, ids, ids), TimingConfig(), ids, 1.0, how)


def summed(updates: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    out = {k: v.copy() for k, v in updates[0].items()}
    for u in updates[1:]:
        for k in out:
            out[k] += u[k]
    return out


@pytest.mark.parametrize(
    "order",
    [[0, 1, 2, 3, 4, 5, 6, 7], [7, 6, 5, 4, 3, 2, 1, 0], [3, 0, 7, 1, 5, 2], [1, 2, 3, 4, 5, 6, 7]],
    ids=["in-order", "reversed", "shuffled-two-silent", "first-silent"],
)
def test_the_folded_mean_is_average_to_the_bit_in_any_arrival_order(order: list[int]) -> None:
    updates = dict(enumerate(random_tables(8, seed=0)))
    answered = [updates[c] for c in sorted(order)]
    # the data make the order matter to float32, so that the check below can fail
    assert summed(answered)["w"].tobytes() != summed(answered[::-1])["w"].tobytes()
    srv = wide_server(8)
    rng = random.Random(0)
    srv.on_timer(ROUND_TIMER, 0.0, rng)
    for client in order:
        srv.on_model(client, FedMessage("update", 1, 1, updates[client]), 1.0, rng)
    srv.on_timer(ROUND_TIMER, 100.0, rng)
    for name, arr in average(answered).items():
        assert srv.store.params[name].tobytes() == arr.tobytes()
    assert srv.pending == {} and srv.aggregated_rounds == 1


def test_the_server_holds_only_updates_ahead_of_a_silent_client() -> None:
    srv = wide_server(6)
    rng = random.Random(0)
    srv.on_timer(ROUND_TIMER, 0.0, rng)
    updates = dict(enumerate(random_tables(6, seed=1)))
    assert not srv.holds(0) and srv.holds(1)
    srv.on_model(0, FedMessage("update", 1, 1, updates[0]), 1.0, rng)
    srv.on_model(2, FedMessage("update", 1, 1, updates[2]), 1.0, rng)  # 1 has not answered
    srv.on_model(3, FedMessage("update", 1, 1, updates[3]), 1.0, rng)
    assert sorted(srv.pending) == [2, 3] and not srv.holds(1) and srv.holds(4)
    srv.on_model(1, FedMessage("update", 1, 1, updates[1]), 1.0, rng)
    assert srv.pending == {}  # 1, 2 and 3 went into the sum
    srv.on_model(4, FedMessage("update", 1, 1, updates[4]), 1.0, rng)
    assert srv.pending == {}


def test_a_second_update_of_a_round_is_refused_and_counted() -> None:
    srv = server(clients=2)
    rng = random.Random(0)
    srv.on_timer(ROUND_TIMER, 0.0, rng)
    srv.on_model(0, FedMessage("update", 1, 1, table(1.0)), 1.0, rng)
    srv.on_model(0, FedMessage("update", 1, 2, table(1000.0)), 1.0, rng)
    srv.on_model(1, FedMessage("update", 1, 1, table(3.0)), 1.0, rng)
    srv.on_timer(ROUND_TIMER, 100.0, rng)
    np.testing.assert_array_equal(srv.store.params["w"], np.full((2, 3), 2.0))
    assert srv.repeated == 1 and srv.stats.models_received == 2
    assert srv.state()["repeated"] == 1


@pytest.mark.parametrize("how", ["trimmed", "median"])
def test_robust_merges_keep_every_update_until_the_round_ends(how: str) -> None:
    updates = dict(enumerate(random_tables(5, seed=3)))
    srv = wide_server(5, how)
    rng = random.Random(0)
    srv.on_timer(ROUND_TIMER, 0.0, rng)
    for c in (4, 0, 2, 1, 3):
        assert srv.holds(c)
        srv.on_model(c, FedMessage("update", 1, 1, updates[c]), 1.0, rng)
    assert sorted(srv.pending) == [0, 1, 2, 3, 4]
    srv.on_timer(ROUND_TIMER, 100.0, rng)
    for name, arr in average([updates[c] for c in range(5)], how).items():
        assert srv.store.params[name].tobytes() == arr.tobytes()
