"""The node driver: runs one pure gossip node, executing the effects it returns.

It owns the node's wire state (delta encoder/decoder), its timers on the clock, its counters and
metrics. Peer messages come in through ``accept`` once the host decoded and checked them.
"""

from __future__ import annotations

import dataclasses
import logging
import random
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from adversary.messages import CollusionMessage
from learning.metrics import Figures
from learning.params import Array, ModelSpec, spec_of
from p2pcore.effects import (
    Delivered,
    Dropped,
    Effect,
    Event,
    Learned,
    Merged,
    Received,
    Send,
    SetTimer,
    Started,
    TimerFired,
    Unreachable,
)
from p2pcore.plugin import PluginError
from p2pnode.clock import Clock, TimerHandle
from p2pnode.telemetry.exposure import ExposureLedger
from p2pnode.telemetry.metrics import Metrics, NodeCounters, NodeReadings
from p2pnode.transport.base import Memo, Outcome, SharesFrames, Transport
from p2pnode.transport.refusals import failure_label
from p2pnode.wire.codec import (
    PublicSpec,
    decode_frame,
    decode_public,
    encode_model_body,
    encode_model_frame,
    encode_public_frame,
    encode_sampling_frame,
    frame_head,
    frame_with_body,
    pack_collusion_body,
)
from p2pnode.wire.delta import DeltaDecoder, DeltaEncoder, EncodedModel
from p2pnode.wire.schema import INCARNATION_SHIFT, Channel, MsgType, SharedFrame, WireError
from peer_sampling.messages import Leave
from protocols.gossip import GossipNode
from protocols.knn_messages import KnnAnswer, KnnAsk, KnnProbe, KnnProfile
from protocols.messages import FedMessage, ModelMessage, PublicMessage

log = logging.getLogger("p2pnode.node")


class HostedModel(Protocol):
    """What the driver needs from a node's model: a version, the spec of what it shares, and
    HR@K on held-out data (``None`` for a node without data, like the FedAvg server)."""

    version: int

    @property
    def spec(self) -> ModelSpec: ...

    def evaluate(self) -> float | None: ...

    def ranking(self) -> Figures | None:
        """HR@K (F1@K for PRME), NDCG@K, Recall@K and the reciprocal rank on held-out data from
        one ranking (learning/metrics.py), or None."""
        ...

    @property
    def candidates(self) -> int:
        """How many items the held-out item is ranked among, itself included (0: no data)."""
        ...

    def validation_ranks(self) -> list[int | None]:
        """Its validation items' ranks among their negatives ([] without; the early stop)."""
        ...

    def ranking_under(self, shared: Mapping[str, Array]) -> Figures | None:
        """:meth:`ranking` of its model with a FedAvg global model's shared tensors (None: no data)."""
        ...

    def validation_ranks_under(self, shared: Mapping[str, Array]) -> list[int | None]:
        """:meth:`validation_ranks` of its model with a FedAvg global model's shared tensors."""
        ...

    def popularity(self, counts: npt.NDArray[np.int64]) -> float | None:
        """Its utility had it ranked its candidates by the training split's item ``counts``
        (the popularity baseline), or None for a node without data."""
        ...

    def snapshot(self) -> dict[str, Array]: ...

    def epsilon(self) -> float | None:
        """DP-SGD ε spent so far, or None for a node that does not train with DP-SGD."""
        ...

    #: selective DP-SGD (learning.learner.BaseLearner): models taken before DP-SGD begins (0: none)
    dp_after: int

    @property
    def private(self) -> bool:
        """Whether its local updates go through DP-SGD now."""
        ...

    def note_delivered(self) -> None:
        """A peer took one of its models."""
        ...

    def unprotected(self) -> int:
        """Its models peers took before its DP-SGD began."""
        ...


def _finite(value: float | None) -> float:
    """ε for a gauge: +Inf stays +Inf (σ = 0), None (no DP) reads as NaN."""
    return float("nan") if value is None else value


