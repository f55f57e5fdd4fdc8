"""Process identities over HTTP: a member speaks only for its own nodes, and a node's models go
only to an address its holder proves (p2pnode.trust.identity)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import aiohttp
import pytest

from p2pnode.config import RunConfig
from p2pnode.runners.real import NodeProcess, ProcessSpec, StartupError
from p2pnode.transport.base import Outcome
from p2pnode.trust.auth import Keyring, load_keyring, save_keyring, sign
from p2pnode.trust.identity import Authority, Identity, save_identity
from p2pnode.wire.schema import Channel, MsgType
from p2pnode.wire.tensors import pack_tensor
from tests.functional.helpers import free_ports
from tests.functional.test_http_nodes import cfg, frame

pytestmark = pytest.mark.functional


def cluster_files(tmp: Path) -> tuple[Path, Authority, list[Path]]:
    authority = Authority.generate("ids")
    key = tmp / "cluster.key"
    save_keyring(key, Keyring.generate("ids").trust(authority.public_key))
    paths = []
    for k, ranges in enumerate(([(0, 5)], [(6, 11)])):
        paths.append(tmp / f"p{k}.identity")
        save_identity(paths[-1], authority.issue(ranges))
    return key, authority, paths


def two_processes(
    config: RunConfig, key: Path | None = None, identities: list[Path] | None = None
) -> tuple[list[NodeProcess], list[str]]:
    """Process A (nodes 0-5) and B (6-11) on loopback, each the other's peer, with the cluster
    key and their identities when given (not started)."""
    addrs = [f"127.0.0.1:{p}" for p in free_ports(2)]
    procs = []
    for k in range(2):
        host, port = addrs[k].split(":")
        extra = {} if identities is None else {"key_file": key, "identity_file": identities[k]}
        spec = ProcessSpec(tuple(range(6 * k, 6 * k + 6)), host, int(port), (addrs[1 - k],), **extra)
        procs.append(NodeProcess(config, spec))
    return procs, addrs


async def post(
    session: aiohttp.ClientSession,
    url: str,
    path: str,
    key: Path,
    sender: int,
    body: bytes,
    ident: Identity | None,
) -> tuple[int, str]:
    headers = sign(load_keyring(key), "POST", path, sender, body, int(time.time() * 1000), identity=ident)
    async with session.post(url, data=body, headers=headers) as r:
        return r.status, r.headers.get("X-P2P-Reason", "ok")


async def test_a_member_speaks_only_for_its_own_nodes_and_models_go_only_to_their_holder(
    tmp_path: Path,
) -> None:
    key, _authority, identities = cluster_files(tmp_path)
    config = cfg(nodes=12, rounds=8, sampling="static")  # node 1's in-neighbours: 8 and 10 of B
    procs, addrs = two_processes(config, key, identities)
    await asyncio.gather(*(p.start() for p in procs))
    node = procs[0].host.nodes[1]
    good = {k: pack_tensor(v) for k, v in node.learner.snapshot().items()}
    path = "/v1/nodes/1/gossip"
    url = f"http://{addrs[0]}{path}"
    # B's key: the member who runs process B, holding the cluster key and its own identity
    from p2pnode.trust.identity import load_identity

    b_ident = load_identity(identities[1])
    try:
        run = asyncio.gather(*(p.run() for p in procs))
        async with aiohttp.ClientSession() as s:
            life = (int(time.time()) << 32) + 5
            as_2 = await post(
                s, url, path, key, 2, frame(MsgType.MODEL, 2, 1, {"ver": life, "p": good}), b_ident
            )
            bare = await post(
                s, url, path, key, 7, frame(MsgType.MODEL, 7, 1, {"ver": life, "p": good}), None
            )
            as_8 = await post(
                s, url, path, key, 8, frame(MsgType.MODEL, 8, 1, {"ver": life, "p": good}), b_ident
            )
            as_7 = await post(  # B holds 7, but 7 is no in-neighbour of node 1: the sender gate
                s, url, path, key, 7, frame(MsgType.MODEL, 7, 1, {"ver": life, "p": good}), b_ident
            )
        # B revoked: its next request is refused within a second of the keyring's change
        save_keyring(key, load_keyring(key).revoke(b_ident.credential.serial))
        await asyncio.sleep(1.2)
        async with aiohttp.ClientSession() as s:
            body = frame(MsgType.MODEL, 8, 1, {"ver": life + 1, "p": good})
            revoked = await post(s, url, path, key, 8, body, b_ident)
        results = await run
        # the client side: node 7's model goes only where node 7's holder proves itself; an
        # address relayed for it (A's, which holds 0-5) fails the proof and is forgotten
        transport = procs[0].transport
        assert transport is not None
        transport.closed = False
        procs[0].addresses[8] = addrs[0]
        done = asyncio.get_running_loop().create_future()
        transport.send(
            1, 8, Channel.GOSSIP, frame(MsgType.MODEL, 1, 8, {"ver": 99, "p": good}), done.set_result
        )
        diverted = await done
    finally:
        await asyncio.gather(*(p.shutdown() for p in procs))
    assert as_2 == (403, "not-holder")  # B's identity does not name node 2
    assert bare == (401, "no-identity")  # the cluster key alone is no longer enough
    assert as_8 == (200, "ok")
    assert as_7 == (403, "not-neighbour")
    assert revoked == (403, "revoked")
    assert diverted == Outcome(0, "not-holder") and 8 not in procs[0].addresses
    assert all(r["model_messages"] > 0 for r in results)
    cross = sum(n.node.protocol.stats.models_received for n in procs[0].host.nodes.values())
    assert cross > 0


async def test_a_process_without_the_identity_its_keyring_requires_does_not_start(tmp_path: Path) -> None:
    key, _authority, identities = cluster_files(tmp_path)
    config = cfg(nodes=12, rounds=2)
    with pytest.raises(StartupError, match="--identity"):
        NodeProcess(config, ProcessSpec(tuple(range(6)), "127.0.0.1", free_ports(1)[0], key_file=key))
    with pytest.raises(StartupError, match="does not name"):  # B's identity cannot host A's nodes
        NodeProcess(
            config,
            ProcessSpec(
                tuple(range(6)), "127.0.0.1", free_ports(1)[0], key_file=key, identity_file=identities[1]
            ),
        )
