"""Common wake-up timing of the gossip protocols and the pure node that hosts one protocol.

Timing from 002 §3.1: a round is 100 ticks, and node i waits Δ_i ~ N(100, σ² = 100) ticks between
wake-ups, Δ_i drawn once at the start. The first wake-up falls at a random phase in [0, Δ_i).
"""

from __future__ import annotations

import dataclasses
import random
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from learning.params import ParamsView, distance, l2_norm, toward
from p2pcore.effects import (
    Delivered,
    Dropped,
    Effect,
    Event,
    NodeId,
    Received,
    SetTimer,
    TimerFired,
    Unreachable,
)
from peer_sampling.base import PeerSampler
from protocols.knn import KnnService
from protocols.knn_messages import KnnAnswer, KnnAsk, KnnProbe, KnnProfile
from protocols.learner import Learner
from protocols.merging import Merger, UniformMerge
from protocols.messages import FedMessage, ModelMessage, PublicMessage
from protocols.public import PublicBoard
from protocols.robust import ClipRadius, NormBand, SenderGate, SteadyPull

WAKE_TIMER = "wake"


@dataclass(frozen=True)
class TimingConfig:
    """Wake-up period distribution, in ticks."""

    mean_ticks: float = 100.0
    std_ticks: float = 10.0
    round_ticks: float = 100.0


@dataclass
class ProtocolStats:
    """Counters the driver exports as metrics."""

    wakes: int = 0
    models_sent: int = 0
    models_received: int = 0
    merges: int = 0
    local_steps: int = 0
    buffer_drops: int = 0
    recoveries: int = 0  #: times the model went non-finite and went back to its last good state
    clipped: int = 0  #: received models whose difference was clipped (ClippedGossip)
    banded: int = 0  #: received models whose norm the norm band moved (NormBand)
    damped: int = 0  #: received models whose difference the steady-pull memory damped (SteadyPull)


