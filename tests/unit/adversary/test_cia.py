"""CIA (000 §IV): eq. 4, EvaluateModel, top-K, ground truth and the attack metrics on hand tables."""

from __future__ import annotations

import numpy as np
import pytest

from adversary.cia import CIAObserver
from adversary.community import accuracy, best_share, jaccard, summarize, top_k, true_community, upper_bound
from adversary.models import GMFAttack, PRMEAttack
from learning import gmf, prme


def gmf_model(user: float, items: list[float], h: float = 1.0, b: float = 0.0) -> dict[str, np.ndarray]:
    return {
        gmf.USER: np.array([[user]], np.float32),
        gmf.ITEM: np.array([[x] for x in items], np.float32),
        gmf.H: np.array([h], np.float32),
        gmf.B: np.array([b], np.float32),
    }


def sigmoid(x: float) -> float:
    return float(1 / (1 + np.exp(-x)))


def test_momentum_follows_eq4_and_scores_mean_relevance_of_the_target() -> None:
    obs = CIAObserver(GMFAttack(), [np.array([1, 3])], k=1, momentum=0.9)
    obs.observe(7, gmf_model(1.0, [0.0, 2.0, 0.0, 4.0]))
    np.testing.assert_allclose(obs.v[7][gmf.ITEM][:, 0], [2.0, 4.0])  # v⁰ = Θ⁰, target rows only
    assert obs.scores[7][0] == pytest.approx((sigmoid(2.0) + sigmoid(4.0)) / 2)
    obs.observe(7, gmf_model(3.0, [9.0, 0.0, 9.0, -2.0]))
    v = obs.v[7]
    np.testing.assert_allclose(v[gmf.ITEM][:, 0], [0.9 * 2 + 0.1 * 0, 0.9 * 4 + 0.1 * -2], rtol=1e-6)
    np.testing.assert_allclose(v[gmf.USER], [[0.9 * 1 + 0.1 * 3]], rtol=1e-6)
    u = 1.2
    expected = (sigmoid(u * 1.8) + sigmoid(u * 3.4)) / 2  # EvaluateModel on v, not on Θ
    assert obs.scores[7][0] == pytest.approx(expected, rel=1e-6)


def test_without_momentum_the_latest_model_counts() -> None:
    obs = CIAObserver(GMFAttack(), [np.array([0])], k=1, momentum=0.0)
    obs.observe(1, gmf_model(1.0, [5.0]))
    obs.observe(1, gmf_model(1.0, [-5.0]))
    assert obs.scores[1][0] == pytest.approx(sigmoid(-5.0))


def test_prediction_is_the_top_k_observed_users_with_the_adversary_excluded() -> None:
    target = np.array([0])
    obs = CIAObserver(GMFAttack(), [target], k=2, momentum=0.5, exclude=[{4}])
    for user, rel in ((1, 0.5), (2, 3.0), (3, -1.0), (4, 9.0)):
        obs.observe(user, gmf_model(1.0, [rel]))
    pred = obs.predict()
    assert pred.users == [2, 1]  # 4 scores highest but is the adversary itself
    assert pred.scores == pytest.approx([sigmoid(3.0), sigmoid(0.5)])
    assert obs.observed == {1, 2, 3, 4}


def test_many_targets_share_one_kept_model() -> None:
    obs = CIAObserver(GMFAttack(), [np.array([0, 1]), np.array([1, 2]), np.array([3])], k=1, momentum=0.0)
    obs.observe(0, gmf_model(1.0, [1.0, 2.0, 3.0, 4.0]))
    assert obs.v[0][gmf.ITEM].shape == (4, 1)
    expected = [
        (sigmoid(1) + sigmoid(2)) / 2,
        (sigmoid(2) + sigmoid(3)) / 2,
        sigmoid(4),
    ]
    np.testing.assert_allclose(obs.scores[0], expected, rtol=1e-6)


