"""ReuseKNN (paper 003): the vectorised neighbourhoods and queries against a plain loop written
from the paper and the authors' code, and the metrics of its Table 2."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import rankdata

from learning.reuseknn import (
    STRATEGIES,
    Neighbourhoods,
    Ratings,
    answer,
    coverage,
    epsilon,
    folds,
    ndcg_at,
    pp_corr,
    privacy_risk,
    tau_from_usage,
    top_items,
    vulnerable_share,
)
from learning.reuseknn_reference import loop_answer


def toy(seed: int = 0, n_users: int = 30, n_items: int = 40, rows: int = 420) -> Ratings:
    rng = np.random.default_rng(seed)
    cells = rng.choice(n_users * n_items, size=rows, replace=False)
    users, items = cells // n_items, cells % n_items
    values = rng.integers(1, 6, size=rows).astype(np.float64)
    return Ratings(users.astype(np.int64), items.astype(np.int64), values, n_users, n_items, (1.0, 5.0))


def loop_cosine(data: Ratings) -> np.ndarray:
    """Surprise's cosine as the authors' code runs it: sums over co-rated items, min support 1."""
    by_user = {u: {} for u in range(data.n_users)}
    for u, i, r in zip(data.users, data.items, data.values, strict=True):
        by_user[int(u)][int(i)] = float(r)
    sim = np.zeros((data.n_users, data.n_users))
    for a in range(data.n_users):
        for b in range(data.n_users):
            common = set(by_user[a]) & set(by_user[b])
            if a == b:
                sim[a, b] = 1.0
            elif common:
                num = sum(by_user[a][i] * by_user[b][i] for i in common)
                den = math.sqrt(
                    sum(by_user[a][i] ** 2 for i in common) * sum(by_user[b][i] ** 2 for i in common)
                )
                sim[a, b] = num / den
    return sim


def test_similarity_reusability_and_ranking_follow_the_paper_and_the_authors_code() -> None:
    data = toy()
    nb = Neighbourhoods.fit(data)
    assert np.allclose(nb.sim, loop_cosine(data))
    items_of = [set(data.items[data.users == u].tolist()) for u in range(data.n_users)]
    popularity = np.bincount(data.items, minlength=data.n_items) / data.n_users
    for u in range(data.n_users):
        assert nb.expect[u] == pytest.approx(sum(popularity[i] for i in items_of[u]))  # eq. 5
        for c in range(data.n_users):
            want = len(items_of[u] & items_of[c]) / len(items_of[u]) if items_of[u] else 0.0
            assert nb.gain[u, c] == pytest.approx(want)  # eq. 6
    rank = nb.ranking("gain")
    assert np.allclose(
        rank[3], 0.5 * rankdata(nb.sim[3], method="max") + 0.5 * rankdata(nb.gain[3], method="max")
    )
    assert np.array_equal(nb.ranking("userknn"), rankdata(nb.sim, method="max", axis=1))


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize(("tau", "dp"), [(math.inf, False), (3.0, True), (0.0, True)])
def test_answer_is_the_authors_loop(strategy: str, tau: float, dp: bool) -> None:
    data = toy(1)
    train, test = folds(len(data), 5, seed=2)[0]
    nb = Neighbourhoods.fit(data.subset(train))
    queries = list(zip(data.users[test].tolist(), data.items[test].tolist(), strict=True))
    got = answer(nb, strategy, 5, queries, tau, dp, np.random.default_rng(9))
    want, usage, risk, sizes = loop_answer(nb, strategy, 5, queries, tau, dp, np.random.default_rng(9))
    assert np.allclose(got.estimates, want)
    assert np.array_equal(got.data_usage, usage) and np.array_equal(got.privacy_risk, risk)
    assert got.neighbours_at_q == sizes
    assert np.array_equal(got.dp_uses + got.privacy_risk, got.data_usage)
    if tau == 0.0:
        assert got.privacy_risk.sum() == 0 and got.dp_uses.sum() > 0  # UserKNN_DP^full: every use protected


def test_reuse_keeps_neighbourhoods_smaller_than_userknn() -> None:
    data = toy(3, n_users=60, n_items=50, rows=1400)
    train, test = folds(len(data), 5, seed=0)[0]
    nb = Neighbourhoods.fit(data.subset(train))
    queries = (data.users[test], data.items[test])
    size = {}
    for strategy in STRATEGIES:
        run = answer(nb, strategy, 5, queries, math.inf, False, np.random.default_rng(0))
        size[strategy] = np.mean([q[-1] for q in run.neighbours_at_q.values()])
        co = run.coratings_at_q
        assert all(v >= 0 for values in co.values() for v in values)
    assert size["reuse"] < size["userknn"] and size["expect"] < size["userknn"]


def test_privacy_metrics() -> None:
    usage = np.array([0.0, 2.0, 5.0, 9.0])
    assert vulnerable_share(usage, 4.0) == 0.5
    assert np.array_equal(privacy_risk(usage, 4.0), [0.0, 2.0, 4.0, 4.0])
    eps = epsilon(usage, np.array([0.0, 2.0, 4.0, 0.0]))
    assert eps[0] == 0.0 and eps[1] == math.inf  # never used; used without DP
    assert eps[2] == pytest.approx(math.log(3 + 4 * 4 / 1)) and eps[3] == pytest.approx(math.log(3))  # eq. 26


def test_tau_the_codes_way_and_the_proses_way() -> None:
    rng = np.random.default_rng(0)
    body, tail = rng.poisson(20, 900), rng.poisson(300, 60)
    usage = np.concatenate([body, tail]).astype(np.float64)
    code, prose = tau_from_usage(usage, "code"), tau_from_usage(usage, "prose")
    assert 0 < code < usage.max() and 0 < prose < usage.max()
    assert prose != code
    with pytest.raises(ValueError, match="unknown τ rule"):
        tau_from_usage(usage, "other")


def test_popularity_bias_and_ndcg() -> None:
    users = np.array([0, 0, 0, 1, 1], np.int64)
    items = np.array([2, 0, 1, 0, 3], np.int64)
    est = np.array([4.5, 3.0, 4.0, 2.0, 5.0])
    truth = np.array([5.0, 1.0, 4.0, 2.0, 4.0])
    top = top_items(users, items, est, n=2)
    assert top[0].tolist() == [2, 1] and top[1].tolist() == [3, 0]
    assert coverage(top, 5) == 0.8
    assert pp_corr(top, np.array([0.1, 0.2, 0.3, 0.4, 0.0])) == pytest.approx(
        np.corrcoef([1, 1, 1, 1, 0], [0.1, 0.2, 0.3, 0.4, 0.0])[0, 1]
    )
    # user 0: relevant (≥ 3.5) at ranks 1 and 2 of 3; user 1: at rank 1 of 2; n = 10 normalises by 3 and 2
    d0 = (1 + 1 / math.log2(3)) / (1 + 1 / math.log2(3) + 1 / math.log2(4))
    d1 = 1 / (1 + 1 / math.log2(3))
    assert ndcg_at(users, items, truth, est, 3.5) == pytest.approx((d0 + d1) / 2)


def test_tau_the_codes_way_is_a_gaussian_density_over_the_histogram_counts() -> None:
    """τ by the code's rule, recomputed by hand: the Gaussian density (bandwidth 50) of the 25
    bin counts on 1,000 points over the usage range, at its second derivative's maximum."""
    usage = np.repeat([5.0, 15, 25, 40, 60, 90, 140, 200, 320], [300, 250, 160, 90, 50, 25, 12, 6, 3])
    counts, edges = np.histogram(usage, bins=25)
    grid = np.linspace(0, edges.max(), 1000)
    density = np.exp(-((grid[:, None] - counts[None, :]) ** 2) / (2 * 50.0**2)).sum(axis=1)
    by_hand = grid[np.argmax(np.gradient(np.gradient(density)))]
    assert tau_from_usage(usage) == pytest.approx(by_hand)


