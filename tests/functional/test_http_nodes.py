"""Real nodes over HTTP on loopback: learning, hostile frames, Cyclon join, sim/real parity."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import msgpack
import numpy as np
import pytest

from p2pnode.config import RunConfig
from p2pnode.runners.real import NodeProcess, ProcessSpec
from p2pnode.runners.sim import simulate
from p2pnode.wire.schema import WIRE_VERSION, MsgType
from p2pnode.wire.tensors import pack_tensor
from tests.functional.helpers import LEARNED, SHED, failed_sends, free_ports

pytestmark = pytest.mark.functional


def cfg(**kw: Any) -> RunConfig:
    return RunConfig(nodes=10, rounds=6, seed=2, tick_seconds=0.004).replace(**{"learning.lr": 0.01, **kw})


async def run_cluster(config: RunConfig, parts: list[tuple[int, ...]], peers_of=None, server_in=None):  # type: ignore[no-untyped-def]
    addrs = [f"127.0.0.1:{p}" for p in free_ports(len(parts))]
    procs = []
    for k, users in enumerate(parts):
        peers = tuple(addrs[j] for j in peers_of[k]) if peers_of else tuple(a for a in addrs if a != addrs[k])
        host, port = addrs[k].split(":")
        spec = ProcessSpec(users, host, int(port), peers, server=server_in == k)
        procs.append(NodeProcess(config, spec))
    await asyncio.gather(*(p.start() for p in procs))
    return procs, addrs


async def finish(procs: list[NodeProcess]) -> list[dict[str, Any]]:
    try:
        return list(await asyncio.gather(*(p.run() for p in procs)))
    finally:
        await asyncio.gather(*(p.shutdown() for p in procs))


async def test_real_nodes_exchange_models_and_learn() -> None:
    config = cfg(nodes=12, rounds=8)
    procs, _ = await run_cluster(config, [tuple(range(0, 6)), tuple(range(6, 12))])
    nodes = [n for p in procs for n in p.host.nodes.values()]
    rank_before = np.mean([n.learner.test_rank() for n in nodes])
    results = await finish(procs)
    rank_after = np.mean([n.learner.test_rank() for n in nodes])
    assert all(r["model_messages"] > 0 and r["merges"] > 0 for r in results)
    assert sum(n.node.protocol.stats.models_received for n in nodes) > 20
    # the held-out item climbs the ranking: fewer negatives score above it (helpers.LEARNED)
    assert rank_after < rank_before - LEARNED, (rank_before, rank_after)


async def test_a_process_that_ends_first_keeps_answering_its_peers_last_round() -> None:
    """Processes start their rounds a moment apart; the one that ends first keeps answering (its
    timers stopped) for a round, so the other's last round loses no frame to a stopped process."""
    # 2 s rounds: a sender's retries (0.2 s, 0.4 s, ±50%) are over before the later one ends
    config = cfg(nodes=12, rounds=2, tick_seconds=0.02)
    procs, _ = await run_cluster(config, [tuple(range(0, 6)), tuple(range(6, 12))])
    assert procs[1].clock is not None
    procs[1].clock.hold(0.6 * 100 * config.tick_seconds)  # its rounds end 0.6 of a round later

    async def alone(proc: NodeProcess) -> dict[str, Any]:  # as `p2pnode run` does: stop when done
        try:
            return await proc.run()
        finally:
            await proc.shutdown()

    results = await asyncio.gather(*(alone(p) for p in procs))
    failed = failed_sends(procs)  # none to a stopped process: only where a loop running late shed load
    assert set(failed) <= SHED and sum(r["send_failures"] for r in results) == sum(failed.values()), failed
    assert all(r["model_messages"] > 0 for r in results)


async def test_local_delivery_skips_http_between_nodes_of_one_process_only() -> None:
    config = cfg(nodes=12, rounds=8)  # the default
    assert config.wire.local_delivery
    procs, _ = await run_cluster(config, [tuple(range(0, 6)), tuple(range(6, 12))])
    nodes = [n for p in procs for n in p.host.nodes.values()]
    rank_before = np.mean([n.learner.test_rank() for n in nodes])
    sent_before = [p.transport.delivered_locally for p in procs if p.transport is not None]
    results = await finish(procs)
    rank_after = np.mean([n.learner.test_rank() for n in nodes])
    for r in results:  # about half of the frames stay in their process, the rest are posted
        assert 0 < r["local_frames"] < r["messages"], (r["local_frames"], r["messages"])
    assert sent_before == [0, 0]
    assert rank_after < rank_before - LEARNED, (rank_before, rank_after)


async def test_without_local_delivery_every_frame_is_posted() -> None:
    config = cfg(nodes=8, rounds=3).replace(**{"wire.local_delivery": False})  # --no-local-delivery
    procs, _ = await run_cluster(config, [tuple(range(8))])
    results = await finish(procs)
    assert results[0]["local_frames"] == 0 and results[0]["messages"] > 0


