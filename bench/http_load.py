"""Real HTTP: how many model messages/s one process hosting 100 nodes takes in on loopback.

A server process (``p2pnode`` code: one aiohttp server, per-node routes, SAMO nodes whose
wake-ups are pushed past the run so only the receive path is measured) and a separate load
process posting real full-model frames (ML-100k GMF, 32 factors) over keep-alive connections.
Reports accepted messages/s, latency percentiles and the server's CPU time per message.

``--auth`` picks what the requests carry: ``open`` (nothing), ``hmac`` (the cluster key's MAC,
p2pnode.trust.auth), ``identity`` (the MAC and the sender process's Ed25519 signature and credential,
p2pnode.trust.identity), or ``all``: the three one after the other in one run, for the receive path's
cost of each side by side.

    .venv/bin/python -m bench.http_load [--nodes 100] [--seconds 10] [--concurrency 16] [--auth all]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import numpy as np

from learning import gmf
from p2pnode.config import RunConfig
from p2pnode.wire.codec import encode_model_frame
from p2pnode.wire.delta import DeltaEncoder


def server_config(nodes: int, protocol: str) -> RunConfig:
    # tick_seconds large: wake-ups fall after the measurement, so nodes only receive. With SAMO a
    # receipt is decode + check + buffer; with Base GL it is also a merge and a local epoch.
    # No sender gate: the load comes from senders that are not the nodes' in-neighbours, each far
    # more often than an honest one sends (the gate would refuse them from the id, unread).
    return RunConfig(
        nodes=nodes, rounds=1, protocol=protocol, sampling="static", tick_seconds=60.0, sender_gate=False
    )


AUTHS = ("open", "hmac", "identity")
SENDERS = 4  #: senders per node, in turn


def key_files(folder: Path, auth: str, nodes: int) -> tuple[Path | None, Path | None, Path | None]:
    """The server's keyring and identity and the loader's identity (None where ``auth`` has none)."""
    from p2pnode.trust.auth import Keyring, save_keyring
    from p2pnode.trust.identity import Authority, save_identity

    if auth == "open":
        return None, None, None
    ring = Keyring.generate("load")
    if auth == "hmac":
        save_keyring(folder / "k", ring)
        return folder / "k", None, None
    authority = Authority.generate("load")
    save_keyring(folder / "k", ring.trust(authority.public_key))
    save_identity(folder / "server.id", authority.issue([(0, nodes - 1)]))
    save_identity(folder / "loader.id", authority.issue([(0, nodes - 1)]))  # the senders' process
    return folder / "k", folder / "server.id", folder / "loader.id"


async def serve(port: int, nodes: int, protocol: str, auth: str, folder: Path) -> None:
    from p2pnode.runners.process import tune_process
    from p2pnode.runners.real import NodeProcess, ProcessSpec

    tune_process()
    key, ident, _ = key_files(folder, auth, nodes)
    spec = ProcessSpec(tuple(range(nodes)), "127.0.0.1", port, key_file=key, identity_file=ident)
    proc = NodeProcess(server_config(nodes, protocol), spec)
    await proc.start()
    print("ready", flush=True)
    await asyncio.Event().wait()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def load(
    port: int, nodes: int, seconds: float, concurrency: int, pid: int, protocol: str, auth: str, folder: Path
) -> None:
    from p2pnode.trust.auth import KeyHolder, load_keyring
    from p2pnode.trust.identity import load_identity

    key = folder / "k"
    holder = None
    if auth != "open":
        ident = load_identity(folder / "loader.id") if auth == "identity" else None
        holder = KeyHolder(load_keyring(key), identity=ident)
    init = gmf.init_params(1682, 32, seed=0)
    # each node hears from SENDERS senders in turn: every (sender, node) pair stays below the
    # server's per-pair rate limit (p2pnode.trust.limits.RateLimiter)
    frames = [
        [
            bytes(encode_model_frame((d + s) % nodes, d, DeltaEncoder(enabled=False).encode(d, 1, init)))
            for s in range(1, SENDERS + 1)
        ]
        for d in range(nodes)
    ]
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker(k: int, deadline: float) -> None:
            i = k
            while time.perf_counter() < deadline:
                d = i % nodes
                s = (i // nodes) % SENDERS
                t = time.perf_counter()
                path = f"/v1/nodes/{d}/gossip"
                headers = None
                if holder is not None:
                    sender = (d + s + 1) % nodes
                    headers = holder.sign("POST", path, sender, frames[d][s], int(time.time() * 1000))
                async with session.post(
                    f"http://127.0.0.1:{port}{path}", data=frames[d][s], headers=headers
                ) as resp:
                    await resp.read()
                    statuses[resp.status] = statuses.get(resp.status, 0) + 1
                latencies.append(time.perf_counter() - t)
                i += concurrency

        await asyncio.gather(*(worker(k, time.perf_counter() + 1.0) for k in range(concurrency)))
        latencies.clear()
        statuses.clear()
        cpu0 = cpu_seconds(pid)
        own0 = time.process_time()
        t0 = time.perf_counter()
        await asyncio.gather(*(worker(k, t0 + seconds) for k in range(concurrency)))
        wall = time.perf_counter() - t0
        cpu = cpu_seconds(pid) - cpu0
        own = time.process_time() - own0
    ok = statuses.get(200, 0)
    lat = np.array(latencies) * 1e3
    print(
        f"auth {auth}, protocol {protocol}: {nodes} nodes in one process, {concurrency} concurrent "
        f"senders, {wall:.1f} s"
    )
    others = {k: v for k, v in statuses.items() if k != 200}
    print(
        f"accepted {ok} model messages: {ok / wall:.0f} msg/s  (target >= 1000)   "
        f"{ok * len(frames[0][0]) / wall / 1e6:.0f} MB/s   other statuses {others}"
    )
    print(f"latency ms: p50 {np.percentile(lat, 50):.1f}  p99 {np.percentile(lat, 99):.1f}")
    print(
        f"server CPU {cpu:.2f} s = {cpu / max(ok, 1) * 1e6:.0f} us per received message "
        f"({cpu / wall:.0%} of one core); sender CPU {own / max(ok + sum(others.values()), 1) * 1e6:.0f} us "
        "per request (signing and posting, aiohttp's client)"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("mode", nargs="?", default="run", choices=["run", "serve"])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--protocol", default="samo", choices=["samo", "base"])
    ap.add_argument("--auth", default="open", choices=[*AUTHS, "all"])
    ap.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.mode == "serve":
        asyncio.run(serve(args.port, args.nodes, args.protocol, args.auth, args.dir))
        return
    for auth in AUTHS if args.auth == "all" else (args.auth,):
        with tempfile.TemporaryDirectory() as folder:
            run_one(args, auth, Path(folder))
        print(flush=True)


def run_one(args: argparse.Namespace, auth: str, folder: Path) -> None:
    from p2plab.launch import free_ports

    port = free_ports(1)[0]
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.http_load",
            "serve",
            "--port",
            str(port),
            "--nodes",
            str(args.nodes),
            "--protocol",
            args.protocol,
            "--auth",
            auth,
            "--dir",
            str(folder),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        if server.stdout.readline().strip() != "ready":
            raise SystemExit("server did not start")
        asyncio.run(
            load(port, args.nodes, args.seconds, args.concurrency, server.pid, args.protocol, auth, folder)
        )
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