def test_share_less_scores_with_a_fictive_user_trained_on_the_target() -> None:
    rng = np.random.default_rng(0)
    n, d = 40, 8
    item = rng.normal(0, 1, (n, d)).astype(np.float32)
    item[:5] = rng.normal(0, 1, d) + rng.normal(0, 0.1, (5, d))  # the target items look alike
    ref = {gmf.ITEM: item, gmf.H: np.ones(d, np.float32), gmf.B: np.zeros(1, np.float32)}
    target = np.arange(5)
    obs = CIAObserver(GMFAttack(), [target], k=1, momentum=0.0, fictive_user=True)
    with pytest.raises(RuntimeError, match="set_reference"):
        obs.observe(0, ref)
    obs.set_reference(ref, rng)
    fan = dict(ref)
    fan[gmf.ITEM] = item.copy()
    fan[gmf.ITEM][:5] *= 3.0  # a user whose training pushed the target items further out
    other = dict(ref)
    other[gmf.ITEM] = item.copy()
    other[gmf.ITEM][:5] *= -1.0
    obs.observe(1, fan)
    obs.observe(2, other)
    assert gmf.USER not in obs.v[1]  # nothing user-side is kept or needed
    assert obs.predict().users == [1]


def test_scoring_one_user_row_per_item_is_bit_identical_and_leaves_the_model_alone() -> None:
    rng = np.random.default_rng(3)
    n, d = 300, 32
    params = {
        gmf.ITEM: rng.normal(0, 1, (n, d)).astype(np.float32),
        gmf.H: rng.normal(0, 1, d).astype(np.float32),
        gmf.B: np.array([0.1], np.float32),
    }
    before = params[gmf.ITEM].copy()
    rows = rng.integers(0, n, 1000)
    users = rng.normal(0, 1, (1000, d)).astype(np.float32)
    by_formula = 1.0 / (1.0 + np.exp(-((params[gmf.ITEM][rows] * users) @ params[gmf.H] + params[gmf.B][0])))
    got = gmf.score(params, users, rows)
    assert got.tobytes() == np.asarray(by_formula, dtype=np.float32).tobytes()
    np.testing.assert_array_equal(params[gmf.ITEM], before)  # the product went into the gather's copy
    got = gmf.score(params, users[:300], slice(0, 300))  # a slice is a view: never written to
    np.testing.assert_array_equal(params[gmf.ITEM], before)
    half = {**params, gmf.ITEM: params[gmf.ITEM].astype(np.float16)}  # a 16-bit table, float32 users
    want = (half[gmf.ITEM][rows] * users) @ params[gmf.H] + params[gmf.B][0]
    got = gmf.score(half, users, rows)
    assert got.tobytes() == np.asarray(1.0 / (1.0 + np.exp(-want)), dtype=np.float32).tobytes()


def test_share_less_scores_with_the_e_a_of_now_after_retraining() -> None:
    rng = np.random.default_rng(1)
    n, d = 30, 4
    item = rng.normal(0, 1, (n, d)).astype(np.float32)
    ref = {gmf.ITEM: item, gmf.H: np.ones(d, np.float32), gmf.B: np.zeros(1, np.float32)}
    obs = CIAObserver(GMFAttack(), [np.arange(4), np.arange(4, 9)], k=1, momentum=0.0, fictive_user=True)
    obs.set_reference(ref, rng)
    first = obs.observe(0, ref)
    scored_first = obs.scores[0].copy()
    moved = {**ref, gmf.ITEM: item[::-1].copy()}
    obs.set_reference(moved, rng)  # e_A retrained: the next observation scores with the new one
    obs.observe(1, first)
    refs = obs._refs  # type: ignore[attr-defined]
    assert refs is not None
    for t, target in enumerate(obs.targets):
        rel = gmf.score(first, np.repeat(refs[t][None], len(target), 0), np.asarray(target))
        assert obs.scores[1][t] == pytest.approx(float(np.mean(rel.astype(np.float64))), rel=1e-6)
    assert not np.array_equal(obs.scores[1], scored_first)


