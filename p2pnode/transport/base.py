"""The transport interface: move one frame to a node, report the outcome; nothing else."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from p2pnode.wire.schema import Channel, SharedFrame

UNREACHABLE = 0  # status reported when no answer came back (refused, timeout, dropped)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What happened to a frame: an HTTP-style status (200 accepted) and a short reason."""

    status: int
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.status == 200


#: the raw bytes of one frame as a transport carries them (``wire.codec.Frame`` is the decoded envelope)
Payload = bytes | memoryview
OnDone = Callable[[Outcome], None]
#: what the frames of one multicast share between the partners of one process (p2pnode.nodes.intake.take:
#: the first partner's decode of the common body); None for any other frame
Memo = dict[str, object]


class Receiver(Protocol):
    """The side of a host that takes frames in (the single decode/dispatch point)."""

    def receive(
        self,
        dest: int,
        channel: Channel,
        data: Payload | SharedFrame,
        *,
        local: bool = False,
        memo: Memo | None = None,
    ) -> Outcome:
        """``local``: the frame comes from a node of the same process; ``memo``: shared with the
        other frames of its multicast (only such a frame has one, and a SharedFrame always)."""
        ...


class Transport(Protocol):
    """Sends frames; ``on_done`` is called exactly once with the outcome."""

    def send(
        self, src: int, dst: int, channel: Channel, data: Payload, on_done: OnDone, memo: Memo | None = None
    ) -> None:
        """``memo``: shared by the frames of one multicast; a receiver in this process may take the
        body's decode from it (a frame sent over a socket goes without)."""
        ...


@runtime_checkable
class SharesFrames(Protocol):
    """A transport within one process that carries the frames of a multicast as one body behind
    a head each (the simulator's network): the sender packs the body once, the network holds it
    once, the first receiver unpacks it for the others (wire.codec.decode_frame)."""

    def send_shared(
        self, src: int, dst: int, channel: Channel, frame: SharedFrame, on_done: OnDone, memo: Memo
    ) -> None:
        """Send ``frame``, one of a multicast whose frames share ``frame.body`` and ``memo``."""
        ...
