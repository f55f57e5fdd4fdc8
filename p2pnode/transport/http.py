"""HTTP transport (aiohttp): one ClientSession per process with connection reuse, and the server.

The HTTP layer only moves bytes (docs/design.md, rule 3): bounded read, hand to ``Host.receive``,
answer with its status. Routes: ``POST /v1/nodes/{id}/gossip``, ``/sampling``, ``/collude`` and ``/knn``
(msgpack frames), ``POST /v1/batch`` (the small frames a process sends to one other process in one
turn, each with its own post's authentication; p2pnode/transport/batch.py),
``GET /v1/members``, ``GET /status`` and ``GET /metrics``.

What a stranger gets for free is bounded (p2pnode.trust.limits): :func:`listen` closes a remote
address's connections past its cap as they are accepted and any connection that does not complete
a request's headers within ``header_timeout_s``; a POST is authenticated from its headers before
its body is read, and the body must arrive within ``body_timeout_s``; GET pages are rendered at
most once per ``page_cache_s`` and served a few at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
import re
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast

import aiohttp
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from p2pnode.transport.admission import Admission, ServedHost
from p2pnode.transport.base import UNREACHABLE, Memo, OnDone, Outcome, Payload
from p2pnode.transport.batch import (
    ENTRY_BYTES,
    MAX_FRAMES,
    SMALL_SHARE,
    pack_batch,
    pack_outcomes,
    parse_batch,
    parse_outcomes,
)
from p2pnode.transport.peer_bytes import PeerBytesLog
from p2pnode.trust.auth import KeyHolder
from p2pnode.trust.identity import H_CRED, Credential, new_challenge
from p2pnode.trust.limits import AddressGuard, Gate, LagShedder, Limits
from p2pnode.trust.tls import certified_nodes
from p2pnode.wire.schema import Channel, WireError

log = logging.getLogger("p2pnode.http")
REASON_HEADER = "X-P2P-Reason"
_ROUTE = {
    "gossip": Channel.GOSSIP,
    "sampling": Channel.SAMPLING,
    "collude": Channel.COLLUDE,
    "knn": Channel.KNN,
}
_PATH = {route: name for name, route in _ROUTE.items()}
_PROBE: web.AppKey[asyncio.Task[None]] = web.AppKey("lag-probe", asyncio.Task)
GUARD: web.AppKey[AddressGuard] = web.AppKey("address-guard", AddressGuard)
SHEDDER: web.AppKey[LagShedder] = web.AppKey("lag-shedder", LagShedder)
ADMISSION: web.AppKey[Admission] = web.AppKey("admission", Admission)
JSON = "application/json; charset=utf-8"
_CHALLENGE = re.compile(r"^[0-9a-f]{32}$")
CLIENT_PER_HOST = 32  #: connections a process opens to one destination (below the server's caps)
CLIENT_KEEPALIVE_S = 4.0  #: idle client connections are dropped before the server's header timeout
SILENT_AFTER = 5  #: sends in a row without an answer before a peer process is said to be gone
SILENT_SAID = 64  #: at most this many addresses said gone at once (a log line each)
#: at most this many addresses' runs of unanswered sends are kept, the least recent forgotten: a
#: member's relayed entries can name any number of addresses nobody serves (measured by
#: bench.soak: 477 in 20 s), and a forgotten one only starts its count again
SILENT_KEPT = 4096
#: at most this many "stopped answering" lines a minute; the others are counted into the next
SILENT_LINES = 8
SILENT_INTERVAL_S = 60.0


def _ids(nodes: list[int]) -> str:
    """``0-4, 9``: sorted node ids with their runs folded, at most 8 parts."""
    runs: list[list[int]] = []
    for n in nodes:
        if runs and runs[-1][1] == n - 1:
            runs[-1][1] = n
        else:
            runs.append([n, n])
    parts = [str(a) if a == b else f"{a}-{b}" for a, b in runs]
    return ", ".join(parts[:8]) + (", ..." if len(parts) > 8 else "") if parts else "(none known)"


class HttpTransport:
    """Posts frames to ``http://host:port/v1/nodes/{dst}/{channel}``; tracks every in-flight send.

    With ``local`` (the default; ``--no-local-delivery`` turns it off), a frame for a node that
    host holds (one of this process's own nodes) skips HTTP: it goes to ``Host.receive`` on the
    next turn of the event loop, decoded and checked as a frame off the network would be, with the
    sender's id as its authenticated sender (the sender is this process). Frames to other
    processes are posted.

    With ``batch_bytes`` (the receivers' body limit), the small frames this process sends to one
    address in one turn of the event loop go in one ``POST /v1/batch`` (p2pnode/transport/batch.py),
    each with the authentication its own post would carry; a lone frame is posted as before, and
    an address that answers a batch with 404 gets single posts from then on.
    """

    def __init__(
        self,
        addresses: dict[int, str],
        timeout_s: float = 10.0,
        max_connections: int = 256,
        keys: KeyHolder | None = None,
        retries: int = 2,
        backoff_s: float = 0.2,
        ssl_context: ssl.SSLContext | None = None,
        local: ServedHost | None = None,
        batch_bytes: int = 0,
    ) -> None:
        self.addresses = addresses
        self.local = local
        self.delivered_locally = 0
        self.batch_bytes = batch_bytes
        self.batches = 0  #: batch requests posted
        self.batched = 0  #: frames that went in them
        #: per address: the frames collected this turn (sender, destination, channel, frame, on_done)
        #: and their size in bytes
        self._pending: dict[str, tuple[list[tuple[int, int, Channel, bytes, OnDone]], list[int]]] = {}
        self._single_only: set[str] = set()  #: addresses without /v1/batch
        self.scheme = "https" if ssl_context is not None else "http"
        self.retries = retries  #: extra attempts after no answer or a 503, with doubling backoff
        self.backoff_s = backoff_s
        self.retried = 0
        self.keys = keys  #: sign every request (HMAC, p2pnode.trust.auth) when set
        self._timeout = aiohttp.ClientTimeout(total=timeout_s, connect=min(timeout_s, 3.0))
        self._connector = aiohttp.TCPConnector(
            limit=max_connections,
            limit_per_host=CLIENT_PER_HOST,
            keepalive_timeout=CLIENT_KEEPALIVE_S,
            ssl=ssl_context if ssl_context is not None else True,
        )
        self.session = aiohttp.ClientSession(connector=self._connector, timeout=self._timeout)
        self._inflight: set[asyncio.Task[None]] = set()
        self.closed = False
        self._ssl = ssl_context
        #: with mutual TLS: per address, the node ids its server's certificate names (checked once)
        self._server_ids: dict[str, asyncio.Task[set[int]]] = {}
        #: with identities: per address, the credential serial and node ids its server proved
        self._proven: dict[str, asyncio.Task[Credential | None]] = {}
        self.unproven = 0  #: sends refused because the address's server does not hold the node
        #: per address, sends in a row that got no answer (a peer process gone, or not up yet)
        self._silent: dict[str, int] = {}
        self._said_silent: set[str] = set()  #: addresses said to have stopped answering
        #: first-hand addresses waiting for a node's current address to stop answering (:meth:`move`)
        self._moves: dict[int, str] = {}
        self._silent_lines: list[float] = []  #: when the last "stopped answering" lines were said
        self._unsaid_silent = 0  #: addresses gone silent since, not said (over SILENT_LINES)

    def move(self, node: int, address: str) -> bool:
        """A node's own (first-hand) entry names ``address`` for it: taken at once where the
        node has no address yet or its address has stopped answering (``SILENT_AFTER`` sends in a
        row got nothing), else kept until it does. A node that moved leaves an address that no
        longer answers, so it is found again within ``SILENT_AFTER`` sends; a member who signs a
        first-hand entry as another process's node (with the cluster key alone any member can)
        cannot take the node from an address that answers (bench.soak's ``member-cyclon``: A's
        intake x0.30 and A and B cut apart before). True when taken now."""
        current = self.addresses.get(node)
        if current is None or current == address or self._silent.get(current, 0) >= SILENT_AFTER:
            self.addresses[node] = address
            self._moves.pop(node, None)
            return True
        self._moves[node] = address
        return False

    def sizes(self) -> dict[str, int]:
        """The entries of the client's per-address tables (``p2pnode_cache_entries``): one per
        address a node has sent to, so bounded by the addresses its views name."""
        return {
            "peer-certificates": len(self._server_ids),
            "peer-proofs": len(self._proven),
            "peer-silence": len(self._silent),
            "pending-batches": len(self._pending),
            "pending-moves": len(self._moves),
        }

    async def server_ids(self, address: str) -> set[int]:
        """The node ids the certificate of the server at ``address`` names (mutual TLS).

        A model goes to ``dst`` only if the server that answers at its address may speak for
        ``dst``: another member's process cannot pose as ``dst`` by taking its address. Checked
        with one handshake per address before the first frame; a failed handshake is not kept.
        """
        assert self._ssl is not None
        task = self._server_ids.get(address)
        if task is None or (task.done() and task.exception() is not None):
            host, port = address.rsplit(":", 1)
            task = asyncio.ensure_future(_certified_at(host, int(port), self._ssl))
            self._server_ids[address] = task
        return await asyncio.shield(task)

    async def holds(self, address: str, dsts: tuple[int, ...]) -> bool:
        """Whether the server at ``address`` proved it holds every node of ``dsts`` (identities,
        p2pnode.trust.identity): one ``GET /v1/members?challenge=`` per address, answered with its
        credential and a signature by the key it names over the challenge and that very address.
        A model goes to ``dst`` only where ``dst``'s holder answers, so a relayed address cannot
        divert it. A proof that could not be fetched is not kept; a revoked credential holds
        nothing."""
        trust = self.keys.verifier.trust if self.keys is not None else None
        if trust is None:
            return True
        task = self._proven.get(address)
        if task is None or (task.done() and task.exception() is not None):
            task = asyncio.ensure_future(self._prove(address))
            self._proven[address] = task
        cred = await asyncio.shield(task)
        if cred is None:  # kept only for addresses that proved a credential: relayed addresses
            if self._proven.get(address) is task:  # that fail are forgotten (bounded memory)
                del self._proven[address]
            return False
        return cred.serial not in trust.revoked and all(cred.names(d) for d in dsts)

    async def _prove(self, address: str) -> Credential | None:
        assert self.keys is not None and self.keys.verifier.trust is not None
        challenge = new_challenge()
        url = f"{self.scheme}://{address}/v1/members"
        async with self.session.get(url, params={"challenge": challenge}) as resp:
            answer = await resp.json() if resp.status == 200 else {}
        if not isinstance(answer, dict):
            return None
        return self.keys.verifier.trust.check_proof(answer, challenge, address)

    def send(
        self, src: int, dst: int, channel: Channel, data: Payload, on_done: OnDone, memo: Memo | None = None
    ) -> None:
        if self.local is not None and dst in self.local.nodes and not self.closed:
            asyncio.get_running_loop().call_soon(self._deliver, src, dst, channel, data, on_done, memo)
            return
        address = self.addresses.get(dst)
        if address is None or self.closed:
            reason = "closing" if self.closed else "unknown address"
            asyncio.get_running_loop().call_soon(on_done, Outcome(UNREACHABLE, reason))
            return
        if (
            self.batch_bytes
            and len(data) * SMALL_SHARE <= self.batch_bytes
            and address not in self._single_only
        ):
            self._collect(src, address, dst, channel, bytes(data), on_done)
            return
        # a model's frame is posted, digested and signed from the packer's buffer: no copy
        self._spawn(self._post(address, src, dst, channel, data, on_done))

    def _spawn(self, coro: Awaitable[None]) -> None:
        task = asyncio.ensure_future(coro)
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

    def _collect(
        self, src: int, address: str, dst: int, channel: Channel, frame: bytes, on_done: OnDone
    ) -> None:
        """Add a small frame to this turn's batch for ``address``; posted at the end of the turn,
        or at once when the batch is full."""
        pending = self._pending.get(address)
        if pending is not None and (
            len(pending[0]) >= MAX_FRAMES or pending[1][0] + len(frame) + ENTRY_BYTES > self.batch_bytes
        ):
            self._flush(address)
            pending = None
        if pending is None:
            pending = self._pending[address] = ([], [0])
            asyncio.get_running_loop().call_soon(self._flush, address, pending[0])
        pending[0].append((src, dst, channel, frame, on_done))
        pending[1][0] += len(frame) + ENTRY_BYTES

    def _flush(
        self, address: str, entries: list[tuple[int, int, Channel, bytes, OnDone]] | None = None
    ) -> None:
        pending = self._pending.get(address)
        if pending is None or (entries is not None and pending[0] is not entries):
            return  # already posted (it filled up), or a newer batch for the address
        del self._pending[address]
        batch = pending[0]
        if self.closed:
            for entry in batch:
                entry[4](Outcome(UNREACHABLE, "closing"))
            return
        if len(batch) == 1:
            src, dst, channel, frame, on_done = batch[0]
            self._spawn(self._post(address, src, dst, channel, frame, on_done))
        else:
            self._spawn(self._post_batch(address, batch))

    def _deliver(
        self, src: int, dst: int, channel: Channel, data: Payload, on_done: OnDone, memo: Memo | None
    ) -> None:
        assert self.local is not None
        self.delivered_locally += 1
        on_done(self.local.receive(dst, channel, data, src, local=True, memo=memo))

    def _headers(self, path: str, src: int, body: Payload, vouched: bool = False) -> dict[str, str]:
        """Signed afresh for every attempt: a retry is a new request (new nonce and time).
        ``vouched``: a batch entry (its batch's signature covers it: no signature of its own)."""
        headers = {"Content-Type": "application/msgpack"}
        if self.keys is not None:
            now = time.time()
            self.keys.refresh(now)
            headers.update(self.keys.sign("POST", path, src, body, int(now * 1000), vouched))
        return headers

    async def _post(
        self, address: str, src: int, dst: int, channel: Channel, data: Payload, on_done: OnDone
    ) -> None:
        try:
            outcome, _ = await self._request(address, f"/v1/nodes/{dst}/{_PATH[channel]}", src, (dst,), data)
        except asyncio.CancelledError:
            on_done(Outcome(UNREACHABLE, "cancelled"))
            raise
        on_done(outcome)

    def _entry_auth(self, src: int, dst: int, channel: Channel, frame: bytes) -> dict[str, str]:
        """The authentication headers the frame's own post would carry (none in an open cluster),
        but for the identity's signature: the batch's signature covers the entry, and a receiver
        that verified it takes the entry's credential without one (p2pnode.trust.identity.Trust)."""
        if self.keys is None:
            return {}
        headers = self._headers(f"/v1/nodes/{dst}/{_PATH[channel]}", src, frame, vouched=True)
        headers.pop("Content-Type", None)
        return headers

    async def _post_batch(self, address: str, batch: list[tuple[int, int, Channel, bytes, OnDone]]) -> None:
        entries = [
            (dst, ch, frame, self._entry_auth(src, dst, ch, frame)) for src, dst, ch, frame, _ in batch
        ]
        try:
            outcome, answer = await self._request(
                address, "/v1/batch", batch[0][0], tuple(e[1] for e in batch), pack_batch(entries)
            )
        except asyncio.CancelledError:
            for entry in batch:
                entry[4](Outcome(UNREACHABLE, "cancelled"))
            raise
        if outcome.status == 404 and outcome.reason == "no-route" and not self.closed:
            self._single_only.add(address)  # a process from before batches: one post per frame
            for src, dst, channel, frame, on_done in batch:
                self._spawn(self._post(address, src, dst, channel, frame, on_done))
            return
        outcomes = parse_outcomes(answer, len(batch)) if outcome.ok else None
        if outcome.ok and outcomes is None:
            outcome = Outcome(UNREACHABLE, "bad-batch-answer")
        self.batches += 1
        self.batched += len(batch)
        for k, entry in enumerate(batch):
            entry[4](outcomes[k] if outcomes is not None else outcome)

    async def _request(
        self, address: str, path: str, src: int, dsts: tuple[int, ...], data: Payload
    ) -> tuple[Outcome, bytes]:
        """POST with bounded retries: no answer or 503 (busy) are tried again after 0.2 s, 0.4 s
        (± half, so that many senders do not retry in step); any other answer is final."""
        url = f"{self.scheme}://{address}{path}"
        attempt = 0
        answer = b""
        while True:
            try:
                if self._ssl is not None and not set(dsts) <= await self.server_ids(address):
                    return Outcome(UNREACHABLE, "cert-mismatch"), b""
                if not await self.holds(address, dsts):
                    return self._not_holder(address, dsts), b""
                async with self.session.post(url, data=data, headers=self._headers(path, src, data)) as resp:
                    answer = await resp.read()
                    outcome = Outcome(resp.status, resp.headers.get(REASON_HEADER, ""))
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                outcome = Outcome(UNREACHABLE, type(exc).__name__)
            retry = outcome.status in (UNREACHABLE, 503) and attempt < self.retries and not self.closed
            if not retry:
                self._note_answer(address, outcome)
                return outcome, answer
            delay = self.backoff_s * 2**attempt * random.uniform(0.5, 1.5)
            attempt += 1
            self.retried += 1
            await asyncio.sleep(delay)

    def _note_answer(self, address: str, outcome: Outcome) -> None:
        """Say once when a peer process stops answering (SILENT_AFTER sends in a row got no
        answer: it stopped, crashed or is cut off), and once when it answers again: a peer gone
        is not left to a count of failed sends alone."""
        if outcome.status != UNREACHABLE or self.closed:
            self._silent.pop(address, None)
            if address in self._said_silent:
                self._said_silent.discard(address)
                log.warning("%s answers again", address)
            return
        n = self._silent.pop(address, 0) + 1
        self._silent[address] = n  # the most recent last
        if len(self._silent) > SILENT_KEPT:
            del self._silent[next(iter(self._silent))]
        if n >= SILENT_AFTER and self._moves:  # its nodes' own newer addresses are taken now
            for dst in [d for d, a in self.addresses.items() if a == address and d in self._moves]:
                self.addresses[dst] = self._moves.pop(dst)
        if n == SILENT_AFTER and address not in self._said_silent and len(self._said_silent) < SILENT_SAID:
            now = time.monotonic()
            self._silent_lines = [t for t in self._silent_lines if now - t < SILENT_INTERVAL_S]
            if len(self._silent_lines) >= SILENT_LINES:  # a member's entries may name many at once
                self._unsaid_silent += 1
                return
            self._silent_lines.append(now)
            self._said_silent.add(address)
            nodes = sorted(d for d, a in self.addresses.items() if a == address)
            more = (
                f" ({self._unsaid_silent} more addresses stopped answering, not said)"
                if self._unsaid_silent
                else ""
            )
            self._unsaid_silent = 0
            log.warning(
                "%s stopped answering (%d sends in a row, the last %s): its node(s) %s are skipped "
                "as suspected and probed now and then%s", address, n, outcome.reason or "unreachable",
                _ids(nodes), more,
            )  # fmt: skip

    def _not_holder(self, address: str, dsts: tuple[int, ...]) -> Outcome:
        """``address`` does not hold some of ``dsts``: forget it for them (a first-hand entry, or
        another relayed one, may bring their right address) and fail the send."""
        self.unproven += 1
        for dst in dsts:
            if self.addresses.get(dst) == address and (self.local is None or dst not in self.local.nodes):
                del self.addresses[dst]
        return Outcome(UNREACHABLE, "not-holder")

    async def drain(self, timeout_s: float) -> None:
        """Post this turn's batches, wait for in-flight sends to finish, then cancel what is left."""
        for key in list(self._pending):
            self._flush(key)
        pending = set(self._inflight)
        if pending:
            _done, still = await asyncio.wait(pending, timeout=timeout_s)
            for task in still:
                task.cancel()
            if still:
                await asyncio.gather(*still, return_exceptions=True)

    async def close(self) -> None:
        self.closed = True
        for key in list(self._pending):  # frames collected and never posted: they fail, once each
            for entry in self._pending.pop(key)[0]:
                entry[4](Outcome(UNREACHABLE, "closing"))
        await self.session.close()


async def _certified_at(host: str, port: int, ctx: ssl.SSLContext) -> set[int]:
    """One TLS handshake with the server at ``host:port``: the node ids its certificate names."""
    _reader, writer = await asyncio.wait_for(asyncio.open_connection(host, port, ssl=ctx), timeout=5.0)
    try:
        return certified_nodes(writer.get_extra_info("peercert"))
    finally:
        writer.close()
        with contextlib.suppress(OSError, ssl.SSLError):
            await writer.wait_closed()


async def _probe_lag(shedder: LagShedder) -> None:
    """Measure the event loop's lag every 20 ms into ``shedder`` (admission sheds on it)."""
    loop = asyncio.get_running_loop()
    interval = 0.02
    while True:
        t0 = loop.time()
        await asyncio.sleep(interval)
        shedder.record(loop.time() - t0 - interval)


async def _start_probe(app: web.Application) -> None:
    app[_PROBE] = asyncio.create_task(_probe_lag(app[SHEDDER]))


async def _stop_probe(app: web.Application) -> None:
    app[_PROBE].cancel()
    await asyncio.gather(app[_PROBE], return_exceptions=True)


async def _serve(
    admission: Admission,
    request: web.Request,
    dest: int,
    deliver: Callable[[bytes, int | None, set[int] | None], web.Response],
    tls: bool,
) -> web.StreamResponse:
    """A POST through admission's steps (``dest`` -1: a batch, rate-limited per frame), then
    ``deliver``; every refusal answers and closes the connection."""
    refused, sender, member = admission.authenticate_request(request.path, request.headers, dest, time.time())
    if refused is not None:
        return _answer(refused, close=True)
    address = request.remote or "?"
    refused = admission.enter(dest, address, request.content_length, member)
    if refused is not None:
        return _answer(refused, close=True)
    try:
        refused = admission.check_length(dest, request.content_length)
        if refused is not None:
            return _answer(refused, close=True)
        data = await _read_body(admission, request, dest)
        if isinstance(data, Outcome):
            return _answer(data, close=True)
        allowed = None
        if tls:  # mutual TLS: a frame's sender must be one of the ids the peer's certificate names
            transport = request.transport
            allowed = certified_nodes(transport.get_extra_info("peercert") if transport is not None else None)
        return deliver(data, sender, allowed)
    finally:
        admission.leave(address, member)


async def _read_body(admission: Admission, request: web.Request, dest: int) -> bytes | Outcome:
    """The body, read within the body timeout and matched against the signed digest; or the
    refusal (counted)."""
    try:
        async with asyncio.timeout(admission.limits.body_timeout_s):
            data = await request.read()
    except web.HTTPRequestEntityTooLarge:
        return admission.body_failed(dest, "too-large")
    except TimeoutError:  # a body that trickles in holds a slot: not past the timeout
        return admission.body_failed(dest, "slow-body")
    except ConnectionError:  # the sender went away mid-body (it died, or its link did)
        return admission.body_failed(dest, "truncated")
    refused = admission.check_body(dest, request.headers, data)
    return refused if refused is not None else data


def make_app(
    host: ServedHost,
    status: Callable[[], dict[str, Any]],
    members: Callable[[], dict[str, Any]],
    keys: KeyHolder | None = None,
    limits: Limits | None = None,
    tls: bool = False,
    address: str = "",
) -> web.Application:
    """The aiohttp application of one process: its routes; the body limit comes from the model size.

    A POST is let in by :class:`~p2pnode.transport.admission.Admission` (route 404, then its
    steps in order: authentication and rate 401/403/409/429, starting and busy 503, declared
    length 413, body 408/413/400/401); only then is it decoded (``host.receive``).

    ``GET /v1/members?challenge=HEX`` (with an identity in ``keys``) adds the process's credential
    and its signature over the challenge and ``address`` (the address it advertises), so that a
    peer posts to a node only where its holder answers (p2pnode.trust.identity).
    """
    app = web.Application(client_max_size=host.max_frame_bytes)
    limits = limits or Limits()
    admission = Admission(host, keys, limits)
    app[GUARD] = admission.guard
    app[SHEDDER] = admission.shedder
    app[ADMISSION] = admission
    app.on_startup.append(_start_probe)
    app.on_cleanup.append(_stop_probe)

    async def post_frame(request: web.Request) -> web.StreamResponse:
        channel = _ROUTE.get(request.match_info["channel"])
        try:
            dest = int(request.match_info["node"])
        except ValueError:
            dest = -1
        if channel is None or dest < 0:
            return _answer(Outcome(404, "no-route"), close=True)

        def deliver(data: bytes, sender: int | None, allowed: set[int] | None) -> web.Response:
            return _answer(host.receive(dest, channel, data, sender, allowed))

        return await _serve(admission, request, dest, deliver, tls)

    async def post_batch(request: web.Request) -> web.StreamResponse:
        # _serve verified the batch's own signature over its digest before delivering
        vouched = request.headers.get(H_CRED) if keys is not None and keys.verifier.trust else None

        def deliver(data: bytes, sender: int | None, allowed: set[int] | None) -> web.Response:
            try:
                entries = parse_batch(data)
            except WireError as err:
                host.refuse(-1, err.reason)
                return _answer(Outcome(err.status, err.reason), close=True)
            outcomes = [deliver_entry(*entry, allowed, vouched) for entry in entries]
            return web.Response(body=pack_outcomes(outcomes), content_type="application/msgpack")

        return await _serve(admission, request, -1, deliver, tls)

    def deliver_entry(
        dst: int,
        channel: Channel,
        frame: bytes,
        auth: dict[str, str],
        allowed: set[int] | None,
        vouched: str | None = None,
    ) -> Outcome:
        """One frame of a batch, judged as its own post would be (authenticated with its own
        path and headers, and its frame as the body), then ``Host.receive``."""
        path = f"/v1/nodes/{dst}/{_PATH[channel]}"
        refused, verdict = admission.authenticate(path, auth, dst, time.time(), frame, vouched)
        sender = None if verdict is None else verdict.sender
        if refused is not None:
            return refused
        return host.receive(dst, channel, frame, sender, allowed)

    pages = _Pages(limits)
    app.router.add_post("/v1/nodes/{node}/{channel}", post_frame)
    app.router.add_post("/v1/batch", post_batch)
    app.router.add_get("/v1/members", pages.members(members, keys, address))
    app.router.add_get("/status", pages.bounded("status", _render_json(status), JSON))
    metrics = pages.bounded("metrics", lambda: generate_latest(host.metrics.registry), CONTENT_TYPE_LATEST)
    app.router.add_get("/metrics", metrics)
    return app


def _render_json(source: Callable[[], dict[str, Any]]) -> Callable[[], bytes]:
    return lambda: _dumps(source()).encode()


class _Pages:
    """The GET pages of one process: served a few at a time (503 past ``max_get_inflight``) and
    rendered at most once per ``page_cache_s``, so that a flood of GETs costs one render."""

    def __init__(self, limits: Limits) -> None:
        self.gate = Gate(limits.max_get_inflight)
        self.cache_s = limits.page_cache_s
        self.rendered: dict[str, tuple[float, bytes]] = {}

    def bounded(
        self, name: str, render: Callable[[], bytes], content_type: str
    ) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handler(request: web.Request) -> web.Response:
            if not self.gate.enter():
                return _answer(Outcome(503, "busy"), close=True)
            try:
                now = time.monotonic()
                hit = self.rendered.get(name)
                if hit is None or now - hit[0] >= self.cache_s:
                    hit = self.rendered[name] = (now, render())
                return web.Response(body=hit[1], headers={"Content-Type": content_type})
            finally:
                self.gate.leave()

        return handler

    def members(
        self, members: Callable[[], dict[str, Any]], keys: KeyHolder | None, address: str
    ) -> Callable[[web.Request], Awaitable[web.Response]]:
        """The members page; with a challenge, signed afresh (one Ed25519 signature, ~30 us,
        served a few at a time like every GET)."""
        page = self.bounded("members", _render_json(members), JSON)

        async def handler(request: web.Request) -> web.Response:
            challenge = request.query.get("challenge")
            identity = keys.identity if keys is not None else None
            if challenge is None or identity is None:
                return await page(request)
            if not _CHALLENGE.match(challenge):
                return _answer(Outcome(400, "bad-challenge"), close=True)
            if not self.gate.enter():
                return _answer(Outcome(503, "busy"), close=True)
            try:
                body = {**members(), **identity.prove(challenge, address)}
                return web.Response(body=_dumps(body).encode(), headers={"Content-Type": JSON})
            finally:
                self.gate.leave()

        return handler


class _Guarded(asyncio.Protocol):
    """The server's protocol for one connection, behind its remote address's connection cap.

    A connection past the cap is aborted as it is accepted, before aiohttp sees a byte of it;
    otherwise every event goes to aiohttp's own protocol unchanged.
    """

    def __init__(self, inner: asyncio.Protocol, guard: AddressGuard, on_refused: Callable[[], None]) -> None:
        self.inner = inner
        self.guard = guard
        self.on_refused = on_refused
        self.address: str | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        peer = transport.get_extra_info("peername")
        address = str(peer[0]) if isinstance(peer, tuple) and peer else "?"
        if not self.guard.connect(address):
            self.on_refused()
            cast(asyncio.Transport, transport).abort()
            return
        self.address = address
        self.inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.address is None:
            return
        self.guard.disconnect(self.address)
        self.inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.address is not None:
            self.inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self.inner.eof_received() if self.address is not None else None

    def pause_writing(self) -> None:
        self.inner.pause_writing()

    def resume_writing(self) -> None:
        self.inner.resume_writing()


async def listen(
    app: web.Application,
    host: str,
    port: int,
    ssl_context: ssl.SSLContext | None = None,
    limits: Limits | None = None,
    on_refused: Callable[[], None] = lambda: None,
    on_malformed: Callable[[str], None] = lambda _kind: None,
) -> tuple[web.AppRunner, asyncio.Server]:
    """Serve ``app`` on ``host:port`` with the per-address connection cap and the header timeout.

    A request that does not parse as HTTP is answered 400 by aiohttp, counted by ``on_malformed``
    (with the parse error's kind) and logged at most once a minute per kind, without a traceback
    (:class:`~p2pnode.transport.peer_bytes.PeerBytesLog`).

    aiohttp closes a connection that has not completed a request's headers within its keep-alive
    timeout, counted from the connection's start or its last answer (bytes trickling in do not
    extend it), so that timeout is the header timeout. Stop with :func:`stop_listening`.
    """
    limits = limits or Limits()
    runner = web.AppRunner(
        app,
        handle_signals=False,
        shutdown_timeout=5.0,
        keepalive_timeout=limits.header_timeout_s,
        logger=PeerBytesLog(on_malformed),
    )
    await runner.setup()
    factory = runner.server
    assert factory is not None
    guard = app[GUARD]
    loop = asyncio.get_running_loop()
    try:
        server = await loop.create_server(
            lambda: _Guarded(factory(), guard, on_refused), host, port, ssl=ssl_context, reuse_address=True
        )
    except OSError:
        await runner.cleanup()
        raise
    return runner, server


async def stop_listening(runner: web.AppRunner, server: asyncio.Server) -> None:
    """Stop accepting, let requests in progress finish (aiohttp's shutdown), close the rest."""
    server.close()
    await runner.cleanup()
    await server.wait_closed()


def _answer(outcome: Outcome, close: bool = False) -> web.Response:
    """The answer; ``close`` drops the connection after it (its body, if any, is never read)."""
    headers = {REASON_HEADER: outcome.reason} if outcome.reason else None
    text = outcome.reason or "ok"
    resp = web.Response(status=outcome.status, text=text, headers=headers)
    if close:
        resp.force_close()
    return resp


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))
