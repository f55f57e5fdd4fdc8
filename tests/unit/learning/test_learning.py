"""Leave-one-out split, negative sampling, HR@K, and the two training backends agreeing."""

from __future__ import annotations

import numpy as np
import pytest

from learning import gmf
from learning.dp import DPConfig
from learning.interactions import DataError, Interactions
from learning.learner import GMFLearner, TrainConfig
from learning.metrics import hit_at_k, ndcg_at_k, random_hit_ratio, rank_of, recall_at_k, reciprocal_rank
from learning.negatives import sample_negatives
from learning.split import leave_one_out


def toy() -> Interactions:
    rows = [("a", "1", 5), ("a", "2", 1), ("a", "3", 9), ("b", "2", 2), ("b", "4", 3)]
    rows += [("a", str(i), 0) for i in range(10, 140)]
    rows += [("b", str(i), 0) for i in range(140, 200)]
    rows += [("c", str(i), 0) for i in range(200, 400)]
    return Interactions.from_raw([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])


def test_leave_one_out_holds_out_the_latest_item() -> None:
    data = toy()
    users = leave_one_out(data, seed=0)
    a = users[0]
    assert data.raw_item_ids[a.test_item] == "3"
    assert a.test_item not in a.train_items and len(a.train_items) == 132
    assert len(a.test_negatives) == 100 == len(set(a.test_negatives))
    assert not set(a.test_negatives) & (set(a.train_items) | {a.test_item})
    assert data.raw_item_ids[users[1].test_item] == "4"


def test_leave_one_out_refuses_users_with_one_item() -> None:
    data = Interactions.from_raw(["a", "a", "b"], ["1", "2", "1"], [0, 1, 2])
    with pytest.raises(DataError, match="at least 2"):
        leave_one_out(data, 0, n_negatives=0)


def test_ml100k_split(ml100k: Interactions) -> None:
    assert (ml100k.n_users, ml100k.n_items, len(ml100k)) == (943, 1682, 100_000)
    users = leave_one_out(ml100k, seed=0)
    assert sum(len(u.train_items) for u in users) == 100_000 - 943


def test_negatives_avoid_excluded_items() -> None:
    excluded = np.zeros(50, bool)
    excluded[:45] = True
    negs = sample_negatives(np.random.default_rng(0), excluded, 1000)
    assert negs.min() >= 45 and len(negs) == 1000


def test_hit_at_k_counts_ties_against_the_test_item() -> None:
    assert hit_at_k(0.9, np.array([0.1] * 100, np.float32), 1)
    assert not hit_at_k(0.5, np.array([0.5] * 100, np.float32), 20)
    assert random_hit_ratio(20, 100) == pytest.approx(20 / 101)


def test_ndcg_at_k_of_one_held_out_item_is_one_over_log2_of_its_position() -> None:
    assert rank_of(0.9, np.array([0.1, 0.95, 0.9, 0.2], np.float32)) == 2  # a tie counts against it
    assert rank_of(0.9, np.array([0.1, float("nan")], np.float32)) is None
    assert rank_of(float("nan"), np.array([0.1], np.float32)) is None
    # 1-based positions 1, 2, 10: DCG 1, 1/log2(3) = 0.6309, 1/log2(11) = 0.2891; the ideal DCG is 1
    assert ndcg_at_k(0, 10) == 1.0
    assert ndcg_at_k(1, 10) == pytest.approx(0.63093, abs=1e-5)
    assert ndcg_at_k(9, 10) == pytest.approx(0.28906, abs=1e-5)
    assert ndcg_at_k(10, 10) == 0.0 and ndcg_at_k(None, 10) == 0.0


@pytest.mark.parametrize("model", ["gmf", "prme"])
def test_a_learners_ranking_figures_come_from_the_same_ranking_as_its_utility(model: str) -> None:
    from tests.unit.learning.test_workbench import learners

    for learner in learners(model, bench=False)[0][:4]:
        learner.local_update()
        utility, ndcg, recall, rr = learner.ranking()
        negatives = len(learner._eval_items) - 1
        rank = round(learner.test_rank() * negatives)  # test_rank: the share of negatives at or above it
        assert ndcg == ndcg_at_k(rank, learner.top_k)
        assert rr == 1 / (rank + 1)
        assert recall == (1.0 if rank < learner.top_k else 0.0)
        assert utility == learner.evaluate() and (utility > 0) == (rank < learner.top_k)


