"""The one-run ε audit (adversary/audit.py): the bound's closed forms, a random attack audits to
about 0, a perfect one to the most its guesses allow."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from adversary.audit import GUESSES, audit, epsilon_lower_bound, most_for, p_value


def test_the_p_value_is_randomized_responses_binomial_tail() -> None:
    q = math.exp(1.0) / (1 + math.exp(1.0))
    assert p_value(1000, 100, 80, 1.0) == pytest.approx(stats.binom.sf(79, 100, q))
    assert p_value(1000, 100, 0, 3.0) == 1.0
    # δ only adds to the tail
    assert p_value(1000, 100, 80, 1.0, 1e-5) > p_value(1000, 100, 80, 1.0)
    for bad in [(10, 5, 6, 1.0, 0.0), (10, 11, 1, 1.0, 0.0), (10, 5, 1, -1.0, 0.0), (10, 5, 1, 1.0, 2.0)]:
        with pytest.raises(ValueError):
            p_value(*bad)


def test_all_correct_guesses_give_logit_of_beta_to_the_one_over_r() -> None:
    for r in (10, 100, 1000):
        bound = epsilon_lower_bound(10 * r, r, r, 0.05)
        assert bound == pytest.approx(most_for(r), rel=1e-6)
    assert most_for(100) == pytest.approx(3.4928, abs=1e-3)  # β = 0.05: 0.05^(1/100) = 0.97049
    # at the bound the tail is β: a hair above it, the run is explained
    eps = epsilon_lower_bound(1000, 100, 90)
    assert p_value(1000, 100, 90, eps) < 0.05 <= p_value(1000, 100, 90, eps + 1e-6)
    assert epsilon_lower_bound(1000, 100, 50) == 0.0  # half right: what ε = 0 gives
    # δ > 0 can only lower the bound
    assert epsilon_lower_bound(1000, 100, 95, delta=1e-4) < epsilon_lower_bound(1000, 100, 95)


def test_a_random_attack_audits_to_about_zero_and_a_perfect_one_to_its_most() -> None:
    rng = np.random.default_rng(0)
    m = 1000
    bounds = []
    for seed in range(20):
        included = np.random.default_rng(seed).random(m) < 0.5
        bounds.append(audit(rng.random(m), included).epsilon)
    assert max(bounds) < 0.5 and np.mean(bounds) < 0.1  # Bonferroni over the guesses: rarely above 0
    included = np.arange(m) % 2 == 0  # 500 in
    perfect = audit(included.astype(float), included)
    assert perfect.guesses == m and perfect.correct == m  # half guessed in, half out, all right
    assert perfect.epsilon == pytest.approx(most_for(m, 0.05 / len(GUESSES)), rel=1e-6)
    assert perfect.included == 500 and perfect.canaries == m
    worse = audit(np.where(included, 1.0, 0.0) + rng.normal(0, 0.7, m), included)
    assert 0 < worse.epsilon < perfect.epsilon


def test_bad_canaries_are_refused() -> None:
    with pytest.raises(ValueError, match="one score per canary"):
        audit([1.0, 2.0], [True])
    with pytest.raises(ValueError, match="NaN"):
        audit([np.nan], [True])
    with pytest.raises(ValueError, match="β"):
        epsilon_lower_bound(10, 5, 5, beta=0.0)


def test_a_canary_changes_only_its_own_users_training() -> None:
    """plant_canaries: each user's canaries are drawn from its own untouched items with its own
    generator; the included ones are appended to its training items, nothing else moves."""
    from learning.split import leave_one_out, plant_canaries
    from p2pnode.data.datasets import load_ml100k

    data = load_ml100k(None).subset_users(30)
    users = leave_one_out(data, 0, 20)
    planted = plant_canaries(users, 8, seed=0)
    again = plant_canaries(users[:10], 8, seed=0)  # fewer users: the same canaries for these
    for before, after, same in zip(users, planted, again, strict=False):
        assert len(after.canary_items) == 8
        assert np.array_equal(after.canary_items, same.canary_items)
        assert np.array_equal(after.canary_in, same.canary_in)
        n = int(after.canary_in.sum())
        assert np.array_equal(after.train_items[: len(before.train_items)], before.train_items)
        assert np.array_equal(
            after.train_items[len(before.train_items) :], after.canary_items[after.canary_in]
        )
        assert len(after.train_items) == len(before.train_items) + n
        touched = before.interacted
        touched[before.test_negatives] = True
        assert not touched[after.canary_items].any()  # never an item of the user or a test negative
        assert after.test_item == before.test_item
        assert np.array_equal(after.test_negatives, before.test_negatives)
    share = np.mean(np.concatenate([u.canary_in for u in planted]))
    assert 0.35 < share < 0.65  # each in with probability ½ (240 canaries)
    assert plant_canaries(users, 0, seed=0) is users
