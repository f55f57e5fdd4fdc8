"""A member's poisoned model (#18): the distance bound, robust aggregation, NaN-proof HR@K."""

from __future__ import annotations

import random

import numpy as np
import pytest

from learning.metrics import hit_at_k
from learning.params import mean_into, relative_distance, robust_into
from peer_sampling.base import StaticView
from protocols.base_gl import BaseGossip
from protocols.gossip import GossipNode, TimingConfig
from protocols.messages import ModelMessage
from protocols.samo import Samo
from tests.unit.fakes import FakeLearnerBase


def models(values: list[float]) -> list[dict[str, np.ndarray]]:
    return [{"q": np.full((2, 3), v, dtype=np.float32)} for v in values]


def test_median_and_trimmed_mean_ignore_one_extreme_model() -> None:
    own, *others = models([1.0, 1.2, 0.8, 1e6])
    robust_into(own, others, "median")
    assert np.allclose(own["q"], 1.1)  # median of 1.0, 1.2, 0.8, 1e6
    own, *others = models([1.0, 1.2, 0.8, 1.1, 1e6])
    robust_into(own, others, "trimmed")
    assert np.allclose(own["q"], (1.0 + 1.1 + 1.2) / 3)  # the largest and smallest dropped
    own, *others = models([1.0, 1.2, 0.8, 1.1, 1e6])
    mean_into(own, others)
    assert own["q"][0, 0] > 1e5  # the plain mean is what one poisoned model takes over


def test_with_two_models_every_rule_is_the_mean() -> None:
    for how in ("median", "trimmed"):
        own, other = models([1.0, 3.0])
        robust_into(own, [other], how)
        assert np.allclose(own["q"], 2.0)
    with pytest.raises(ValueError, match="trimmed or median"):
        robust_into(*models([1.0]), [], "mode")


def test_relative_distance_is_scaled_by_the_own_model_and_infinite_on_overflow() -> None:
    own = {"q": np.ones((2, 2), dtype=np.float32)}
    assert relative_distance(own, {"q": np.ones((2, 2), dtype=np.float32)}) == 0.0
    assert relative_distance(own, {"q": 3 * np.ones((2, 2), dtype=np.float32)}) == pytest.approx(2.0)
    assert relative_distance(own, {"other": np.zeros(1, dtype=np.float32)}) == 0.0  # nothing shared
    huge = {"q": np.full((2, 2), 3e38, dtype=np.float32)}
    assert relative_distance(own, huge) > 1e30


class Learner(FakeLearnerBase):
    def __init__(self) -> None:
        self.version = 0
        self.params = {"q": np.ones((2, 3), dtype=np.float32)}
        self.merged: list[tuple[int, str]] = []

    def merge(self, models, how="mean") -> None:  # type: ignore[no-untyped-def]
        self.merged.append((len(models), how))

    def local_update(self) -> int:
        return 1


def test_a_model_far_from_the_own_one_is_vetted_away_and_a_near_one_is_not() -> None:
    learner = Learner()
    protocol = BaseGossip(0, learner, StaticView(0, [1, 2], [1, 2]), TimingConfig())
    node = GossipNode(protocol)
    near = ModelMessage(3, {"q": np.full((2, 3), 2.0, dtype=np.float32)})
    far = ModelMessage(3, {"q": np.full((2, 3), 1e6, dtype=np.float32)})
    assert node.vet(far) is None  # no bound unless one is set
    protocol.max_distance = 100.0
    assert node.vet(near) is None and node.vet(far) == "too-far"
    assert node.vet(object()) is None  # sampling messages are not models


def test_samo_merges_its_buffer_with_the_configured_rule() -> None:
    from protocols.merging import UniformMerge

    learner = Learner()
    view = StaticView(0, [1, 2], [1, 2])
    samo = Samo(0, learner, view, TimingConfig(), merger=UniformMerge(learner, "median"))
    rng = random.Random(0)
    for sender in (1, 2):
        samo.on_model(sender, ModelMessage(1, learner.snapshot()), 0.0, rng)
    samo.wake(1.0, rng)
    assert learner.merged == [(2, "median")]


def test_hit_at_k_gives_no_credit_to_a_nan_model() -> None:
    negatives = np.full(100, np.nan, dtype=np.float32)
    assert not hit_at_k(float("nan"), negatives, 20)  # NaN >= NaN is false: it used to count as a hit
    assert not hit_at_k(0.5, negatives, 20)
    assert hit_at_k(0.9, np.zeros(100, dtype=np.float32), 20)


