"""Admission: the checks a POST goes through before its frame is decoded, in the order they run.

The HTTP server (p2pnode/transport/http.py) only moves bytes; what it lets in is decided here,
without sockets, from what a request shows: its path and headers, the address it came from, its
declared length, then its body. Every refusal is counted against its addressee through the host
(``p2pnode_rejected_messages_total{reason}``) and changes nothing. The order (each step sees only
requests the earlier ones let through):

1. ``authenticate``: with a cluster key, the headers alone (MAC, identity, replay: p2pnode.trust.auth),
   401/403/409, then the per-(sender, node) rate limit, 429. A stranger's body is never read.
2. ``enter``: the process is accepting (503 ``starting``, after the headers so a stranger learns
   nothing), the requests in flight from the remote address and (with identities) from the
   member's credential at any address, the event loop's lag for a model-sized body, the requests
   in flight in the whole process (503 ``busy``).
3. ``check_length``: the declared length (413 ``too-large``).
4. the body, read by the server within ``body_timeout_s``: ``body_failed`` names what went wrong
   (413, 408 ``slow-body``, 400 ``truncated``); ``check_body`` matches it against the signed
   digest (401 ``bad-digest``).

Without a cluster key there is no per-sender limit: the sender id would be whatever a stranger
claims.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from p2pnode.transport.base import Memo, Outcome, Payload
from p2pnode.transport.batch import SMALL_SHARE
from p2pnode.trust.auth import KeyHolder, Verdict, body_matches
from p2pnode.trust.limits import AddressGuard, CappedCounts, Gate, LagShedder, Limits, RateLimiter
from p2pnode.wire.schema import Channel, SharedFrame


class ServedHost(Protocol):
    """What the server needs of the process's nodes (p2pnode.nodes.host.Host is one)."""

    max_frame_bytes: int
    accepting: bool
    metrics: Any  #: its ``registry`` is what ``GET /metrics`` renders

    @property
    def nodes(self) -> Mapping[int, Any]:
        """The nodes it holds, by id (local delivery skips HTTP for them)."""
        ...

    def receive(
        self,
        dest: int,
        channel: Channel,
        data: Payload | SharedFrame,
        sender: int | None = None,
        certified: set[int] | None = None,
        local: bool = False,
        memo: Memo | None = None,
    ) -> Outcome: ...

    def refuse(self, dest: int, reason: str) -> None: ...