PIN_TTL_TICKS = 1000.0  #: ten rounds
CLOCK_SKEW_S = 5  #: how far ahead of this host's clock another host's may run


class VersionPins(Mapping[int, int]):
    """Per sender, the newest model version taken: an older model from it is refused (409
    ``old-model``), so a late or replayed model cannot roll a node back.

    A pin lasts ``PIN_TTL_TICKS`` after the last model taken from its sender. A member who posts
    a model with version 2⁶⁴ − 1 as some sender, or a sender that restarts without its state,
    is then muted for ten rounds at most, not for good (THREAT_MODEL.md).
    """

    def __init__(self, clock: Clock, ttl: float = PIN_TTL_TICKS) -> None:
        self._clock = clock
        self._ttl = ttl
        self._pins: dict[int, tuple[int, float]] = {}

    def take(self, sender: int, version: int) -> None:
        held = self.get(sender)
        self._pins[sender] = (version if held is None else max(held, version), self._clock.now())

    def load(self, pins: Iterable[tuple[int, int]]) -> None:
        """Pins from a checkpoint, each fresh from now."""
        now = self._clock.now()
        self._pins = {s: (v, now) for s, v in pins}

    def __getitem__(self, sender: int) -> int:
        version, taken = self._pins[sender]
        if self._clock.now() - taken > self._ttl:
            raise KeyError(sender)
        return version

    def __iter__(self) -> Iterator[int]:
        now = self._clock.now()
        return iter([s for s, (_, t) in self._pins.items() if now - t <= self._ttl])

    def __len__(self) -> int:
        return sum(1 for _ in self)


