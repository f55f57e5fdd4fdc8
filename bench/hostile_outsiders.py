"""What a stranger without the cluster key can take from a running process (THREAT_MODEL.md).

Two ``p2pnode run`` processes on loopback share a cluster key: A hosts 4 nodes, B hosts 12, so
most models A's nodes take come from B over HTTP. The script measures the rate at which A's nodes
take models (``p2pnode_models_received_total``) for a quiet window, then for the same window while
one remote address (127.0.0.2, a second loopback address) attacks A with no key:

- ``slow-body``: connections that send a ``POST /v1/nodes/0/gossip`` head with
  ``Content-Length: 200000`` and one byte of body, then stay idle (they reconnect when closed);
- ``slowloris``: connections that send a request head one header line every second, never ending it;
- ``get-flood``: clients that fetch ``GET /metrics`` back to back.

It prints the honest rate under each attack as a ratio of the quiet rate (the acceptance bound of
the target is 0.8 for slow-body and slowloris together) and what A refused.

    .venv/bin/python -m bench.hostile_outsiders [--seconds 8] [--slow-body 64] [--slowloris 200] \\
        [--get-flood 64]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from p2plab.launch import free_ports
from p2pnode.trust.auth import Keyring, save_keyring

ATTACKER = "127.0.0.2"  #: the stranger's source address (all of 127/8 is loopback on Linux)
NODES_A, NODES_B = 4, 12


def free_port() -> int:
    """A port drawn below the kernel's ephemeral range (the floods here open many connections)."""
    return free_ports(1)[0]


def get(address: str, path: str, timeout: float = 5.0) -> str:
    with urllib.request.urlopen(f"http://{address}{path}", timeout=timeout) as r:
        return str(r.read().decode())


def counter(address: str, name: str) -> float:
    text = get(address, "/metrics")
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith(name + "{") or line.startswith(name + " ")
    )


@dataclass
class Cluster:
    a: str
    b: str
    procs: list[subprocess.Popen[str]]


@contextlib.contextmanager
def cluster(tmp: Path, tick_seconds: float = 0.004, sampling: str = "cyclon") -> Iterator[Cluster]:
    """A (nodes 0-3) and B (nodes 4-15), keyed, running until the block ends."""
    save_keyring(tmp / "k", Keyring.generate("outsiders"))
    a, b = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    total = NODES_A + NODES_B

    def start(listen: str, peer: str, users: str) -> subprocess.Popen[str]:
        args = [
            sys.executable, "-m", "p2pnode", "run", "--listen", listen, "--peers", peer,
            "--users", users, "--nodes", str(total), "--rounds", "1000000",
            "--tick-seconds", str(tick_seconds), "--sampling", sampling, "--lr", "0.01",
            "--cluster-key-file", str(tmp / "k"), "--quiet",
        ]  # fmt: skip
        return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    procs = [start(a, b, f"0-{NODES_A - 1}"), start(b, a, f"{NODES_A}-{total - 1}")]
    try:
        wait_for_round((a, b), procs, 3, 90.0)
        yield Cluster(a, b, procs)
    finally:
        stop(procs)


def wait_for_round(
    addresses: Sequence[str], procs: Sequence[subprocess.Popen[str]], at: int, timeout: float
) -> None:
    """Until every process at ``addresses`` reports round ``at`` (RuntimeError with their stderr if
    one exits first or ``timeout`` seconds pass)."""
    deadline = time.time() + timeout
    while True:
        with contextlib.suppress(OSError, ValueError):
            if all(int(json.loads(get(x, "/status"))["round"]) >= at for x in addresses):
                return
        if any(p.poll() is not None for p in procs) or time.time() > deadline:
            errs = [p.stderr.read() if p.stderr and p.poll() is not None else "" for p in procs]
            raise RuntimeError(f"the cluster did not start: {errs}")
        time.sleep(0.2)


def stop(procs: Sequence[subprocess.Popen[str]]) -> None:
    """SIGTERM every process, then SIGKILL those still running after 15 s."""
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()


def honest_rate(address: str, seconds: float) -> float:
    """Models A's nodes took per second over ``seconds`` (read from /metrics, not the attack's view)."""
    before = counter(address, "p2pnode_models_received_total")
    t0 = time.perf_counter()
    time.sleep(seconds)
    after = counter(address, "p2pnode_models_received_total")
    return (after - before) / (time.perf_counter() - t0)