def test_randomized_response_keeps_the_real_rating_three_times_in_four() -> None:
    """User 0's one neighbour (user 1, similarity 1), past τ = 0, answers 4,000 queries for item 1
    alone: the estimate is its answer, its real rating 2 with probability 3/4 (a fair coin, then
    another), else a uniform draw over [1, 5]."""
    n = 4000
    users = np.array([0, 0, 1, 1], np.int64)
    items = np.array([0, 1, 0, 1], np.int64)
    data = Ratings(users, items, np.array([4.0, 2.0, 4.0, 2.0]), 2, 2, (1.0, 5.0))
    nb = Neighbourhoods.fit(data.subset(np.arange(4)))
    run = answer(nb, "userknn", 1, [(0, 1)] * n, 0.0, True, np.random.default_rng(5))
    real = np.isclose(run.estimates, 2.0)
    p, sd = 0.75, math.sqrt(0.75 * 0.25 / n)
    assert abs(real.mean() - p) < 4 * sd  # a binomial bound, seeded
    noise = run.estimates[~real]
    assert (
        noise.min() >= 1.0
        and noise.max() <= 5.0
        and abs(noise.mean() - 3.0) < 4 * math.sqrt(16 / 12 / noise.size)
    )
    assert run.dp_uses[1] == n and run.privacy_risk[1] == 0  # every use protected, counted
    eps = epsilon(run.data_usage, run.privacy_risk)
    assert eps[1] == pytest.approx(math.log(3))