class GossipProtocol(ABC):
    """A gossip learning protocol for one node: reacts to wake-ups and received models.

    ``max_distance`` D bounds what a member can push into the node (THREAT_MODEL.md): a received
    model with ‖θ_recv‖ > (1 + D)·‖θ_own‖ is refused before it touches anything (:meth:`vet`; 0:
    no bound). By the triangle inequality no model within D·‖θ_own‖ of the node's own is ever
    refused, and every model farther than (D + 2)·‖θ_own‖ is: a bound on the distance, computed
    from one norm of the received model (its bytes are in cache, just decoded) and the own
    model's norm, kept per model version. Honest models stay within 6·‖θ_own‖ of the receiver's
    in every measured setting (``python -m bench.model_distance``): the default of 100 never
    fires on them.
    """

    name = "abstract"
    max_distance = 0.0
    clip: ClipRadius | None = None  #: ClippedGossip (``--clip-factor``); None: models taken whole
    band: NormBand | None = None  #: the norm band (``--norm-band``); None: norms taken as they come
    pull: SteadyPull | None = None  #: ``--steady-pull``; None: no memory of who pulls which way
    gate: SenderGate | None = None  #: whose models are taken at all (protocols.robust); None: anyone's

    def __init__(
        self,
        node_id: NodeId,
        learner: Learner,
        sampler: PeerSampler,
        timing: TimingConfig,
        merger: Merger | None = None,
    ) -> None:
        self.node_id = node_id
        self.learner = learner
        self.sampler = sampler
        self.timing = timing
        self.merger: Merger = merger or UniformMerge(learner)
        self.period = 0.0
        self.stats = ProtocolStats()
        self._own_norm: tuple[int, tuple[str, ...], float] | None = None  #: (version, names, ‖θ‖)

    def start(self, now: float, rng: random.Random) -> list[Effect]:
        """Draw Δ_i and set the first wake-up."""
        self.period = max(1.0, rng.gauss(self.timing.mean_ticks, self.timing.std_ticks))
        return [SetTimer(WAKE_TIMER, now + rng.uniform(0.0, self.period))]

    def on_wake(self, now: float, rng: random.Random) -> list[Effect]:
        self.stats.wakes += 1
        return [SetTimer(WAKE_TIMER, now + self.period), *self.wake(now, rng)]

    @abstractmethod
    def wake(self, now: float, rng: random.Random) -> list[Effect]:
        """What the node does when it wakes up."""

    def on_timer(self, key: str, now: float, rng: random.Random) -> list[Effect]:
        """A protocol timer other than the wake-up fired (FedAvg rounds)."""
        return []

    @abstractmethod
    def on_model(self, sender: NodeId, message: Any, now: float, rng: random.Random) -> list[Effect]:
        """What the node does when a model arrives (already checked against the local model)."""

    def train(self) -> list[Effect]:
        """A local update, then the model must still be finite: if training (or the merge
        before it) left a NaN or an infinity, the node goes back to its last good model and says
        so (``Dropped("non-finite")``: logged and counted by the driver)."""
        self.stats.local_steps += self.learner.local_update()
        if self.learner.finite():
            return []
        self.learner.recover()
        self.stats.recoveries += 1
        return [Dropped("non-finite")]

    def admit(self, sender: NodeId, now: float) -> str | None:
        """Why a model from ``sender`` must be refused before its body is read (None: read it):
        the sender gate's verdict (protocols.robust.SenderGate)."""
        return None if self.gate is None else self.gate.check(sender, now)

    def vet(self, message: ModelMessage | FedMessage) -> str | None:
        """Why a decoded model must be refused before it is taken (None: take it)."""
        bound = self.max_distance
        if bound <= 0:
            return None
        if l2_norm(message.params) > (1 + bound) * self.own_norm(tuple(message.params)):
            return "too-far"
        return None

    def own_norm(self, names: tuple[str, ...]) -> float:
        """‖θ_own‖ over the tensors ``names``, computed once per model version."""
        version = self.learner.version
        if self._own_norm is None or self._own_norm[:2] != (version, names):
            self._own_norm = (version, names, self.learner.norm(names))
        return self._own_norm[2]

    def clipped(self, sender: NodeId, params: ParamsView) -> ParamsView:
        """``params`` as the merge takes them: with ClippedGossip, its difference from the own
        model clipped to the adaptive radius (:class:`ClipRadius`), and with a norm band its
        difference at most reach × ‖θ_own‖ and its norm moved into the band (:class:`NormBand`),
        then damped when its owner's models keep pulling one way (:class:`SteadyPull`).
        A changed model is a new one: the received one is unchanged, since it may be a sender's
        delta base."""
        if self.clip is None and self.band is None and self.pull is None:
            return params
        own = self.learner.params
        own_norm = self.own_norm(tuple(params))
        dist = distance(own, params)
        scale = 1.0 if self.clip is None else self.clip.scale(sender, dist, own_norm)
        if self.band is not None:
            scale *= self.band.reach_scale(dist * scale, own_norm)
        out = params if scale >= 1.0 else toward(own, params, scale)
        if scale < 1.0:
            self.stats.clipped += 1
        if self.band is not None:
            factor = self.band.norm_scale(l2_norm(out), own_norm)
            if factor != 1.0:
                self.stats.banded += 1
                out = {k: v * np.float32(factor) for k, v in out.items()}
        if self.pull is not None:
            damp = self.pull.scale(sender, own, out)
            if damp < 1.0:
                self.stats.damped += 1
                out = toward(own, out, damp)
        return out

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps of the protocol (its counters, the clip's distances; subclasses
        add buffers)."""
        out: dict[str, Any] = {"stats": dataclasses.asdict(self.stats)}
        if self.clip is not None:
            out["clip"] = self.clip.state()
        if self.pull is not None:
            out["pull"] = self.pull.state()
        return out

    def restore(self, state: dict[str, Any]) -> None:
        self._own_norm = None
        if self.clip is not None and "clip" in state:
            self.clip.restore(state["clip"])
        if self.pull is not None and "pull" in state:
            self.pull.restore(state["pull"])
        for k, v in state["stats"].items():
            if hasattr(self.stats, k):
                setattr(self.stats, k, int(v))


class ModelObserver(Protocol):
    """What a node shows every model it receives, before it merges it: a user's attack
    (adversary.plugin.PluginObserver, ``--attack-plugin``), its figures at the end and its part
    of a checkpoint."""

    def observe(self, sender: int, params: Mapping[str, Any], now: float) -> None: ...

    def result(self) -> Mapping[str, Any]: ...

    def state(self) -> Any: ...

    def restore(self, state: Mapping[str, Any]) -> None: ...


class GossipNode:
    """One pure node: a protocol plus its sampler, with timers and messages routed to each."""

    def __init__(self, protocol: GossipProtocol) -> None:
        self.protocol = protocol
        self.sampler = protocol.sampler
        self.node_id = protocol.node_id
        #: its part in PARD's public set D_pub (protocols/public.py); None: it runs no PARD
        self.board: PublicBoard | None = None
        #: a user's attack (adversary/plugin.py, ``--attack-plugin``): shown every model this
        #: node receives before it merges it; None: none
        self.attack_plugin: ModelObserver | None = None
        #: its part in the peer-to-peer KNN service (protocols/knn.py); None: it runs none
        self.knn: KnnService | None = None

    def handle(self, event: Event, now: float, rng: random.Random) -> list[Effect]:
        """The node's one entry: an event in, the effects for the driver out (with the rows of
        D_pub it sends beside its models, under PARD)."""
        effects = self._handle(event, now, rng)
        return effects if self.board is None else self.board.outgoing(effects)

    def _handle(self, event: Event, now: float, rng: random.Random) -> list[Effect]:
        if isinstance(event, Received):
            return self.on_message(event.sender, event.message, now, rng)
        if isinstance(event, TimerFired):
            return self.on_timer(event.key, now, rng)
        if isinstance(event, Delivered):
            self.on_delivered(event.peer)
            return []
        if isinstance(event, Unreachable):
            return self.on_unreachable(event.peer, now, rng)
        return self.start(now, rng)

    def start(self, now: float, rng: random.Random) -> list[Effect]:
        knn = [] if self.knn is None else self.knn.start(now)
        return [*self.sampler.start(now, rng), *self.protocol.start(now, rng), *knn]

    def on_timer(self, key: str, now: float, rng: random.Random) -> list[Effect]:
        if key == WAKE_TIMER:
            effects = self.protocol.on_wake(now, rng)
            if self.knn is not None:  # view candidates: a few of the sampler's peers probed
                effects += self.knn.on_wake(now, self.sampler.out_view())
            return effects
        if key.startswith("ps:"):
            return self.sampler.on_timer(key, now, rng)
        if key.startswith("knn:"):
            return [] if self.knn is None else self.knn.on_timer(key, now)
        return self.protocol.on_timer(key, now, rng)

    def on_message(self, sender: NodeId, message: object, now: float, rng: random.Random) -> list[Effect]:
        self.sampler.note_alive(sender)
        if isinstance(message, PublicMessage):
            if self.board is not None:  # the intake refuses rows to a node without a board
                self.board.take(sender, message)
            return []
        if isinstance(message, KnnProbe | KnnProfile | KnnAsk | KnnAnswer):
            # the intake refuses them to a node without the service
            return [] if self.knn is None else self.knn.on_message(sender, message, now)
        if isinstance(message, ModelMessage | FedMessage):
            if self.protocol.gate is not None:
                self.protocol.gate.spend(sender, now)
            plugin = self.attack_plugin
            if plugin is not None and (isinstance(message, ModelMessage) or message.kind == "update"):
                plugin.observe(int(sender), message.params, now)
            return self.protocol.on_model(sender, message, now, rng)
        return self.sampler.on_message(sender, message, now, rng)

    def on_unreachable(self, peer: NodeId, now: float, rng: random.Random) -> list[Effect]:
        self.sampler.note_unreachable(peer)
        return self.sampler.on_unreachable(peer, now, rng)

    def on_delivered(self, peer: NodeId) -> None:
        self.sampler.note_alive(peer)

    def leave(self) -> list[Effect]:
        """The node leaves the network for good: what it tells its peers (its sampler decides)."""
        return self.sampler.leave()

    def admit(self, sender: NodeId, now: float, collusion: bool = False) -> str | None:
        """Why a model (``collusion``: a colluder's multicast) from ``sender`` must be refused
        before its body is read (None: read it). Asked by the driver after the frame's envelope
        checks; a refusal changes nothing. An honest node takes no multicasts."""
        return "not-colluder" if collusion else self.protocol.admit(sender, now)

    def charge(self, sender: NodeId, now: float) -> None:
        """A model from ``sender`` passed the sender gate and was then refused (its body did not
        parse, or it was too far): it costs the sender a token as a taken model does, so a member
        cannot probe the distance bound for free (THREAT_MODEL.md)."""
        if self.protocol.gate is not None:
            self.protocol.gate.spend(sender, now)

    def vet(self, message: object) -> str | None:
        """Why a decoded message must be refused before the node takes it (None: take it).
        Asked by the driver between decoding and delivery, so a refusal changes nothing."""
        if isinstance(message, ModelMessage | FedMessage):
            return self.protocol.vet(message)
        return None

    def admit_public(self, sender: NodeId) -> str | None:
        """Why rows of D_pub from ``sender`` must be refused before their body is read."""
        return "not-public" if self.board is None else self.board.admit(sender)

    def vet_public(self, sender: NodeId, message: PublicMessage) -> str | None:
        """Why parsed rows of D_pub must be refused (another user's row from a publisher)."""
        return "not-public" if self.board is None else self.board.vet(sender, message)

    # -- what the host reads of a node: its checkpoint, and what an attacking node adds --------

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps: the sampler's and the protocol's state, and the attack's
        (``observer``: None for an honest node)."""
        out = {"sampler": self.sampler.state(), "protocol": self.protocol.state(), "observer": None}
        if self.attack_plugin is not None:
            out["attack_plugin"] = self.attack_plugin.state()
        return out

    def restore(self, state: Mapping[str, Any]) -> None:
        """Take back a :meth:`state`; refuses one written by a node that attacked (or, for an
        attacking node, one that did not) before changing anything."""
        attacked = state.get("observer") is not None or state.get("aia") is not None
        if attacked != (self.observed_users() is not None):
            raise ValueError("checkpoint and configuration disagree on whether this node attacks")
        self.sampler.restore(state["sampler"])
        self.protocol.restore(state["protocol"])
        if self.attack_plugin is not None and state.get("attack_plugin") is not None:
            self.attack_plugin.restore(state["attack_plugin"])  # else: it starts over

    def collusion_template(self, params: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The tensors a partner's collusion multicast carries, given this node's model
        ``params`` (None: the node takes no multicasts, as every honest node)."""
        return None

    def observed_users(self) -> int | None:
        """How many users' models an attacking node has observed (None: it observes nothing)."""
        return None
