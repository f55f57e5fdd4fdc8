"""The attribute inference attack's parts: eq. 7's features, the public split, the classifier, the
metrics and their baselines (adversary/aia.py)."""

from __future__ import annotations

import numpy as np
import pytest

from adversary.aia import (
    AiaLab,
    AiaSettings,
    attack,
    attack_all,
    baselines,
    changed_items,
    feature,
    inferred_items,
    public_users,
    split,
)
from adversary.models import GMFAttack
from learning import gmf
from learning.attribute_mlp import train
from learning.attributes import Attribute, Attributes


def test_features_are_the_user_row_beside_the_mean_of_the_positive_items() -> None:
    params = {
        "user": np.array([[1.0, 2.0]], np.float32),
        "item": np.arange(8, dtype=np.float32).reshape(4, 2),
    }
    assert feature(params, np.array([0, 2])).tolist() == [1.0, 2.0, 2.0, 3.0]
    without_user = {"item": params["item"]}
    assert feature(without_user, np.array([3])).tolist() == [6.0, 7.0]  # Share less: the item part
    fictive = np.array([9.0, 9.0], np.float32)
    assert feature(without_user, np.array([3]), fictive).tolist() == [9.0, 9.0, 6.0, 7.0]
    assert inferred_items(np.array([0.1, 0.9, 0.5, 0.9]), 2).tolist() == [1, 3]  # ties by id


def test_public_users_train_and_are_never_scored() -> None:
    public = public_users(100, 0.2, seed=4)
    assert public.sum() == 20 and (public == public_users(100, 0.2, seed=4)).all()
    parts = split(range(0, 100, 2), public, AiaSettings(select="validation"))
    train = set(parts.train.tolist()) | set(parts.validation.tolist())
    assert train == {u for u in range(0, 100, 2) if public[u]}  # only observed public users
    assert not set(parts.test.tolist()) & set(np.flatnonzero(public).tolist())
    assert len(parts.validation) == round(0.25 * len(train))
    for select in ("best-test", "last"):  # no validation part: every observed public user trains
        whole = split(range(100), public, AiaSettings(select=select))
        assert len(whole.validation) == 0 and len(whole.train) == 20


def _data(n: int, separable: bool, seed: int = 0) -> tuple[dict[int, np.ndarray], Attribute]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    x = rng.standard_normal((n, 8)).astype(np.float32)
    if separable:
        x[:, 0] += 3.0 * (2 * labels - 1)
    return {u: x[u] for u in range(n)}, Attribute("g", ("a", "b"), labels.astype(np.int64))


def test_the_classifier_reads_a_leaking_feature_and_not_a_silent_one() -> None:
    settings = AiaSettings(public=0.3, seed=1, epochs=60)
    features, attr = _data(400, separable=True)
    score = attack(features, attr, public_users(400, 0.3, 1), settings, train)
    assert score is not None and score.auc is not None and score.auc > 0.95
    assert score.majority["auc"] == 0.5  # a constant guess ranks nothing
    features, attr = _data(400, separable=False)
    blind = attack(features, attr, public_users(400, 0.3, 1), settings, train)
    assert blind is not None and blind.auc is not None and abs(blind.auc - 0.5) < 0.1
    best = attack(
        features,
        attr,
        public_users(400, 0.3, 1),
        AiaSettings(public=0.3, seed=1, epochs=60, select="best-test"),
        train,
    )
    assert (
        best is not None and best.auc is not None and best.auc >= blind.auc - 1e-9
    )  # chosen on the test users


def test_multi_class_attributes_get_micro_and_macro_f1_and_their_baselines() -> None:
    rng = np.random.default_rng(2)
    labels = rng.choice(3, 600, p=[0.6, 0.3, 0.1]).astype(np.int64)
    x = rng.standard_normal((600, 6)).astype(np.float32)
    x[np.arange(600), labels] += 4.0
    attrs = Attributes((Attribute("age", ("y", "m", "o"), labels),))
    got = attack_all(
        {u: x[u] for u in range(600)}, attrs, public_users(600, 0.2, 2), AiaSettings(seed=2, epochs=80), train
    )
    age = got["attributes"]["age"]
    assert age["micro_f1"] > 0.8 > age["majority"]["micro_f1"] + 0.15 and age["macro_f1"] > 0.6
    assert age["majority"]["micro_f1"] == pytest.approx(
        float((labels[~public_users(600, 0.2, 2)] == 0).mean())
    )
    assert got["observed"] == 600 and got["public_observed"] == 120 and got["coverage"] == 1.0
    majority, prior = baselines(np.array([0, 0, 1]), np.array([0, 1, 1, 0]), 2, seed=0)
    assert majority == {"auc": 0.5} and 0.0 <= prior["auc"] <= 1.0


