"""Bounded load: a concurrency gate (answer 503 instead of queueing) and per-sender rate limits.

Pure: time is an argument. The HTTP server asks the gate before it reads a body and the rate
limiter after it knows who sent it (the authenticated sender, or the sender the frame claims on
an open node). Refusals are counted in ``p2pnode_rejected_messages_total{reason}``.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    max_inflight: int = 64  #: requests being read or handled at once; more get 503 "busy"
    rate_per_s: float = 20.0  #: sustained frames per second from one sender to one node
    burst: float = 40.0  #: frames a sender may send at once to one node before the rate applies
    max_senders: int = 200_000  #: (sender, node) buckets remembered (least recently used go first)
    max_lag_s: float = 0.1  #: shed new requests (503) while the event loop runs this late (smoothed)

    def __post_init__(self) -> None:
        if self.max_inflight < 1 or self.rate_per_s <= 0 or self.burst < 1 or self.max_senders < 1:
            raise ValueError("limits must be positive (max_inflight, rate, burst >= 1, max_senders)")
        if self.max_lag_s <= 0:
            raise ValueError("max_lag_s must be positive")


class LagShedder:
    """Overload as a single-threaded server sees it: the event loop running late.

    A node reads a model body at once and decodes, merges and trains synchronously, so under
    overload requests wait in socket buffers where no in-flight counter sees them; what grows is
    the delay of every callback. A probe sleeps ``interval`` and records how late it woke
    (smoothed, EWMA 0.3); while that exceeds ``max_lag_s`` new requests get 503 before their body
    is read, which costs far less than serving them, so the queue drains and the lag falls.
    """

    def __init__(self, max_lag_s: float, alpha: float = 0.3) -> None:
        self.max_lag_s = max_lag_s
        self.alpha = alpha
        self.lag_s = 0.0
        self.shed = 0

    def record(self, lag_s: float) -> None:
        self.lag_s = (1 - self.alpha) * self.lag_s + self.alpha * max(0.0, lag_s)

    def overloaded(self) -> bool:
        return self.lag_s > self.max_lag_s


class Gate:
    """At most ``limit`` requests in flight; ``enter`` is False when full (the caller answers 503)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.inflight = 0
        self.peak = 0

    def enter(self) -> bool:
        if self.inflight >= self.limit:
            return False
        self.inflight += 1
        self.peak = max(self.peak, self.inflight)
        return True

    def leave(self) -> None:
        self.inflight -= 1


class RateLimiter:
    """Token buckets per (sender, destination node): ``rate`` tokens a second, ``burst`` at most.

    Gossip sends one model per round to one neighbour, so a legitimate sender is far below the
    defaults; a flood from one sender is cut without touching anybody else's traffic. Buckets
    are kept for the ``max_keys`` most recent pairs; a forgotten pair starts with a full bucket.
    """

    def __init__(self, rate: float, burst: float, max_keys: int) -> None:
        self.rate = rate
        self.burst = burst
        self.max_keys = max_keys
        self._buckets: OrderedDict[tuple[int, int], tuple[float, float]] = OrderedDict()

    def allow(self, sender: int, dest: int, now_s: float) -> bool:
        key = (sender, dest)
        tokens, last = self._buckets.pop(key, (self.burst, now_s))
        tokens = min(self.burst, tokens + max(0.0, now_s - last) * self.rate)
        ok = tokens >= 1.0
        if ok:
            tokens -= 1.0
        self._buckets[key] = (tokens, now_s)
        if len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)
        return ok

    def __len__(self) -> int:
        return len(self._buckets)
