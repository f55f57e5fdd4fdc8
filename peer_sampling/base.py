"""The interface every peer sampler implements, and the static k-regular view."""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from peer_sampling.effects import Effect, NodeId


class PeerSampler(ABC):
    """A node's view of the network. Pure: time and randomness come in as arguments.

    Timer keys a sampler sets start with ``"ps:"``; the node routes those timers back here.
    """

    node_id: NodeId

    @abstractmethod
    def out_view(self) -> tuple[NodeId, ...]:
        """The peers this node may send models to, in a deterministic order."""

    def in_view(self) -> tuple[NodeId, ...]:
        """The peers known to send to this node (empty when the sampler does not track them)."""
        return ()

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

    def send_targets(self, rng: random.Random) -> tuple[NodeId, ...]:
        """Where a send-to-all protocol (SAMO) sends: the whole out-view by default."""
        return self.out_view()

    def pick(self, rng: random.Random) -> NodeId | None:
        """One peer of the out-view chosen uniformly at random (002 Alg. 1 line 3)."""
        view = self.out_view()
        return view[rng.randrange(len(view))] if view else None

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps of this sampler (plain lists, numbers and strings)."""
        return {"out": list(self.out_view()), "in": list(self.in_view())}

    def restore(self, state: dict[str, Any]) -> None:
        """Take back a :meth:`state`; a swap or shuffle in flight at the time is forgotten."""
        raise NotImplementedError(f"{type(self).__name__} cannot restore a checkpoint")


class StaticView(PeerSampler):
    """Views fixed to the initial random k-regular graph (002 §2.4, static setting)."""

    def __init__(self, node_id: NodeId, out_view: Sequence[NodeId], in_view: Sequence[NodeId]):
        self.node_id = node_id
        self._out = tuple(sorted(out_view))
        self._in = tuple(sorted(in_view))

    def out_view(self) -> tuple[NodeId, ...]:
        return self._out

    def in_view(self) -> tuple[NodeId, ...]:
        return self._in

    def restore(self, state: dict[str, Any]) -> None:
        self._out = tuple(sorted(int(n) for n in state["out"]))
        self._in = tuple(sorted(int(n) for n in state["in"]))
