"""The RMIA-style calibrated attack's parts (adversary/calibrated.py)."""

from __future__ import annotations

import numpy as np
import pytest

from adversary.calibrated import population_likelihood, rmia_scores, train_reference


def test_the_score_is_the_share_of_population_items_an_example_beats() -> None:
    p = np.array([0.9, 0.5, 0.2, 0.4, 0.1])
    ref = np.array([0.3, 0.5, 0.2, 0.4, 0.1])  # LR: 3, 1, 1, 1, 1
    out = rmia_scores(p, np.array([0, 1]), np.array([2, 3, 4]), ref)
    assert out.tolist() == [1.0, 0.0]  # item 0's ratio beats every z; item 1's ties all (not > γ)
    assert rmia_scores(p, np.array([0]), np.array([2, 3, 4]), ref, gamma=4.0).tolist() == [0.0]
    with pytest.raises(ValueError, match="population"):
        rmia_scores(p, np.array([0]), np.array([], dtype=np.int64), ref)


def test_the_reference_model_learns_its_users_items() -> None:
    rng = np.random.default_rng(0)
    items = [np.arange(10 * (u % 3), 10 * (u % 3) + 10) for u in range(30)]  # three tastes
    U, V = train_reference(items, 60, rng, factors=8, epochs=30, lr=0.1)
    pr = population_likelihood(U, V)
    assert pr[:30].mean() > 2 * pr[30:].mean()  # items someone touched are more likely than the rest
    with pytest.raises(ValueError, match="at least one user"):
        train_reference([], 10, rng)
