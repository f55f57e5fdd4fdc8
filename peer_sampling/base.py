"""The interface every peer sampler implements, and the static k-regular view."""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from p2pcore.effects import Effect, NodeId
from p2pcore.roundtrips import RoundTrips

SUSPECT_AFTER = 2  #: consecutive undelivered sends before a peer is skipped
PROBE_CHANCE = 0.1  #: share of sends that still try the suspected peers (a peer that came back rejoins)


class PeerSampler(ABC):
    """A node's view of the network. Pure: time and randomness come in as arguments.

    Timer keys a sampler sets start with ``"ps:"``; the node routes those timers back here.
    """

    node_id: NodeId
    #: whether :meth:`expects` knows who may send to this node (views that form a graph: static,
    #: PeerSwap); a sampler that does not track its in-neighbours expects every member
    tracks_senders = False

    @abstractmethod
    def out_view(self) -> tuple[NodeId, ...]:
        """The peers this node may send models to, in a deterministic order."""

    def in_view(self) -> tuple[NodeId, ...]:
        """The peers known to send to this node (empty when the sampler does not track them)."""
        return ()

    def expects(self, sender: NodeId, now: float) -> bool:
        """Whether ``sender`` may send models to this node at ``now`` (protocols.robust.SenderGate):
        an in-neighbour, for samplers that track them."""
        return True

    def start(self, now: float, rng: random.Random) -> list[Effect]:
        """Effects to run when the node starts (first timers)."""
        return []

    def on_timer(self, key: str, now: float, rng: random.Random) -> list[Effect]:
        """A timer this sampler set has fired."""
        return []

    def on_message(self, sender: NodeId, message: object, now: float, rng: random.Random) -> list[Effect]:
        """A peer-sampling message from ``sender``."""
        return []

    def on_unreachable(self, peer: NodeId, now: float, rng: random.Random) -> list[Effect]:
        """A message to ``peer`` could not be delivered."""
        return []

    def add_seeds(self, seeds: Sequence[tuple[NodeId, str]]) -> None:
        """Contact addresses (``id``, ``id@host:port``) learned after construction, from a real
        process's bootstrap. Samplers whose views are fixed at the start ignore them."""
        return None

    def away(self, ticks: float) -> None:
        """The node was offline for ``ticks`` (it comes back from a checkpoint): what it knew of
        its peers is that much older. Samplers of a fixed population ignore it."""
        return None

    def record_scores(self, scores: Mapping[NodeId, float]) -> None:
        """How well peers' models scored on this node's data (Pers-Gossip's merge reports them);
        samplers that do not choose peers by score ignore them."""
        return None

    def view_changes(self) -> dict[str, int] | None:
        """Counts of this sampler's view changes by outcome (None: it does not change views by
        agreement; PeerSwap reports committed, aborted and why)."""
        return None

    def latency(self) -> RoundTrips | None:
        """The round trips this sampler's requests took (None: it measures none; PeerSwap
        measures its proposals' and lock requests')."""
        return None

    def leave(self) -> list[Effect]:
        """What a node sends when it leaves the network for good (Cyclon: a Leave to its cache;
        samplers of a fixed population send nothing)."""
        return []

    def send_targets(self, rng: random.Random) -> tuple[NodeId, ...]:
        """Where a send-to-all protocol (SAMO) sends: the out-view, less suspected-dead peers."""
        return self._live(self.out_view(), rng)

    def pick(self, rng: random.Random) -> NodeId | None:
        """One peer of the out-view chosen uniformly at random (002 Alg. 1 line 3), skipping
        peers suspected dead unless every peer is suspected."""
        view = self._live(self.out_view(), rng)
        return view[rng.randrange(len(view))] if view else None

    # -- failure suspicion: peers that stop answering are skipped, and probed now and then ------

    @property
    def failures(self) -> dict[NodeId, int]:
        """Consecutive undelivered sends per peer (reset by any sign of life)."""
        found: dict[NodeId, int] | None = self.__dict__.get("_failures")
        if found is None:
            found = {}
            self.__dict__["_failures"] = found
        return found

    def note_unreachable(self, peer: NodeId) -> None:
        self.failures[peer] = self.failures.get(peer, 0) + 1

    def note_alive(self, peer: NodeId) -> None:
        self.failures.pop(peer, None)

    def suspected(self) -> set[NodeId]:
        """Peers of the current out-view that are being skipped."""
        view = set(self.out_view())
        return {p for p, n in self.failures.items() if n >= SUSPECT_AFTER and p in view}

    def _live(self, view: tuple[NodeId, ...], rng: random.Random) -> tuple[NodeId, ...]:
        """``view`` without suspected peers; with PROBE_CHANCE a suspect is kept (it may be
        back), and when every peer is suspected the whole view is used."""
        failures = self.__dict__.get("_failures")
        if not failures:
            return view
        live = tuple(p for p in view if failures.get(p, 0) < SUSPECT_AFTER)
        if not live or len(live) == len(view):
            return view
        return view if rng.random() < PROBE_CHANCE else live

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps of this sampler (plain lists, numbers and strings)."""
        return {"out": list(self.out_view()), "in": list(self.in_view())}

    def restore(self, state: dict[str, Any]) -> None:
        """Take back a :meth:`state`; a swap or shuffle in flight at the time is forgotten."""
        raise NotImplementedError(f"{type(self).__name__} cannot restore a checkpoint")


class StaticView(PeerSampler):
    """Views fixed to the initial random k-regular graph (002 §2.4, static setting)."""

    tracks_senders = True

    def __init__(self, node_id: NodeId, out_view: Sequence[NodeId], in_view: Sequence[NodeId]):
        self.node_id = node_id
        self._out = tuple(sorted(out_view))
        self._in = tuple(sorted(in_view))

    def out_view(self) -> tuple[NodeId, ...]:
        return self._out

    def in_view(self) -> tuple[NodeId, ...]:
        return self._in

    def expects(self, sender: NodeId, now: float) -> bool:
        return sender in self._in

    def restore(self, state: dict[str, Any]) -> None:
        self._out = tuple(sorted(int(n) for n in state["out"]))
        self._in = tuple(sorted(int(n) for n in state["in"]))
