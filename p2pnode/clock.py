"""One clock interface in ticks: virtual (discrete-event) for the simulator, monotonic for real
runs, and the real runs' elastic one, which holds back while its process runs behind."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable
from typing import Protocol


class TimerHandle(Protocol):
    def cancel(self) -> None: ...


class Clock(Protocol):
    """Time in ticks and callbacks at a tick."""

    def now(self) -> float: ...

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle: ...


class _Handle:
    """A timer of a clock that keeps its own queue (virtual, elastic): cancelled in place."""

    __slots__ = ("cancelled",)

    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class VirtualClock:
    """Discrete-event clock: ``run_until`` jumps from one scheduled callback to the next.

    Callbacks at the same tick run in the order they were scheduled, so a run is reproducible.
    """

    def __init__(self) -> None:
        self._now = 0.0
        self._queue: list[tuple[float, int, _Handle, Callable[[], None]]] = []
        self._seq = itertools.count()
        self.events = 0

    def now(self) -> float:
        return self._now

    def call_at(self, when: float, callback: Callable[[], None]) -> _Handle:
        handle = _Handle()
        heapq.heappush(self._queue, (max(when, self._now), next(self._seq), handle, callback))
        return handle

    def run_until(self, until: float) -> None:
        """Run every callback scheduled before ``until`` (including ones they schedule)."""
        queue = self._queue
        while queue and queue[0][0] < until:
            when, _, handle, callback = heapq.heappop(queue)
            if handle.cancelled:
                continue
            self._now = when
            self.events += 1
            callback()
        self._now = max(self._now, until)


class MonotonicClock:
    """Real time on the asyncio loop's monotonic clock; one tick lasts ``tick_seconds``."""

    def __init__(self, tick_seconds: float, loop: asyncio.AbstractEventLoop | None = None) -> None:
        if tick_seconds <= 0:
            raise ValueError("tick_seconds must be positive")
        self.tick_seconds = tick_seconds
        self._loop = loop or asyncio.get_running_loop()
        self._t0 = self._loop.time()

    def now(self) -> float:
        return (self._loop.time() - self._t0) / self.tick_seconds

    def call_at(self, when: float, callback: Callable[[], None]) -> asyncio.TimerHandle:
        return self._loop.call_at(self._t0 + when * self.tick_seconds, callback)


class ElasticClock:
    """Real time in ticks that holds back while its process cannot keep up.

    A tick lasts ``tick_seconds`` while the process's timers fire on time. A process that falls
    behind (the machine is busy, its loop blocked) fires its timers late; where a timer fires
    more than ``slack_ticks`` late, the clock stops for the rest of the delay: the tick it shows
    is then ``slack_ticks`` past the timer's, and every later timer, timeout and round end moves
    back by as much. So what the protocols measure in ticks (PeerSwap's leases and transaction
    timeouts, the sender gate's wake-ups, Cyclon's ages, a KNN answer's deadline, a round) keeps
    its length in the process's own work rather than shrinking to nothing under load, and the
    rounds stretch instead: :meth:`stretch` says by how much. ``slack_ticks`` 0: never holds
    back (the plain monotonic clock's ticks).

    The clock keeps its own timers in order and hands the loop one at a time (the earliest), so
    a hold moves every pending timer at once; timers due together run one per turn of the loop,
    with its I/O between them.
    """

    def __init__(
        self, tick_seconds: float, slack_ticks: float = 0.0, loop: asyncio.AbstractEventLoop | None = None
    ) -> None:
        if tick_seconds <= 0:
            raise ValueError("tick_seconds must be positive")
        if slack_ticks < 0:
            raise ValueError("slack_ticks must be at least 0")
        self.tick_seconds = tick_seconds
        self.slack_ticks = slack_ticks
        self._loop = loop or asyncio.get_running_loop()
        self._t0 = self._loop.time()
        self.held_s = 0.0  #: wall seconds the clock stood still, in all
        self.holds = 0  #: times it held back
        self.worst_lag_s = 0.0  #: the latest a timer fired, in wall seconds
        self._queue: list[tuple[float, int, _Handle, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._armed: tuple[float, asyncio.TimerHandle] | None = None  #: (tick, the loop's handle)

    def now(self) -> float:
        return (self._loop.time() - self._t0 - self.held_s) / self.tick_seconds

    def wall(self, tick: float) -> float:
        """The loop time at which ``tick`` comes if the clock does not hold back before."""
        return self._t0 + self.held_s + tick * self.tick_seconds

    def elapsed_s(self) -> float:
        """Wall seconds since the clock started."""
        return self._loop.time() - self._t0

    def stretch(self) -> float:
        """Wall time so far over the ticks it showed: 1.0 while the process kept up, 1.8 when
        its rounds took 1.8 times their ticks."""
        elapsed = self.elapsed_s()
        shown = elapsed - self.held_s
        return elapsed / shown if shown > 0 else 1.0

    def hold(self, seconds: float) -> None:
        """Stand still for ``seconds`` from now: every pending timer and round end moves back
        by as much (a process told to start its rounds later)."""
        self.held_s += max(0.0, seconds)
        if self._armed is not None:
            self._armed[1].cancel()
            self._armed = None
        self._arm()

    def call_at(self, when: float, callback: Callable[[], None]) -> _Handle:
        handle = _Handle()
        heapq.heappush(self._queue, (when, next(self._seq), handle, callback))
        self._arm()
        return handle

    def _arm(self) -> None:
        queue = self._queue
        while queue and queue[0][2].cancelled:
            heapq.heappop(queue)
        if not queue:
            if self._armed is not None:
                self._armed[1].cancel()
                self._armed = None
            return
        head = queue[0][0]
        if self._armed is not None:
            if self._armed[0] <= head:
                return  # the armed call comes first: it re-arms when it fires
            self._armed[1].cancel()
        self._armed = (head, self._loop.call_at(self.wall(head), self._fire))

    def _fire(self) -> None:
        self._armed = None
        queue = self._queue
        while queue and queue[0][2].cancelled:
            heapq.heappop(queue)
        if not queue:
            return
        when = queue[0][0]
        late = max(0.0, self._loop.time() - self.wall(when))  # (the loop may fire a hair early)
        self.worst_lag_s = max(self.worst_lag_s, late)
        excess = late - self.slack_ticks * self.tick_seconds
        if self.slack_ticks > 0 and excess > 0:
            self.held_s += excess
            self.holds += 1
        callback = heapq.heappop(queue)[3]
        try:
            callback()
        finally:
            self._arm()
