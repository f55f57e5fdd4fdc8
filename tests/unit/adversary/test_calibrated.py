"""The RMIA-style calibrated attack's parts (adversary/calibrated.py)."""

from __future__ import annotations

import numpy as np
import pytest

from adversary.calibrated import population_likelihood, rmia_scores, train_reference


def test_the_score_is_the_share_of_population_items_an_example_beats() -> None:
    p = np.array([0.9, 0.5, 0.2, 0.4, 0.1])
    ref = np.array([0.3, 0.5, 0.2, 0.4, 0.1])  # LR: 3, 1, 1, 1, 1
    out = rmia_scores(p, np.array([0, 1]), np.array([2, 3, 4]), ref, smooth=False)
    assert out.tolist() == [1.0, 0.0]  # item 0's ratio beats every z; item 1's ties all (not > γ)
    assert rmia_scores(p, np.array([0]), np.array([2, 3, 4]), ref, gamma=4.0, smooth=False).tolist() == [0.0]
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


def test_the_smoothed_score_breaks_the_fractions_ties_without_reordering_it() -> None:
    """Examples past every z all read 1.0 as a fraction (no threshold at a low FPR finds a member
    among them); smoothed, they are ordered by how far past, and the fraction's order holds."""
    rng = np.random.default_rng(3)
    n_items = 400
    p = rng.uniform(0.01, 0.99, n_items)
    ref = rng.uniform(0.05, 0.95, n_items)
    p[:40], ref[:40] = rng.uniform(0.9, 0.99, 40), rng.uniform(0.05, 0.1, 40)  # far past every z
    z = rng.choice(np.arange(200, 400), 50, replace=False)
    x = np.arange(200)
    fraction = rmia_scores(p, x, z, ref, smooth=False)
    smooth = rmia_scores(p, x, z, ref)
    lr = (p / ref)[x]
    assert (fraction == 1.0).sum() >= 5  # ties at the top, as on ML-100k
    order = np.argsort(lr)
    assert np.all(np.diff(smooth[order]) > 0)  # strictly increasing in LR(x): no ties left
    a, b = np.meshgrid(fraction, fraction)
    sa, sb = np.meshgrid(smooth, smooth)
    assert np.all((sa > sb)[a > b])  # a whole z apart in the fraction: the same order smoothed
    assert smooth.min() >= 0.0 and smooth.max() <= 1.0
    # the two ends: just past the highest z / just under the lowest
    top = rmia_scores(np.array([0.5, 0.6]), np.array([1]), np.array([0]), np.array([0.5, 0.5]))
    assert top.tolist() == pytest.approx([(1 + (1 - 0.5 / 0.6)) / 2])
    low = rmia_scores(np.array([0.6, 0.3]), np.array([1]), np.array([0]), np.array([0.5, 0.5]))
    assert low.tolist() == pytest.approx([0.5 * (0.6 / 1.2) / 1.0])
