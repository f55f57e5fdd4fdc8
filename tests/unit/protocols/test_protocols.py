"""Base GL and SAMO merge arithmetic on hand-computed tables, with a fake learner."""

from __future__ import annotations

import random

import numpy as np

from learning.params import mean_into
from p2pcore.effects import Dropped, Merged, Send, SetTimer
from peer_sampling.base import StaticView
from protocols.base_gl import BaseGossip
from protocols.gossip import GossipNode, TimingConfig
from protocols.messages import ModelMessage
from protocols.samo import Samo
from tests.unit.fakes import FakeLearnerBase


class FakeLearner(FakeLearnerBase):
    """θ is one 2x2 table; a local update adds 1 to every entry."""

    def __init__(self, value: float) -> None:
        self.params = {"w": np.full((2, 2), value, np.float32)}
        self.version = 0
        self.updates = 0

    def merge(self, models, how="mean") -> None:  # type: ignore[no-untyped-def]
        mean_into(self.params, list(models))
        self.version += 1

    def local_update(self) -> int:
        self.params["w"] += 1.0
        self.updates += 1
        return 3


def msg(value: float) -> ModelMessage:
    return ModelMessage(1, {"w": np.full((2, 2), value, np.float32)})


def test_base_gl_averages_pairwise_then_trains() -> None:
    learner = FakeLearner(2.0)
    proto = BaseGossip(0, learner, StaticView(0, [1, 2, 3], [1, 2, 3]), TimingConfig())
    rng = random.Random(0)
    assert proto.on_model(1, msg(6.0), 0.0, rng) == [Merged((1,))]  # what exposure counts
    np.testing.assert_array_equal(learner.params["w"], np.full((2, 2), 5.0))  # (2+6)/2 + 1
    proto.on_model(2, msg(1.0), 0.0, rng)
    np.testing.assert_array_equal(learner.params["w"], np.full((2, 2), 4.0))  # (5+1)/2 + 1
    assert proto.stats.merges == 2 and proto.stats.local_steps == 6


def test_base_gl_wake_sends_one_model_to_a_view_member() -> None:
    learner = FakeLearner(1.0)
    node = GossipNode(BaseGossip(0, learner, StaticView(0, [4, 5, 6], []), TimingConfig()))
    rng = random.Random(1)
    start = node.start(0.0, rng)
    assert len(start) == 1 and isinstance(start[0], SetTimer)
    effects = node.on_timer("wake", 10.0, rng)
    sends = [e for e in effects if isinstance(e, Send)]
    assert len(sends) == 1 and sends[0].to in (4, 5, 6)
    learner.params["w"][:] = 99  # the snapshot sent is not aliased to the live model
    assert float(sends[0].message.params["w"][0, 0]) == 1.0  # type: ignore[attr-defined]


def test_samo_merges_all_buffered_once_and_sends_to_all() -> None:
    learner = FakeLearner(0.0)
    proto = Samo(0, learner, StaticView(0, [1, 2, 3], []), TimingConfig())
    rng = random.Random(0)
    for v in (3.0, 6.0, 7.0):
        assert proto.on_model(9, msg(v), 0.0, rng) == []
    np.testing.assert_array_equal(learner.params["w"], np.zeros((2, 2)))  # nothing merged yet
    effects = proto.wake(0.0, rng)
    # (0 + 3 + 6 + 7) / 4 = 4, then one local update → 5
    np.testing.assert_array_equal(learner.params["w"], np.full((2, 2), 5.0))
    assert sorted(e.to for e in effects if isinstance(e, Send)) == [1, 2, 3]
    assert learner.updates == 1 and proto.buffer == []
    proto.wake(0.0, rng)  # |Θ| = 1: no merge, no training, still sends
    assert learner.updates == 1


def test_samo_buffer_is_bounded() -> None:
    learner = FakeLearner(0.0)
    proto = Samo(0, learner, StaticView(0, [1], []), TimingConfig(), max_buffer=2)
    effects = [proto.on_model(1, msg(v), 0.0, random.Random(0)) for v in (1.0, 2.0, 3.0)]
    assert len(proto.buffer) == 2 and proto.stats.buffer_drops == 1
    assert effects == [[], [], [Dropped("buffer-full")]]  # the driver counts the drop from the effect


def test_wake_period_is_drawn_once_around_100_ticks() -> None:
    periods = []
    for seed in range(300):
        p = BaseGossip(0, FakeLearner(0), StaticView(0, [1], []), TimingConfig())
        p.start(0.0, random.Random(seed))
        periods.append(p.period)
    assert 98 < float(np.mean(periods)) < 102
    assert 8 < float(np.std(periods)) < 12
