"""How a node folds received models into its own: uniform (002) or score-weighted (Pers-Gossip).

Pers-Gossip (CIA paper §V-D, after PEPPER 2022): each received model is scored on the node's own
validation data, the score goes to the personalized sampler, and the merge weighs every model —
the node's own included — by its score: θ ← (s_i θ_i + Σ s_j θ_j) / (s_i + Σ s_j).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from learning.params import ParamsView
from p2pcore.effects import NodeId
from peer_sampling.personalized import Personalized
from protocols.learner import Learner

Received = Sequence[tuple[NodeId, ParamsView]]
MIN_WEIGHT = 1e-3  # keeps a model that ranks nothing right from dividing by zero


class Merger(Protocol):
    def merge(self, learner: Learner, received: Received) -> None: ...


class UniformMerge:
    """θ ← mean(θ, *received) (002 Alg. 1 line 7, Alg. 2 line 4)."""

    def merge(self, learner: Learner, received: Received) -> None:
        learner.merge([params for _, params in received])


class ScoringLearner(Learner, Protocol):
    def score(self, params: ParamsView | None) -> float:
        """How well ``params`` (None: the own model) rank this node's validation items, in [0, 1]."""
        ...

    def merge_weighted(self, models: Sequence[ParamsView], weights: Sequence[float], own: float) -> None:
        """θ ← (own θ + Σ w_j θ_j) / (own + Σ w_j) over the shared parameters."""
        ...


class ScoreWeightedMerge:
    """Pers-Gossip: score each received model, tell the sampler, merge weighted by score."""

    def __init__(self, learner: ScoringLearner, sampler: Personalized) -> None:
        self.learner = learner
        self.sampler = sampler

    def merge(self, learner: Learner, received: Received) -> None:
        weights = []
        for sender, params in received:
            score = self.learner.score(params)
            self.sampler.record(sender, score)
            weights.append(max(score, MIN_WEIGHT))
        own = max(self.learner.score(None), MIN_WEIGHT)
        self.learner.merge_weighted([p for _, p in received], weights, own)
