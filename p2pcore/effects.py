"""The contract between the pure state machines and the node driver: the events a machine is
handed and the effects it returns for the driver to carry out."""

from __future__ import annotations

from dataclasses import dataclass

NodeId = int


@dataclass(frozen=True, slots=True)
class Send:
    """Deliver ``message`` to node ``to`` (one-way; the driver reports failures back)."""

    to: NodeId
    message: object


@dataclass(frozen=True, slots=True)
class SetTimer:
    """Call the machine's ``on_timer(key)`` at virtual time ``at`` (ticks); replaces a pending one."""

    key: str
    at: float


@dataclass(frozen=True, slots=True)
class Learned:
    """The driver should remember that ``node`` is reachable at ``address`` (``id@host:port``).

    ``first_hand``: the node itself said so (its own entry in a message it sent); otherwise the
    address was relayed by another node and fills only an address the driver does not know.
    """

    node: NodeId
    address: str
    first_hand: bool = False


@dataclass(frozen=True, slots=True)
class Dropped:
    """The machine let go of something a peer sent (e.g. SAMO's full buffer pushed the oldest
    model out); the driver counts it as a rejection with this ``reason``."""

    reason: str


@dataclass(frozen=True, slots=True)
class Merged:
    """The node merged the models these senders sent it (what p2pnode/telemetry/exposure.py counts)."""

    senders: tuple[NodeId, ...]


Effect = Send | SetTimer | Learned | Dropped | Merged


# -- events: what the driver hands a pure node (``GossipNode.handle``) ----------------------------


@dataclass(frozen=True, slots=True)
class Started:
    """The node starts (first timers)."""


@dataclass(frozen=True, slots=True)
class TimerFired:
    """A timer the node set with ``SetTimer(key, at)`` is due."""

    key: str


@dataclass(frozen=True, slots=True)
class Received:
    """A decoded message from ``sender``."""

    sender: NodeId
    message: object


@dataclass(frozen=True, slots=True)
class Delivered:
    """A message to ``peer`` arrived (the peer is alive)."""

    peer: NodeId


@dataclass(frozen=True, slots=True)
class Unreachable:
    """A message to ``peer`` could not be delivered."""

    peer: NodeId


Event = Started | TimerFired | Received | Delivered | Unreachable
