"""Bounded load: what one peer, or a stranger, may hold of a process.

Pure: time is an argument. Per remote address the server caps open connections and requests in
flight (:class:`AddressGuard`), so one address never holds the whole process; it authenticates a
request from its headers before it reads the body (p2pnode.trust.auth), reads headers and bodies under
timeouts, answers 503 past a concurrency gate instead of queueing (:class:`Gate`), sheds load
while its event loop runs late (:class:`LagShedder`), and rate limits per (sender, node) once it
knows who sent a frame (:class:`RateLimiter`). Refusals are counted in
``p2pnode_rejected_messages_total{reason}`` (connections in ``p2pnode_refused_connections_total``).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any

from p2pnode.config import check_fields, min_check, opt

#: the slowest a frame may move and still arrive: the time a body gets (and a sender waits) grows
#: by its bytes at this rate, so a 6 MB frame of a POI model gets 6 s more than a 270 kB ML-100k one
MIN_TRANSFER_RATE = 1 << 20  #: bytes a second (8 Mbit/s)
CLIENT_TIMEOUT_S = 10.0  #: what a sender waits for an answer to a small frame


def transfer_time(frame_bytes: int) -> float:
    """Seconds ``frame_bytes`` take at the slowest rate a peer may send at."""
    return frame_bytes / MIN_TRANSFER_RATE


def client_timeout(frame_bytes: int) -> float:
    """What a sender waits for a node to take its largest frame and answer."""
    return CLIENT_TIMEOUT_S + transfer_time(frame_bytes)


_POSITIVE = (lambda v: v > 0, "must be > 0")


def _limit(default: Any, help: str, least: float | None = None) -> Any:
    """A limit with its ``p2pnode run`` flag (``--max-inflight``) and its ``[limits]`` TOML key;
    it must be at least ``least`` (None: above 0)."""
    check = _POSITIVE if least is None else min_check(least)
    return opt(default, help, group="limits", commands=("run",), check=check)


@dataclass(frozen=True)
class Limits:
    """What one peer, or a stranger, may hold of a process (``p2pnode run`` flags and the
    ``[limits]`` table of its ``--config`` file; p2pnode/runners/settings.py)."""

    max_inflight: int = _limit(64, "requests being read or handled at once; more get 503 busy", 1)
    rate_per_s: float = _limit(20.0, "sustained frames per second from one sender to one node")
    burst: float = _limit(40.0, "frames a sender may send at once to one node before the rate applies", 1)
    max_senders: int = _limit(200_000, "(sender, node) rate buckets kept (least recently used go first)", 1)
    max_lag_s: float = _limit(0.1, "shed new requests (503) while the event loop runs this late (smoothed)")
    max_connections_per_address: int = _limit(
        128, "connections one remote address may hold open; more are closed as they are accepted", 1
    )
    max_inflight_per_address: int = _limit(
        48, "POSTs one remote address may have in flight (a sender opens at most 32 per destination)", 1
    )
    max_inflight_per_member: int = _limit(
        32,
        "POSTs one member (one credential, with identities) may have in flight from all its addresses "
        "(a process opens at most 32 at once to one destination)",
        1,
    )
    max_get_inflight: int = _limit(4, "GET /status, /metrics, /v1/members served at once; more get 503", 1)
    header_timeout_s: float = _limit(10.0, "a connection must complete a request's headers within this")
    body_timeout_s: float = _limit(
        15.0, "a request must deliver its whole body within this, plus the time its size takes (else 408)"
    )
    page_cache_s: float = _limit(0.5, "/metrics and /status are rendered at most once per this interval", 0)

    def __post_init__(self) -> None:
        check_fields(self)  # each field's own check, declared with its flag: ConfigError names it

    def sized(self, frame_bytes: int) -> Limits:
        """These limits for frames of up to ``frame_bytes``: the body timeout grows by the time
        such a frame takes at the slowest allowed rate. Only members get that time: a POST is
        authenticated from its headers before its body is read."""
        return replace(self, body_timeout_s=self.body_timeout_s + transfer_time(frame_bytes))


class CappedCounts:
    """A count per key, each at most ``cap``; keys whose count falls to 0 are forgotten. Per
    member (its credential, with identities) it caps requests in flight from all the member's
    addresses (p2pnode.transport.admission): a member with several addresses would otherwise
    hold the process's whole gate with slow uploads (96 at 1 byte a second from 4
    addresses took the honest intake to x0.48); a process opens at most ``CLIENT_PER_HOST``
    connections to one destination, so an honest member never meets that cap."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.counts: dict[str, int] = {}
        self.refused = 0

    def take(self, key: str) -> bool:
        n = self.counts.get(key, 0)
        if n >= self.cap:
            self.refused += 1
            return False
        self.counts[key] = n + 1
        return True

    def __len__(self) -> int:
        return len(self.counts)

    def give_back(self, key: str) -> None:
        n = self.counts.get(key, 0) - 1
        if n > 0:
            self.counts[key] = n
        else:
            self.counts.pop(key, None)


class AddressGuard:
    """Per remote address: connections open and requests in flight, each under its own cap.

    A stranger who opens hundreds of idle or slow connections from one address holds at most
    ``max_connections`` of them, and at most ``max_inflight`` requests, below the process-wide
    gate: the rest of the network keeps its share. Addresses are forgotten when their last
    connection closes, so the table holds only addresses with a connection open.
    """

    def __init__(self, max_connections: int, max_inflight: int) -> None:
        self._open = CappedCounts(max_connections)
        self._inflight = CappedCounts(max_inflight)

    def connect(self, address: str) -> bool:
        return self._open.take(address)

    def sizes(self) -> dict[str, int]:
        """Its tables' entries (``p2pnode_cache_entries``): addresses with a connection open, and
        with a request in flight."""
        return {"address-connections": len(self._open), "address-inflight": len(self._inflight)}

    def disconnect(self, address: str) -> None:
        self._open.give_back(address)

    def enter(self, address: str) -> bool:
        return self._inflight.take(address)

    def leave(self, address: str) -> None:
        self._inflight.give_back(address)

    def connections(self, address: str) -> int:
        return self._open.counts.get(address, 0)

    def inflight(self, address: str) -> int:
        return self._inflight.counts.get(address, 0)

    @property
    def refused_connections(self) -> int:
        return self._open.refused

    @property
    def refused_requests(self) -> int:
        return self._inflight.refused

    @property
    def addresses(self) -> int:
        """Addresses with a connection open (what the guard remembers)."""
        return len(self._open.counts)


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

    def __len__(self) -> int:
        return len(self._buckets)

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
