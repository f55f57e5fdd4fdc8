"""In-memory transport on the virtual clock: deterministic delivery with seeded drop and delay.

The model is hashicorp/memberlist's ``MockNetwork``: every host registers with one network,
frames go through the same encode/decode path as over HTTP, and only the wire is simulated.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass

from p2pnode.clock import VirtualClock
from p2pnode.transport.base import UNREACHABLE, Memo, OnDone, Outcome, Payload, Receiver
from p2pnode.transport.spill import Spill
from p2pnode.wire.schema import Channel, SharedFrame


@dataclass(frozen=True)
class LinkConfig:
    """Delay (ticks, uniform in [min, max]) and drop probability for every frame. ``delays``:
    the delay's quantiles instead, evenly spaced from its least to its most (a delay is drawn
    between two neighbouring ones): the delays a real run measured (``p2plab.selfcheck``)."""

    delay_min: float = 0.0
    delay_max: float = 0.0
    drop: float = 0.0
    delays: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if not 0.0 <= self.drop < 1.0:
            raise ValueError("drop must be in [0, 1)")
        if not 0.0 <= self.delay_min <= self.delay_max:
            raise ValueError("need 0 <= delay_min <= delay_max")
        q = self.delays
        if q and (len(q) < 2 or q[0] < 0 or any(b < a for a, b in itertools.pairwise(q))):
            raise ValueError("delays must be at least two quantiles, from 0 up, in order")

    def draw(self, rng: random.Random) -> float:
        """One frame's delay."""
        if self.delays:
            q = self.delays
            x = rng.random() * (len(q) - 1)
            k = int(x)
            return q[k] + (q[min(k + 1, len(q) - 1)] - q[k]) * (x - k)
        return rng.uniform(self.delay_min, self.delay_max) if self.delay_max else 0.0


class MemoryNetwork:
    """Routes frames between receivers registered by node id. ``spill``: where large frames wait
    for their delivery on disk instead of in memory (p2pnode/transport/spill.py)."""

    def __init__(self, clock: VirtualClock, link: LinkConfig, seed: int, spill: Spill | None = None) -> None:
        self.clock = clock
        self.link = link
        self.spill = spill
        self.rng = random.Random(seed)
        self._receivers: dict[int, Receiver] = {}
        self.down: set[int] = set()
        self.frames = 0
        self.bytes = 0

    def register(self, node_id: int, receiver: Receiver) -> None:
        self._receivers[node_id] = receiver

    def send_shared(
        self, src: int, dst: int, channel: Channel, frame: SharedFrame, on_done: OnDone, memo: Memo
    ) -> None:
        """One frame of a multicast (transport.base.SharesFrames): carried as it is, its body held
        once for all the multicast's frames (and so not spilled: one copy waits, not one a frame)."""
        self.send(src, dst, channel, frame, on_done, memo)

    def send(
        self,
        src: int,
        dst: int,
        channel: Channel,
        data: Payload | SharedFrame,
        on_done: OnDone,
        memo: Memo | None = None,
    ) -> None:
        self.frames += 1
        self.bytes += len(data)
        link = self.link
        delay = link.draw(self.rng)
        dropped = link.drop > 0 and self.rng.random() < link.drop
        receiver = self._receivers.get(dst)
        if dropped or receiver is None or dst in self.down:
            reason = "dropped" if dropped else "no such node"
            self.clock.call_at(self.clock.now() + delay, lambda: on_done(Outcome(UNREACHABLE, reason)))
            return
        if self.spill is not None and not isinstance(data, SharedFrame):
            data = self.spill.keep(data)

        def deliver() -> None:
            if dst in self.down:  # went down while the frame was on its way
                on_done(Outcome(UNREACHABLE, "no such node"))
                return
            on_done(receiver.receive(dst, channel, data, local=True, memo=memo))

        self.clock.call_at(self.clock.now() + delay, deliver)
