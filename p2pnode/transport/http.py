"""HTTP transport (aiohttp): one ClientSession per process with connection reuse, and the server.

The HTTP layer only moves bytes (docs/design.md, rule 3): bounded read, hand to ``Host.receive``,
answer with its status. Routes: ``POST /v1/nodes/{id}/gossip``, ``/sampling`` and ``/collude``
(msgpack frames), ``GET /v1/members``, ``GET /status`` and ``GET /metrics``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import ssl
import time
from collections.abc import Callable
from typing import Any

import aiohttp
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from p2pnode.auth import KeyHolder, sign
from p2pnode.host import Host
from p2pnode.limits import Gate, LagShedder, Limits, RateLimiter
from p2pnode.tls import certified_nodes
from p2pnode.transport.base import UNREACHABLE, OnDone, Outcome, Payload
from p2pnode.wire.schema import Channel

log = logging.getLogger("p2pnode.http")
REASON_HEADER = "X-P2P-Reason"
_ROUTE = {"gossip": Channel.GOSSIP, "sampling": Channel.SAMPLING, "collude": Channel.COLLUDE}
_PATH = {Channel.GOSSIP: "gossip", Channel.SAMPLING: "sampling", Channel.COLLUDE: "collude"}
_PROBE: web.AppKey[asyncio.Task[None]] = web.AppKey("lag-probe", asyncio.Task)


class HttpTransport:
    """Posts frames to ``http://host:port/v1/nodes/{dst}/{channel}``; tracks every in-flight send."""

    def __init__(
        self,
        addresses: dict[int, str],
        timeout_s: float = 10.0,
        max_connections: int = 256,
        keys: KeyHolder | None = None,
        retries: int = 2,
        backoff_s: float = 0.2,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.addresses = addresses
        self.scheme = "https" if ssl_context is not None else "http"
        self.retries = retries  #: extra attempts after no answer or a 503, with doubling backoff
        self.backoff_s = backoff_s
        self.retried = 0
        self.keys = keys  #: sign every request (HMAC, p2pnode.auth) when set
        self._timeout = aiohttp.ClientTimeout(total=timeout_s, connect=min(timeout_s, 3.0))
        self._connector = aiohttp.TCPConnector(
            limit=max_connections, limit_per_host=64, ssl=ssl_context if ssl_context is not None else True
        )
        self.session = aiohttp.ClientSession(connector=self._connector, timeout=self._timeout)
        self._inflight: set[asyncio.Task[None]] = set()
        self.closed = False

    def send(self, src: int, dst: int, channel: Channel, data: Payload, on_done: OnDone) -> None:
        address = self.addresses.get(dst)
        if address is None or self.closed:
            reason = "closing" if self.closed else "unknown address"
            asyncio.get_running_loop().call_soon(on_done, Outcome(UNREACHABLE, reason))
            return
        path = f"/v1/nodes/{dst}/{_PATH[channel]}"
        body = data if self.keys is None else bytes(data)
        task = asyncio.create_task(self._post(address, path, src, body, on_done))
        self._inflight.add(task)
        task.add_done_callback(self._inflight.discard)

    def _headers(self, path: str, src: int, body: Payload) -> dict[str, str]:
        """Signed afresh for every attempt: a retry is a new request (new nonce and time)."""
        headers = {"Content-Type": "application/msgpack"}
        if self.keys is not None:
            now = time.time()
            self.keys.refresh(now)
            headers.update(sign(self.keys.keyring, "POST", path, src, bytes(body), int(now * 1000)))
        return headers

    async def _post(self, address: str, path: str, src: int, data: Payload, on_done: OnDone) -> None:
        """POST with bounded retries: no answer or 503 (busy) are tried again after 0.2 s, 0.4 s
        (± half, so that many senders do not retry in step); any other answer is final."""
        url = f"{self.scheme}://{address}{path}"
        attempt = 0
        while True:
            try:
                async with self.session.post(url, data=data, headers=self._headers(path, src, data)) as resp:
                    await resp.read()
                    outcome = Outcome(resp.status, resp.headers.get(REASON_HEADER, ""))
            except asyncio.CancelledError:
                on_done(Outcome(UNREACHABLE, "cancelled"))
                raise
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                outcome = Outcome(UNREACHABLE, type(exc).__name__)
            retry = outcome.status in (UNREACHABLE, 503) and attempt < self.retries and not self.closed
            if not retry:
                break
            delay = self.backoff_s * 2**attempt * random.uniform(0.5, 1.5)
            attempt += 1
            self.retried += 1
            try:
                await asyncio.sleep(delay)
            except asyncio.CancelledError:
                on_done(Outcome(UNREACHABLE, "cancelled"))
                raise
        on_done(outcome)

    async def drain(self, timeout_s: float) -> None:
        """Wait for in-flight sends to finish, then cancel what is left."""
        pending = set(self._inflight)
        if pending:
            _done, still = await asyncio.wait(pending, timeout=timeout_s)
            for task in still:
                task.cancel()
            if still:
                await asyncio.gather(*still, return_exceptions=True)

    async def close(self) -> None:
        self.closed = True
        await self.session.close()


def make_app(
    host: Host,
    status: Callable[[], dict[str, Any]],
    members: Callable[[], dict[str, Any]],
    keys: KeyHolder | None = None,
    limits: Limits | None = None,
    tls: bool = False,
) -> web.Application:
    """The aiohttp application of one process; the body limit comes from the model size.

    With ``keys`` every POST is authenticated (p2pnode.auth) before it is decoded, then rate
    limited per (sender, node) (429); past ``limits.max_inflight`` requests in flight the server
    answers 503 without reading the body. Refusals are counted in
    ``p2pnode_rejected_messages_total{reason}`` and change nothing. Without keys there is no
    per-sender limit: the sender id would be whatever a stranger claims.
    """
    app = web.Application(client_max_size=host.max_frame_bytes)
    limits = limits or Limits()
    gate = Gate(limits.max_inflight)
    rate = RateLimiter(limits.rate_per_s, limits.burst, limits.max_senders)
    shedder = LagShedder(limits.max_lag_s)

    async def probe_lag() -> None:
        loop = asyncio.get_running_loop()
        interval = 0.02
        while True:
            t0 = loop.time()
            await asyncio.sleep(interval)
            shedder.record(loop.time() - t0 - interval)

    async def start_probe(app: web.Application) -> None:
        app[_PROBE] = asyncio.create_task(probe_lag())

    async def stop_probe(app: web.Application) -> None:
        app[_PROBE].cancel()
        await asyncio.gather(app[_PROBE], return_exceptions=True)

    app.on_startup.append(start_probe)
    app.on_cleanup.append(stop_probe)

    async def post_frame(request: web.Request) -> web.Response:
        overloaded = shedder.overloaded()
        if overloaded or not gate.enter():
            shedder.shed += overloaded
            try:
                dest = int(request.match_info["node"])
            except ValueError:
                dest = -1
            host.refuse(dest, "busy")
            return _answer(Outcome(503, "busy"))
        try:
            return await _post_frame(request)
        finally:
            gate.leave()

    async def _post_frame(request: web.Request) -> web.Response:
        channel = _ROUTE.get(request.match_info["channel"])
        try:
            dest = int(request.match_info["node"])
        except ValueError:
            dest = -1
        if channel is None or dest < 0:
            return _answer(Outcome(404, "no-route"))
        try:
            data = await request.read()
        except web.HTTPRequestEntityTooLarge:
            node = host.nodes.get(dest)
            if node is not None:
                node.reject("too-large")
            return _answer(Outcome(413, "too-large"))
        except ConnectionError:  # the sender went away mid-body (it died, or its link did)
            node = host.nodes.get(dest)
            if node is not None:
                node.reject("truncated")
            return _answer(Outcome(400, "truncated"))
        sender = None
        if keys is not None:
            now = time.time()
            keys.refresh(now)
            verdict = keys.verifier.check("POST", request.path, request.headers, data, int(now * 1000))
            if not verdict.ok:
                host.refuse(dest, verdict.reason)
                return _answer(Outcome(verdict.status, verdict.reason))
            sender = verdict.sender
            if sender is not None and not rate.allow(sender, dest, now):
                host.refuse(dest, "rate-limited")
                return _answer(Outcome(429, "rate-limited"))
        allowed = None
        if tls:  # mutual TLS: the frame's sender must be one of the ids the peer's certificate names
            transport = request.transport
            allowed = certified_nodes(transport.get_extra_info("peercert") if transport is not None else None)
        return _answer(host.receive(dest, channel, data, sender, allowed))

    async def get_metrics(request: web.Request) -> web.Response:
        body = generate_latest(host.metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def get_status(request: web.Request) -> web.Response:
        return web.json_response(status(), dumps=_dumps)

    async def get_members(request: web.Request) -> web.Response:
        return web.json_response(members(), dumps=_dumps)

    app.router.add_post("/v1/nodes/{node}/{channel}", post_frame)
    app.router.add_get("/v1/members", get_members)
    app.router.add_get("/status", get_status)
    app.router.add_get("/metrics", get_metrics)
    return app


def _answer(outcome: Outcome) -> web.Response:
    headers = {REASON_HEADER: outcome.reason} if outcome.reason else None
    text = outcome.reason or "ok"
    return web.Response(status=outcome.status, text=text, headers=headers)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))
