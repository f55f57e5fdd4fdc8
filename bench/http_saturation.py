"""Push one node process past saturation over loopback; show that it sheds load and recovers.

A ``p2pnode run`` process hosts a few ML-100k GMF nodes behind authentication. This script signs
real model frames as many different senders (so the per-sender rate limit is not what stops
them) and offers them at rising rates, each step for a few seconds, with bounded concurrency
per step (the nodes' own timers are slowed to a tick of 1,000 s, so only this load reaches
them). For every step it prints the offered and accepted rates, the p50/p99 latency of
accepted requests, and the 503 (busy), 429 and other answers. It then drops back to a low rate
to show the node recovers, and checks that every accepted message was taken by a node: the sum
of ``p2pnode_models_received_total`` over the nodes equals the number of 200 answers.

    .venv/bin/python -m bench.http_saturation [--rates 50,100,200,400,800,1600] [--seconds 4]
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

from p2plab.launch import free_ports
from p2pnode.config import RunConfig
from p2pnode.nodes.prepare import prepare
from p2pnode.trust.auth import Keyring, save_keyring, sign
from p2pnode.wire.schema import WIRE_VERSION, MsgType
from p2pnode.wire.tensors import pack_tensor

NODES = 4  #: hosted by the process under test (ids 0..3 of a 943-node network)


def free_port() -> int:
    """A port drawn below the kernel's ephemeral range (the floods here open many connections)."""
    return free_ports(1)[0]


def model_frame(sender: int, dest: int, version: int, params: dict[str, np.ndarray]) -> bytes:
    import msgpack

    body = {"ver": version, "p": {k: pack_tensor(v) for k, v in params.items()}}
    frame = {"v": WIRE_VERSION, "t": int(MsgType.MODEL), "src": sender, "dst": dest, "b": body}
    return bytes(msgpack.packb(frame, use_bin_type=True))


async def offer(
    session: aiohttp.ClientSession,
    base: str,
    ring: Keyring,
    frames: list[tuple[int, int, bytes]],
    rate: float,
    seconds: float,
    max_inflight: int,
) -> dict[str, float]:
    """Open-loop load: one request every 1/rate s (at most ``max_inflight`` waiting)."""
    latencies: list[float] = []
    answers: dict[int, int] = {}
    gate = asyncio.Semaphore(max_inflight)
    tasks = []
    dropped = 0

    async def one(sender: int, dest: int, data: bytes) -> None:
        path = f"/v1/nodes/{dest}/gossip"
        headers = sign(ring, "POST", path, sender, data, int(time.time() * 1000))
        t0 = time.perf_counter()
        try:
            async with session.post(base + path, data=data, headers=headers) as r:
                await r.read()
                status = r.status
        except (aiohttp.ClientError, TimeoutError, OSError):
            status = 0
        if status == 200:
            latencies.append(time.perf_counter() - t0)
        answers[status] = answers.get(status, 0) + 1
        gate.release()

    start = time.perf_counter()
    n = int(rate * seconds)
    for i in range(n):
        target = start + i / rate
        delay = target - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        if gate.locked():
            dropped += 1  # the client itself could not keep up: not offered
            continue
        await gate.acquire()
        sender, dest, data = frames[i % len(frames)]
        tasks.append(asyncio.create_task(one(sender, dest, data)))
    await asyncio.gather(*tasks)
    wall = time.perf_counter() - start
    lat = np.array(latencies) * 1000 if latencies else np.array([np.nan])
    return {
        "offered": (n - dropped) / seconds,
        "accepted": answers.get(200, 0) / wall,
        "ok": answers.get(200, 0),
        "busy": answers.get(503, 0),
        "limited": answers.get(429, 0),
        "other": sum(v for k, v in answers.items() if k not in (200, 503, 429)),
        "p50": float(np.percentile(lat, 50)),
        "p99": float(np.percentile(lat, 99)),
    }


async def scrape_received(session: aiohttp.ClientSession, base: str) -> float:
    async with session.get(base + "/metrics") as r:
        text = await r.text()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("p2pnode_models_received_total{")
    )


async def main_async(args: argparse.Namespace) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="p2pnode-sat-"))
    ring = Keyring.generate("bench")
    save_keyring(workdir / "k", ring)
    port = free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    cmd = [
        sys.executable,
        "-m",
        "p2pnode",
        "run",
        "--listen",
        f"127.0.0.1:{port}",
        "--users",
        f"0-{NODES - 1}",
        "--nodes",
        "943",
        "--rounds",
        "1000000",
        "--sampling",
        "cyclon",
        "--protocol",
        "base",
        "--cluster-key-file",
        str(workdir / "k"),
        "--tick-seconds",
        "1000",
        "--no-sender-gate",  # 300 senders at rates no honest neighbour sends at: the load, not the gate
        "--quiet",
    ]
    log = (workdir / "log").open("w")
    server = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=log)
    base = f"http://127.0.0.1:{port}"
    config = RunConfig(nodes=943)
    prep = prepare(config)
    params = {k: np.asarray(v, dtype=np.float32) for k, v in prep.init.items()}
    senders = list(range(100, 400))
    frames = [(s, s % NODES, model_frame(s, s % NODES, 1, params)) for s in senders]
    print(
        f"node process on {base}, {NODES} nodes (Base GL: merge and train on every model), "
        f"frames of {len(frames[0][2]) / 1e3:.0f} kB"
    )
    try:
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=512)) as session:
            for _ in range(100):
                try:
                    async with session.get(base + "/status") as r:
                        if r.status == 200:
                            break
                except aiohttp.ClientError:
                    await asyncio.sleep(0.2)
            before = await scrape_received(session, base)
            ok_total = 0
            print(
                f"{'offered/s':>10} {'accepted/s':>11} {'p50 ms':>7} {'p99 ms':>7} "
                f"{'503':>6} {'429':>5} {'other':>6}"
            )
            steps = [float(r) for r in args.rates.split(",")] + [float(args.rates.split(",")[0])]
            for i, rate in enumerate(steps):
                res = await offer(session, base, ring, frames, rate, args.seconds, args.inflight)
                ok_total += int(res["ok"])
                tag = "  (recovery)" if i == len(steps) - 1 else ""
                print(
                    f"{res['offered']:10.0f} {res['accepted']:11.0f} {res['p50']:7.1f} {res['p99']:7.1f} "
                    f"{res['busy']:6d} {res['limited']:5d} {res['other']:6d}{tag}"
                )
                await asyncio.sleep(1.0)
            await asyncio.sleep(1.0)
            received = await scrape_received(session, base) - before
        print(
            f"accepted (200) answers: {ok_total}; models the nodes took: {received:.0f}; "
            f"lost accepted messages: {ok_total - received:.0f}"
        )
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--rates", default="50,100,200,400,800,1600", help="offered messages per second, per step"
    )
    ap.add_argument("--seconds", type=float, default=4.0, help="length of each step")
    ap.add_argument("--inflight", type=int, default=256, help="client-side cap on requests in flight")
    asyncio.run(main_async(ap.parse_args()))


if __name__ == "__main__":
    main()
