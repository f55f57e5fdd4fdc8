"""A soak: two keyed processes under a rotating mix of a stranger's and a member's floods, their
resources sampled as they go (THREAT_MODEL.md's battery, rotated for an hour).

Two ``p2pnode run`` processes on loopback share a cluster key (A hosts nodes 0-3, B nodes 4-15,
Cyclon views, GMF on ML-100k, ``--quiet``: an honest run then writes no log line, so every byte a
log grows by is an attack's). Phases of ``--phase`` seconds rotate through:

- ``quiet``;
- ``slow-body + slowloris`` (a stranger from 127.0.0.2: 64 bodies promising 200 kB, 200 heads
  one line a second), ``get-flood`` (32 clients looping ``GET /metrics``), ``malformed`` (16 at
  once: Content-Length 2^64, a 9,000-byte header line, 200 headers), ``unsigned`` (16 at once:
  model POSTs with no key);
- a member holding the cluster key: ``member-junk`` (16 at once: signed POSTs, each with a fresh
  nonce, of bytes that are no frame: the nonce cache's worst case), ``member-cyclon`` (signed
  Cyclon shuffles naming B's nodes at a fresh address each time: the client's per-address tables'
  worst case).

Every ``--every`` seconds it samples, for each process: its RSS (``VmRSS``), open files
(``/proc/PID/fd``), TCP sockets among them, its log's bytes (its stderr, in a file), the models its
nodes took (``p2pnode_models_received_total``) and every ``p2pnode_cache_entries{cache}`` of its
``/metrics``. A flood has its own level (the nonces it brings, the sockets it holds), so a series
is judged phase by phase: its median in the phase's first turn after ``--warmup`` against its
median in the phase's last turn, flat when within ``--tolerance`` (5%) or ``--slack`` entries or
files (a series of 0-3 moves by whole ones); the phase that grew most is reported. A log's largest
growth between two samples is held to 4,096 bytes; the intake is reported per phase. Prints a
table, writes ``--json``, exits 1 if a series grew.

    .venv/bin/python -m bench.soak [--minutes 60] [--every 15] [--phase 60] [--warmup 180]
        [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.hostile_outsiders import (
    ATTACKER,
    Flood,
    FloodThread,
    counter,
    free_port,
    get,
    get_flood,
    slow_body,
    slowloris,
    stop,
    wait_for_round,
)
from bench.malformed_http import KINDS
from p2pnode.trust.auth import Keyring, load_keyring, save_keyring, sign
from p2pnode.wire.codec import encode_sampling_frame
from peer_sampling.messages import ShuffleRequest

NODES_A, NODES_B = 4, 12
LOG_BOUND = 4096  #: bytes a log may grow by between two samples


@dataclass
class Soaked:
    """The two processes, their addresses, their logs and the key a member holds."""

    a: str
    b: str
    procs: list[subprocess.Popen[bytes]]
    logs: list[Path]
    key: Path


@contextlib.contextmanager
def cluster(tmp: Path, tick_seconds: float = 0.004) -> Iterator[Soaked]:
    """A and B, keyed, quiet, their stderr in ``tmp/A.log`` and ``tmp/B.log``."""
    key = tmp / "k"
    save_keyring(key, Keyring.generate("soak"))
    a, b = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    total = NODES_A + NODES_B
    logs = [tmp / "A.log", tmp / "B.log"]

    def start(listen: str, peer: str, users: str, log: Path) -> subprocess.Popen[bytes]:
        args = [
            sys.executable, "-m", "p2pnode", "run", "--listen", listen, "--peers", peer,
            "--users", users, "--nodes", str(total), "--rounds", "100000000",
            "--tick-seconds", str(tick_seconds), "--sampling", "cyclon", "--lr", "0.01",
            "--cluster-key-file", str(key), "--quiet",
        ]  # fmt: skip
        with log.open("wb") as fh:
            return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=fh)

    procs = [start(a, b, f"0-{NODES_A - 1}", logs[0]), start(b, a, f"{NODES_A}-{total - 1}", logs[1])]
    try:
        wait_for_round((a, b), procs, 3, 120.0)  # type: ignore[arg-type]  # stderr is a file
        yield Soaked(a, b, procs, logs, key)
    finally:
        stop(procs)  # type: ignore[arg-type]


async def _request(host: str, port: int, data: bytes) -> None:
    """Send one request, read the answer's head, close."""
    try:
        reader, writer = await asyncio.open_connection(host, port, local_addr=(ATTACKER, 0))
    except OSError:
        await asyncio.sleep(0.05)
        return
    try:
        writer.write(data)
        await writer.drain()
        await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10.0)
    except (TimeoutError, OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        pass
    finally:
        writer.close()


def _post(host: str, port: int, path: str, body: bytes, headers: dict[str, str]) -> bytes:
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}", "Content-Type: application/msgpack"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def malformed(host: str, port: int, stop_: asyncio.Event) -> Coroutine[Any, Any, None]:
    heads = list(KINDS.values())

    async def run() -> None:
        i = 0
        while not stop_.is_set():
            await _request(host, port, heads[i % len(heads)])
            i += 1

    return run()


