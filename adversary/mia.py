"""Membership inference on recommendation models, sans I/O.

Two attacks, both built on the Modified Prediction Entropy (MPE) of Song and Mittal:

- **MPE attack** (002 §2.5, eq. 3, 4 and 6): an omniscient observer takes a node's current model θ
  and calls an interaction (u, i) a member when M_MPE(θ[u], i) ≤ τ̃. The threshold τ̃ is the best
  one for that victim, chosen on its own members and non-members, so the figure is an upper bound
  on what a real attacker reaches (002 §2.5). Members are the node's training items, non-members
  its held-out items (the leave-one-out test item, and the validation item when there is one).
  Eq. 6 with members and non-members "sampled equally" is computed in expectation: accuracy is
  balanced, (TPR + TNR) / 2, over every member and non-member, instead of drawing a subsample.
- **MIA as a proxy for CIA** (000 §VIII-C, Table VIII): the CIA adversary asks, for each observed
  user u and each item of V_target, whether (u, i) is a member (M_MPE ≤ ρ); the users with the most
  predicted members of V_target form the predicted community. MIA precision is the share of
  predicted members that are truly in u's training items.

The label distribution θ[u] is the model's own output: GMF predicts whether u interacts with i,
P(1) = σ(score), so with label 1, M_MPE = −2(1 − p)·ln p; PRME only ranks, so θ[u] is the softmax
of its scores over the whole catalogue and the label is the item.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from learning.params import Index

Floats = npt.NDArray[np.float64]

_EPS = 1e-12
#: ρ of the CIA paper's Table VIII
TABLE8_THRESHOLDS = (0.2, 0.4, 0.6, 0.8, 1.0)


def mpe_binary(p: npt.ArrayLike) -> Floats:
    """M_MPE for label 1 of a two-class prediction P(1) = p (eq. 3 with Y = {0, 1})."""
    q = np.clip(np.asarray(p, dtype=np.float64), _EPS, 1.0 - _EPS)
    out: Floats = -2.0 * (1.0 - q) * np.log(q)
    return out


def mpe_categorical(dist: npt.ArrayLike, labels: Index) -> Floats:
    """M_MPE(P, y) for every y in ``labels`` under one distribution P over the classes (eq. 3)."""
    p = np.clip(np.asarray(dist, dtype=np.float64), _EPS, 1.0 - _EPS)
    rest = p * np.log1p(-p)  # P(y')·log(1 − P(y')) for every class
    total = float(rest.sum())
    py = p[labels]
    out: Floats = -(1.0 - py) * np.log(py) - (total - rest[labels])
    return out


def softmax(scores: npt.ArrayLike) -> Floats:
    s = np.asarray(scores, dtype=np.float64)
    e = np.exp(s - s.max())
    out: Floats = e / e.sum()
    return out


def item_mpe(scores: npt.ArrayLike, items: Index, probabilistic: bool) -> Floats:
    """M_MPE of (u, i) for ``items`` given the model's scores for u over the whole catalogue.

    ``probabilistic``: the scores are interaction probabilities (GMF); otherwise they are ranking
    scores, turned into a distribution over items by a softmax (PRME).
    """
    s = np.asarray(scores, dtype=np.float64)
    if probabilistic:
        return mpe_binary(s[items])
    return mpe_categorical(softmax(s), items)


def best_threshold_accuracy(members: npt.ArrayLike, non_members: npt.ArrayLike) -> tuple[float, float]:
    """The oracle threshold τ̃ of 002 §2.5 and its balanced accuracy (eq. 6, classes weighted equally).

    The attack says "member" when M ≤ τ. Every τ between observed values is tried, plus one below
    all of them (everything a non-member), so the result is at least 0.5.
    """
    m = np.sort(np.asarray(members, dtype=np.float64))
    n = np.sort(np.asarray(non_members, dtype=np.float64))
    if not len(m) or not len(n):
        raise ValueError("the MPE attack needs at least one member and one non-member")
    cuts = np.concatenate(([-np.inf], np.unique(np.concatenate((m, n)))))
    tpr = np.searchsorted(m, cuts, side="right") / len(m)
    tnr = 1.0 - np.searchsorted(n, cuts, side="right") / len(n)
    acc = (tpr + tnr) / 2.0
    best = int(np.argmax(acc))
    return float(cuts[best]), float(acc[best])


def victim_accuracy(scores: npt.ArrayLike, members: Index, non_members: Index, probabilistic: bool) -> float:
    """MIA vulnerability of one node's model (002 eq. 6 with the per-victim τ̃)."""
    m = item_mpe(scores, members, probabilistic)
    n = item_mpe(scores, non_members, probabilistic)
    return best_threshold_accuracy(m, n)[1]


@dataclass(frozen=True)
class ProxyRound:
    """MIA used as a CIA proxy for one target at one evaluation (000 Table VIII), per threshold ρ."""

    predicted: list[Index]  #: per ρ: the K users with most predicted members of V_target
    true_positives: list[int]  #: per ρ: predicted (u, i) pairs with i in u's training items
    positives: list[int]  #: per ρ: predicted (u, i) pairs


def proxy_round(
    users: Sequence[int],
    mpe: npt.NDArray[np.floating],
    membership: npt.NDArray[np.bool_],
    thresholds: Sequence[float],
    k: int,
    exclude: set[int],
) -> ProxyRound:
    """Rank ``users`` by their count of V_target items with M_MPE ≤ ρ (ties: lower user id; the MIA
    says nothing more, and breaking ties by confidence would smuggle in the CIA's own ranking).

    ``mpe`` and ``membership`` are (users × |V_target|): each observed user's M_MPE for every
    target item, and whether the item is truly in that user's training set. Excluded users (the
    adversary's own) are neither ranked nor counted in the precision.
    """
    keep = np.array([u not in exclude for u in users], dtype=bool)
    ids = np.asarray(users, dtype=np.int64)[keep]
    m = np.asarray(mpe, dtype=np.float64)[keep]
    member = np.asarray(membership, dtype=bool)[keep]
    predicted, tps, ps = [], [], []
    for rho in thresholds:
        hit = m <= rho
        order = np.lexsort((ids, -hit.sum(axis=1)))[:k]
        predicted.append(ids[order])
        tps.append(int(np.count_nonzero(hit & member)))
        ps.append(int(np.count_nonzero(hit)))
    return ProxyRound(predicted, tps, ps)
