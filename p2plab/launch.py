"""``p2pnode launch``: a local cluster of real processes over loopback, watched and summarised.

The N nodes are split over P processes (``p2pnode run``), each with its own aiohttp server on a
free loopback port; every process lists the others as ``--peers``. Launch polls ``/status`` once a
round for a progress line, then collects every ``result.json`` into one summary.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp

from p2plab.merge import aggregate
from p2pnode.auth import Keyring, save_keyring
from p2pnode.config import RunConfig
from p2pnode.real import split_users
from p2pnode.report import metric_for, summary


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


async def launch(
    config: RunConfig,
    processes: int,
    out: Path | None,
    progress: Callable[[str], None] | None = None,
    key_file: Path | None = None,
    open_cluster: bool = False,
) -> dict[str, Any]:
    """Start the cluster, wait for it, return the aggregated summary.

    The processes authenticate each other with ``key_file``, or with a fresh keyring written
    (mode 0600) into the work directory; ``open_cluster`` runs them without authentication.
    """
    parts = split_users(config.nodes, processes)
    ports = free_ports(len(parts))
    addresses = [f"127.0.0.1:{p}" for p in ports]
    workdir = Path(out) if out else Path(tempfile.mkdtemp(prefix="p2pnode-launch-"))
    workdir.mkdir(parents=True, exist_ok=True)
    cfg_file = workdir / "config.json"
    cfg_file.write_text(json.dumps(config.to_dict()))
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    key_args: list[str] = []
    if not open_cluster:
        if key_file is None:
            key_file = workdir / "cluster.key"
            save_keyring(key_file, Keyring.generate(f"launch-{secrets.token_hex(4)}"))
        key_args = ["--cluster-key-file", str(key_file)]
    procs: list[asyncio.subprocess.Process] = []
    for k, users in enumerate(parts):
        args = [
            sys.executable,
            "-m",
            "p2pnode",
            "run",
            "--config-json",
            str(cfg_file),
            "--users",
            f"{users[0]}-{users[-1]}",
            "--listen",
            addresses[k],
            "--peers",
            ",".join(a for a in addresses if a != addresses[k]),
            *(["--server"] if k == 0 and config.protocol == "fedavg" else []),
            *key_args,
            "--out",
            str(workdir / f"proc{k}"),
            "--quiet",
        ]
        log = (workdir / f"proc{k}.log").open("w")
        procs.append(await asyncio.create_subprocess_exec(*args, stdout=log, stderr=log, env=env))
    if progress is not None:
        progress(
            f"launched {config.nodes} nodes in {len(parts)} processes on "
            f"{', '.join(addresses)}; logs in {workdir}"
        )
    shown = {"round": 0}  #: the last round the watcher printed
    t0 = time.perf_counter()
    watcher = asyncio.create_task(_watch(addresses, config, progress, shown))
    try:
        codes = await asyncio.gather(*(p.wait() for p in procs))
    except asyncio.CancelledError:
        for p in procs:
            if p.returncode is None:
                p.send_signal(signal.SIGTERM)
        await asyncio.gather(*(p.wait() for p in procs))
        raise
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
    failed = [k for k, c in enumerate(codes) if c != 0]
    if failed:
        tail = (workdir / f"proc{failed[0]}.log").read_text()[-2000:]
        raise RuntimeError(f"process {failed[0]} exited with {codes[failed[0]]}:\n{tail}")
    results = [json.loads((workdir / f"proc{k}" / "result.json").read_text()) for k in range(len(parts))]
    metric = metric_for(config)
    total = aggregate(results, metric.key)
    total.update(mode="launch", processes=len(parts), out=str(workdir), config=config.to_dict())
    if progress is not None:
        if shown["round"] < total["round"]:  # the processes ended before the watcher saw the last round
            progress(
                f"round {total['round']:>4}/{config.rounds}  {metric.label} {total[metric.key]:.3f}  "
                f"models {total['model_messages']:>7}  MB {total['bytes'] / 1e6:9.1f}  "
                f"{time.perf_counter() - t0:7.1f}s"
            )
        progress(summary(total, metric))
    (workdir / "summary.json").write_text(json.dumps(total, indent=1))
    return total


async def _watch(
    addresses: list[str],
    config: RunConfig,
    progress: Callable[[str], None] | None,
    shown: dict[str, int],
) -> None:
    """One line per round from the processes' ``/status``: utility, traffic, send failures and
    refusals, and the adversaries' CIA accuracy when there are any."""
    if progress is None:
        return
    t0 = time.perf_counter()
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
        while True:
            await asyncio.sleep(config.tick_seconds * 100 / 2)
            statuses = []
            for a in addresses:
                try:
                    async with session.get(f"http://{a}/status") as resp:
                        statuses.append(await resp.json())
                except (TimeoutError, aiohttp.ClientError, OSError, ValueError):
                    pass
            if not statuses or len(statuses) < len(addresses):
                continue
            rnd = min(s["round"] for s in statuses)
            if rnd <= shown["round"]:
                continue
            shown["round"] = rnd
            hits = [n["hit"] for s in statuses for n in s["nodes"] if n["hit"] is not None]
            models = sum(n["models_sent"] for s in statuses for n in s["nodes"])
            nbytes = sum(n["bytes_sent"] for s in statuses for n in s["nodes"])
            failures = sum(s.get("send_failures", 0) for s in statuses)
            refused = sum(s.get("rejected", 0) for s in statuses)
            cia = [s["cia"]["aac"] for s in statuses if s.get("cia")]
            hr = sum(hits) / len(hits) if hits else 0.0
            progress(
                f"round {rnd:>4}/{config.rounds}  {metric_for(config).label} {hr:.3f}  "
                f"models {models:>7}  MB {nbytes / 1e6:9.1f}  {time.perf_counter() - t0:7.1f}s"
                + (f"  CIA AAC {sum(cia) / len(cia):.3f}" if cia else "")
                + (f"  failed sends {failures}" if failures else "")
                + (f"  refused {refused}" if refused else "")
            )
