"""FedAvg server and client state machines on hand-computed tables."""

from __future__ import annotations

import random

import numpy as np

from p2pcore.effects import Send, SetTimer
from peer_sampling.base import StaticView
from protocols.fedavg import ROUND_TIMER, FedAvgClient, FedAvgServer, ParamStore
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
