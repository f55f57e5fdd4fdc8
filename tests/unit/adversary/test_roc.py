"""The ROC curve, AUC and TPR at low FPR of a membership attack (adversary/roc.py), against
scikit-learn on made-up scores, and the pooled MPE figures a run reports."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score, roc_curve

from adversary.evaluation import AttackLab, Victim
from adversary.roc import auc, balanced_accuracy, points, roc, tpr_at


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_curve_and_its_area_are_scikit_learns(seed: int) -> None:
    rng = np.random.default_rng(seed)
    members = rng.normal(0.6, 1.0, 700).round(1)  # rounded: many ties, as MPE scores have
    non_members = rng.normal(0.0, 1.0, 1300).round(1)
    curve = roc(members, non_members)
    y = np.r_[np.ones(700), np.zeros(1300)]
    s = np.r_[members, non_members]
    fpr, tpr, _ = roc_curve(y, s, drop_intermediate=False)
    np.testing.assert_allclose(curve.fpr, fpr)
    np.testing.assert_allclose(curve.tpr, tpr)
    assert auc(curve) == pytest.approx(roc_auc_score(y, s))
    # the TPR at an FPR is the best threshold whose FPR does not exceed it
    for f in (0.001, 0.01, 0.1):
        assert tpr_at(curve, f).tpr == pytest.approx(tpr[fpr <= f].max())
    best = max((t + 1 - p) / 2 for p, t in zip(fpr, tpr, strict=True))
    assert balanced_accuracy(curve) == pytest.approx(best)


def test_perfect_random_and_inverted_attacks() -> None:
    perfect = roc([2.0, 3.0, 4.0], [0.0, 1.0])
    assert auc(perfect) == 1.0 and tpr_at(perfect, 0.0).tpr == 1.0 and balanced_accuracy(perfect) == 1.0
    same = roc([1.0] * 50, [1.0] * 50)
    assert auc(same) == 0.5 and tpr_at(same, 0.5).tpr == 0.0  # one threshold: all or nothing
    inverted = roc([0.0, 1.0], [2.0, 3.0])
    assert auc(inverted) == 0.0
    assert [p[0] for p in points(perfect)][-1] == 1.0 and points(perfect)[-1][1] == 1.0


def test_an_fpr_too_few_non_members_back_is_said_unresolved() -> None:
    curve = roc(np.arange(10.0), np.arange(500.0))
    assert not tpr_at(curve, 0.001).resolved  # 500 · 0.001 < 1 false positive
    assert tpr_at(curve, 0.01).resolved  # 5 false positives
    assert tpr_at(roc([1.0], np.arange(1000.0)), 0.001).resolved


def test_bad_scores_are_refused() -> None:
    with pytest.raises(ValueError, match="at least one member"):
        roc([], [1.0])
    with pytest.raises(ValueError, match="at least one non-member"):
        roc([1.0], [])
    with pytest.raises(ValueError, match="NaN"):
        roc([np.nan], [1.0])
    with pytest.raises(ValueError, match="between 0 and 1"):
        tpr_at(roc([1.0], [0.0]), 1.5)


def test_the_lab_reports_the_pooled_attack_beside_the_oracle_one() -> None:
    """Members a GMF scores high, non-members low, on every victim: both attacks succeed; the
    pooled figures are one threshold's over all victims' examples."""
    rng = np.random.default_rng(3)
    lab = AttackLab(None, mia=True)
    victims = []
    for _ in range(20):
        scores = rng.uniform(0.05, 0.3, 100).astype(np.float32)
        train = rng.choice(100, 30, replace=False)
        scores[train] = rng.uniform(0.6, 0.99, 30)
        held = np.setdiff1d(np.arange(100), train)[:5]
        victims.append(Victim("gmf", scores, train.astype(np.int64), held.astype(np.int64)))
    row = lab.evaluate_mia(1, victims)
    assert row is not None and row["accuracy"] == pytest.approx(1.0)
    pooled = row["pooled"]
    assert pooled["auc"] == pytest.approx(1.0) and pooled["members"] == 600 and pooled["non_members"] == 100
    assert pooled["tpr_at_fpr"] == {"1e-03": 1.0, "1e-02": 1.0}  # keys without a dot: a path reaches them
    assert pooled["resolved"] == {"1e-03": False, "1e-02": True}  # 100 non-members
    summary = lab.mia_summary()
    assert summary is not None and summary["pooled"]["max_auc"] == pytest.approx(1.0)
    assert summary["pooled"]["final_roc"][-1] == [1.0, 1.0]


def test_the_membership_figures_reach_metrics() -> None:
    from types import SimpleNamespace

    from p2pnode.nodes.node import NodeRuntime
    from p2pnode.telemetry.metrics import Metrics

    metrics = Metrics()
    row = {
        "accuracy": 0.7,
        "pooled": {"auc": 0.6, "balanced_accuracy": 0.55, "tpr_at_fpr": {"1e-03": 0.02, "1e-02": 0.05}},
        "audit_epsilon": 1.5,
    }
    NodeRuntime.publish_mia(SimpleNamespace(_metrics=metrics), "omniscient", row)  # type: ignore[arg-type]

    def value(figure: str) -> float | None:
        return metrics.registry.get_sample_value("p2pnode_mia", {"observer": "omniscient", "figure": figure})

    assert value("oracle_accuracy") == 0.7 and value("auc") == 0.6 and value("balanced_accuracy") == 0.55
    assert value("tpr_at_fpr_1e-03") == 0.02 and value("tpr_at_fpr_1e-02") == 0.05
    assert value("audit_epsilon") == 1.5
