"""Base Gossip Learning, 002 Algorithm 1 (after Ormándi et al.)."""

from __future__ import annotations

import random

from p2pcore.effects import Effect, Merged, NodeId, Send
from protocols.gossip import GossipProtocol
from protocols.messages import ModelMessage


class BaseGossip(GossipProtocol):
    """On wake-up send θ_i to one random neighbour; on receipt θ_i ← (θ_i + θ_j)/2, then train."""

    name = "base"

    def wake(self, now: float, rng: random.Random) -> list[Effect]:
        peer = self.sampler.pick(rng)
        if peer is None:
            return []
        self.stats.models_sent += 1
        return [Send(peer, ModelMessage(self.learner.version, self.learner.snapshot()))]

    def on_model(self, sender: NodeId, message: ModelMessage, now: float, rng: random.Random) -> list[Effect]:
        self.stats.models_received += 1
        self.sampler.record_scores(self.merger.merge([(sender, self.clipped(sender, message.params))]))
        self.stats.merges += 1
        return [Merged((sender,)), *self.train()]
