"""Membership inference (002 §2.5, 000 §VIII-C): MPE, the oracle threshold, the CIA proxy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from adversary.cia import CIAObserver
from adversary.mia import (
    best_threshold_accuracy,
    item_mpe,
    mpe_binary,
    mpe_categorical,
    proxy_round,
    softmax,
    victim_accuracy,
)
from adversary.models import GMFAttack
from learning import gmf


def eq3(dist: list[float], y: int) -> float:
    """002 eq. 3 written out term by term."""
    out = -(1 - dist[y]) * math.log(dist[y])
    for j, p in enumerate(dist):
        if j != y:
            out -= p * math.log(1 - p)
    return out


def test_mpe_matches_eq3_term_by_term() -> None:
    dist = [0.6, 0.3, 0.1]
    got = mpe_categorical(np.array(dist), np.array([0, 1, 2]))
    np.testing.assert_allclose(got, [eq3(dist, y) for y in range(3)], rtol=1e-12)
    # two classes with label 1: −(1−p)ln p − (1−p)ln p
    for p in (0.1, 0.5, 0.93):
        assert mpe_binary(p) == pytest.approx(eq3([1 - p, p], 1))
        assert mpe_binary(p) == pytest.approx(-2 * (1 - p) * math.log(p))
    # confident and right is low, confident and wrong is high
    assert mpe_binary(0.99) < mpe_binary(0.5) < mpe_binary(0.01)
    assert np.isfinite(mpe_binary(np.array([0.0, 1.0]))).all()


def test_item_mpe_uses_probabilities_for_gmf_and_a_catalogue_softmax_for_prme() -> None:
    scores = np.array([0.9, 0.2, 0.6])
    np.testing.assert_allclose(item_mpe(scores, np.array([0, 2]), True), mpe_binary([0.9, 0.6]))
    ranking = np.array([-1.0, -4.0, -0.5])  # PRME: negative distances
    dist = softmax(ranking)
    assert dist.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(item_mpe(ranking, np.array([1]), False), [eq3(list(dist), 1)], rtol=1e-9)


def test_oracle_threshold_accuracy_on_hand_tables() -> None:
    # members all below non-members: a perfect threshold exists
    tau, acc = best_threshold_accuracy([0.1, 0.2], [0.5, 0.9])
    assert acc == 1.0 and 0.2 <= tau < 0.5
    # identical distributions: nothing beats calling everything one class
    assert best_threshold_accuracy([0.3, 0.3], [0.3, 0.3])[1] == 0.5
    # one non-member (a leave-one-out test item) above 3 of 4 members: (3/4 + 1) / 2
    assert best_threshold_accuracy([0.1, 0.2, 0.3, 0.9], [0.5])[1] == pytest.approx(0.875)
    # balanced: 1 member vs 3 non-members weighs both classes equally
    assert best_threshold_accuracy([0.1], [0.05, 0.5, 0.6])[1] == pytest.approx((1 + 2 / 3) / 2)
    with pytest.raises(ValueError, match="non-member"):
        best_threshold_accuracy([0.1], [])


def test_victim_accuracy_sees_memorised_items() -> None:
    scores = np.full(10, 0.3)
    scores[[1, 2, 3]] = 0.95  # the training items
    assert victim_accuracy(scores, np.array([1, 2, 3]), np.array([7]), True) == 1.0
    scores[7] = 0.99  # the held-out item scored above all of them
    assert victim_accuracy(scores, np.array([1, 2, 3]), np.array([7]), True) == 0.5


def test_proxy_counts_predicted_members_and_measures_precision() -> None:
    users = [4, 5, 6, 9]
    mpe = np.array(
        [
            [0.1, 0.1, 0.9],  # user 4: two items under 0.5
            [0.1, 0.9, 0.9],  # user 5: one
            [0.1, 0.1, 0.1],  # user 6: three, but it is the adversary
            [0.9, 0.9, 0.9],  # user 9: none
        ]
    )
    member = np.array([[1, 0, 0], [1, 0, 0], [1, 1, 1], [0, 0, 0]], dtype=bool)
    r = proxy_round(users, mpe, member, [0.5, 1.0], k=2, exclude={6})
    assert r.predicted[0].tolist() == [4, 5]
    assert r.positives[0] == 3 and r.true_positives[0] == 2  # user 6 not counted
    # ρ = 1: every item predicted; all tie, so the lower ids win
    assert r.predicted[1].tolist() == [4, 5]
    assert r.positives[1] == 9 and r.true_positives[1] == 2


def test_observer_keeps_the_latest_model_for_membership_inference() -> None:
    def model(user: float, items: list[float]) -> dict[str, np.ndarray]:
        return {
            gmf.USER: np.array([[user]], np.float32),
            gmf.ITEM: np.array([[x] for x in items], np.float32),
            gmf.H: np.array([1.0], np.float32),
            gmf.B: np.array([0.0], np.float32),
        }

    obs = CIAObserver(GMFAttack(), [np.array([0, 2])], k=1, momentum=0.9, keep_last=True)
    obs.observe(3, model(1.0, [1.0, 0.0, 2.0]))
    obs.observe(3, model(1.0, [-1.0, 0.0, 4.0]))
    users, latest = obs.relevance_table(0, latest=True)
    assert users == [3]
    np.testing.assert_allclose(latest[0], 1 / (1 + np.exp(-np.array([-1.0, 4.0]))), rtol=1e-6)
    _, smoothed = obs.relevance_table(0)  # v_u = 0.9·first + 0.1·latest
    np.testing.assert_allclose(smoothed[0], 1 / (1 + np.exp(-np.array([0.8, 2.2]))), rtol=1e-6)
    with pytest.raises(RuntimeError, match="keep_last"):
        CIAObserver(GMFAttack(), [np.array([0])]).relevance_table(0, latest=True)


def test_mia_nonmembers_are_held_out_of_training() -> None:
    """--mia-holdout: the latest training items leave training and become held-out non-members."""
    from learning import gmf
    from learning.learner import GMFLearner, TrainConfig
    from learning.split import hold_out_nonmembers, leave_one_out
    from learning.synthetic import SyntheticConfig, planted_communities

    data, _ = planted_communities(
        SyntheticConfig(users=6, items=200, communities=2, pool_size=20, pool_overlap=5, per_user=12)
    )
    users = leave_one_out(data, seed=0)
    held = hold_out_nonmembers(users, 5)
    for a, b in zip(users, held, strict=True):
        n = min(5, len(a.train_items) - 3)
        assert b.nonmember_items.tolist() == a.train_items[len(a.train_items) - n :].tolist()
        assert b.train_items.tolist() == a.train_items[: len(a.train_items) - n].tolist()
        assert b.interacted[b.nonmember_items].all()  # never sampled as a training negative
        assert b.test_item == a.test_item
    few = hold_out_nonmembers(users, 10_000)
    assert all(len(u.train_items) == 3 for u in few)  # at least 3 stay in training
    learner = GMFLearner(
        held[0], gmf.init_params(held[0].n_items, 8, 0), TrainConfig(factors=8), np.random.default_rng(0)
    )
    assert sorted(learner.held_out().tolist()) == sorted(
        [held[0].test_item, *held[0].nonmember_items.tolist()]
    )
    with pytest.raises(ValueError):
        hold_out_nonmembers(users, -1)