def unsigned(host: str, port: int, stop_: asyncio.Event) -> Coroutine[Any, Any, None]:
    body = os.urandom(2048)

    async def run() -> None:
        while not stop_.is_set():
            await _request(host, port, _post(host, port, "/v1/nodes/0/gossip", body, {}))

    return run()


def member(key: Path, b_port: int) -> tuple[Flood, Flood]:
    """The member's two floods, signing with the cluster key as one of B's node ids."""
    keyring = load_keyring(key)
    rng = random.Random(7)

    def junk(host: str, port: int, stop_: asyncio.Event) -> Coroutine[Any, Any, None]:
        async def run() -> None:
            while not stop_.is_set():
                sender = rng.randrange(NODES_A, NODES_A + NODES_B)
                body = os.urandom(rng.randrange(64, 4096))
                path = "/v1/nodes/0/gossip"
                headers = sign(keyring, "POST", path, sender, body, int(time.time() * 1000))
                await _request(host, port, _post(host, port, path, body, headers))

        return run()

    def cyclon(host: str, port: int, stop_: asyncio.Event) -> Coroutine[Any, Any, None]:
        async def run() -> None:
            n = 0
            while not stop_.is_set():
                n += 1
                sender = rng.randrange(NODES_A, NODES_A + NODES_B)
                # B's nodes at an address nobody serves, a new one each time (127.0.x.y)
                fake = f"127.0.{2 + n // 250 % 250}.{1 + n % 250}:{b_port}"
                entries = tuple(
                    (u, f"{u}@{fake}", 0) for u in rng.sample(range(NODES_A, NODES_A + NODES_B), 3)
                )
                body = bytes(encode_sampling_frame(sender, 0, ShuffleRequest(entries)))
                path = "/v1/nodes/0/sampling"
                headers = sign(keyring, "POST", path, sender, body, int(time.time() * 1000))
                await _request(host, port, _post(host, port, path, body, headers))
                await asyncio.sleep(0.02)

        return run()

    return junk, cyclon


def phases(s: Soaked) -> list[tuple[str, list[tuple[Flood, int]]]]:
    """The rotation: each phase's floods (against A) and how many copies of each."""
    junk, cyclon = member(s.key, int(s.b.rsplit(":", 1)[1]))
    return [
        ("quiet", []),
        ("slow-body + slowloris", [(slow_body, 64), (slowloris, 200)]),
        ("get-flood", [(get_flood, 32)]),
        ("malformed", [(malformed, 16)]),
        ("unsigned", [(unsigned, 16)]),
        ("member-junk", [(junk, 16)]),
        ("member-cyclon", [(cyclon, 4)]),
    ]


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def _fds(pid: int) -> tuple[int, int]:
    """(open files, sockets among them)."""
    names = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            names.append(os.readlink(fd))
    return len(names), sum(n.startswith("socket:") for n in names)


def _caches(address: str) -> dict[str, float]:
    out: dict[str, float] = {}
    with contextlib.suppress(OSError, ValueError):
        for line in get(address, "/metrics", timeout=10).splitlines():
            if line.startswith("p2pnode_cache_entries{"):
                name = line.split('cache="')[1].split('"')[0]
                out[name] = float(line.rsplit(" ", 1)[1])
    return out


def sample(s: Soaked) -> dict[str, float]:
    """One sample of both processes' series, named ``A rss_kib``, ``B cache nonces``, ..."""
    row: dict[str, float] = {}
    for name, proc, log, address in zip("AB", s.procs, s.logs, (s.a, s.b), strict=True):
        files, sockets = _fds(proc.pid)
        row[f"{name} rss_kib"] = _rss_kib(proc.pid)
        row[f"{name} open_files"] = files
        row[f"{name} sockets"] = sockets
        row[f"{name} log_bytes"] = log.stat().st_size
        with contextlib.suppress(OSError, ValueError):
            row[f"{name} models_received"] = counter(address, "p2pnode_models_received_total")
        for cache, n in _caches(address).items():
            row[f"{name} cache {cache}"] = n
    return row


@dataclass
class Verdict:
    series: str
    early: float
    late: float
    flat: bool
    note: str = ""


