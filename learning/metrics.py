"""Utility metrics for recommendation under leave-one-out (NCF §4.1): HR@K, NDCG@K, Recall@K and
the reciprocal rank of the held-out item among its candidates (100 sampled negatives, the papers'
protocol, or every item the user never touched: ``--eval full``), F1@K (PRME's).

Sampled metrics can order models otherwise than the full ranking does (Krichene and Rendle, "On
Sampled Metrics for Item Recommendation", KDD 2020), which is why both are offered."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import numpy.typing as npt


class Figures(NamedTuple):
    """One node's evaluation of one model: its utility (HR@K, F1@K for
    PRME), NDCG@K, Recall@K and reciprocal rank of the held-out item among its candidates."""

    utility: float
    ndcg: float
    recall: float
    rr: float


def rank_of(test_score: float, negative_scores: npt.NDArray[np.float32]) -> int | None:
    """The held-out item's 0-based rank among itself and the negatives: how many negatives score
    at least as high (0 is best); ``None`` when any score is not finite.

    Ties count against the test item (a model that scores everything alike gets no credit), and
    so does a NaN anywhere: a model gone NaN ranks nothing (NaN compares false, which would
    otherwise put the test item first).
    """
    if not math.isfinite(test_score) or not np.isfinite(negative_scores).all():
        return None
    return int(np.count_nonzero(negative_scores >= test_score))


def hit_at_k(test_score: float, negative_scores: npt.NDArray[np.float32], k: int) -> bool:
    """True when the test item ranks in the top ``k`` among itself and the negatives
    (:func:`rank_of`: ties and NaN count against it)."""
    rank = rank_of(test_score, negative_scores)
    return rank is not None and rank < k


def ndcg_at_k(rank: int | None, k: int) -> float:
    """NDCG@K of one leave-one-out ranking with its one relevant item at 0-based ``rank``:
    1 / log2(rank + 2) inside the top ``k``, else 0 (the ideal DCG of one relevant item is 1;
    PARD paper 004 §IV-A-3 reports it as N@10 over 100 candidates). ``None`` (a model gone NaN)
    scores 0."""
    if rank is None or rank >= k:
        return 0.0
    return 1.0 / math.log2(rank + 2)


def recall_at_k(rank: int | None, k: int) -> float:
    """Recall@K of a leave-one-out ranking, its one relevant item at 0-based ``rank``: the share
    of the relevant items in the top ``k``, so 1 or 0, the value of HR@K (it is reported under its
    own name too, as other tools report it). ``None`` (a model gone NaN) scores 0."""
    return 1.0 if rank is not None and rank < k else 0.0


def reciprocal_rank(rank: int | None) -> float:
    """1 / (rank + 1) of the held-out item at 0-based ``rank`` (no cut-off); its mean over the
    users is the MRR. ``None`` (a model gone NaN) scores 0."""
    return 0.0 if rank is None else 1.0 / (rank + 1)


def random_hit_ratio(k: int, n_negatives: int) -> float:
    """HR@K of a random ranking: k / (n_negatives + 1)."""
    return min(1.0, k / (n_negatives + 1))


def popularity_hit(counts: npt.NDArray[np.int64], candidates: npt.NDArray[np.int64], k: int) -> float:
    """The chance that ranking ``candidates`` (the held-out item first, then the items it is
    ranked against) by ``counts``, the training split's interactions per item, puts the held-out
    item in the top ``k``: the popularity baseline a trained model has to beat.

    Items of equal count are ordered at random (the expectation is returned, not one draw): with
    g candidates counted more often than the held-out item and t as often, it lands at each of
    the places g .. g + t alike, so the chance is clamp((k - g) / (t + 1), 0, 1).
    """
    c = counts[candidates]
    rest = c[1:]
    greater = int(np.count_nonzero(rest > c[0]))
    ties = int(np.count_nonzero(rest == c[0]))
    return min(1.0, max(0.0, (k - greater) / (ties + 1)))


def item_counts(train_items: list[npt.NDArray[np.int64]], n_items: int) -> npt.NDArray[np.int64]:
    """How many users trained on each item (the popularity baseline's scores)."""
    if not train_items:
        return np.zeros(n_items, dtype=np.int64)
    return np.bincount(np.concatenate(train_items), minlength=n_items).astype(np.int64)


def f1_at_k(hit: bool, k: int, relevant: int = 1) -> float:
    """F1@K of one ranking: precision hits/K, recall hits/relevant (leave-one-out: 2/(K+1) or 0)."""
    hits = 1 if hit else 0
    if hits == 0:
        return 0.0
    precision, recall = hits / k, hits / relevant
    return 2 * precision * recall / (precision + recall)
