"""Authenticated nodes over real HTTP: hostile requests get their status, rotation loses nothing."""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import pytest

from p2pnode.runners.real import NodeProcess, ProcessSpec
from p2pnode.trust.auth import Keyring, save_keyring, sign
from p2pnode.wire.schema import MsgType
from p2pnode.wire.tensors import pack_tensor
from tests.functional.helpers import SHED, failed_sends, free_ports
from tests.functional.test_http_nodes import cfg, frame

pytestmark = pytest.mark.functional
AUTH_REASONS = ("no-auth", "bad-mac", "unknown-key", "bad-auth", "wrong-cluster", "unknown-sender")


async def keyed_cluster(
    config: Any, parts: list[tuple[int, ...]], key_files: list[Path]
) -> tuple[list[NodeProcess], list[str]]:
    addrs = [f"127.0.0.1:{p}" for p in free_ports(len(parts))]
    procs = []
    for k, users in enumerate(parts):
        host, port = addrs[k].split(":")
        peers = tuple(a for a in addrs if a != addrs[k])
        procs.append(NodeProcess(config, ProcessSpec(users, host, int(port), peers, key_file=key_files[k])))
    await asyncio.gather(*(p.start() for p in procs))
    return procs, addrs


async def one_keyed_process(tmp_path: Path, cluster: str, config: Any) -> tuple[Keyring, NodeProcess, str]:
    """One process hosting every node of ``config`` under a fresh keyring, its nodes' timers
    stopped (from here on only a test's requests change anything)."""
    ring = Keyring.generate(cluster)
    save_keyring(tmp_path / "k", ring)
    procs, addrs = await keyed_cluster(config, [tuple(range(config.nodes))], [tmp_path / "k"])
    for n in procs[0].host.nodes.values():
        n.pause()
    return ring, procs[0], addrs[0]


def now_ms() -> int:
    return int(time.time() * 1000)


