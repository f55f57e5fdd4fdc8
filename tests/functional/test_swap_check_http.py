"""A third process's node asks a swap's partner before a member's commit moves its edge there
(``SwapCheck`` over real HTTP with identities): A (0-5), the member B (6-11), C (12-17)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
import pytest

from p2pnode.runners.real import NodeProcess, ProcessSpec
from p2pnode.trust.auth import Keyring, save_keyring
from p2pnode.trust.identity import Authority, load_identity, save_identity
from p2pnode.wire.codec import encode_sampling_frame
from peer_sampling.messages import CHECK_REFUSED, LockRequest, SwapChecked, SwapCommit
from peer_sampling.peerswap import PeerSwap
from tests.functional.helpers import free_ports
from tests.functional.test_http_nodes import cfg
from tests.functional.test_identities_http import post

pytestmark = pytest.mark.functional


async def member_commits_to_c(tmp_path: Path) -> tuple[tuple[tuple[int, ...], ...], PeerSwap, int]:
    """Three processes with identities and PeerSwap views, no honest swap; B's process stopped so
    that the test speaks as B's ids. As one of B's ids b that neighbours C's node c, the member
    locks c and commits (b, x) for an A node x that never heard of the transaction: c's edge with
    b would move to x, whose views do not name c. Returns c's views before, c's sampler after,
    and x."""
    tmp_path.mkdir()
    authority = Authority.generate("ids")
    key = tmp_path / "cluster.key"
    save_keyring(key, Keyring.generate("ids").trust(authority.public_key))
    addrs = [f"127.0.0.1:{p}" for p in free_ports(3)]
    config = cfg(nodes=18, rounds=1000, sampling="peerswap", swap_rate=0.0)
    procs = []
    for k in range(3):
        ident = tmp_path / f"p{k}.identity"
        save_identity(ident, authority.issue([(6 * k, 6 * k + 5)]))
        host, port = addrs[k].split(":")
        peers = tuple(a for a in addrs if a != addrs[k])
        spec = ProcessSpec(
            tuple(range(6 * k, 6 * k + 6)), host, int(port), peers, key_file=key, identity_file=ident
        )
        procs.append(NodeProcess(config, spec))
    await asyncio.gather(*(p.start() for p in procs))
    try:
        await procs[1].shutdown()
        member = load_identity(tmp_path / "p1.identity")
        ps = {i: n.node.sampler for i, n in procs[2].host.nodes.items()}
        c, b = next(
            (i, v)
            for i, s in ps.items()
            if isinstance(s, PeerSwap)
            for v in (*s.out_view(), *s.in_view())
            if 6 <= v < 12
        )
        sampler = ps[c]
        assert isinstance(sampler, PeerSwap)
        before = (sampler.out_view(), sampler.in_view())
        x = next(a for a in range(6) if a not in (*before[0], *before[1]))
        txn = (b, 1)
        path = f"/v1/nodes/{c}/sampling"
        async with aiohttp.ClientSession() as s:
            for message in (LockRequest(txn), SwapCommit(txn, b, x)):
                body = encode_sampling_frame(b, c, message)
                assert await post(s, f"http://{addrs[2]}{path}", path, key, b, body, member) == (200, "ok")
        for _ in range(100):  # C asks A's node over HTTP; it answers that it adopted nothing
            if sampler.lock is None:
                break
            await asyncio.sleep(0.02)
        return before, sampler, x
    finally:
        await asyncio.gather(procs[0].shutdown(), procs[2].shutdown())


async def test_a_member_s_commit_moves_a_third_process_edge_only_with_the_partner_s_word(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """C's node asks A's node, which never took part, and keeps its views; without asking (seen
    failing) the edge moves to a node whose views do not name it, which refuses its models."""
    answered: list[tuple[int, int, int]] = []
    answer = PeerSwap._answer

    def recorded(self: PeerSwap, asker: int, txn: tuple[int, int]) -> SwapChecked:
        out = answer(self, asker, txn)
        answered.append((self.node_id, asker, out.state))
        return out

    monkeypatch.setattr(PeerSwap, "_answer", recorded)
    before, sampler, x = await member_commits_to_c(tmp_path / "asked")
    assert answered == [(x, sampler.node_id, CHECK_REFUSED)]  # asked over HTTP, not a lease run out
    assert sampler.stats.unconfirmed == 1 and sampler.lock is None
    assert (sampler.out_view(), sampler.in_view()) == before
    monkeypatch.setattr(PeerSwap, "_asks", lambda self, a, b, now: {})
    before, sampler, x = await member_commits_to_c(tmp_path / "unasked")
    assert x in (*sampler.out_view(), *sampler.in_view()) and sampler.stats.unconfirmed == 0