class NodeRuntime:
    """One hosted node: pure state machine + learner + wire state + timers + counters."""

    def __init__(
        self,
        node: GossipNode,
        learner: HostedModel,
        clock: Clock,
        transport: Transport,
        metrics: Metrics,
        rng: random.Random,
        encoder: DeltaEncoder,
        decoder: DeltaDecoder,
        on_learned: Callable[[int, str, bool], None] | None = None,
    ) -> None:
        self.node = node
        self.node_id = node.node_id
        self.learner = learner
        self.clock = clock
        self.transport = transport
        self.rng = rng
        self.encoder = encoder
        self.decoder = decoder
        self.spec = learner.spec
        #: node ids are 0..population-1 (the FedAvg server's included); None: any id
        self.population: int | None = None
        #: which life of this node: a real process sets it from the wall clock at each start (the
        #: simulator leaves it 0); peers' version checks reset when it grows
        self.incarnation = 0
        #: the wall clock (seconds) of a real process: bounds the incarnations peers may claim
        self.wall: Callable[[], float] | None = None
        self.collusion_spec: ModelSpec | None = None
        #: the rows of PARD's D_pub it takes (p2pnode.runners.build sets it under PARD)
        self.public_spec: PublicSpec | None = None
        template = node.collusion_template(learner.snapshot())
        if template is not None:
            self.collusion_spec = spec_of(template)
        if node.observed_users() is not None:
            metrics.cia_observed.labels(str(node.node_id)).set_function(lambda: node.observed_users() or 0)
        self.counters = NodeCounters()
        self.on_learned = on_learned
        #: the merges by sender its host counts (p2pnode/telemetry/exposure.py); None: not counted
        self.ledger: ExposureLedger | None = None
        #: where a real process hears that a user's plug-in failed (:meth:`_handle`)
        self.on_plugin_error: Callable[[PluginError], None] | None = None
        #: counts a message its protocol drops after taking it (SAMO's full buffer); its host sets
        #: it (Host.add), the one place a process counts refusals
        self.count_refusal: Callable[[str], None] | None = None
        self._timers: dict[str, TimerHandle] = {}
        #: the last multicast: its message, packed body, and the memo its partners' frames share
        self._multicast: tuple[CollusionMessage, bytes, dict[str, object]] | None = None
        #: a transport that carries a multicast's frames as one body (the simulator's network)
        self._sharing = transport if isinstance(transport, SharesFrames) else None
        #: the global model a FedAvg server is sending this turn: message, wire version, packed
        #: body and the memo its clients' frames share (dropped when the turn's effects are done)
        self._broadcast: tuple[FedMessage, int, memoryview, Memo] | None = None
        self.stopped = False
        #: per sender: newest model version taken, forgotten PIN_TTL_TICKS after it was taken
        self.last_version = VersionPins(clock)
        label = str(self.node_id)
        metrics.watch(
            label,
            NodeReadings(self.counters, lambda: len(node.sampler.out_view()), lambda: learner.version),
        )
        self._metrics = metrics
        self._label = label
        self._m_recoveries = metrics.recoveries.labels(label)
        self._m_peers_left = metrics.peers_left.labels(label)
        self._m_round = metrics.round.labels(label)
        self._m_hit = metrics.hit_ratio.labels(label)
        self._m_figures = (
            metrics.ndcg.labels(label),
            metrics.recall.labels(label),
            metrics.reciprocal_rank.labels(label),
        )
        self._m_merges = metrics.merges.labels(label)
        self._m_steps = metrics.local_steps.labels(label)
        knn = node.knn
        if knn is not None:  # read at scrape time: the service's own counts
            for figure, read in (
                ("data_usage", lambda: knn.stats.usage),
                ("real", lambda: knn.stats.real),
                ("randomized", lambda: knn.stats.randomized),
                ("epsilon", lambda: knn.epsilon),
                ("queries", lambda: len(knn.done)),
            ):
                metrics.knn.labels(label, figure).set_function(read)
        if learner.epsilon() is not None:  # read at scrape time: the accountant is the source
            metrics.dp_epsilon.labels(label).set_function(lambda: _finite(learner.epsilon()))
            if learner.dp_after:  # selective DP-SGD: the models that left before the switch
                metrics.dp_unprotected.labels(label).set_function(learner.unprotected)
        self._synced = (0, 0)
        self._swaps_synced: dict[str, int] = {}
        self._bounded_synced: dict[str, int] = {}
        self.round = 0
        self.last_hit: float | None = None
        #: this adversary's latest CIA accuracy and upper bound (None: not an evaluated adversary)
        self.last_attack: tuple[float, float] | None = None

    # -- checkpoints (p2pnode/data/checkpoint.py) ----------------------------------------------------

    def checkpoint_state(self) -> dict[str, Any]:
        """Everything needed to continue after a restart (delta bases are not kept: peers fall
        back to full models, as they do for any receiver that lacks the base)."""
        learner: Any = self.learner
        version, internal, gauss = self.rng.getstate()
        node = self.node.state()
        return {
            "node": self.node_id,
            "round": self.round,
            "learner": learner.state(),
            "sampler": node["sampler"],
            "protocol": node["protocol"],
            "last_version": [[s, v] for s, v in sorted(self.last_version.items())],
            "incarnation": self.incarnation,
            "rng": [version, list(internal), gauss],
            "observer": node["observer"],
            #: its traffic counts, so a resumed run's models and bytes carry on as its merges do
            "counters": dataclasses.asdict(self.counters),
            **({"aia": node["aia"]} if node.get("aia") is not None else {}),  # attribute inference's
            **({"knn": self.node.knn.state()} if self.node.knn is not None else {}),  # its DataUsage
            **self._public_state(),
            #: when it was taken (a real process's wall clock): a restart ages the views by the gap
            "saved_at": None if self.wall is None else self.wall(),
        }

    def _public_state(self) -> dict[str, bytes]:
        """PARD: the rows of D_pub this node holds, as the PUBLIC frame that would carry them
        (restored through the same checks as one received)."""
        board = self.node.board
        if board is None or not board.rows:
            return {}
        return {"public": encode_public_frame(self.node_id, self.node_id, board.held())}

    def _public_rows(self, state: dict[str, Any]) -> PublicMessage | None:
        """The rows of D_pub a checkpoint holds, through a received frame's checks (None: none)."""
        if "public" not in state:
            return None
        data = state["public"]
        if self.node.board is None or not isinstance(data, bytes):
            raise ValueError("checkpoint holds rows of D_pub this node cannot take")
        try:
            rows = decode_public(decode_frame(data, len(data)), self.public_spec)
        except WireError as exc:
            raise ValueError(f"checkpoint's rows of D_pub: {exc}") from exc
        if not set(rows.users) <= self.node.board.publishers or self.node_id in rows.users:
            raise ValueError("checkpoint's rows of D_pub name a user who does not publish")
        return rows

    def away(self, ticks: float) -> None:
        """Its views aged by ``ticks`` while its process was down (a resume from a checkpoint)."""
        self.node.sampler.away(ticks)

    def restore_state(self, state: dict[str, Any]) -> None:
        """Take back a :meth:`checkpoint_state` of this node (same id and configuration)."""
        if int(state["node"]) != self.node_id:
            raise ValueError(f"checkpoint of node {state['node']} given to node {self.node_id}")
        attacked = state["observer"] is not None or state.get("aia") is not None
        if attacked != (self.node.observed_users() is not None):
            raise ValueError("checkpoint and configuration disagree on whether this node attacks")
        public = self._public_rows(state)  # checked before anything is restored
        counters = _counters(state.get("counters"))
        if ("knn" in state) != (self.node.knn is not None):
            raise ValueError("checkpoint and configuration disagree on whether this node runs --knn")
        if self.node.knn is not None:  # parsed whole before it changes anything, as the rows above
            self.node.knn.restore(state["knn"])
        learner: Any = self.learner
        learner.restore(state["learner"])
        self.node.restore(state)
        if self.node.board is not None:
            self.node.board.restore(public)
        self.last_version.load((int(s), int(v)) for s, v in state["last_version"])
        self.incarnation = max(self.incarnation, int(state.get("incarnation", 0)) + 1)
        version, internal, gauss = state["rng"]
        self.rng.setstate((int(version), tuple(int(x) for x in internal), gauss))
        self.round = int(state["round"])
        self._m_round.set(self.round)
        if counters is not None:  # a checkpoint from before they were kept starts them at 0
            for f in dataclasses.fields(counters):  # in place: /metrics reads this same object
                setattr(self.counters, f.name, getattr(counters, f.name))

    def _handle(self, event: Event) -> list[Effect]:
        """The pure node's answer to ``event``. A user's plug-in that fails (``PluginError``)
        ends a real process through :attr:`on_plugin_error` (an HTTP handler or a timer would
        otherwise swallow it and the run would end as if nothing happened); in the simulator,
        which sets none, it propagates to the caller."""
        try:
            return self.node.handle(event, self.clock.now(), self.rng)
        except PluginError as exc:
            if self.on_plugin_error is None:
                raise
            self.on_plugin_error(exc)
            return []

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        self.execute(self._handle(Started()))

    def pause(self) -> None:
        """Cancel the node's timers; it keeps answering peers (used to freeze a node for checks)."""
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()

    def leave(self) -> None:
        """Tell the peers this node is leaving (Cyclon: a Leave to each peer in its cache)."""
        if not self.stopped:
            self.execute(self.node.leave())

    def stop(self) -> None:
        """Stop: no timers, and later frames are answered 503."""
        self.stopped = True
        self.pause()

    def resume(self) -> None:
        """Undo :meth:`stop` (a node of the simulator coming back); :meth:`start` sets its timers."""
        self.stopped = False

    def set_attack_gauges(self, accuracy: float, bound: float) -> None:
        """Publish this adversary's latest CIA accuracy and upper bound."""
        self.last_attack = (accuracy, bound)
        self._metrics.cia_accuracy.labels(self._label).set(accuracy)
        self._metrics.cia_upper_bound.labels(self._label).set(bound)

    def publish_aia(self, observer: str, scores: dict[str, Any]) -> None:
        """Publish attribute inference's latest scores (``adversary.aia.attack_all``) on /metrics."""
        m = self._metrics
        m.aia_observed.labels(observer).set(scores["observed"])
        for name, score in scores["attributes"].items():
            key = "auc" if "auc" in score else "micro_f1"
            m.aia_score.labels(observer, name).set(score[key])
            m.aia_baseline.labels(observer, name).set(score["majority"].get(key, float("nan")))

    def publish_mia(self, observer: str, row: Mapping[str, Any]) -> None:
        """Publish the membership attack's latest figures (``AttackLab.evaluate_mia``) on /metrics."""
        gauge = self._metrics.mia
        gauge.labels(observer, "oracle_accuracy").set(row["accuracy"])
        if "observed" in row:  # a placed observer: the users it holds a model of
            gauge.labels(observer, "observed").set(row["observed"])
        pooled = row.get("pooled")
        if isinstance(pooled, Mapping):
            gauge.labels(observer, "auc").set(pooled["auc"])
            gauge.labels(observer, "balanced_accuracy").set(pooled["balanced_accuracy"])
            for key, tpr in pooled["tpr_at_fpr"].items():
                gauge.labels(observer, f"tpr_at_fpr_{key}").set(tpr)
        if "audit_epsilon" in row:
            gauge.labels(observer, "audit_epsilon").set(row["audit_epsilon"])

    def publish_exposure(self, summary: Mapping[str, Any]) -> None:
        """Publish the process's exposure figures (p2pnode/telemetry/exposure.py) on /metrics."""
        gauge = self._metrics.exposure
        for figure in ("tau", "above_tau", "privacy_risk"):
            if figure in summary:
                gauge.labels(figure).set(summary[figure])
        gauge.labels("usage_max").set(summary["usage"]["max"])

    def record_round(self, round_no: int, figures: Figures | None) -> None:
        """Publish the round, the latest evaluation (HR@K, NDCG@K, Recall@K, reciprocal rank)
        and the protocol's counters."""
        self.round = round_no
        self.last_hit = None if figures is None else figures.utility
        self._m_round.set(round_no)
        if figures is not None:
            self._m_hit.set(figures.utility)
            for gauge, value in zip(self._m_figures, figures[1:], strict=True):
                gauge.set(value)
        stats = self.node.protocol.stats
        merges, steps = self._synced
        self._m_merges.inc(stats.merges - merges)
        self._m_steps.inc(stats.local_steps - steps)
        self._synced = (stats.merges, stats.local_steps)
        for how, value in (("clipped", stats.clipped), ("banded", stats.banded), ("damped", stats.damped)):
            done = self._bounded_synced.get(how, 0)
            if value > done:  # a series only for nodes that bound any
                self._metrics.bounded.labels(self._label, how).inc(value - done)
            self._bounded_synced[how] = value
        swaps = self.node.sampler.view_changes()
        if swaps is not None:
            for outcome, value in (
                ("committed", swaps["committed"]),
                ("aborted", swaps["aborted"]),
                ("skipped-busy", swaps["skipped_busy"]),
                ("unconfirmed", swaps.get("unconfirmed", 0)),
                ("vetoed", swaps.get("vetoed", 0)),
            ):
                done = self._swaps_synced.get(outcome, 0)
                self._metrics.view_changes.labels(self._label, outcome).inc(value - done)
                self._swaps_synced[outcome] = value

    # -- effects --------------------------------------------------------------------------------

    def execute(self, effects: list[Effect]) -> None:
        try:
            self._execute(effects)
        finally:
            self._broadcast = None  # its frames hold the body while they are on their way

    def _execute(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, Send):
                self._send(effect.to, effect.message)
            elif isinstance(effect, SetTimer):
                self._set_timer(effect.key, effect.at)
            elif isinstance(effect, Learned):
                if self.on_learned is not None:
                    self.on_learned(effect.node, effect.address, effect.first_hand)
            elif isinstance(effect, Dropped) and effect.reason == "non-finite":
                # the protocol counted it (GossipNode.train); a node that keeps diverging (a learning
                # rate too high for its data, or a member's poisoned models) is logged O(log n)
                # times, not once a round
                self._m_recoveries.inc()
                count = self.node.protocol.stats.recoveries
                if count & (count - 1) == 0:  # 1st, 2nd, 4th, 8th, ...
                    log.warning(
                        "node %s: its model went non-finite; back to its last good model (%d time%s so "
                        "far; logged at powers of two, each counted in p2pnode_model_recoveries_total)",
                        self.node_id,
                        count,
                        "" if count == 1 else "s",
                    )
            elif isinstance(effect, Dropped) and self.count_refusal is not None:
                self.count_refusal(effect.reason)
            elif isinstance(effect, Merged) and self.ledger is not None:
                self.ledger.record(self.node_id, effect.senders)

    def _set_timer(self, key: str, at: float) -> None:
        old = self._timers.pop(key, None)
        if old is not None:
            old.cancel()
        if at == float("inf") or self.stopped:
            return

        def fire() -> None:
            self._timers.pop(key, None)
            if not self.stopped:
                self.execute(self._handle(TimerFired(key)))

        self._timers[key] = self.clock.call_at(at, fire)

    def _send(self, peer: int, message: object) -> None:
        if self.stopped:
            return
        if isinstance(message, ModelMessage | FedMessage):
            self._send_model(peer, message, allow_delta=True)
            return
        if isinstance(message, CollusionMessage):
            if self._multicast is None or self._multicast[0] is not message:
                self._multicast = (message, pack_collusion_body(message), {})
            _, body, memo = self._multicast
            self.counters.multicasts_sent += 1
            if self._sharing is not None:  # one body for every partner (transport.base.SharesFrames)
                shared = SharedFrame(frame_head(MsgType.COLLUDE, self.node_id, peer), body)
                self._account(Channel.COLLUDE, len(shared))
                self._sharing.send_shared(
                    self.node_id, peer, Channel.COLLUDE, shared, lambda out: self._sent(peer, out), memo
                )
                return
            frame = frame_with_body(MsgType.COLLUDE, self.node_id, peer, body)
            self._account(Channel.COLLUDE, len(frame))
            self.transport.send(
                self.node_id, peer, Channel.COLLUDE, frame, lambda out: self._sent(peer, out), memo
            )
            return
        if isinstance(message, PublicMessage):
            public = encode_public_frame(self.node_id, peer, message)
            self._account(Channel.GOSSIP, len(public))
            self.transport.send(self.node_id, peer, Channel.GOSSIP, public, lambda out: self._sent(peer, out))
            return
        data = encode_sampling_frame(self.node_id, peer, message)
        knn = isinstance(message, KnnProbe | KnnProfile | KnnAsk | KnnAnswer)
        channel = Channel.KNN if knn else Channel.SAMPLING
        self._account(channel, len(data))
        self.transport.send(self.node_id, peer, channel, data, lambda out: self._sent(peer, out))

    def wire_version(self, version: int) -> int:
        """The version a model carries on the wire: the incarnation above the model's own count,
        so that every model of a restarted node is newer than any of its previous life."""
        return (self.incarnation << INCARNATION_SHIFT) | version

    def _send_model(self, peer: int, message: ModelMessage | FedMessage, allow_delta: bool) -> None:
        if not allow_delta:
            self.encoder.forget(peer)
        wire_version = self.wire_version(message.version)
        encoded = self.encoder.encode(peer, wire_version, message.params)
        shared: tuple[SharedFrame, Memo] | None = None
        data: SharedFrame | memoryview
        if isinstance(message, FedMessage):
            kind = MsgType.FED_GLOBAL if message.kind == "global" else MsgType.FED_UPDATE
            if kind is MsgType.FED_GLOBAL and self._sharing is not None and not encoded.is_delta:
                shared = self._global_frame(peer, message, wire_version, encoded)
                data = shared[0]
            else:
                data = encode_model_frame(self.node_id, peer, encoded, kind, message.round)
        else:
            data = encode_model_frame(self.node_id, peer, encoded)
        self._account(Channel.GOSSIP, len(data))
        self.counters.models_sent += 1
        if encoded.is_delta:
            self.counters.delta_models_sent += 1

        version = message.version
        kept: ModelMessage | FedMessage | None = message  #: to send again whole on ``no-base``
        if isinstance(message, FedMessage) and message.kind == "update" and not encoded.is_delta:
            # A client's update is the snapshot of a model that loaded the whole global model
            # just before it trained, so its next update differs from this one in every row the
            # round's clients touched and goes whole; the open base on its live model (learning/
            # history.py) serves the rare delta. Nothing here keeps the snapshot or its body while
            # the update is on its way: of a POI-shaped round's 1,083 updates in flight at once,
            # each held its 4.9 MB snapshot beside its 4.9 MB frame (bench.fedavg_memory).
            kept = None
            encoded = encoded._replace(body={}, view={})

        def done(outcome: Outcome) -> None:
            self._model_sent(peer, version, kept, encoded, outcome)

        if shared is not None and self._sharing is not None:
            self._sharing.send_shared(self.node_id, peer, Channel.GOSSIP, shared[0], done, shared[1])
        else:
            assert not isinstance(data, SharedFrame)
            self.transport.send(self.node_id, peer, Channel.GOSSIP, data, done)

    def _global_frame(
        self, peer: int, message: FedMessage, wire_version: int, encoded: EncodedModel
    ) -> tuple[SharedFrame, Memo]:
        """A FedAvg server's global model to ``peer`` as one frame of the turn's broadcast: the
        body packed once for every selected client (each frame the bytes encode_model_frame
        makes), and the memo their receivers share (the first unpacks the body for the rest)."""
        cast = self._broadcast
        if cast is None or cast[0] is not message or cast[1] != wire_version:
            cast = (message, wire_version, encode_model_body(encoded, message.round), {})
            self._broadcast = cast
        return SharedFrame(frame_head(MsgType.FED_GLOBAL, self.node_id, peer), cast[2]), cast[3]

    def _model_sent(
        self,
        peer: int,
        version: int,
        message: ModelMessage | FedMessage | None,
        encoded: EncodedModel,
        outcome: Outcome,
    ) -> None:
        """The answer to a model sent. ``message``: the model, kept to send it again whole where a
        delta of it finds no base; None where it was sent whole and not kept (a FedAvg update).
        Either way the send no longer holds the bases it opened or was made against."""
        try:
            if outcome.ok:
                view = encoded.view if message is not None else None
                self.encoder.acknowledged(peer, self.wire_version(version), view)
                self.learner.note_delivered()  # its DataUsage bound: selective DP-SGD counts it
                self._handle(Delivered(peer))
                return
            self.encoder.forget(peer)
            retry = outcome.reason == "no-base" and encoded.is_delta and not self.stopped
            if retry and message is not None:
                self._send_model(peer, message, allow_delta=False)
                return
            self._sent(peer, outcome)
        finally:
            self.encoder.settled(encoded)

    def _sent(self, peer: int, outcome: Outcome) -> None:
        if outcome.ok or self.stopped:
            return
        self.counters.send_failures += 1
        self._metrics.send_failures.labels(self._label, failure_label(outcome.status, outcome.reason)).inc()
        if outcome.status == 0:
            self.execute(self._handle(Unreachable(peer)))

    def _account(self, channel: Channel, nbytes: int) -> None:
        c = self.counters
        c.messages_sent += 1
        c.bytes_sent += nbytes
        if channel is Channel.GOSSIP:
            c.gossip_sent += 1
        elif channel is Channel.SAMPLING:
            c.sampling_sent += 1
        elif channel is Channel.KNN:
            c.knn_sent += 1
        else:
            c.collude_sent += 1

    # -- incoming -------------------------------------------------------------------------------

    @property
    def newest_incarnation(self) -> int | None:
        """A sender's incarnation is its start's wall second: none can be later than now (plus
        the allowed clock skew). None in the simulator, where every incarnation is 0."""
        return None if self.wall is None else int(self.wall()) + CLOCK_SKEW_S

    def admit(self, sender: int, collusion: bool = False) -> str | None:
        """The pure node's verdict on a model's (or multicast's) sender, before its body is read
        (p2pnode.nodes.intake asks it)."""
        return self.node.admit(sender, self.clock.now(), collusion)

    def vet(self, message: object) -> str | None:
        """The pure node's verdict on a decoded message (p2pnode.nodes.intake asks it)."""
        return self.node.vet(message)

    def charge(self, sender: int) -> None:
        """A model from ``sender`` admitted and then refused costs it as a taken one does."""
        self.node.charge(sender, self.clock.now())

    def admit_public(self, sender: int) -> str | None:
        """The pure node's verdict on rows of D_pub from ``sender``, before their body is read."""
        return self.node.admit_public(sender)

    def vet_public(self, sender: int, message: PublicMessage) -> str | None:
        """The pure node's verdict on parsed rows of D_pub."""
        return self.node.vet_public(sender, message)

    def admit_knn(self, sender: int) -> str | None:
        """Why a KNN service message must be refused before its body is read (no service here)."""
        return None if self.node.knn is not None else "not-knn"

    def vet_knn(self, sender: int, message: object) -> str | None:
        """The KNN service's verdict on a parsed message (protocols.knn.KnnService.vet)."""
        knn = self.node.knn
        return "not-knn" if knn is None else knn.vet(sender, message)

    def accept(self, sender: int, message: object, nbytes: int) -> Outcome:
        """Take a message ``p2pnode.nodes.intake.take`` accepted for this node: count it and hand it to
        the pure node."""
        self.counters.bytes_received += nbytes
        if isinstance(message, ModelMessage | FedMessage):
            self.counters.models_received += 1
            self.last_version.take(sender, message.version)
        elif isinstance(message, Leave):
            self._m_peers_left.inc()
        self.execute(self._handle(Received(sender, message)))
        return Outcome(200)

    @property
    def rejected(self) -> dict[str, int]:
        """Its refusals per reason, counted by its host (p2pnode.transport.refusals.Refusals)."""
        return self.counters.rejected


def _counters(raw: Any) -> NodeCounters | None:
    """A checkpoint's traffic counts, checked whole (non-negative integers, by name) before any
    is taken; None where the checkpoint has none."""
    if raw is None:
        return None
    names = {f.name for f in dataclasses.fields(NodeCounters)}
    if not isinstance(raw, dict) or not set(raw) <= names:
        raise ValueError("checkpoint's counters are not a node's counters")
    rejected = raw.get("rejected", {})
    plain = {k: v for k, v in raw.items() if k != "rejected"}
    if not isinstance(rejected, dict) or not all(
        isinstance(k, str) and type(v) is int and v >= 0 for k, v in rejected.items()
    ):
        raise ValueError("checkpoint's refusal counts are not counts")
    if not all(type(v) is int and v >= 0 for v in plain.values()):
        raise ValueError("checkpoint's counters are not non-negative integers")
    return NodeCounters(**plain, rejected=dict(rejected))