def test_recall_and_reciprocal_rank_of_one_held_out_item() -> None:
    assert recall_at_k(0, 10) == 1.0 and recall_at_k(9, 10) == 1.0
    assert recall_at_k(10, 10) == 0.0 and recall_at_k(None, 10) == 0.0
    assert reciprocal_rank(0) == 1.0 and reciprocal_rank(3) == 0.25 and reciprocal_rank(None) == 0.0


@pytest.mark.parametrize("model", ["gmf", "prme"])
def test_the_full_catalogue_ranks_among_every_untouched_item_and_never_better_than_the_sample(
    model: str,
) -> None:
    from tests.unit.learning.test_workbench import learners

    for learner in learners(model, bench=False)[0][:6]:
        learner.local_update()
        sampled = learner.ranking()
        learner.rank_all_items()
        d = learner.data
        assert learner.candidates == d.n_items - int(np.count_nonzero(d.interacted)) + 1
        assert learner._eval_items[0] == d.test_item
        assert not set(learner._eval_items[1:].tolist()) & set(np.flatnonzero(d.interacted).tolist())
        full = learner.ranking()
        # the sampled negatives are among the untouched items: a rank among all of them is no better
        assert full.rr <= sampled.rr and full.ndcg <= sampled.ndcg and full.utility <= sampled.utility
        scores = learner._scores(learner.params, learner._eval_items, d.test_time)
        assert full.rr == 1 / (1 + int(np.count_nonzero(scores[1:] >= scores[0])))


@pytest.mark.parametrize(("sparse", "tau"), [(True, 0.0), (False, 0.0), (True, 0.05), (False, 0.05)])
def test_numpy_and_fused_backends_match_torch_reference(sparse: bool, tau: float) -> None:
    users = leave_one_out(toy(), seed=0)
    init = gmf.init_params(toy().n_items, 8, seed=3)
    learners = [
        GMFLearner(
            users[0],
            init,
            TrainConfig(
                factors=8, lr=0.01, batch_size=64, sparse_items=sparse, backend=b, share_less_tau=tau
            ),
            np.random.default_rng(7),
        )
        for b in ("numpy", "torch", "fused")
    ]
    for _ in range(5):
        steps = [learner.local_update() for learner in learners]
        assert steps[0] == steps[1] == steps[2] == 11
    fast, ref, fused = learners
    for k in init:
        assert not np.allclose(fast.params[k], init[k])
        np.testing.assert_allclose(fast.params[k], ref.params[k], rtol=2e-4, atol=2e-6)
        np.testing.assert_allclose(fused.params[k], ref.params[k], rtol=2e-4, atol=2e-6)
        # the same arithmetic in another order: the fused kernel is within rounding of numpy's
        np.testing.assert_allclose(fused.params[k], fast.params[k], rtol=1e-4, atol=1e-6)


def test_training_lowers_the_rank_of_held_out_items(ml100k: Interactions) -> None:
    data = ml100k.subset_users(30)
    users = leave_one_out(data, seed=0)
    init = gmf.init_params(data.n_items, 16, seed=0)
    learners = [
        GMFLearner(u, init, TrainConfig(factors=16, lr=0.01), np.random.default_rng(u.user)) for u in users
    ]
    before = np.mean([lrn.test_rank() for lrn in learners])
    for _ in range(5):
        for lrn in learners:
            lrn.local_update()
    after = np.mean([lrn.test_rank() for lrn in learners])
    assert after < before - 0.15, (before, after)


def test_share_less_regulariser_holds_own_items_near_their_anchor() -> None:
    users = leave_one_out(toy(), seed=0)
    init = gmf.init_params(toy().n_items, 8, seed=3)
    moved = {}
    for tau in (0.0, 0.5):
        lrn = GMFLearner(
            users[0],
            init,
            TrainConfig(factors=8, lr=0.05, batch_size=32, local_epochs=3, share_less_tau=tau),
            np.random.default_rng(1),
        )
        lrn.local_update()
        own = users[0].train_items
        moved[tau] = float(np.linalg.norm(lrn.params["item"][own] - init["item"][own], axis=1).mean())
    assert moved[0.5] < 0.8 * moved[0.0], moved


