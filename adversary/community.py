"""Ground truth and accuracy of the Community Inference Attack (CIA paper §V-C, eq. 5 and 6).

Pure numpy: user-item sets in, communities and accuracies out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from learning.params import Index


class UserItems:
    """Every user's training items as a 0/1 matrix, so that eq. 5 is one matrix-vector product."""

    def __init__(self, user_items: Sequence[Index], n_items: int) -> None:
        self.matrix = np.zeros((len(user_items), n_items), dtype=np.float32)
        for u, items in enumerate(user_items):
            self.matrix[u, items] = 1.0
        self.sizes = self.matrix.sum(axis=1).astype(np.float64)

    def jaccard(self, target: Index) -> npt.NDArray[np.float64]:
        mask = np.zeros(self.matrix.shape[1], dtype=np.float32)
        mask[target] = 1.0
        inter = (self.matrix @ mask).astype(np.float64)
        union = float(mask.sum()) + self.sizes - inter
        out: npt.NDArray[np.float64] = np.divide(inter, union, out=np.zeros_like(inter), where=union > 0)
        return out


def jaccard(target: Index, user_items: Sequence[Index] | UserItems, n_items: int) -> npt.NDArray[np.float64]:
    """|V_target ∩ V_u| / |V_target ∪ V_u| for every user u (eq. 5)."""
    table = user_items if isinstance(user_items, UserItems) else UserItems(user_items, n_items)
    return table.jaccard(target)


def top_k(scores: npt.NDArray[np.floating], k: int, exclude: Sequence[int] = ()) -> Index:
    """The ``k`` users with the highest scores, best first; ties go to the lower user id.

    ``exclude`` (the adversary's own nodes) never enters the community.
    """
    s = np.asarray(scores, dtype=np.float64).copy()
    if len(exclude):
        s[np.asarray(exclude, dtype=np.int64)] = -np.inf
    order = np.lexsort((np.arange(len(s)), -s))  # primary: score desc, then id asc
    order = order[np.isfinite(s[order])]
    return np.asarray(order[:k], dtype=np.int64)


def true_community(
    target: Index,
    user_items: Sequence[Index] | UserItems,
    n_items: int,
    k: int,
    exclude: Sequence[int] = (),
) -> Index:
    """C: the top-K users by Jaccard similarity of their training items to V_target (eq. 5)."""
    return top_k(jaccard(target, user_items, n_items), k, exclude)


def accuracy(predicted: Index, truth: Index, k: int) -> float:
    """Accuracy@R = |Ĉ ∩ C| / K (eq. 6)."""
    return len(set(predicted.tolist()) & set(truth.tolist())) / k


def upper_bound(observed: Sequence[int] | set[int], truth: Index, k: int) -> float:
    """The best accuracy the observed models allow: the share of C among observed users (§V-C)."""
    seen = set(observed)
    return sum(1 for u in truth.tolist() if u in seen) / k


@dataclass(frozen=True)
class AttackSummary:
    """The paper's attack metrics over a run (§V-C)."""

    aac: list[float]  #: average accuracy over adversaries, per evaluated round
    rounds: list[int]  #: the rounds ``aac`` was evaluated at
    max_aac: float  #: Max AAC: the best average over rounds
    round_of_max: int
    best10_aac: float  #: the least accuracy among the best 10% adversaries at the Max-AAC round
    upper_bound: float  #: mean over adversaries of the share of C observed, at the Max-AAC round
    upper_bounds: list[float]  #: the same per evaluated round
    random_bound: float  #: K / N
    adversaries: int

    def as_dict(self) -> dict[str, object]:
        return {
            "max_aac": self.max_aac,
            "best10_aac": self.best10_aac,
            "upper_bound": self.upper_bound,
            "random_bound": self.random_bound,
            "round_of_max": self.round_of_max,
            "adversaries": self.adversaries,
            "aac": self.aac,
            "rounds": self.rounds,
            "upper_bounds": self.upper_bounds,
        }


def best_share(accuracies: Sequence[float], share: float = 0.1) -> float:
    """The accuracy that the best ``share`` of adversaries all reach (at least one adversary)."""
    if not accuracies:
        return 0.0
    ordered = sorted(accuracies, reverse=True)
    n = max(1, int(np.ceil(share * len(ordered))))
    return float(ordered[n - 1])


def summarize(
    rounds: Sequence[int],
    per_round: Sequence[Sequence[float]],
    per_round_bounds: Sequence[Sequence[float]],
    k: int,
    n_users: int,
) -> AttackSummary:
    """AAC per round, Max AAC, Best-10% AAC and the upper bound from per-adversary accuracies."""
    aac = [float(np.mean(a)) if len(a) else 0.0 for a in per_round]
    bounds = [float(np.mean(b)) if len(b) else 0.0 for b in per_round_bounds]
    if not aac:
        return AttackSummary([], [], 0.0, 0, 0.0, 0.0, [], k / n_users, 0)
    best = int(np.argmax(aac))
    return AttackSummary(
        aac=aac,
        rounds=list(rounds),
        max_aac=aac[best],
        round_of_max=int(rounds[best]),
        best10_aac=best_share(per_round[best]),
        upper_bound=bounds[best],
        upper_bounds=bounds,
        random_bound=k / n_users,
        adversaries=len(per_round[best]),
    )