def test_a_model_gone_non_finite_goes_back_exactly_to_the_model_before_its_update() -> None:
    from p2pnode.build import make_learner
    from p2pnode.config import RunConfig
    from p2pnode.prepare import prepare

    prep = prepare(RunConfig(nodes=20, dataset="synthetic"))
    learner = make_learner(prep, 3)
    assert learner.finite()
    learner.local_update()
    assert learner.finite()
    before = {k: v.copy() for k, v in learner.params.items()}
    learner.local_update()
    undo = learner._undo
    assert undo is not None
    touched = int(undo._rows["item"][0][0][0])  # a row the update trained on diverges
    learner.params["item"][touched, 0] = np.nan
    learner.params["user"][0, 1] = np.inf
    assert not learner.finite()
    learner.recover()
    assert learner.finite()
    for k, v in before.items():  # bit for bit: the update is undone, nothing else moved
        assert learner.params[k].view(np.uint32).tolist() == v.view(np.uint32).tolist(), k
    assert learner.local_update() > 0 and learner.finite()  # it trains on from there


def test_a_merge_gone_non_finite_sends_the_model_back_to_theta_0() -> None:
    from p2pnode.build import make_learner
    from p2pnode.config import RunConfig
    from p2pnode.prepare import prepare

    prep = prepare(RunConfig(nodes=20, dataset="synthetic"))
    learner = make_learner(prep, 3)
    learner.local_update()
    assert learner.finite()
    huge = {k: np.full_like(v, 3e38) for k, v in learner.snapshot().items()}
    learner.params["item"][...] = 3e38  # two models of values past 1.7e38 overflow when added
    learner.merge([huge])
    assert not learner.finite()
    learner.recover()
    for k, v in prep.init.items():
        np.testing.assert_array_equal(learner.params[k], v)
    assert learner.local_update() > 0 and learner.finite()


class Diverging(Learner):
    def local_update(self) -> int:
        self.params["q"][0, 0] = np.nan
        return 1

    def finite(self) -> bool:
        return bool(np.isfinite(self.params["q"]).all())

    def recover(self) -> None:
        self.params["q"][...] = 1.0
        self.recovered = True


def test_a_protocol_whose_training_diverges_recovers_and_says_so() -> None:
    from p2pcore.effects import Dropped

    learner = Diverging()
    protocol = BaseGossip(0, learner, StaticView(0, [1, 2], [1, 2]), TimingConfig())
    effects = protocol.on_model(1, ModelMessage(1, learner.snapshot()), 0.0, random.Random(0))
    assert effects == [Dropped("non-finite")] and learner.recovered
    assert protocol.stats.recoveries == 1 and np.isfinite(learner.params["q"]).all()


def test_compiled_snapshot_copies_check_bit_for_bit() -> None:
    from learning.snapshots import copy_checked

    rng = np.random.default_rng(0)
    x = rng.standard_normal((50, 8)).astype(np.float32)
    x[0, :5] = [-0.0, 1e-42, np.finfo(np.float32).max, -np.finfo(np.float32).max, 0.0]
    copy, ok = copy_checked(x)
    assert ok and copy is not x and copy.view(np.uint32).tolist() == x.view(np.uint32).tolist()
    for bad in (np.nan, np.inf, -np.inf):
        y = x.copy()
        y[7, 3] = bad
        assert copy_checked(y)[1] is False
        assert copy_checked(y[:, 1::2])[1] is False  # strided: the numpy path says the same


def test_clip_radius_counts_each_sender_once_and_clips_far_models_to_the_radius() -> None:
    from protocols.gossip import ClipRadius

    clip = ClipRadius(2.0, window=16, warmup=4, quantile=0.5)
    assert [clip.scale(s, 1.0) for s in range(4)] == [1.0] * 4  # warm-up: nothing clipped
    assert clip.radius() == 2.0
    # a flood from one id holds one place: the radius stays where the honest senders put it
    for _ in range(50):
        assert clip.scale(99, 1000.0) == pytest.approx(2.0 / 1000.0, rel=0.5)
    assert clip.radius() == 2.0
    assert clip.scale(5, 1.5) == 1.0 and clip.scale(6, float("inf")) == 0.0
    restored = ClipRadius(2.0, window=16, warmup=4, quantile=0.5)
    restored.restore(clip.state())
    assert restored.radius() == clip.radius()


def test_toward_moves_a_copy_and_leaves_both_models_as_they_were() -> None:
    from learning.params import distance, toward

    own = {"E": np.zeros((3, 2), dtype=np.float32)}
    far = {"E": np.full((3, 2), 10.0, dtype=np.float32), "extra": np.ones(2, dtype=np.float32)}
    moved = toward(own, far, 0.1)
    assert np.allclose(moved["E"], 1.0) and moved["extra"] is far["extra"]
    assert float(own["E"].sum()) == 0.0 and float(far["E"].sum()) == 60.0
    assert distance(own, moved) == pytest.approx(0.1 * distance(own, far))
