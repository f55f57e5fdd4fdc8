"""Utility metrics for recommendation under leave-one-out (NCF §4.1): HR@K and NDCG@K of the
held-out item among its sampled negatives, F1@K (PRME's)."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt


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


def random_hit_ratio(k: int, n_negatives: int) -> float:
    """HR@K of a random ranking: k / (n_negatives + 1)."""
    return min(1.0, k / (n_negatives + 1))


def f1_at_k(hit: bool, k: int, relevant: int = 1) -> float:
    """F1@K of one ranking: precision hits/K, recall hits/relevant (leave-one-out: 2/(K+1) or 0)."""
    hits = 1 if hit else 0
    if hits == 0:
        return 0.0
    precision, recall = hits / k, hits / relevant
    return 2 * precision * recall / (precision + recall)
