"""Utility metrics for recommendation: HR@K under leave-one-out (NCF §4.1)."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt


def hit_at_k(test_score: float, negative_scores: npt.NDArray[np.float32], k: int) -> bool:
    """True when the test item ranks in the top ``k`` among itself and the negatives.

    Ties count against the test item (a model that scores everything alike gets no credit), and
    so does a NaN anywhere: a model gone NaN ranks nothing (NaN compares false, which would
    otherwise put the test item first).
    """
    if not math.isfinite(test_score) or not np.isfinite(negative_scores).all():
        return False
    rank = int(np.count_nonzero(negative_scores >= test_score))
    return rank < k


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
