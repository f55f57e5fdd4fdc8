"""How a node folds received models into its own: uniform (002) or score-weighted (Pers-Gossip).

Pers-Gossip (CIA paper §V-D, after PEPPER 2022): each received model is scored on the node's own
validation data, the merge weighs every model — the node's own included — by its score:
θ ← (s_i θ_i + Σ s_j θ_j) / (s_i + Σ s_j), and returns the scores, which the protocol hands to its
sampler (the personalized view keeps the best-scoring peers). A merger is bound to its node's
learner when it is made.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from learning.params import ParamsView
from p2pcore.effects import NodeId
from p2pcore.plugin import PluginError
from protocols.learner import Learner

Received = Sequence[tuple[NodeId, ParamsView]]
MIN_WEIGHT = 1e-3  # keeps a model that ranks nothing right from dividing by zero


class Merger(Protocol):
    def merge(self, received: Received) -> dict[NodeId, float]:
        """Fold ``received`` into the node's model; returns each sender's score (none: {})."""
        ...


class UniformMerge:
    """θ ← mean(θ, *received) (002 Alg. 1 line 7, Alg. 2 line 4), or, with ``how`` trimmed or
    median, their coordinate-wise trimmed mean or median (``--merge``: against a member that
    posts poisoned models; with two models, as Base GL merges, every rule is the mean)."""

    def __init__(self, learner: Learner, how: str = "mean") -> None:
        self.learner = learner
        self.how = how

    def merge(self, received: Received) -> dict[NodeId, float]:
        self.learner.merge([params for _, params in received], self.how)
        return {}


class ScoringLearner(Learner, Protocol):
    def score(self, params: ParamsView | None) -> float:
        """How well ``params`` (None: the own model) rank this node's validation items, in [0, 1]."""
        ...

    def merge_weighted(self, models: Sequence[ParamsView], weights: Sequence[float], own: float) -> None:
        """θ ← (own θ + Σ w_j θ_j) / (own + Σ w_j) over the shared parameters."""
        ...


class ScoreWeightedMerge:
    """Pers-Gossip: score each received model, merge weighted by score, return the scores."""

    def __init__(self, learner: ScoringLearner) -> None:
        self.learner = learner

    def merge(self, received: Received) -> dict[NodeId, float]:
        scores: dict[NodeId, float] = {}
        weights = []
        for sender, params in received:
            score = self.learner.score(params)
            scores[sender] = score
            weights.append(max(score, MIN_WEIGHT))
        own = max(self.learner.score(None), MIN_WEIGHT)
        self.learner.merge_weighted([p for _, p in received], weights, own)
        return scores


class PluginMerger:
    """A user's merge rule (``--merge-plugin``, docs/plugins.md): an object made from the node's
    learner whose ``merge(received)`` folds the received models into the learner (with
    ``learner.merge`` or ``learner.merge_weighted``) and returns a score per sender (or None:
    none), which a Pers-Gossip view keeps the best of. Errors in its code are named as its."""

    def __init__(self, name: str, plugin: Merger) -> None:
        self.name = name
        self.plugin = plugin

    def merge(self, received: Received) -> dict[NodeId, float]:
        try:
            scores = self.plugin.merge(received)
        except Exception as exc:
            raise PluginError(f"merge plugin {self.name}: merge() raised {exc!r}") from exc
        if scores is None:
            return {}
        try:
            return {sender: float(score) for sender, score in dict(scores).items()}
        except (TypeError, ValueError) as exc:
            raise PluginError(
                f"merge plugin {self.name}: merge() returned {type(scores).__name__}, not a mapping of "
                "sender to score"
            ) from exc