def test_share_less_grad_is_tau_times_unit_direction() -> None:
    from learning.gmf_numpy import _share_less_grad

    q = np.array([[3.0, 4.0], [1.0, 1.0], [2.0, 2.0]], np.float32)
    anchor = np.array([[0.0, 0.0], [1.0, 1.0], [0.0, 0.0]], np.float32)
    y = np.array([1.0, 1.0, 0.0], np.float32)
    g = _share_less_grad(q, anchor, y, tau=0.5)
    np.testing.assert_allclose(g, [[0.3, 0.4], [0.0, 0.0], [0.0, 0.0]], atol=1e-7)


def test_share_less_merge_leaves_the_user_embedding_alone() -> None:
    users = leave_one_out(toy(), seed=0)
    init = gmf.init_params(toy().n_items, 8, seed=3)
    lrn = GMFLearner(
        users[0], init, TrainConfig(factors=8), np.random.default_rng(0), shared=gmf.SHARE_LESS_NAMES
    )
    assert "user" not in lrn.snapshot() and "user" not in lrn.spec
    other = {k: v + 1.0 for k, v in lrn.snapshot().items()}
    user_before = lrn.params["user"].copy()
    item_before = lrn.params["item"].copy()
    lrn.merge([other])
    np.testing.assert_array_equal(lrn.params["user"], user_before)
    np.testing.assert_allclose(lrn.params["item"], item_before + 0.5, rtol=1e-6)


def test_compiled_negatives_are_the_numpy_ones() -> None:
    from learning.gmf_fused import draw_negatives

    excluded = np.zeros(50, dtype=bool)
    excluded[[0, 3, 4, 10, 11, 12, 49]] = True
    for seed in range(20):
        want = sample_negatives(np.random.default_rng(seed), excluded, 137)
        got = draw_negatives(np.random.default_rng(seed), excluded, 137, 43)
        np.testing.assert_array_equal(got, want)
        assert not excluded[got].any()


def test_shuffled_examples_is_the_permuted_concatenation() -> None:
    from learning.gmf_fused import shuffled_examples

    pos = np.array([5, 9, 2], np.int64)
    neg = np.array([1, 7, 7, 3, 0, 4], np.int64)
    perm = np.random.default_rng(3).permutation(9)
    items, labels = shuffled_examples(pos, neg, perm)
    np.testing.assert_array_equal(items, np.concatenate((pos, neg))[perm])
    np.testing.assert_array_equal(labels, np.concatenate((np.ones(3), np.zeros(6)))[perm].astype(np.float32))
    assert labels.dtype == np.float32


def test_sigmoid_past_float32_exp_range_is_its_limit_without_a_warning() -> None:
    """Long runs grow logits past -88, where float32 exp(-logit) overflows to inf: σ is then
    exactly 0 (and 1 at the other end), and no RuntimeWarning is printed for it (a 1,600-round
    Share-less run printed them from the score, the training step and the attacker's fit)."""
    import warnings

    from adversary.models import GMFAttack

    params = gmf.init_params(6, 4, seed=0)
    params[gmf.ITEM][:] = np.array([[-40.0] * 4, [40.0] * 4, [0.01] * 4, [-40.0] * 4, [1.0] * 4, [2.0] * 4])
    params[gmf.USER][:] = 30.0
    params[gmf.H][:] = 1.0
    users = leave_one_out(toy(), seed=0)
    big = gmf.init_params(toy().n_items, 4, seed=0)
    big[gmf.ITEM] *= 1e5
    big[gmf.USER][:] = 1e3
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning fails the test
        s = gmf.score(params, params[gmf.USER][0], np.arange(6))
        learner = GMFLearner(
            users[0], big, TrainConfig(factors=4, lr=0.01, backend="numpy"), np.random.default_rng(0)
        )
        learner.local_update()
        private = GMFLearner(  # DP-SGD's clipped per-example sums (learning/gmf_numpy.py)
            users[0],
            big,
            TrainConfig(factors=4, lr=0.01, backend="numpy", dp=DPConfig(noise_multiplier=0.5)),
            np.random.default_rng(0),
        )
        private.local_update()
        fitted = GMFAttack().fit_user(params, np.array([1, 4]), np.random.default_rng(0), np.full(4, 10.0))
    assert s[0] == 0.0 and s[3] == 0.0 and s[1] == 1.0 and 0.5 < s[2] < 1.0
    assert learner.finite() and private.finite() and np.isfinite(fitted).all()
