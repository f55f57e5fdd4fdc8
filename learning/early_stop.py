"""Early stopping on a validation item, as paper 004's code runs FedNCF (``trainer.py``,
``run_experiment``): after every evaluation the users' validation figure is compared with the
best so far; a figure at least as high is the new best (ties move it later), and the run ends
once ``patience`` evaluations in a row stayed below it. The run reports the best evaluation.

The figure is the mean over users of HR@K + HR@2K of each user's validation item (its
second-latest interaction, ranked among negatives of its own): 004's code sums its validation
Recall@10 and Recall@20, which with one held-out item are HR@10 and HR@20.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass
class EarlyStop:
    """The best validation figure so far, the evaluation it came from, and how long since."""

    patience: int
    best: float = -math.inf
    best_round: int | None = None
    waited: int = 0  #: evaluations since the best

    def __post_init__(self) -> None:
        if self.patience < 1:
            raise ValueError("the early stop's patience is at least one evaluation")

    def observe(self, round_no: int, value: float) -> bool:
        """Take round ``round_no``'s validation figure; True when it is the new best."""
        if value >= self.best:
            self.best, self.best_round, self.waited = value, round_no, 0
            return True
        self.waited += 1
        return False

    @property
    def done(self) -> bool:
        """Whether ``patience`` evaluations in a row stayed below the best."""
        return self.waited >= self.patience

    def to_dict(self) -> dict[str, float | int | None]:
        return {
            "patience": self.patience,
            "best_round": self.best_round,
            "validation": None if self.best_round is None else self.best,
            "waited": self.waited,
        }


def validation_figure(ranks: Iterable[list[int | None]], k: int) -> tuple[float, float, int]:
    """Mean HR@K and HR@2K of the first validation item of each user that has one (``ranks``:
    each user's validation ranks, learning.learner.BaseLearner.validation_ranks; a rank of None,
    a model gone non-finite, misses), and how many users had one."""
    hit_k = hit_2k = 0
    n = 0
    for r in ranks:
        if not r:
            continue
        n += 1
        rank = r[0]
        if rank is not None:
            hit_k += rank < k
            hit_2k += rank < 2 * k
    if n == 0:
        return 0.0, 0.0, 0
    return hit_k / n, hit_2k / n, n