async def _connect(host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection(host, port, local_addr=(ATTACKER, 0))


async def slow_body(host: str, port: int, stop: asyncio.Event) -> None:
    """One connection at a time: a model POST head promising 200 kB, one byte, then silence."""
    head = (
        f"POST /v1/nodes/0/gossip HTTP/1.1\r\nHost: {host}:{port}\r\n"
        "Content-Type: application/msgpack\r\nContent-Length: 200000\r\n\r\n\x85"
    ).encode()
    while not stop.is_set():
        try:
            reader, writer = await _connect(host, port)
            writer.write(head)
            await writer.drain()
            with contextlib.suppress(TimeoutError):  # hold it until the server closes it or we stop
                await asyncio.wait_for(reader.read(), timeout=60)
            writer.close()
        except OSError:
            pass
        await asyncio.sleep(1.0)  # closed or refused: open another


async def slowloris(host: str, port: int, stop: asyncio.Event) -> None:
    """One connection at a time: a request head one header line a second, never finished."""
    while not stop.is_set():
        try:
            reader, writer = await _connect(host, port)
            writer.write(f"GET /status HTTP/1.1\r\nHost: {host}:{port}\r\n".encode())
            for i in range(10_000):
                if stop.is_set() or reader.at_eof():
                    break
                writer.write(f"X-Pad-{i}: {'a' * 16}\r\n".encode())
                await writer.drain()
                await asyncio.sleep(1.0)
            writer.close()
        except OSError:
            pass
        await asyncio.sleep(1.0)


async def get_flood(host: str, port: int, stop: asyncio.Event) -> None:
    """One client fetching GET /metrics back to back over one kept-alive connection."""
    request = f"GET /metrics HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
    while not stop.is_set():
        try:
            reader, writer = await _connect(host, port)
            while not stop.is_set():
                writer.write(request)
                await writer.drain()
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.lower().split(b"\r\n")
                length = next((int(x.split(b":")[1]) for x in lines if x.startswith(b"content-length")), 0)
                await reader.readexactly(length)
                if b"connection: close" in head.lower():
                    break
            writer.close()
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        await asyncio.sleep(0.01)


ATTACKS = {"slow-body": slow_body, "slowloris": slowloris, "get-flood": get_flood}


Flood = Callable[[str, int, asyncio.Event], Coroutine[Any, Any, None]]  #: (host, port, stop)


class FloodThread:
    """Runs copies of flood coroutines (each ``(host, port, stop)``) against one address in a
    thread with its own event loop, from :meth:`start` until :meth:`stop` (or as a context).
    The loop is closed at the stop: a soak starts one every phase, and an unclosed loop keeps
    its selector's and self-pipe's files open."""

    def __init__(self, address: str, floods: Sequence[tuple[Flood, int]], settle_s: float = 0.0) -> None:
        import threading

        host, port = address.rsplit(":", 1)
        self._loop = asyncio.new_event_loop()
        self._stop = asyncio.Event()
        self._settle_s = settle_s

        async def main() -> None:
            tasks = [
                asyncio.create_task(flood(host, int(port), self._stop))
                for flood, n in floods
                for _ in range(n)
            ]
            await self._stop.wait()
            await asyncio.sleep(0.2)
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        self._thread = threading.Thread(target=self._loop.run_until_complete, args=(main(),), daemon=True)

    def start(self) -> FloodThread:
        self._thread.start()
        time.sleep(self._settle_s)  # the connections are open before a measured window starts
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(timeout=15)
        if not self._thread.is_alive() and not self._loop.is_closed():
            self._loop.close()

    def __enter__(self) -> FloodThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def Attack(address: str, counts: dict[str, int]) -> FloodThread:
    """The named attacks of :data:`ATTACKS`, ``counts`` copies each, against ``address``."""
    return FloodThread(address, [(ATTACKS[kind], n) for kind, n in counts.items()], settle_s=1.0)


def measure(c: Cluster, counts: dict[str, int], seconds: float) -> tuple[float, float]:
    """(quiet rate, rate under attack) of models taken by A's nodes. The quiet rate is the mean
    of a window before the attack and one after it. On a loaded machine one quiet 6 s window
    differs from the next by up to a third (7.8 to 13.5 models/s measured beside a simulation),
    and a window on one side only counted such a swing as the attack's (the test failed twice in
    four runs there at 0.71-0.73, where the attacked rate sat inside the quiet windows' range)."""
    before = honest_rate(c.a, seconds)
    with Attack(c.a, counts):
        attacked = honest_rate(c.a, seconds)
    after = honest_rate(c.a, seconds)
    return (before + after) / 2, attacked


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="length of each measured window")
    parser.add_argument("--slow-body", type=int, default=64)
    parser.add_argument("--slowloris", type=int, default=200)
    parser.add_argument("--get-flood", type=int, default=64)
    args = parser.parse_args(argv)
    import tempfile

    scenarios = {
        "slow-body + slowloris": {"slow-body": args.slow_body, "slowloris": args.slowloris},
        "get-flood": {"get-flood": args.get_flood},
    }
    with tempfile.TemporaryDirectory() as tmp, cluster(Path(tmp)) as c:
        print(f"A = {c.a} hosts {NODES_A} nodes, B = {c.b} hosts {NODES_B}; attacker {ATTACKER}, no key")
        print(f"{'attack':<24} {'quiet/s':>8} {'attacked/s':>10} {'ratio':>6}")
        for name, counts in scenarios.items():
            quiet, attacked = measure(c, counts, args.seconds)
            print(f"{name:<24} {quiet:8.1f} {attacked:10.1f} {attacked / quiet:6.2f}", flush=True)
        refused = counter(c.a, "p2pnode_refused_connections_total")
        metrics = get(c.a, "/metrics")
        reasons: dict[str, float] = {}
        for line in metrics.splitlines():
            if line.startswith("p2pnode_rejected_messages_total{"):
                reason = line.split('reason="')[1].split('"')[0]
                reasons[reason] = reasons.get(reason, 0.0) + float(line.rsplit(" ", 1)[1])
        print(f"A closed {refused:.0f} connections at accept (per-address cap); refused requests: {reasons}")


if __name__ == "__main__":
    main()