def test_too_few_users_on_either_side_say_nothing() -> None:
    features, attr = _data(10, separable=True)
    public = np.zeros(10, dtype=bool)
    public[0] = True
    assert (
        attack(features, attr, public, AiaSettings(epochs=5), train) is None
    )  # one public user cannot train


def test_changed_items_are_the_rows_that_moved_most_from_the_reference() -> None:
    reference = {"item": np.zeros((5, 2), np.float32)}
    params = {"item": np.array([[0, 0.1], [3, 0], [0, 0], [1, 1], [0, -2]], np.float32)}
    assert changed_items(params, reference, 2).tolist() == [1, 4]
    assert changed_items(params, reference, 9).tolist() == [0, 1, 2, 3, 4]
    assert changed_items(params, params, 2).tolist() == [0, 1]  # nothing moved: ties by id


def test_share_less_features_have_no_user_part_or_a_fictive_user_trained_on_the_items() -> None:
    rng = np.random.default_rng(0)
    full = {
        gmf.USER: rng.standard_normal((1, 4)).astype(np.float32),
        gmf.ITEM: rng.standard_normal((30, 4)).astype(np.float32),
        gmf.H: np.ones(4, np.float32),
        gmf.B: np.zeros(1, np.float32),
    }
    shared = {k: v for k, v in full.items() if k != gmf.USER}
    attrs = Attributes((Attribute("g", ("a", "b"), np.zeros(3, np.int64)),))
    positives = {0: np.array([2, 5, 7]), 1: np.array([1]), 2: np.array([3])}

    def lab(items: str, user_part: str) -> AiaLab:
        return AiaLab(
            attrs, AiaSettings(), train, GMFAttack(), positives, 2, items=items, user_part=user_part
        )

    assert lab("oracle", "absent").feature_of(0, full).shape == (8,)  # [θ_u, item mean]
    absent = lab("oracle", "absent").feature_of(0, shared)
    np.testing.assert_allclose(absent, full[gmf.ITEM][[2, 5, 7]].mean(0))
    fictive = lab("oracle", "fictive").feature_of(0, shared)
    e_a = fictive[:4]
    assert fictive.shape == (8,) and np.abs(e_a).sum() > 0
    q = shared[gmf.ITEM] * shared[gmf.H]
    liked = (q[[2, 5, 7]] @ e_a).mean()
    others = (np.delete(q, [2, 5, 7], axis=0) @ e_a).mean()
    assert liked > others  # e_A likes I'_u
    np.testing.assert_allclose(lab("oracle", "fictive").feature_of(0, shared), fictive)  # seeded
    moved = {**shared, gmf.ITEM: shared[gmf.ITEM].copy()}
    moved[gmf.ITEM][[4, 9]] += 5.0
    changed = lab("changed", "absent").feature_of(0, moved, shared)
    np.testing.assert_allclose(changed, moved[gmf.ITEM][[4, 9]].mean(0))
    with pytest.raises(ValueError, match="needs a reference"):
        lab("changed", "absent").feature_of(0, moved)


def test_a_classifier_that_diverges_is_scored_at_its_last_sound_epoch() -> None:
    # a step that leaves a weight non-finite is undone and training stops there (a gossip
    # observer with 7 public users and 21 classes diverged at 004's rate and took its run down)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((40, 6)).astype(np.float32) * 50
    y = rng.integers(0, 3, 40).astype(np.int64)
    yielded = [p()[0] for p in train(x, y, (x,), 3, 50, 1e8, 2000, 0)]
    assert 0 < len(yielded) < 50 and all(np.isfinite(p).all() for p in yielded)
    features = {u: x[u] for u in range(40)}
    attr = Attribute("a", ("x", "y", "z"), y)
    public = public_users(40, 0.5, 1)
    for select in ("last", "best-test", "validation"):
        score = attack(
            features, attr, public, AiaSettings(public=0.5, seed=1, lr=1e8, epochs=50, select=select), train
        )
        assert score is not None and score.epoch < 50 and score.micro_f1 is not None, select