class Admission:
    """The state admission keeps (slots in flight, rate buckets, the loop's lag) and its checks.

    ``dest`` is the addressed node (-1: a batch, whose entries are then rate-limited one by one
    through :meth:`authenticate`). A request that :meth:`enter` lets in holds a slot until
    :meth:`leave`.
    """

    def __init__(self, host: ServedHost, keys: KeyHolder | None, limits: Limits) -> None:
        self.host = host
        self.keys = keys
        self.limits = limits
        self.gate = Gate(limits.max_inflight)
        self.guard = AddressGuard(limits.max_connections_per_address, limits.max_inflight_per_address)
        self.members = CappedCounts(limits.max_inflight_per_member)  #: in flight per member
        self.rate = RateLimiter(limits.rate_per_s, limits.burst, limits.max_senders)
        self.shedder = LagShedder(limits.max_lag_s)

    def sizes(self) -> dict[str, int]:
        """The entries of the tables admission keeps (``p2pnode_cache_entries``); each is bounded
        (the rate buckets by ``max_senders``, the others by what is open or in flight)."""
        return {"rate-buckets": len(self.rate), "member-inflight": len(self.members), **self.guard.sizes()}

    def refuse(self, dest: int, outcome: Outcome) -> Outcome:
        """Count ``outcome``'s reason against ``dest`` and return it."""
        self.host.refuse(dest, outcome.reason)
        return outcome

    def authenticate(
        self,
        path: str,
        headers: Mapping[str, str],
        dest: int,
        now: float,
        frame: bytes | None = None,
        vouched: str | None = None,
    ) -> tuple[Outcome | None, Verdict | None]:
        """Step 1, for a post and for each entry of a batch: the authentication from the headers
        alone, the body against their digest when it is already at hand (a batch entry's frame),
        then the per-(sender, node) rate limit. ``vouched``: for a batch entry, the batch's
        verified credential (its signature covers the entry). Returns the refusal (counted) or
        None, and the verdict that let it in (its sender and, with identities, its credential's
        serial; None in an open cluster or on a refusal)."""
        if self.keys is None:  # an open cluster: the sender is whatever the frame claims
            return None, None
        verdict = self.keys.verifier.check_headers("POST", path, headers, int(now * 1000), vouched)
        if verdict.ok and frame is not None and not body_matches(headers, frame):
            verdict = Verdict(401, "bad-digest", verdict.sender)
        if not verdict.ok:
            return self.refuse(dest, Outcome(verdict.status, verdict.reason)), None
        sender = verdict.sender
        if sender is not None and dest >= 0 and not self.rate.allow(sender, dest, now):
            return self.refuse(dest, Outcome(429, "rate-limited")), None
        return None, verdict

    def authenticate_request(
        self, path: str, headers: Mapping[str, str], dest: int, now: float
    ) -> tuple[Outcome | None, int | None, str | None]:
        """Step 1 for a request off the network: the keyring is brought up to ``now`` first (a
        rotation's grace ends), then :meth:`authenticate` from the headers. Returns the refusal
        or None, the authenticated sender and the member (its credential's serial, with
        identities; None otherwise), which :meth:`enter` caps."""
        if self.keys is not None:
            self.keys.refresh(now)
        refused, verdict = self.authenticate(path, headers, dest, now)
        if verdict is None:
            return refused, None, None
        member = None if verdict.serial is None else f"serial {verdict.serial}"
        return refused, verdict.sender, member

    def enter(self, dest: int, address: str, length: int | None, member: str | None = None) -> Outcome | None:
        """Step 2: a slot for a request from ``address`` (and from ``member``, the authenticated
        credential, with identities) with declared ``length`` (None: not declared), or the
        refusal. Lag sheds model-sized bodies, the work that makes a loop late; a small frame (a
        swap's lock request, a batch of them) costs less to serve than to refuse and retry."""
        if not self.host.accepting:
            return self.refuse(dest, Outcome(503, "starting"))
        if not self.guard.enter(address):
            return self.refuse(dest, Outcome(503, "busy"))
        if member is not None and not self.members.take(member):
            self.guard.leave(address)
            return self.refuse(dest, Outcome(503, "busy"))
        overloaded = self.shedder.overloaded() and (
            length is None or length * SMALL_SHARE > self.host.max_frame_bytes
        )
        if overloaded or not self.gate.enter():
            self.shedder.shed += overloaded
            self.guard.leave(address)
            if member is not None:
                self.members.give_back(member)
            return self.refuse(dest, Outcome(503, "busy"))
        return None

    def leave(self, address: str, member: str | None = None) -> None:
        """The slot :meth:`enter` gave a request from ``address`` (and ``member``) is free again."""
        self.gate.leave()
        self.guard.leave(address)
        if member is not None:
            self.members.give_back(member)

    def check_length(self, dest: int, length: int | None) -> Outcome | None:
        """Step 3: a declared length past the largest frame is refused before the body is read."""
        if length is not None and length > self.host.max_frame_bytes:
            return self.refuse(dest, Outcome(413, "too-large"))
        return None

    def body_failed(self, dest: int, error: str) -> Outcome:
        """Step 4, a body that could not be read: ``error`` is ``too-large`` (past the limit as
        it came), ``slow-body`` (not in within the body timeout: it held a slot) or ``truncated``
        (the sender went away mid-body)."""
        status = {"too-large": 413, "slow-body": 408, "truncated": 400}[error]
        return self.refuse(dest, Outcome(status, error))

    def check_body(self, dest: int, headers: Mapping[str, str], data: bytes) -> Outcome | None:
        """Step 4, the body read: with a cluster key it must match the digest the headers sign."""
        if self.keys is not None and not body_matches(headers, data):
            return self.refuse(dest, Outcome(401, "bad-digest"))
        return None