@dataclass
class Soak:
    #: (seconds since the start, phase, which turn of the rotation, the sample)
    samples: list[tuple[float, str, int, dict[str, float]]] = field(default_factory=list)

    def judge(self, warmup: float, tolerance: float, slack: float) -> list[Verdict]:
        """Each series phase by phase: its median in the phase's first turn after ``warmup``
        against its median in the phase's last turn (a flood's own level is not growth; the same
        flood reading higher later is); the phase that grew most is the series' verdict. The logs
        by their largest growth between two samples against :data:`LOG_BOUND`; the intake
        counters by their rate per phase (reported, not judged)."""
        out = []
        names = sorted({k for *_, row in self.samples for k in row})
        for name in names:
            points = [(t, p, turn, row[name]) for t, p, turn, row in self.samples if name in row]
            if name.endswith("log_bytes"):
                steps = [b[3] - a[3] for a, b in itertools.pairwise(points)]
                worst = max(steps, default=0.0)
                note = f"largest step {worst:.0f} B (bound {LOG_BOUND})"
                out.append(Verdict(name, points[0][3], points[-1][3], worst <= LOG_BOUND, note))
            elif name.endswith("models_received"):
                out.append(Verdict(name, points[0][3], points[-1][3], True, _rates(points)))
            else:
                found = _worst_phase(name, points, warmup, tolerance, slack)
                if found is not None:
                    out.append(found)
        return out


def _worst_phase(
    name: str, points: list[tuple[float, str, int, float]], warmup: float, tolerance: float, slack: float
) -> Verdict | None:
    worst: tuple[float, Verdict] | None = None
    for phase in dict.fromkeys(p for _, p, _, _ in points):
        turns = sorted({turn for t, p, turn, _ in points if p == phase and t >= warmup})
        if len(turns) < 2:
            continue
        early = statistics.median(v for _, p, turn, v in points if p == phase and turn == turns[0])
        late = statistics.median(v for _, p, turn, v in points if p == phase and turn == turns[-1])
        flat = late <= early * (1 + tolerance) or late - early <= slack
        growth = (late - early) / max(early, 1.0)
        if worst is None or growth > worst[0]:
            note = f"{phase}: turn {turns[0] + 1} against {turns[-1] + 1}"
            worst = (growth, Verdict(name, early, late, flat, note))
    return None if worst is None else worst[1]


def _rates(points: list[tuple[float, str, int, float]]) -> str:
    """Models taken per second in each phase (the counter's rise over the phase's samples)."""
    per: dict[str, list[float]] = {}
    for a, b in itertools.pairwise(points):
        if a[1] == b[1] and b[0] > a[0]:
            per.setdefault(a[1], []).append((b[3] - a[3]) / (b[0] - a[0]))
    return "models/s: " + ", ".join(f"{p} {statistics.mean(r):.1f}" for p, r in per.items())


def run(minutes: float, every: float, phase: float) -> Soak:
    soak = Soak()
    with tempfile.TemporaryDirectory() as tmp, cluster(Path(tmp)) as s:
        rotation = phases(s)
        t0 = time.monotonic()
        end = t0 + minutes * 60
        i = 0
        while time.monotonic() < end:
            name, floods = rotation[i % len(rotation)]
            running = [FloodThread(s.a, floods).start()] if floods else []
            phase_end = min(end, time.monotonic() + phase)
            try:
                while time.monotonic() < phase_end:
                    next_at = time.monotonic() + every
                    if any(p.poll() is not None for p in s.procs):
                        raise RuntimeError("a process exited during the soak")
                    soak.samples.append((time.monotonic() - t0, name, i // len(rotation), sample(s)))
                    time.sleep(max(0.0, min(next_at, phase_end) - time.monotonic()))
            finally:
                for f in running:
                    f.stop()
            i += 1
        soak.samples.append((time.monotonic() - t0, "end", i // len(rotation), sample(s)))
    return soak


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--every", type=float, default=15.0, help="seconds between samples")
    parser.add_argument("--phase", type=float, default=60.0, help="seconds each flood runs")
    parser.add_argument("--warmup", type=float, default=180.0, help="seconds before the first compared turn")
    parser.add_argument("--tolerance", type=float, default=0.05)
    parser.add_argument("--slack", type=float, default=3.0, help="entries or files a series may move by")
    parser.add_argument("--json", type=Path, help="write every sample and verdict here")
    args = parser.parse_args(argv)
    soak = run(args.minutes, args.every, args.phase)
    verdicts = soak.judge(args.warmup, args.tolerance, args.slack)
    print(
        f"soak: {args.minutes:g} min, a sample every {args.every:g} s, floods rotating every {args.phase:g} s"
    )
    print(f"{'series':<34} {'early':>12} {'late':>12}  verdict")
    for v in verdicts:
        print(f"{v.series:<34} {v.early:12.0f} {v.late:12.0f}  {'flat' if v.flat else 'GREW'} {v.note}")
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "samples": [{"t": t, "phase": p, "turn": n, **row} for t, p, n, row in soak.samples],
                    "verdicts": [v.__dict__ for v in verdicts],
                },
                indent=1,
            )
        )
    if not all(v.flat for v in verdicts):
        sys.exit(1)


if __name__ == "__main__":
    main()
