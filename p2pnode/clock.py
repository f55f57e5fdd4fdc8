"""One clock interface in ticks: virtual (discrete-event) for the simulator, monotonic for real runs."""

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


class _VirtualHandle:
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
        self._queue: list[tuple[float, int, _VirtualHandle, Callable[[], None]]] = []
        self._seq = itertools.count()
        self.events = 0

    def now(self) -> float:
        return self._now

    def call_at(self, when: float, callback: Callable[[], None]) -> _VirtualHandle:
        handle = _VirtualHandle()
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