def frame(msg_type: int, src: int, dst: int, body: Any) -> bytes:
    return bytes(
        msgpack.packb(
            {"v": WIRE_VERSION, "t": msg_type, "src": src, "dst": dst, "b": body}, use_bin_type=True
        )
    )


async def test_hostile_frames_get_4xx_and_change_nothing() -> None:
    config = cfg(nodes=6, rounds=1000, protocol="samo", sampling="static")
    procs, addrs = await run_cluster(config, [tuple(range(6))])
    proc = procs[0]
    node = proc.host.nodes[1]
    for n in proc.host.nodes.values():
        n.pause()  # no more wake-ups: from here on only the requests below could change state
    await asyncio.sleep(0.3)  # let messages already in flight land
    before = {k: v.copy() for k, v in node.learner.params.items()}
    buffered = len(node.node.protocol.buffer)  # type: ignore[attr-defined]
    view = node.node.sampler.out_view()
    good = {k: pack_tensor(v) for k, v in node.learner.snapshot().items()}
    nan = {k: pack_tensor(v) for k, v in node.learner.snapshot().items()}
    bad_item = node.learner.snapshot()["item"].copy()
    bad_item[0, 0] = np.nan
    nan["item"] = pack_tensor(bad_item)
    full = frame(MsgType.MODEL, 2, 1, {"ver": 1, "p": good})
    cases = [
        ("gossip", b"\xc1garbage", 400, "malformed"),
        ("gossip", full[: len(full) // 3], 400, "truncated"),
        ("gossip", frame(77, 2, 1, {}), 400, "unknown-type"),
        ("gossip", frame(MsgType.MODEL, 2, 1, {"ver": 1, "p": nan}), 400, "non-finite"),
        ("gossip", frame(MsgType.MODEL, 2, 1, {"ver": 1, "p": {"h": good["h"]}}), 400, "schema"),
        ("sampling", full, 400, "wrong-route"),
        ("gossip", frame(MsgType.MODEL, 2, 3, {"ver": 1, "p": good}), 400, "wrong-route"),
        ("gossip", b"\x00" * (proc.host.max_frame_bytes + 10), 413, "too-large"),
    ]
    try:
        async with aiohttp.ClientSession() as s:
            for route, data, status, reason in cases:
                async with s.post(f"http://{addrs[0]}/v1/nodes/1/{route}", data=data) as r:
                    assert (r.status, r.headers.get("X-P2P-Reason")) == (status, reason), reason
            async with s.post(f"http://{addrs[0]}/v1/nodes/99/gossip", data=full) as r:
                assert r.status == 404
            async with s.get(f"http://{addrs[0]}/metrics") as r:
                text = await r.text()
            async with s.get(f"http://{addrs[0]}/status") as r:
                status_json = await r.json()
        for k, v in before.items():
            np.testing.assert_array_equal(node.learner.params[k], v)
        assert node.node.sampler.out_view() == view
        assert len(node.node.protocol.buffer) == buffered  # type: ignore[attr-defined]
        for _, _, _, reason in cases:
            assert f'p2pnode_rejected_messages_total{{node="1",reason="{reason}"}}' in text
        assert status_json["protocol"] == "samo" and len(status_json["nodes"]) == 6
    finally:
        await proc.shutdown()


async def test_node_with_one_seed_joins_through_cyclon() -> None:
    config = cfg(nodes=9, rounds=12, sampling="cyclon")
    # A hosts 0-3 (no peers), B hosts 4-7 and C hosts 8; B and C only know A.
    procs, _ = await run_cluster(config, [(0, 1, 2, 3), (4, 5, 6, 7), (8,)], peers_of=[[], [0], [0]])
    joiner = procs[2].host.nodes[8]
    met: set[int] = set()

    async def watch() -> None:
        while True:
            met.update(joiner.node.sampler.out_view())
            await asyncio.sleep(0.05)

    watcher = asyncio.create_task(watch())
    await finish(procs)
    watcher.cancel()
    assert met & {4, 5, 6, 7}, met  # learned nodes of a process it was never told about
    received_from_joiner = sum(n.counters.bytes_received for p in procs[:2] for n in p.host.nodes.values())
    assert received_from_joiner > 0
    assert joiner.node.protocol.stats.models_received > 0


async def test_parity_simulator_and_http_end_within_noise() -> None:
    config = cfg(nodes=50, rounds=10, seed=11)
    sim = simulate(config)
    procs, _ = await run_cluster(config, [tuple(range(25)), tuple(range(25, 50))])
    real = await finish(procs)
    hr_real = sum(r["hit_ratio_at_20"] * r["nodes"] for r in real) / 50
    sim_tail = np.mean([h["hit_ratio_at_20"] for h in sim["history"][-3:]])
    real_tail = np.mean(
        [
            sum(p.log.history[i]["hit_ratio_at_20"] * p.log.history[i]["nodes"] for p in procs) / 50
            for i in range(-3, 0)
        ]
    )
    # 50 binary outcomes: standard error ~0.07 per run, so 0.2 is about two standard errors
    assert abs(sim_tail - real_tail) < 0.2, (sim_tail, real_tail, hr_real)
    assert real_tail > 0.4 and sim_tail > 0.4


async def test_fedavg_server_and_clients_over_http() -> None:
    config = cfg(nodes=12, rounds=6, protocol="fedavg")
    procs, _ = await run_cluster(config, [tuple(range(0, 6)), tuple(range(6, 12))], server_in=1)
    nodes = [n for p in procs for n in p.host.nodes.values() if n.node_id < 12]
    rank_before = np.mean([n.learner.test_rank() for n in nodes])  # type: ignore[attr-defined]
    await finish(procs)
    rank_after = np.mean([n.learner.test_rank() for n in nodes])  # type: ignore[attr-defined]
    server = procs[1].host.nodes[12]
    assert server.node.protocol.aggregated_rounds >= 4  # type: ignore[attr-defined]
    assert all(n.node.protocol.stats.local_steps > 0 for n in nodes)
    assert rank_after < rank_before - LEARNED, (rank_before, rank_after)


async def test_dp_nodes_publish_their_epsilon_on_metrics() -> None:
    config = cfg(nodes=8, rounds=4).replace(**{"learning.dp_noise": 1.0})
    procs, addrs = await run_cluster(config, [tuple(range(4)), tuple(range(4, 8))])
    try:
        results = list(await asyncio.gather(*(p.run() for p in procs)))
        async with aiohttp.ClientSession() as s, s.get(f"http://{addrs[1]}/metrics") as r:
            text = await r.text()
    finally:
        await asyncio.gather(*(p.shutdown() for p in procs))
    scraped = {}
    for line in text.splitlines():
        if line.startswith("p2pnode_dp_epsilon{"):
            node = line.split('node="')[1].split('"')[0]
            scraped[node] = float(line.rsplit(" ", 1)[1])
    assert set(scraped) == {"4", "5", "6", "7"}
    by_node = results[1]["dp_epsilon_by_node"]
    for node, eps in scraped.items():  # the gauge reads the node's own accountant, and ε only grows:
        now = procs[1].host.nodes[int(node)].learner.epsilon()  # nodes may train until shutdown
        assert now is not None and 0 <= by_node[node] <= eps <= now
    # on a loaded machine a node may not have trained yet in 4 rounds of 1 s; most have
    assert sum(by_node[node] > 0 for node in scraped) >= 2, by_node


@pytest.mark.parametrize("multicast", ["v", "theta"])
async def test_colluders_multicast_over_http_and_strangers_are_refused(multicast: str) -> None:
    """v: every member keeps v_u and multicasts it to the others (Algorithm 2); theta: members
    forward Θ_u to the group's read observer over the same ``/collude`` route."""
    config = cfg(nodes=10, rounds=5, dataset="synthetic").replace(
        **{
            "attack.kind": "cia",
            "attack.target_k": 3,
            "attack.colluders": 0.4,
            "attack.multicast": multicast,
        }
    )
    procs, addrs = await run_cluster(config, [tuple(range(5)), tuple(range(5, 10))])
    try:
        results = list(await asyncio.gather(*(p.run() for p in procs)))
        async with aiohttp.ClientSession() as s:
            texts = []
            for a in addrs:
                async with s.get(f"http://{a}/metrics") as r:
                    texts.append(await r.text())
            honest = next(
                n for p in procs for n in p.host.nodes.values() if not hasattr(n.node, "multicasts_sent")
            )
            where = addrs[0] if honest.node_id < 5 else addrs[1]
            bogus = frame(MsgType.COLLUDE, 1, honest.node_id, {"u": 2, "p": {}})
            async with s.post(f"http://{where}/v1/nodes/{honest.node_id}/collude", data=bogus) as r:
                refused = (r.status, r.headers.get("X-P2P-Reason"))
    finally:
        await asyncio.gather(*(p.shutdown() for p in procs))
    members = [n for p in procs for n in p.host.nodes.values() if hasattr(n.node, "multicasts_sent")]
    observers = [n for n in members if hasattr(n.node, "observer")]
    assert len(members) == 4 and {n.node_id < 5 for n in members} == {True, False}  # both processes
    sent = 0.0
    for text in texts:
        for line in text.splitlines():
            if line.startswith("p2pnode_messages_sent_total{") and 'channel="collude"' in line:
                sent += float(line.rsplit(" ", 1)[1])
    assert sent == sum(n.node.multicasts_sent for n in members) > 0  # type: ignore[attr-defined]
    if multicast == "v":
        assert observers == members
        assert all(n.node.multicasts_received > 0 for n in members)  # type: ignore[attr-defined]
    else:
        (reader,) = observers  # forwarders keep no observer
        assert reader.node.multicasts_received == sent > 0  # type: ignore[attr-defined]
        assert reader.node.multicasts_sent == 0  # type: ignore[attr-defined]
    assert refused == (403, "not-colluder")
    assert sum(r["cia"]["adversaries"] for r in results) == 1