def test_prme_attack_uses_the_preference_space_only() -> None:
    p = prme.init_params(10, 4, seed=0)
    kept = PRMEAttack().keep(p, np.array([2, 5]))
    assert set(kept) == {prme.USER_P, prme.ITEM_P}
    rel = PRMEAttack().relevance(kept, kept[prme.USER_P][0], np.array([0, 1]))
    expected = -((p[prme.USER_P][0] - p[prme.ITEM_P][[2, 5]]) ** 2).sum(1)
    np.testing.assert_allclose(rel, expected, rtol=1e-6)


def test_jaccard_ground_truth_and_accuracy() -> None:
    users = [np.array([0, 1, 2]), np.array([0, 1]), np.array([5, 6]), np.array([0, 1, 2, 3])]
    target = np.array([0, 1, 2])
    np.testing.assert_allclose(jaccard(target, users, 8), [1.0, 2 / 3, 0.0, 3 / 4])
    assert true_community(target, users, 8, 2).tolist() == [0, 3]
    assert true_community(target, users, 8, 2, exclude=[0]).tolist() == [3, 1]
    assert accuracy(np.array([3, 2]), np.array([3, 1]), 2) == 0.5
    assert upper_bound({1, 2}, np.array([3, 1]), 2) == 0.5


def test_top_k_breaks_ties_by_lower_id() -> None:
    assert top_k(np.array([1.0, 2.0, 2.0, 0.5]), 2).tolist() == [1, 2]


def test_summary_metrics_follow_the_paper_definitions() -> None:
    per_round = [[0.1, 0.2, 0.3], [0.5, 0.2, 0.8, 0.1], [0.2]]
    bounds = [[0.5], [0.9, 0.7], [1.0]]
    s = summarize([1, 2, 3], per_round, bounds, k=10, n_users=100)
    assert s.max_aac == pytest.approx(0.4) and s.round_of_max == 2
    assert s.best10_aac == 0.8  # best 10% of 4 adversaries: the single best one
    assert s.upper_bound == pytest.approx(0.8) and s.random_bound == 0.1
    assert best_share([0.1 * i for i in range(20)], 0.1) == pytest.approx(1.8)


def test_observer_refuses_bad_settings_and_mismatched_observations() -> None:
    with pytest.raises(ValueError, match="momentum"):
        CIAObserver(GMFAttack(), [np.array([0])], momentum=1.0)
    with pytest.raises(ValueError, match="at least one item"):
        CIAObserver(GMFAttack(), [np.array([], np.int64)])
    obs = CIAObserver(GMFAttack(), [np.array([0])], momentum=0.5)
    obs.observe(0, gmf_model(1.0, [1.0]))
    with pytest.raises(ValueError, match="does not match"):
        obs.fold(1, {gmf.ITEM: np.zeros((2, 1), np.float32)})


def test_half_precision_models_are_observed_like_full_precision_ones() -> None:
    full = gmf_model(1.0, [0.5, 2.0, -1.0])
    half = {k: v.astype(np.float16) for k, v in full.items()}
    a = CIAObserver(GMFAttack(), [np.array([0, 2])], k=1)
    b = CIAObserver(GMFAttack(), [np.array([0, 2])], k=1)
    a.observe(1, full)
    b.observe(1, half)
    assert a.scores[1][0] == pytest.approx(b.scores[1][0])
    assert b.v[1][gmf.ITEM].dtype == np.float32


# -- the readings of eq. 4 (adversary/momentum.py) ---------------------------------------------


def _item_after(estimator: str, beta: float, values: list[float], initial: float = 0.0) -> float:
    """The kept item row after observing one user's models whose only item value is ``values``."""
    theta0 = gmf_model(0.0, [initial])
    obs = CIAObserver(GMFAttack(), [np.array([0])], k=1, momentum=beta, estimator=estimator, initial=theta0)
    for x in values:
        obs.observe(4, gmf_model(1.0, [x]))
    assert obs.counts == {4: len(values)}
    return float(obs.v[4][gmf.ITEM][0, 0])


