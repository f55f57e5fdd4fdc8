"""A membership attack as the field reports it: its ROC curve, AUC and TPR at low FPR, sans I/O.

Carlini et al. (S&P 2022, "Membership Inference Attacks From First Principles", §III) argue that
a membership attack is judged by its true-positive rate at a low false-positive rate (0.1%, 1%),
read off the ROC curve on log axes, not by its balanced accuracy: an attack that is right on a
few members with near certainty matters, one that is slightly better than chance on all does not.
Here an attack is a score per example, higher meaning "member"; one threshold is applied to
every example of the population (pooled), unlike the per-victim oracle threshold of 002 §2.5
(``adversary.mia.victim_accuracy``), which is an upper bound no real attacker can set.

A TPR at FPR f is backed by ``non_members · f`` false positives: with fewer than one, the FPR
cannot be told from 0 and the figure says nothing; :class:`TprAt` says whether it is resolved.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]

#: the FPRs the field reports TPR at
LOW_FPRS = (0.001, 0.01)
#: FPRs at which a ROC curve is kept in a run's summary (log-spaced, for a log-log plot)
ROC_GRID = (0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0)


@dataclass(frozen=True)
class Roc:
    """The ROC curve of scores ``members`` against ``non_members`` (higher: member): FPR and TPR
    at every distinct threshold, from "nobody is a member" (0, 0) to "everybody is" (1, 1)."""

    fpr: Floats
    tpr: Floats
    members: int
    non_members: int


@dataclass(frozen=True)
class TprAt:
    """The TPR at one FPR, and whether enough non-members back it (non_members · fpr ≥ 1)."""

    fpr: float
    tpr: float
    resolved: bool


def fpr_key(fpr: float) -> str:
    """How a summary names an FPR (``1e-03``): no dot, so a dotted path can reach it."""
    return f"{fpr:.0e}"


def _scores(values: npt.ArrayLike, what: str) -> Floats:
    a = np.asarray(values, dtype=np.float64).ravel()
    if not len(a):
        raise ValueError(f"a ROC curve needs at least one {what}")
    if not np.isfinite(a).all():
        raise ValueError(f"the {what}' scores hold NaN or infinite values")
    return a


def roc(members: npt.ArrayLike, non_members: npt.ArrayLike) -> Roc:
    """The ROC curve of an attack that calls "member" every example scoring at least a threshold."""
    m = _scores(members, "member")
    n = _scores(non_members, "non-member")
    scores = np.concatenate((m, n))
    labels = np.concatenate((np.ones(len(m)), np.zeros(len(n))))
    order = np.argsort(-scores, kind="mergesort")
    scores, labels = scores[order], labels[order]
    # one point per distinct threshold: the last example of each run of equal scores
    last = np.r_[np.flatnonzero(np.diff(scores)), len(scores) - 1]
    tp = np.cumsum(labels)[last]
    fp = (last + 1) - tp
    tpr = np.r_[0.0, tp / len(m)]
    fpr = np.r_[0.0, fp / len(n)]
    return Roc(fpr=fpr, tpr=tpr, members=len(m), non_members=len(n))


def auc(curve: Roc) -> float:
    """The area under the ROC curve (trapezoids: ties count half, as the Mann-Whitney U does)."""
    return float(np.sum(np.diff(curve.fpr) * (curve.tpr[1:] + curve.tpr[:-1]) / 2.0))


def tpr_at(curve: Roc, fpr: float) -> TprAt:
    """The highest TPR at an FPR of at most ``fpr`` (a threshold an attacker can set)."""
    if not 0.0 <= fpr <= 1.0:
        raise ValueError(f"an FPR is between 0 and 1, not {fpr}")
    ok = curve.fpr <= fpr + 1e-12
    return TprAt(fpr=fpr, tpr=float(curve.tpr[ok].max()), resolved=curve.non_members * fpr >= 1.0)


def balanced_accuracy(curve: Roc) -> float:
    """The best (TPR + TNR) / 2 over the thresholds of one pooled attack."""
    return float(np.max((curve.tpr + 1.0 - curve.fpr) / 2.0))


def points(curve: Roc, grid: tuple[float, ...] = ROC_GRID) -> list[list[float]]:
    """``[fpr, tpr]`` at each FPR of ``grid`` (for a summary and its log-log plot)."""
    return [[f, tpr_at(curve, f).tpr] for f in grid]
