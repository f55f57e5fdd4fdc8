"""Mutual TLS between node processes: certificates from a cluster CA, per-node identity."""

from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
from pathlib import Path

import aiohttp
import pytest

from p2pnode.runners.real import NodeProcess, ProcessSpec
from p2pnode.transport.base import Outcome
from p2pnode.trust.tls import TlsFiles, certified_nodes, parse_ids
from p2pnode.wire.schema import MsgType
from p2pnode.wire.tensors import pack_tensor
from tests.functional.helpers import SHED, failed_sends, free_ports
from tests.functional.test_http_nodes import cfg, frame

pytestmark = [
    pytest.mark.functional,
    pytest.mark.skipif(
        not shutil.which("openssl"), reason="needs the openssl command to make test certificates"
    ),
]


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_ca(d: Path, name: str) -> tuple[Path, Path]:
    key, crt = d / f"{name}.key", d / f"{name}.crt"
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", str(key), "-out", str(crt), "-days", "2", "-subj", f"/CN={name}")  # fmt: skip
    return crt, key


def make_cert(d: Path, name: str, ca: tuple[Path, Path], nodes: str) -> TlsFiles:
    key, csr, crt, ext = d / f"{name}.key", d / f"{name}.csr", d / f"{name}.crt", d / f"{name}.ext"
    ext.write_text(f"subjectAltName = URI:p2pnode:nodes:{nodes}\n")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", str(key),
            "-out", str(csr), "-subj", f"/CN={name}")  # fmt: skip
    openssl("x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]), "-CAcreateserial",
            "-out", str(crt), "-days", "2", "-extfile", str(ext))  # fmt: skip
    return TlsFiles(crt, key, ca[0])


def test_node_ids_from_certificates() -> None:
    assert parse_ids("0-2,7") == {0, 1, 2, 7}
    cert = {"subjectAltName": (("DNS", "x"), ("URI", "p2pnode:nodes:0-5"), ("URI", "p2pnode:nodes:9"))}
    assert certified_nodes(cert) == {0, 1, 2, 3, 4, 5, 9}
    assert certified_nodes({"subjectAltName": (("URI", "p2pnode:nodes:x"),)}) == set()
    assert certified_nodes(None) == set()


async def test_mutual_tls_cluster_learns_and_refuses_strangers_and_impostors(tmp_path: Path) -> None:
    ca = make_ca(tmp_path, "ca")
    a = make_cert(tmp_path, "procA", ca, "0-5")
    b = make_cert(tmp_path, "procB", ca, "6-11")
    rogue_ca = make_ca(tmp_path, "rogueca")
    rogue = make_cert(tmp_path, "rogue", rogue_ca, "0-11")
    config = cfg(nodes=12, rounds=8, sampling="static")  # node 1's in-neighbours: 8 and 10 of B
    addrs = [f"127.0.0.1:{p}" for p in free_ports(2)]
    procs = []
    for k, (users, tls) in enumerate(((tuple(range(6)), a), (tuple(range(6, 12)), b))):
        host, port = addrs[k].split(":")
        peers = (addrs[1 - k],)
        procs.append(NodeProcess(config, ProcessSpec(users, host, int(port), peers, tls=tls)))
    await asyncio.gather(*(p.start() for p in procs))
    node = procs[0].host.nodes[1]
    good = {k: pack_tensor(v) for k, v in node.learner.snapshot().items()}
    url = f"https://{addrs[0]}/v1/nodes/1/gossip"
    try:
        run = asyncio.gather(*(p.run() for p in procs))

        def client(files: TlsFiles | None) -> aiohttp.ClientSession:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.load_verify_locations(cafile=ca[0])
            if files is not None:
                ctx.load_cert_chain(files.cert, files.key)
            return aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx))

        outcomes = {}
        for name, files in (("no certificate", None), ("other CA", rogue)):
            async with client(files) as s:
                try:
                    async with s.post(url, data=b"x") as r:
                        outcomes[name] = r.status
                except (aiohttp.ClientError, ssl.SSLError, OSError):
                    outcomes[name] = "refused"
        async with client(b) as s:  # a member whose certificate speaks for 6-11 posing as node 2
            async with s.post(url, data=frame(MsgType.MODEL, 2, 1, {"ver": 1, "p": good})) as r:
                impostor = (r.status, r.headers.get("X-P2P-Reason"))
            async with s.post(url, data=frame(MsgType.MODEL, 8, 1, {"ver": 1, "p": good})) as r:
                genuine = r.status
        results = await run

        # the client side: a model for node 7 goes only to a server whose certificate names 7
        from p2pnode.transport.http import HttpTransport
        from p2pnode.trust.tls import client_context
        from p2pnode.wire.schema import Channel

        sender = HttpTransport({7: addrs[0], 8: addrs[1]}, ssl_context=client_context(a), retries=0)
        answers: dict[int, object] = {}
        for dst in (7, 8):  # 7 "moved" to A's address (A speaks for 0-5); 8 is where it is
            done = asyncio.get_running_loop().create_future()
            sender.send(
                1, dst, Channel.GOSSIP, frame(MsgType.MODEL, 1, dst, {"ver": 99, "p": good}), done.set_result
            )
            answers[dst] = await done
        await sender.close()
    finally:
        await asyncio.gather(*(p.shutdown() for p in procs))
    assert answers[7] == Outcome(0, "cert-mismatch")  # never posted: A cannot pose as node 7's host
    assert answers[8].status != 0  # type: ignore[attr-defined]
    assert outcomes == {"no certificate": "refused", "other CA": "refused"}
    assert impostor == (403, "cert-mismatch") and genuine == 200
    assert all(r["model_messages"] > 0 for r in results)
    failed = failed_sends(procs)  # none for a certificate: only where a loop running late shed load
    assert set(failed) <= SHED and sum(r["send_failures"] for r in results) == sum(failed.values()), failed
    cross = sum(n.node.protocol.stats.models_received for n in procs[0].host.nodes.values())
    assert cross > 0
