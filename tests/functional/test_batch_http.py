"""``POST /v1/batch`` over real HTTP: each frame judged as if it came alone, a bad batch refused
whole, a batch signed as one sender carries only that sender's frames, and the client batches
one node's small frames to one process and falls back to single posts where batches are unknown."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aiohttp
import msgpack
import numpy as np
import pytest
from aiohttp import web

from p2pnode.transport.base import Outcome
from p2pnode.transport.batch import MAX_FRAMES, pack_batch, parse_outcomes
from p2pnode.transport.http import HttpTransport
from p2pnode.trust.auth import Keyring, save_keyring, sign
from p2pnode.wire.codec import encode_sampling_frame
from p2pnode.wire.schema import Channel
from peer_sampling.messages import LockRequest
from tests.functional.helpers import LEARNED, free_ports
from tests.functional.test_auth_http import keyed_cluster
from tests.functional.test_http_nodes import cfg, finish, run_cluster

pytestmark = pytest.mark.functional


def lock_request(src: int, dst: int, counter: int) -> bytes:
    """A PeerSwap lock request of initiator ``src`` (a small sampling frame)."""
    return encode_sampling_frame(src, dst, LockRequest((src, counter)))


async def test_a_signed_batch_is_judged_frame_by_frame(tmp_path: Path) -> None:
    ring = Keyring.generate("lab-b")
    save_keyring(tmp_path / "k", ring)
    config = cfg(nodes=6, rounds=1000)
    procs, addrs = await keyed_cluster(config, [tuple(range(6))], [tmp_path / "k"])
    for n in procs[0].host.nodes.values():
        n.pause()
    path = "/v1/batch"
    url = f"http://{addrs[0]}{path}"

    def signed(dst: int, frame: bytes, sender: int = 2, path_dst: int | None = None) -> dict[str, str]:
        path = f"/v1/nodes/{dst if path_dst is None else path_dst}/sampling"
        return sign(ring, "POST", path, sender, frame, int(time.time() * 1000))

    first = lock_request(2, 1, 1)
    first_auth = signed(1, first)
    entries = [
        (1, Channel.SAMPLING, first, first_auth),
        (3, Channel.SAMPLING, lock_request(2, 3, 1), signed(3, lock_request(2, 3, 1))),
        (4, Channel.SAMPLING, lock_request(5, 4, 1), signed(4, lock_request(5, 4, 1))),  # frame says 5
        (9, Channel.SAMPLING, lock_request(2, 9, 1), signed(9, lock_request(2, 9, 1))),  # no node 9 here
        (1, Channel.SAMPLING, b"\xc1garbage", signed(1, b"\xc1garbage")),  # not a frame
        (3, Channel.SAMPLING, lock_request(2, 3, 2), {}),  # no authentication of its own
        (3, Channel.SAMPLING, lock_request(2, 3, 3), signed(3, lock_request(2, 3, 3), path_dst=1)),
        (1, Channel.SAMPLING, first, first_auth),  # the first entry again
    ]
    body = pack_batch(entries)
    refused_before = sum(sum(n.counters.rejected.values()) for n in procs[0].host.nodes.values())
    try:
        async with aiohttp.ClientSession() as s:
            headers = sign(ring, "POST", path, 2, body, int(time.time() * 1000))
            async with s.post(url, data=body, headers=headers) as r:
                assert r.status == 200
                outcomes = parse_outcomes(await r.read(), len(entries))
            assert outcomes is not None
            assert outcomes[:2] == [Outcome(200), Outcome(200)]
            assert outcomes[2] == Outcome(403, "sender-mismatch")
            assert outcomes[3] == Outcome(404, "unknown-node")
            assert outcomes[4].status == 400
            assert outcomes[5:] == [Outcome(401, "no-auth"), Outcome(401, "bad-mac"), Outcome(409, "replay")]
            after = sum(sum(n.counters.rejected.values()) for n in procs[0].host.nodes.values())
            assert after - refused_before == 5  # each counted at its own node (9 is nobody's)

            await asyncio.sleep(0.3)  # node 2 unlocks the locks it did not ask for
            taken = procs[0].host.nodes[1].counters.bytes_received
            # a body that is not a batch is refused whole, before any frame is delivered
            again = lock_request(2, 1, 2)
            auth = signed(1, again)
            bad_bodies = [
                msgpack.packb({"a": 1}),
                msgpack.packb([[1, 2, again, auth]]),  # one entry: post it alone
                msgpack.packb([[1, 9, again, auth]] * 2),  # no channel 9
                msgpack.packb([[-1, 2, again, auth]] * 2),
                msgpack.packb([[1, 2, again]] * 2),  # no auth map
                msgpack.packb([[1, 2, again, auth]] * (MAX_FRAMES + 1)),
                b"\x92\x94\x01\x02",  # truncated
            ]
            for bad in bad_bodies:
                headers = sign(ring, "POST", path, 2, bad, int(time.time() * 1000))
                async with s.post(url, data=bad, headers=headers) as r:
                    assert (r.status, r.headers.get("X-P2P-Reason")) == (400, "bad-batch"), bad[:20]
            assert procs[0].host.nodes[1].counters.bytes_received == taken  # no frame of them arrived
            # a stranger's batch is refused from its headers
            async with s.post(url, data=body) as r:
                assert (r.status, r.headers.get("X-P2P-Reason")) == (401, "no-auth")
    finally:
        for p in procs:
            p.stop()
        await asyncio.gather(*(p.shutdown() for p in procs))


async def test_nodes_batch_their_small_frames_and_learn_as_without() -> None:
    config = cfg(nodes=12, rounds=8)
    procs, _ = await run_cluster(config, [tuple(range(0, 6)), tuple(range(6, 12))])
    nodes = [n for p in procs for n in p.host.nodes.values()]
    rank_before = np.mean([n.learner.test_rank() for n in nodes])  # type: ignore[attr-defined]
    results = await finish(procs)
    rank_after = np.mean([n.learner.test_rank() for n in nodes])  # type: ignore[attr-defined]
    assert sum(r["batches"] for r in results) > 0
    assert sum(r["batched_frames"] for r in results) >= 2 * sum(r["batches"] for r in results)
    assert sum(r["view_swaps"]["committed"] for r in results) > 0
    assert sum(r["send_failures"] for r in results) <= 0.05 * sum(r["messages"] for r in results)
    assert rank_after < rank_before - LEARNED, (rank_before, rank_after)  # as test_http_nodes' runs
    procs, _ = await run_cluster(
        config.replace(**{"wire.batch": False}), [tuple(range(0, 6)), tuple(range(6, 12))]
    )
    assert all(r["batches"] == 0 for r in await finish(procs))


async def test_a_process_without_batches_gets_single_posts() -> None:
    got: list[str] = []

    async def single(request: web.Request) -> web.Response:
        got.append(request.path)
        return web.Response(text="ok")

    async def no_route(request: web.Request) -> web.Response:
        return web.Response(status=404, text="no-route", headers={"X-P2P-Reason": "no-route"})

    app = web.Application()
    app.router.add_post("/v1/nodes/{node}/{channel}", single)
    app.router.add_post("/v1/batch", no_route)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_ports(1)[0]
    await web.TCPSite(runner, "127.0.0.1", port).start()
    transport = HttpTransport({1: f"127.0.0.1:{port}", 3: f"127.0.0.1:{port}"}, batch_bytes=100_000)
    outcomes: list[Outcome] = []
    try:
        for round_no in range(2):
            for dst in (1, 3):
                transport.send(2, dst, Channel.SAMPLING, lock_request(2, dst, round_no), outcomes.append)
            await transport.drain(5.0)
    finally:
        await transport.close()
        await runner.cleanup()
    assert [o.status for o in outcomes] == [200] * 4
    assert got == ["/v1/nodes/1/sampling", "/v1/nodes/3/sampling"] * 2  # the 404 is remembered
    assert transport.batches == 0
