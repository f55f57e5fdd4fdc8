"""Personalized peer choice for Pers-Gossip (CIA paper §V-D, after Belal et al., PEPPER 2022).

Wraps a random peer sampler. The protocol reports how well each sender's model serves this node
(``record``); the personalized view is the ``size`` best-scoring senders. Each time a target is
needed, with probability ``exploration`` it comes from the random view, otherwise from the
personalized view (uniformly among its members); while nobody has been scored, it is random.
Peer-sampling messages and timers go to the wrapped sampler.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from p2pcore.effects import Effect, NodeId
from peer_sampling.base import PeerSampler


class Personalized(PeerSampler):
    """Random view + score table → personalized view with exploration."""

    def __init__(self, inner: PeerSampler, size: int, exploration: float) -> None:
        if not 0.0 <= exploration <= 1.0:
            raise ValueError("exploration must be in [0, 1]")
        if size < 1:
            raise ValueError("personalized view size must be at least 1")
        self.inner = inner
        self.node_id = inner.node_id
        self.size = size
        self.exploration = exploration
        self.scores: dict[NodeId, float] = {}
        self.explored = 0
        self.exploited = 0

    def state(self) -> dict[str, Any]:
        return {
            "inner": self.inner.state(),
            "scores": [[p, s] for p, s in sorted(self.scores.items())],
            "explored": self.explored,
            "exploited": self.exploited,
        }

    def restore(self, state: dict[str, Any]) -> None:
        self.inner.restore(state["inner"])
        self.scores = {int(p): float(s) for p, s in state["scores"]}
        self.explored, self.exploited = int(state["explored"]), int(state["exploited"])

    def record(self, peer: NodeId, score: float) -> None:
        """The latest score of ``peer``'s model on this node's validation data."""
        if peer != self.node_id:
            self.scores[peer] = score

    def record_scores(self, scores: Mapping[NodeId, float]) -> None:
        for peer, score in scores.items():
            self.record(peer, score)

    def personalized_view(self) -> tuple[NodeId, ...]:
        best = sorted(self.scores, key=lambda p: (-self.scores[p], p))[: self.size]
        return tuple(best)

    def out_view(self) -> tuple[NodeId, ...]:
        """The random view (the personalized one is ``personalized_view``)."""
        return self.inner.out_view()

    def in_view(self) -> tuple[NodeId, ...]:
        return self.inner.in_view()

    def pick(self, rng: random.Random) -> NodeId | None:
        personal = self.personalized_view()
        if not personal or rng.random() < self.exploration:
            self.explored += 1
            return self.inner.pick(rng)
        self.exploited += 1
        return personal[rng.randrange(len(personal))]

    def send_targets(self, rng: random.Random) -> tuple[NodeId, ...]:
        return self.targets(rng, len(self.inner.out_view()))

    def targets(self, rng: random.Random, k: int) -> tuple[NodeId, ...]:
        """Up to ``k`` distinct targets, each drawn by ``pick``."""
        out: list[NodeId] = []
        for _ in range(4 * k):
            if len(out) >= k:
                break
            peer = self.pick(rng)
            if peer is not None and peer not in out:
                out.append(peer)
        return tuple(out)

    def start(self, now: float, rng: random.Random) -> list[Effect]:
        return self.inner.start(now, rng)

    def on_timer(self, key: str, now: float, rng: random.Random) -> list[Effect]:
        return self.inner.on_timer(key, now, rng)

    def on_message(self, sender: NodeId, message: object, now: float, rng: random.Random) -> list[Effect]:
        return self.inner.on_message(sender, message, now, rng)

    def on_unreachable(self, peer: NodeId, now: float, rng: random.Random) -> list[Effect]:
        self.scores.pop(peer, None)
        return self.inner.on_unreachable(peer, now, rng)