@pytest.mark.parametrize(
    ("estimator", "by_hand"),
    [
        # β = 0.5, observations 8, 4, 2 (θ_0 = 6 for init):
        ("first", 4.0),  # v¹ = 8; v² = .5·8 + .5·4 = 6; v³ = .5·6 + .5·2 = 4
        ("zero", 3.0),  # v¹ = .5·8 = 4; v² = .5·4 + .5·4 = 4; v³ = .5·4 + .5·2 = 3
        ("debiased", 3.0 / 0.875),  # zero's v³ / (1 − .5³)
        ("init", 3.75),  # v⁰ = 6; v¹ = 7; v² = 5.5; v³ = 3.75
    ],
)
def test_each_reading_of_eq4_matches_the_hand_computed_value(estimator: str, by_hand: float) -> None:
    assert _item_after(estimator, 0.5, [8.0, 4.0, 2.0], initial=6.0) == pytest.approx(by_hand)


def test_debiased_is_the_running_mean_while_beta_is_near_one() -> None:
    xs = [1.0, 5.0, 3.0, 7.0]
    assert _item_after("debiased", 0.999, xs) == pytest.approx(np.mean(xs), rel=3e-3)
    assert _item_after("debiased", 0.999, xs[:1]) == pytest.approx(1.0)  # v̂¹ = Θ¹, as first
    assert _item_after("zero", 0.999, xs[:1]) == pytest.approx(0.001)  # (1 − β)·Θ¹
    assert _item_after("first", 0.999, xs) == pytest.approx(1.0 + 0.001 * (5 - 1), rel=1e-2)


def test_without_momentum_every_reading_is_the_latest_model() -> None:
    for estimator in ("first", "zero", "debiased", "init"):
        assert _item_after(estimator, 0.0, [8.0, -3.0], initial=6.0) == pytest.approx(-3.0)


def test_unknown_or_incomplete_estimators_are_refused() -> None:
    with pytest.raises(ValueError, match="estimator"):
        CIAObserver(GMFAttack(), [np.array([0])], estimator="median")
    with pytest.raises(ValueError, match="θ_0"):
        CIAObserver(GMFAttack(), [np.array([0])], estimator="init")


def test_checkpoint_keeps_the_observation_counts_and_the_reading() -> None:
    obs = CIAObserver(GMFAttack(), [np.array([0])], k=1, momentum=0.9, estimator="debiased")
    for x in (1.0, 2.0, 3.0):
        obs.observe(2, gmf_model(1.0, [x]))
    obs.observe(5, gmf_model(1.0, [9.0]))
    state = obs.state()
    again = CIAObserver(GMFAttack(), [np.array([0])], k=1, momentum=0.9, estimator="debiased")
    again.restore(state)
    assert again.counts == {2: 3, 5: 1}
    obs.observe(2, gmf_model(1.0, [4.0]))
    again.observe(2, gmf_model(1.0, [4.0]))
    np.testing.assert_array_equal(again.v[2][gmf.ITEM], obs.v[2][gmf.ITEM])
    other = CIAObserver(GMFAttack(), [np.array([0])], k=1, momentum=0.9, estimator="first")
    with pytest.raises(ValueError, match="debiased"):
        other.restore(state)
    old = {k: v for k, v in state.items() if k not in ("counts", "estimator")}  # before counts existed
    with pytest.raises(ValueError, match="'first' estimator"):  # only 'first' wrote such files
        again.restore(old)
    first = CIAObserver(GMFAttack(), [np.array([0])], k=1, momentum=0.9)
    first.restore(old)  # 'first' only asks whether u was seen before
    assert first.counts == {2: 1, 5: 1}
