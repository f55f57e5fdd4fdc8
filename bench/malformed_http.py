"""Log bytes a stranger gets for free with requests that do not parse as HTTP (THREAT_MODEL.md).

aiohttp answers such a request with 400 before any route or key is read, and by default logs an
ERROR with a traceback for each. Two measurements, one run:

1. side by side, in this process: the same flood against an aiohttp server logging through
   aiohttp's own server logger and through the daemon's (:class:`PeerBytesLog`), the log bytes of
   each and their ratio;
2. a real keyed ``p2pnode run`` (4 nodes), its stderr in a file: the bytes that file grows by
   under the flood and the requests ``p2pnode_rejected_messages_total{reason="malformed-http"}``
   counted.

The flood: ``--requests`` requests, ``--parallel`` at once, from 127.0.0.2, in three kinds in turn
(a Content-Length of 2^64, a header line of 9,000 bytes, 200 headers).

    .venv/bin/python -m bench.malformed_http [--requests 20000] [--parallel 16]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import logging
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from aiohttp import web

from bench.hostile_outsiders import free_port, get
from p2pnode.transport.peer_bytes import PeerBytesLog
from p2pnode.trust.auth import Keyring, save_keyring

ATTACKER = "127.0.0.2"

#: the three kinds of bad bytes, each a whole request head
KINDS = {
    "content-length 2^64": b"POST /v1/nodes/0/gossip HTTP/1.1\r\nHost: x\r\n"
    b"Content-Length: 18446744073709551616\r\n\r\n",
    "header line of 9,000 bytes": b"GET /status HTTP/1.1\r\nHost: x\r\nX-A: " + b"a" * 9000 + b"\r\n\r\n",
    "200 headers": b"GET /status HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(200)) + b"\r\n",
}


async def _one(host: str, port: int, head: bytes) -> int:
    """Send one bad head, read the answer's status (0: none came)."""
    try:
        reader, writer = await asyncio.open_connection(host, port, local_addr=(ATTACKER, 0))
    except OSError:
        return 0
    try:
        writer.write(head)
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), 10.0)
        return int(line.split()[1]) if line.startswith(b"HTTP/") else 0
    except (TimeoutError, OSError, ValueError, IndexError):
        return 0
    finally:
        writer.close()


async def flood(host: str, port: int, requests: int, parallel: int) -> dict[int, int]:
    """``requests`` bad heads, ``parallel`` at once, the kinds in turn; statuses counted."""
    heads = list(KINDS.values())
    statuses: dict[int, int] = {}
    queue = iter(range(requests))

    async def worker() -> None:
        for i in queue:
            status = await _one(host, port, heads[i % len(heads)])
            statuses[status] = statuses.get(status, 0) + 1

    await asyncio.gather(*(worker() for _ in range(parallel)))
    return statuses


async def _in_process(requests: int, parallel: int, daemons: bool) -> tuple[int, dict[int, int]]:
    """Log bytes of one flood against a bare aiohttp server, aiohttp's logger or the daemon's."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    log = logging.getLogger(f"bench.malformed.{'daemon' if daemons else 'aiohttp'}")
    log.propagate = False
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    app = web.Application()
    app.router.add_get("/status", lambda _r: web.Response(text="ok"))
    logger = PeerBytesLog(logger=log) if daemons else log
    runner = web.AppRunner(app, handle_signals=False, logger=logger)
    await runner.setup()
    port = free_port()
    site = web.TCPSite(runner, "127.0.0.1", port)
    await site.start()
    try:
        statuses = await flood("127.0.0.1", port, requests, parallel)
    finally:
        await runner.cleanup()
    return len(out.getvalue().encode()), statuses


def _real(requests: int, parallel: int, tmp: Path) -> tuple[int, int, float, dict[int, int]]:
    """(log bytes grown, requests counted as malformed-http, seconds, statuses) of a real process."""
    save_keyring(tmp / "k", Keyring.generate("malformed"))
    address = f"127.0.0.1:{free_port()}"
    err = tmp / "stderr.log"
    args = [
        sys.executable, "-m", "p2pnode", "run", "--listen", address, "--users", "0-3", "--nodes", "4",
        "--rounds", "1000000", "--tick-seconds", "0.01", "--lr", "0.01",
        "--cluster-key-file", str(tmp / "k"), "--quiet",
    ]  # fmt: skip
    with err.open("w") as sink:
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=sink, text=True)
        try:
            deadline = time.time() + 120
            while True:
                try:
                    get(address, "/status")
                    break
                except OSError:
                    if proc.poll() is not None or time.time() > deadline:
                        raise RuntimeError(f"p2pnode run did not start: {err.read_text()}") from None
                    time.sleep(0.2)
            time.sleep(1.0)
            before_bytes = err.stat().st_size
            before = _malformed(address)
            t0 = time.perf_counter()
            host, port = address.rsplit(":", 1)
            statuses = asyncio.run(flood(host, int(port), requests, parallel))
            seconds = time.perf_counter() - t0
            time.sleep(0.5)
            counted = int(_malformed(address) - before)
            grown = err.stat().st_size - before_bytes
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    return grown, counted, seconds, statuses


def _malformed(address: str) -> float:
    text = get(address, "/metrics")
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("p2pnode_rejected_messages_total{") and 'reason="malformed-http"' in line
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=20000)
    parser.add_argument("--parallel", type=int, default=16)
    parser.add_argument(
        "--side-by-side", type=int, default=2000, help="requests in the in-process comparison"
    )
    args = parser.parse_args(argv)
    plain, s_plain = asyncio.run(_in_process(args.side_by_side, args.parallel, daemons=False))
    ours, s_ours = asyncio.run(_in_process(args.side_by_side, args.parallel, daemons=True))
    n = args.side_by_side
    print(
        f"in process, {n} malformed requests: aiohttp's logger {plain:,} bytes ({plain / n:.0f} B a request,"
    )
    print(f"  statuses {s_plain}); the daemon's {ours:,} bytes (statuses {s_ours}); ratio {ours / plain:.5f}")
    with tempfile.TemporaryDirectory() as tmp:
        grown, counted, seconds, statuses = _real(args.requests, args.parallel, Path(tmp))
    print(
        f"p2pnode run, {args.requests:,} malformed requests in {seconds:.1f} s: its log grew by {grown:,} "
        f"bytes; {counted:,} counted as malformed-http; statuses {statuses}"
    )


if __name__ == "__main__":
    main()
