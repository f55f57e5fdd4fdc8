"""Send-All-Merge-Once, 002 Algorithm 2."""

from __future__ import annotations

import random
from typing import Any

from learning.params import ParamsView
from p2pcore.effects import Dropped, Effect, Merged, NodeId, Send
from peer_sampling.base import PeerSampler
from protocols.gossip import GossipProtocol, TimingConfig
from protocols.learner import Learner
from protocols.merging import Merger
from protocols.messages import ModelMessage

DEFAULT_BUFFER = 64


class Samo(GossipProtocol):
    """Buffer received models; on wake-up merge them all once, train, and send to every neighbour.

    The buffer Θ_i holds at most ``max_buffer`` models; when full the oldest is dropped and
    counted (a peer must not be able to grow a node's memory without end).
    """

    name = "samo"

    def __init__(
        self,
        node_id: NodeId,
        learner: Learner,
        sampler: PeerSampler,
        timing: TimingConfig,
        max_buffer: int = DEFAULT_BUFFER,
        merger: Merger | None = None,
    ) -> None:
        super().__init__(node_id, learner, sampler, timing, merger)
        if max_buffer < 1:
            raise ValueError("max_buffer must be at least 1")
        self.max_buffer = max_buffer
        self.buffer: list[tuple[NodeId, ParamsView]] = []

    def wake(self, now: float, rng: random.Random) -> list[Effect]:
        effects: list[Effect] = []
        if self.buffer:  # |Θ_i| > 1: Θ_i holds θ_i plus what was received
            self.sampler.record_scores(self.merger.merge(self.buffer))
            self.stats.merges += 1
            effects.append(Merged(tuple(sender for sender, _ in self.buffer)))
            effects += self.train()
            self.buffer = []
        view = self.sampler.send_targets(rng)
        if not view:
            return effects
        snapshot = self.learner.snapshot()
        message = ModelMessage(self.learner.version, snapshot)
        self.stats.models_sent += len(view)
        return [*effects, *(Send(peer, message) for peer in view)]

    def state(self) -> dict[str, Any]:
        out = super().state()
        out["buffer"] = [[sender, {k: v.copy() for k, v in params.items()}] for sender, params in self.buffer]
        return out

    def restore(self, state: dict[str, Any]) -> None:
        super().restore(state)
        buffer: list[tuple[NodeId, ParamsView]] = [(int(s), dict(p)) for s, p in state["buffer"]]
        self.buffer = buffer[-self.max_buffer :]

    def on_model(self, sender: NodeId, message: ModelMessage, now: float, rng: random.Random) -> list[Effect]:
        self.stats.models_received += 1
        effects: list[Effect] = []
        if len(self.buffer) >= self.max_buffer:
            self.buffer.pop(0)
            self.stats.buffer_drops += 1
            effects.append(Dropped("buffer-full"))
        self.buffer.append((sender, self.clipped(sender, message.params)))
        return effects