async def test_hostile_requests_to_a_keyed_node_get_their_status_and_change_nothing(tmp_path: Path) -> None:
    config = cfg(nodes=6, rounds=1000, protocol="samo", sampling="static")
    ring, proc, addr = await one_keyed_process(tmp_path, "lab-a", config)
    addrs = [addr]
    node = proc.host.nodes[1]
    await asyncio.sleep(0.3)
    good = {k: pack_tensor(v) for k, v in node.learner.snapshot().items()}
    body = frame(MsgType.MODEL, 2, 1, {"ver": 1, "p": good})
    path = "/v1/nodes/1/gossip"
    url = f"http://{addrs[0]}{path}"
    try:
        async with aiohttp.ClientSession() as s:
            valid = sign(ring, "POST", path, 2, body, now_ms())
            async with s.post(url, data=body, headers=valid) as r:
                assert r.status == 200  # a member's message is merged (buffered by SAMO)
            before = {k: v.copy() for k, v in node.learner.params.items()}
            buffered = len(node.node.protocol.buffer)  # type: ignore[attr-defined]
            view = node.node.sampler.out_view()
            stranger = Keyring("lab-a", {ring.primary: b"s" * 32}, ring.primary)
            other = Keyring("lab-b", {"k1": b"o" * 32}, "k1")
            cases = [
                ({}, 401, "no-auth"),
                (sign(stranger, "POST", path, 2, body, now_ms()), 401, "bad-mac"),
                ({**sign(ring, "POST", path, 2, body, now_ms()), "X-P2P-Key": "k7"}, 401, "unknown-key"),
                (sign(other, "POST", path, 2, body, now_ms()), 403, "wrong-cluster"),
                (sign(ring, "POST", path, 77, body, now_ms()), 403, "unknown-sender"),
                (sign(ring, "POST", path, 3, body, now_ms()), 403, "sender-mismatch"),  # frame says 2
                (sign(ring, "POST", path, 2, body, now_ms() - 120_000), 409, "stale"),
                (valid, 409, "replay"),
            ]
            for headers, status, reason in cases:
                async with s.post(url, data=body, headers=headers) as r:
                    assert (r.status, r.headers.get("X-P2P-Reason")) == (status, reason), reason
            # correctly signed by a member, but hostile content: every one is refused by the decoder
            nan_item = node.learner.snapshot()["item"].copy()
            nan_item[3, 1] = np.nan
            huge = dict(good)
            huge["item"] = {"d": "float32", "s": [2**31, 2**31], "b": b"\x00" * 64}
            wrong_dtype = dict(good)
            wrong_dtype["h"] = {"d": "float64", "s": good["h"]["s"], "b": bytes(good["h"]["b"]) * 2}
            signed_corpus = [
                (b"\xc1garbage", 400, "malformed"),
                (body[: len(body) // 2], 400, "truncated"),
                (
                    frame(MsgType.MODEL, 2, 1, {"ver": 9, "p": {**good, "item": pack_tensor(nan_item)}}),
                    400,
                    "non-finite",
                ),
                (frame(MsgType.MODEL, 2, 1, {"ver": 9, "p": huge}), 400, "shape"),
                (frame(MsgType.MODEL, 2, 1, {"ver": 9, "p": wrong_dtype}), 400, "dtype"),
                (frame(77, 2, 1, {}), 400, "unknown-type"),
                (b"\x00" * (proc.host.max_frame_bytes + 10), 413, "too-large"),
            ]
            for data, status, reason in signed_corpus:
                # a model refused after the sender gate costs sender 2 a token: wait
                # for its bucket (1 token per 60 ticks of 4 ms) so the decoder answers each one
                await asyncio.sleep(0.5)
                headers = sign(ring, "POST", path, 2, data, now_ms())
                async with s.post(url, data=data, headers=headers) as r:
                    assert (r.status, r.headers.get("X-P2P-Reason")) == (status, reason), reason
            cases += [({}, status, reason) for _, status, reason in signed_corpus]
            signed_for_3 = sign(ring, "POST", "/v1/nodes/3/gossip", 2, body, now_ms())
            async with s.post(url, data=body, headers=signed_for_3) as r:  # re-aimed at another node
                assert (r.status, r.headers.get("X-P2P-Reason")) == (401, "bad-mac")
            async with s.get(f"http://{addrs[0]}/metrics") as r:
                text = await r.text()
            async with s.get(f"http://{addrs[0]}/status") as r:
                status_text = await r.text()
        for k, v in before.items():
            np.testing.assert_array_equal(node.learner.params[k], v)
        assert len(node.node.protocol.buffer) == buffered  # type: ignore[attr-defined]
        assert node.node.sampler.out_view() == view
        for _, _, reason in cases:
            assert f'p2pnode_rejected_messages_total{{node="1",reason="{reason}"}}' in text
        assert ring.keys[ring.primary].hex() not in text + status_text  # nothing secret is served
    finally:
        await proc.shutdown()


async def test_key_rotation_across_a_running_cluster_loses_no_message(tmp_path: Path) -> None:
    """Install, use, remove, one process after the other, while the nodes gossip."""
    ring = Keyring.generate("lab", "old")
    files = [tmp_path / "a.key", tmp_path / "b.key"]
    save_keyring(files[0], ring)
    shutil.copy(files[0], files[1])
    config = cfg(nodes=8, rounds=40, tick_seconds=0.004)
    procs, _ = await keyed_cluster(config, [tuple(range(4)), tuple(range(4, 8))], files)
    run = asyncio.gather(*(p.run() for p in procs))
    new_key = b"n" * 32
    try:
        for step in (lambda r: r.install("new", new_key), lambda r: r.use("new"), lambda r: r.remove("old")):
            for proc, path in zip(procs, files, strict=True):
                assert proc.keys is not None
                save_keyring(path, step(proc.keys.keyring))
                assert proc.keys.reload(force=True)
                await asyncio.sleep(0.15)  # messages flow in the mixed state
        results = await run
    finally:
        await asyncio.gather(*(p.shutdown() for p in procs))
    assert all(p.keys is not None and list(p.keys.keyring.keys) == ["new"] for p in procs)
    assert all(r["model_messages"] > 0 for r in results)
    rejected = [n.counters.rejected for p in procs for n in p.host.nodes.values()]
    assert not any(reason in r for r in rejected for reason in (*AUTH_REASONS, "replay", "stale")), rejected
    # no send failed for its authentication: only where a loop running late shed load, or where a
    # model overtook the SwapCommit that makes its sender an in-neighbour (the sender gate's
    # `not-neighbour`: a PeerSwap race over two routes, 3 frames in one loaded CI run)
    failed = failed_sends(procs)
    assert set(failed) <= SHED | {"not-neighbour"}, failed
    assert sum(r["send_failures"] for r in results) == sum(failed.values())


async def test_old_models_floods_and_overload_are_refused_over_http(tmp_path: Path) -> None:
    """409 for a model older than the sender's last, 429 past a sender's rate, 503 past the gate."""
    from p2pnode.trust.limits import Limits

    ring = Keyring.generate("lab")
    save_keyring(tmp_path / "k", ring)
    config = cfg(nodes=6, rounds=1000, protocol="samo", sampling="static")
    port = free_ports(1)[0]
    limits = Limits(max_inflight=1, rate_per_s=1.0, burst=3.0)
    proc = NodeProcess(
        config, ProcessSpec(tuple(range(6)), "127.0.0.1", port, key_file=tmp_path / "k", limits=limits)
    )
    await proc.start()
    node = proc.host.nodes[1]
    for n in proc.host.nodes.values():
        n.pause()
    good = {k: pack_tensor(v) for k, v in node.learner.snapshot().items()}
    path = "/v1/nodes/1/gossip"
    url = f"http://127.0.0.1:{port}{path}"

    async def post(s: aiohttp.ClientSession, version: int, sender: int = 2) -> tuple[int, str | None]:
        body = frame(MsgType.MODEL, sender, 1, {"ver": version, "p": good})
        async with s.post(url, data=body, headers=sign(ring, "POST", path, sender, body, now_ms())) as r:
            return r.status, r.headers.get("X-P2P-Reason")

    try:
        async with aiohttp.ClientSession() as s:
            assert await post(s, 5) == (200, None)
            assert await post(s, 3) == (409, "old-model")  # older than the last one taken from 2
            assert await post(s, 5) == (200, None)  # the same version again is not older
            assert await post(s, 6) == (429, "rate-limited")  # sender 2's burst of 3 is spent
            assert await post(s, 6, sender=4) == (200, None)  # other senders are unaffected

            async def slow_body():  # type: ignore[no-untyped-def]
                yield b"\x85"
                await asyncio.sleep(0.5)
                yield b"rest"

            # a stranger's slow upload is answered from its headers, before its body: no slot
            async with s.post(url, data=slow_body()) as r:
                assert (r.status, r.headers.get("X-P2P-Reason")) == (401, "no-auth")
            # a member's slow upload holds the only slot until its body is in
            signed = sign(ring, "POST", path, 3, b"\x85rest", now_ms())
            first = asyncio.ensure_future(s.post(url, data=slow_body(), headers=signed))
            await asyncio.sleep(0.2)
            busy = await post(s, 7, sender=4)
            (await first).release()
            assert busy == (503, "busy")
            assert await post(s, 7, sender=5) == (200, None)  # the gate reopened: it recovers
    finally:
        await proc.shutdown()
    assert node.counters.rejected.get("old-model") == 1 and node.counters.rejected.get("busy") == 1
    assert node.counters.rejected.get("no-auth") == 1
    assert node.node.protocol.stats.models_received == 4  # type: ignore[attr-defined]


async def test_timeouts_connection_caps_and_get_bounds_over_http(tmp_path: Path) -> None:
    """A slow member body is cut at body_timeout_s (408), an unfinished request head at
    header_timeout_s, connections past an address's cap are closed as they are accepted, and
    GET pages are rendered once per page_cache_s however often they are asked for."""
    from p2pnode.trust.limits import Limits

    ring = Keyring.generate("lab")
    save_keyring(tmp_path / "k", ring)
    config = cfg(nodes=4, rounds=1000, protocol="samo", sampling="static")
    port = free_ports(1)[0]
    limits = Limits(
        body_timeout_s=0.4, header_timeout_s=0.6, max_connections_per_address=3, page_cache_s=30.0
    )
    spec = ProcessSpec(tuple(range(4)), "127.0.0.1", port, key_file=tmp_path / "k", limits=limits)
    proc = NodeProcess(config, spec)
    await proc.start()
    for n in proc.host.nodes.values():
        n.pause()
    path = "/v1/nodes/1/gossip"
    url = f"http://127.0.0.1:{port}{path}"
    try:
        async with aiohttp.ClientSession() as s:

            async def stalled():  # type: ignore[no-untyped-def]
                yield b"\x85"
                await asyncio.sleep(3.0)
                yield b"rest"

            t0 = time.perf_counter()
            signed = sign(ring, "POST", path, 2, b"\x85rest", now_ms())
            async with s.post(url, data=stalled(), headers=signed) as r:
                assert (r.status, r.headers.get("X-P2P-Reason")) == (408, "slow-body")
            assert time.perf_counter() - t0 < 2.0

            # an unfinished head: closed after the header timeout, not held
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"GET /status HTTP/1.1\r\nHost: x\r\n")
            t0 = time.perf_counter()
            assert await asyncio.wait_for(reader.read(), timeout=5.0) == b""
            assert 0.3 < time.perf_counter() - t0 < 3.0
            writer.close()

            # three idle connections from 127.0.0.2: a fourth is closed at once, 127.0.0.1 is not
            stranger = {"local_addr": ("127.0.0.2", 0)}
            held = [await asyncio.open_connection("127.0.0.1", port, **stranger) for _ in range(3)]  # type: ignore[arg-type]
            r4, w4 = await asyncio.open_connection("127.0.0.1", port, **stranger)  # type: ignore[arg-type]
            assert await asyncio.wait_for(r4.read(), timeout=2.0) == b""
            async with s.get(f"http://127.0.0.1:{port}/status") as r:
                assert r.status == 200
                first = await r.json()
            for _, w in [*held, (r4, w4)]:
                w.close()

            # a page is rendered once per page_cache_s: the second answer is the first one's bytes
            proc.round += 1
            async with s.get(f"http://127.0.0.1:{port}/status") as r:
                assert await r.json() == first
        assert proc.metrics.refused_connections._value.get() >= 1
    finally:
        await proc.shutdown()
    assert proc.host.nodes[1].counters.rejected.get("slow-body") == 1


async def test_a_process_refuses_frames_until_its_nodes_start_and_senders_try_again(tmp_path: Path) -> None:
    """A process listens before it has learned its peers' addresses (they fetch its members), so
    its nodes could not answer a frame yet: 503 "starting", after the headers (a stranger still
    gets 401 and learns nothing), and the sender's transport tries again until it lands."""
    from p2pnode.transport.base import Outcome
    from p2pnode.transport.http import REASON_HEADER
    from p2pnode.wire.codec import encode_sampling_frame
    from p2pnode.wire.schema import Channel
    from peer_sampling.messages import LockRequest

    # every frame posted, also between the process's own nodes, so that one of them can meet it
    config = cfg(nodes=4, rounds=1000).replace(**{"wire.local_delivery": False})
    ring, proc, addr = await one_keyed_process(tmp_path, "lab-s", config)
    addrs = [addr]
    proc.host.accepting = False
    path = "/v1/nodes/1/sampling"
    body = encode_sampling_frame(2, 1, LockRequest((2, 1)))
    try:
        async with aiohttp.ClientSession() as s:
            async with s.post(f"http://{addrs[0]}{path}", data=body) as r:
                assert r.status == 401
            headers = sign(ring, "POST", path, 2, body, now_ms())
            async with s.post(f"http://{addrs[0]}{path}", data=body, headers=headers) as r:
                assert (r.status, r.headers[REASON_HEADER]) == (503, "starting")
        assert proc.host.nodes[1].node.sampler.lock is None  # nothing reached the node
        assert proc.transport is not None
        done: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        proc.transport.send(
            2, 1, Channel.SAMPLING, encode_sampling_frame(2, 1, LockRequest((2, 2))), done.set_result
        )
        await asyncio.sleep(0.1)
        assert not done.done()  # refused once, waiting to try again
        proc.host.accepting = True
        assert (await asyncio.wait_for(done, 5.0)).ok
        assert proc.host.nodes[1].node.sampler.lock == (2, 2)
    finally:
        await proc.shutdown()


async def test_a_late_event_loop_sheds_models_but_serves_small_frames(tmp_path: Path) -> None:
    """Lag shedding refuses the bodies whose handling makes a loop late (models); a swap's lock
    request costs less to serve than to refuse and have retried, so it is served."""
    from p2pnode.transport.http import SHEDDER
    from p2pnode.wire.codec import encode_sampling_frame
    from peer_sampling.messages import LockRequest

    config = cfg(nodes=6, rounds=1000, protocol="samo", sampling="static")
    ring, proc, addr = await one_keyed_process(tmp_path, "lab-l", config)
    addrs = [addr]
    node = proc.host.nodes[1]
    assert proc.runner is not None
    shedder = proc.runner.app[SHEDDER]
    model = frame(
        MsgType.MODEL, 2, 1, {"ver": 1, "p": {k: pack_tensor(v) for k, v in node.learner.snapshot().items()}}
    )
    lock = encode_sampling_frame(2, 1, LockRequest((2, 1)))

    async def post(s: aiohttp.ClientSession, channel: str, body: bytes) -> tuple[int, str | None]:
        path = f"/v1/nodes/1/{channel}"
        shedder.lag_s = 1e9  # the loop runs late (the probe only smooths it down slowly)
        async with s.post(
            f"http://{addrs[0]}{path}", data=body, headers=sign(ring, "POST", path, 2, body, now_ms())
        ) as r:
            return r.status, r.headers.get("X-P2P-Reason")

    try:
        async with aiohttp.ClientSession() as s:
            assert await post(s, "gossip", model) == (503, "busy")
            assert await post(s, "sampling", lock) == (200, None)
            shedder.lag_s = 0.0
            path = "/v1/nodes/1/gossip"
            async with s.post(
                f"http://{addrs[0]}{path}", data=model, headers=sign(ring, "POST", path, 2, model, now_ms())
            ) as r:
                assert r.status == 200  # on time again: served
    finally:
        await proc.shutdown()
    assert node.counters.rejected.get("busy") == 1
