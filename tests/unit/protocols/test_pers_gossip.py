"""Pers-Gossip: personalized peer choice with exploration, score-weighted merging, validation."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np

from learning import gmf
from learning.learner import GMFLearner, TrainConfig
from learning.split import hold_out_validation, leave_one_out
from peer_sampling.base import StaticView
from peer_sampling.personalized import Personalized
from protocols.merging import ScoreWeightedMerge
from tests.unit.learning.test_learning import toy


def test_prefers_well_scoring_peers_yet_explores_at_the_given_rate() -> None:
    random_view = list(range(10, 20))
    pers = Personalized(StaticView(0, random_view, []), size=3, exploration=0.4)
    for peer, score in {1: 0.9, 2: 0.8, 3: 0.7, 4: 0.1, 5: 0.05}.items():
        pers.record(peer, score)
    assert pers.personalized_view() == (1, 2, 3)
    rng = random.Random(0)
    picks = Counter(pers.pick(rng) for _ in range(20_000))
    explored = sum(n for p, n in picks.items() if p in random_view)
    assert abs(explored / 20_000 - 0.4) < 0.02
    assert {p for p in picks if p not in random_view} == {1, 2, 3}  # never the poor scorers
    assert pers.explored + pers.exploited == 20_000


def test_without_scores_every_pick_is_random_and_samo_targets_are_distinct() -> None:
    pers = Personalized(StaticView(0, [7, 8, 9], []), size=3, exploration=0.0)
    rng = random.Random(2)
    assert {pers.pick(rng) for _ in range(100)} == {7, 8, 9}
    pers.record(4, 0.5)
    targets = pers.send_targets(rng)
    assert len(targets) == len(set(targets)) and targets == (4,)  # exploration 0: only the best


class FakeScorer:
    """Scores are read from the model's 'w' entry; merge_weighted records what it was given."""

    def __init__(self) -> None:
        self.params = {"w": np.array([1.0], np.float32)}
        self.version = 0
        self.calls: list[tuple[list[float], float]] = []

    def score(self, params):  # type: ignore[no-untyped-def]
        return float((params or self.params)["w"][0]) / 10

    def merge_weighted(self, models, weights, own):  # type: ignore[no-untyped-def]
        self.calls.append((list(weights), own))
        total = own + sum(weights)
        self.params["w"] = (
            own * self.params["w"] + sum(w * m["w"] for m, w in zip(models, weights, strict=True))
        ) / total


def test_score_weighted_merge_on_a_hand_computed_table() -> None:
    learner = FakeScorer()
    sampler = Personalized(StaticView(0, [1, 2], []), size=2, exploration=0.4)
    merge = ScoreWeightedMerge(learner)  # type: ignore[arg-type]
    received = [(1, {"w": np.array([5.0], np.float32)}), (2, {"w": np.array([3.0], np.float32)})]
    scores = merge.merge(received)  # type: ignore[arg-type]
    assert scores == {1: 0.5, 2: 0.3}
    sampler.record_scores(scores)  # what the protocol does with them
    assert learner.calls == [([0.5, 0.3], 0.1)]
    # (0.1·1 + 0.5·5 + 0.3·3) / 0.9 = 3.5 / 0.9
    np.testing.assert_allclose(learner.params["w"], [3.5 / 0.9], rtol=1e-6)
    assert sampler.scores == {1: 0.5, 2: 0.3}


def test_validation_hold_out_and_real_scores() -> None:
    users = leave_one_out(toy(), seed=0)
    held = hold_out_validation(users, seed=0)
    a, a2 = users[0], held[0]
    assert a2.validation_items.tolist() == [a.train_items[-1]]
    assert len(a2.train_items) == len(a.train_items) - 1 and a2.test_item == a.test_item
    assert a2.interacted[a2.validation_items[0]]  # never drawn as a training negative
    assert not set(a2.validation_negatives) & set(np.flatnonzero(a.interacted))
    init = gmf.init_params(toy().n_items, 8, seed=3)
    learner = GMFLearner(a2, init, TrainConfig(factors=8, lr=0.05), np.random.default_rng(0))
    before = learner.score(None)
    for _ in range(10):
        learner.local_update()
    assert 0.0 <= before <= 1.0 and learner.score(None) > before
    # a received model is scored with the own user row, whatever user row it carries
    items = np.concatenate((a2.validation_items, a2.validation_negatives))
    s = gmf.score(init, learner.params["user"][0], items)
    expected = float(np.count_nonzero(s[1:] < s[0])) / (len(s) - 1)
    assert learner.score(init) == expected
    other_user = {**init, "user": init["user"] + 5.0}
    assert learner.score(other_user) == expected
