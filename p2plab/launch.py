"""``p2pnode launch``: a local cluster of real processes over loopback, watched and summarised.

The N nodes are split over P processes (``p2pnode run``), each with its own aiohttp server on a
free loopback port; every process lists the others as ``--peers``. Launch polls ``/status`` once a
round for a progress line, then collects every ``result.json`` into one summary.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import secrets
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import aiohttp

from p2pcore.churn import ChurnEvent, schedule
from p2plab.merge import aggregate
from p2pnode.config import ConfigError, RunConfig
from p2pnode.runners.real import STRETCH_SAY, STRETCH_SAY_AFTER, hold_tick, split_users
from p2pnode.runners.report import metric_for, summary, time_left
from p2pnode.trust.auth import Keyring, save_keyring
from p2pnode.trust.identity import Authority, save_authority, save_identity

#: a launch with no round yet says it is starting this often (it used to be silent ~20 s)
STARTING_EVERY_S = 5.0


#: where the kernel reads the range it draws outgoing connections' local ports from (Linux)
EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
#: the lowest port :func:`free_ports` draws from: below it, ports services are registered on and
#: Ray's workers' default range (10002-19999; a Ray head refuses a port there and its workers take
#: ports there as they start)
LOWEST_PORT = 20_000


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's range for outgoing connections' local ports; Linux's default where unreadable."""
    try:
        low, high = (int(x) for x in EPHEMERAL_RANGE_FILE.read_text().split())
    except (OSError, ValueError):
        return 32_768, 60_999
    return low, high


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """``n`` distinct ports that nothing on ``host`` holds now, for processes to listen on.

    They are drawn at random below the kernel's ephemeral range: a port the kernel handed out
    (``bind(0)``) is one it may hand again to any outgoing connection before the node that was
    given it binds (a CI run lost a launch so: "address already in use"). Each drawn port is
    bound once to check it is free; where the range leaves too little room below it, the
    kernel's own draw is the fallback."""
    low, _ = _ephemeral_range()
    pool = range(LOWEST_PORT, low)
    rng = random.SystemRandom()
    socks: list[socket.socket] = []
    try:
        if len(pool) >= 64 * n:
            for _ in range(64 * n):
                if len(socks) == n:
                    break
                s = socket.socket()
                try:
                    s.bind((host, rng.choice(pool)))
                except OSError:
                    s.close()
                    continue
                socks.append(s)
        while len(socks) < n:  # little room below the range, or no free port found there
            s = socket.socket()
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _identities(
    key_file: Path, workdir: Path, parts: Sequence[tuple[int, ...]], config: RunConfig
) -> list[Path]:
    """A fresh keyring that requires identities, its authority, and one identity per process
    (process 0 also names the FedAvg server's id); all written owner-only in ``workdir``."""
    cluster = f"launch-{secrets.token_hex(4)}"
    authority = Authority.generate(cluster)
    save_keyring(key_file, Keyring.generate(cluster).trust(authority.public_key))
    paths = []
    for k, users in enumerate(parts):
        ranges = [(users[0], users[-1])]
        if k == 0 and config.protocol == "fedavg":
            ranges.append((config.nodes, config.nodes))  # the server's id (p2pnode.runners.build.server_id)
        path = workdir / f"proc{k}.identity"
        save_identity(path, authority.issue(ranges))
        paths.append(path)
    save_authority(workdir / "authority.key", authority)
    return paths


#: the cluster label of a local launch's metrics (p2plab/monitoring.py)
LOCAL_CLUSTER = "local"


def check_launch(
    config: RunConfig, processes: int, key_file: Path | None, open_cluster: bool, memory_check: bool
) -> None:
    """Refuse (ConfigError) a launch that cannot run, before any process starts: fewer nodes
    than processes, ``--open`` with a keyring, or (``memory_check``) more than fits in free memory."""
    if processes < 1:
        raise ConfigError("--processes must be at least 1")
    if processes > config.nodes:
        raise ConfigError(
            f"--processes {processes} is more than --nodes {config.nodes}: each process hosts "
            "at least one node"
        )
    if open_cluster and key_file:
        raise ConfigError("--open and --cluster-key-file exclude each other")
    if memory_check:
        from p2pnode.nodes.prepare import prepare
        from p2pnode.runners.footprint import check_fits

        check_fits(config, prepare(config), processes=processes)


async def launch(
    config: RunConfig,
    processes: int,
    out: Path | None,
    progress: Callable[[str], None] | None = None,
    key_file: Path | None = None,
    open_cluster: bool = False,
    on_round: Callable[[int, dict[str, Any]], None] | None = None,
    self_check: bool = False,
) -> dict[str, Any]:
    """Start the cluster, wait for it, return the aggregated summary. ``on_round(round, latest)``:
    called as the processes report each round (a progress bar's hook; ``latest`` holds the
    network's utility under the metric's key and ``cia.aac`` when adversaries attack).
    ``self_check``: then set the run against the simulator's runs of the same setting
    (p2plab/selfcheck.py), the verdict in the summary's ``self_check`` and in its last line.

    The processes authenticate each other with ``key_file``, or with a fresh keyring written
    (mode 0600) into the work directory, together with a fresh cluster authority that the keyring
    trusts and one identity per process naming its nodes (p2pnode.trust.identity): each process then
    speaks only for its own nodes. ``open_cluster`` runs them without authentication.
    """
    _cancel_on_sigterm()
    parts = split_users(config.nodes, processes)
    ports = free_ports(len(parts))
    addresses = [f"127.0.0.1:{p}" for p in ports]
    workdir = Path(out) if out else Path(tempfile.mkdtemp(prefix="p2pnode-launch-"))
    workdir.mkdir(parents=True, exist_ok=True)
    cfg_file = workdir / "config.json"
    cfg_file.write_text(json.dumps(config.to_dict()))
    if out is not None:  # a Prometheus scrape configuration and a Grafana dashboard of these processes
        from p2plab.monitoring import Target, write_monitoring

        targets = [Target(a, "localhost", f"proc{k}") for k, a in enumerate(addresses)]
        write_monitoring(workdir / "monitoring", LOCAL_CLUSTER, targets, 100 * config.tick_seconds)
    key_args: list[str] = []
    identities: list[Path] = []
    secrets_made: list[Path] = []  #: the key files this launch wrote: removed when it ends
    if not open_cluster:
        if key_file is None:
            key_file = workdir / "cluster.key"
            identities = _identities(key_file, workdir, parts, config)
            secrets_made = [key_file, workdir / "authority.key", *identities]
        key_args = ["--cluster-key-file", str(key_file)]
    try:
        total = await _run(
            config,
            parts,
            addresses,
            workdir,
            cfg_file,
            key_args,
            identities,
            progress,
            out is None,
            on_round,
            self_check,
        )
    finally:
        for path in secrets_made:
            path.unlink(missing_ok=True)
        if out is None:  # a temporary folder: nothing of it is kept, also after Ctrl-C or a failure
            shutil.rmtree(workdir, ignore_errors=True)  # (--out keeps logs and results)
    if out is None:
        total["out"] = None
    return total


def _cancel_on_sigterm() -> None:
    """SIGTERM cancels the launch as Ctrl-C does, so that its processes are stopped with it (by
    default SIGTERM ends the interpreter at once, leaving them running). Only where the loop runs
    in the main thread; the Python API's launch in a thread of its own has no signal handlers."""
    task = asyncio.current_task()
    if task is None:
        return
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)


async def _run(
    config: RunConfig,
    parts: Sequence[tuple[int, ...]],
    addresses: list[str],
    workdir: Path,
    cfg_file: Path,
    key_args: list[str],
    identities: list[Path],
    progress: Callable[[str], None] | None,
    temporary: bool,
    on_round: Callable[[int, dict[str, Any]], None] | None = None,
    self_check: bool = False,
) -> dict[str, Any]:
    """Run the processes of one launch in ``workdir`` until they end; their aggregated summary."""
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    churn = config.churn.active
    plan = (
        schedule(
            config.churn.schedule_model(),
            range(1, len(parts)),
            config.rounds,
            random.Random(f"churn-{config.seed}"),
        )
        if churn
        else None
    )

    def command(k: int) -> list[str]:
        users = parts[k]
        return [
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
            *(["--identity", str(identities[k])] if identities else []),
            "--out",
            str(workdir / f"proc{k}"),
            # under churn a crash loses at most the round under way, as in the simulator
            *(
                ["--state-dir", str(workdir / f"proc{k}" / "state"), "--checkpoint-every", "1"]
                if churn
                else []
            ),
            "--quiet",
        ]

    async def spawn(k: int) -> asyncio.subprocess.Process:
        log = (workdir / f"proc{k}.log").open("a")
        return await asyncio.create_subprocess_exec(*command(k), stdout=log, stderr=log, env=env)

    procs: dict[int, asyncio.subprocess.Process] = {}
    for k in range(len(parts)):
        if plan is None or k not in plan.absent:
            procs[k] = await spawn(k)
    if progress is not None:
        progress(
            f"launched {config.nodes} nodes in {len(parts)} processes on "
            f"{', '.join(addresses)}; logs in {workdir}"
            + (" (removed at the end unless a process fails; --out keeps it)" if temporary else "")
            + ("; Prometheus: monitoring/prometheus.yml there" if not temporary else "")
            + (f"; churn: processes 1-{len(parts) - 1} come and go, process 0 stays" if churn else "")
        )
    shown: dict[str, Any] = {"round": 0}  #: the last round the watcher printed
    t0 = time.perf_counter()
    watcher = asyncio.create_task(
        _watch(addresses, config, progress, shown, procs if churn else None, on_round)
    )
    applied: list[dict[str, Any]] = []
    try:
        if plan is None:
            codes = dict(enumerate(await asyncio.gather(*(p.wait() for p in procs.values()))))
        else:
            codes = await _run_churn(plan.events, addresses, procs, spawn, config, applied, progress)
    except asyncio.CancelledError:
        for p in procs.values():
            if p.returncode is None:
                p.send_signal(signal.SIGTERM)
        await asyncio.gather(*(p.wait() for p in procs.values()))
        if progress is not None:  # each process writes its summary on SIGTERM: the run so far
            progress(_interrupted(workdir, sorted(procs), config))
        raise
    finally:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
    failed = [k for k, c in sorted(codes.items()) if c != 0]
    if failed:
        tail = (workdir / f"proc{failed[0]}.log").read_text()[-2000:]
        raise RuntimeError(f"process {failed[0]} exited with {codes[failed[0]]}:\n{tail}")
    # under churn: the processes up at the end (each summary is its own nodes' last evaluation)
    results = [json.loads((workdir / f"proc{k}" / "result.json").read_text()) for k in sorted(codes)]
    metric = metric_for(config)
    total = aggregate(results, metric.key)
    total.update(mode="launch", processes=len(parts), out=str(workdir), config=config.to_dict())
    if plan is not None:
        kinds = [e["kind"] for e in applied]
        total["churn"] = {
            "live_processes_at_end": len(codes),
            "joins": kinds.count("join"),
            "leaves": kinds.count("leave"),
            "crashes": kinds.count("crash"),
            "events": applied,
        }
    if progress is not None and shown["round"] < total["round"]:  # the watcher missed the last round
        progress(
            f"round {total['round']:>4}/{config.rounds}  {metric.label} {total[metric.key]:.3f}  "
            f"models {total['model_messages']:>7}  MB {total['bytes'] / 1e6:9.1f}  "
            f"{time.perf_counter() - t0:7.1f}s"
        )
    if self_check:
        from p2plab.selfcheck import summary_check

        total["self_check"] = summary_check(total, config, len(parts), progress)
    if progress is not None:
        progress(summary(total, metric))
    (workdir / "summary.json").write_text(json.dumps(total, indent=1))
    return total


def _interrupted(workdir: Path, procs: Sequence[int], config: RunConfig) -> str:
    """The line an interrupted launch ends with: the summary of the rounds its processes ran
    (each writes its ``result.json`` when stopped), or why there is none."""
    metric = metric_for(config)
    try:
        results = [json.loads((workdir / f"proc{k}" / "result.json").read_text()) for k in procs]
        total = aggregate(results, metric.key)
        return f"interrupted at round {total['round']} of {config.rounds}: {summary(total, metric)}"
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"interrupted before every process wrote its summary ({type(exc).__name__}: {exc})"


async def _wait_up(addresses: list[str], procs: dict[int, asyncio.subprocess.Process]) -> None:
    """Wait until every address answers ``/status`` (at most a minute; a process that exits
    meanwhile is reported when launch collects the exit codes)."""
    deadline = time.perf_counter() + 60
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
        for a in addresses:
            while time.perf_counter() < deadline and all(p.returncode is None for p in procs.values()):
                try:
                    async with session.get(f"http://{a}/status") as resp:
                        if resp.status == 200:
                            break
                except (TimeoutError, aiohttp.ClientError, OSError):
                    pass
                await asyncio.sleep(0.2)


async def _run_churn(
    events: Sequence[ChurnEvent],
    addresses: list[str],
    procs: dict[int, asyncio.subprocess.Process],
    spawn: Callable[[int], Awaitable[asyncio.subprocess.Process]],
    config: RunConfig,
    applied: list[dict[str, Any]],
    progress: Callable[[str], None] | None,
) -> dict[int, int]:
    """Apply the churn schedule to the processes on process 0's rounds (p2pcore/churn.py): a
    leave is SIGTERM (the nodes tell their peers), a crash SIGKILL, a join restarts the process
    from its checkpoints (``--state-dir``) with every other process as ``--peers``. An event at
    round 6.5 comes when process 0 is half-way through its round 7, by its ``/status`` (rounds
    stretch on a busy machine, so the wall clock would put the events early). At the run's end a
    process still starting is given time to serve, then every process still up is stopped;
    returns their exit codes (a crash's -9 is not a failure)."""
    round_s = 100 * config.tick_seconds
    await _wait_up([addresses[k] for k in procs], procs)  # round 0 of the schedule: all serve
    first = procs[0]
    ended = asyncio.ensure_future(first.wait())
    # process 0 counts the run's rounds from its own start, before the others served: once it
    # is done the run is over, and a process (re)started then would find no peer
    pace = RoundPace(addresses[0], round_s)
    tracker = asyncio.ensure_future(pace.follow())
    try:
        await _apply_events(events, procs, spawn, applied, progress, ended, pace)
    finally:
        tracker.cancel()
        await asyncio.gather(tracker, return_exceptions=True)
    # the run's end: process 0 stops by itself after its rounds; the others were set back by
    # their time away, so they are stopped when it is done (one still starting first serves:
    # stopped before its signal handlers, it would leave no summary)
    await ended
    starting = {k: p for k, p in procs.items() if p.returncode is None}
    await _wait_up([addresses[k] for k in starting], starting)
    for p in procs.values():
        if p.returncode is None:
            p.send_signal(signal.SIGTERM)
    codes = {k: await p.wait() for k, p in procs.items()}
    # one still starting up dies of the signal before it has handlers: it never joined
    return {k: c for k, c in codes.items() if c != -signal.SIGTERM}


class RoundPace:
    """Where a process is in its rounds, from its ``/status`` polled every tenth of a round:
    the round it reached, when, and how long its rounds take lately (they stretch when the
    machine is busy); :meth:`at` the fractional round now."""

    def __init__(self, address: str, round_s: float) -> None:
        self.address = address
        self.round_s = round_s  #: a round's length, measured (its nominal length at first)
        self.round = 0
        self.since = time.perf_counter()

    def at(self) -> float:
        """The round the process is at now (round 6.5: half-way through its seventh)."""
        return self.round + min(0.999, (time.perf_counter() - self.since) / self.round_s)

    def seen(self, rnd: int, now: float) -> None:
        if rnd <= self.round:
            return
        if self.round > 0:  # a round's length: the time between two round ends, smoothed
            took = (now - self.since) / (rnd - self.round)
            self.round_s = 0.5 * self.round_s + 0.5 * took
        self.round, self.since = rnd, now

    async def follow(self) -> None:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
            while True:
                try:
                    async with session.get(f"http://{self.address}/status") as resp:
                        page = await resp.json()
                    self.seen(int(page["round"]), time.perf_counter())
                except (TimeoutError, aiohttp.ClientError, OSError, ValueError, KeyError, TypeError):
                    pass
                await asyncio.sleep(max(0.02, self.round_s / 10))


async def _apply_events(
    events: Sequence[ChurnEvent],
    procs: dict[int, asyncio.subprocess.Process],
    spawn: Callable[[int], Awaitable[asyncio.subprocess.Process]],
    applied: list[dict[str, Any]],
    progress: Callable[[str], None] | None,
    ended: asyncio.Future[int],
    pace: RoundPace,
) -> None:
    """The schedule's events in order, each once process 0 reached its round."""
    for event in events:
        while not ended.done() and pace.at() < event.at:
            wait = (event.at - pace.at()) * pace.round_s
            await asyncio.wait([ended], timeout=min(max(wait, 0.01), pace.round_s / 10))
        if ended.done():
            break
        k = event.node
        proc = procs.get(k)
        if event.kind == "join":
            if proc is not None and proc.returncode is None:
                continue
            procs[k] = await spawn(k)
        else:
            if proc is None or proc.returncode is not None:
                continue
            proc.send_signal(signal.SIGTERM if event.kind == "leave" else signal.SIGKILL)
            await proc.wait()
            del procs[k]
        applied.append({"at_round": round(event.at, 2), "process": k, "kind": event.kind})
        if progress is not None:
            progress(f"churn: process {k} {_PAST[event.kind]} at round {event.at:.1f}")


_PAST = {"join": "joined", "leave": "left", "crash": "crashed"}


def _say_stretch(
    statuses: Sequence[dict[str, Any]],
    config: RunConfig,
    progress: Callable[[str], None],
    shown: dict[str, Any],
) -> None:
    """One line, once, when a process's rounds take 1.5 times their tick or more (its clock
    holds back while it runs behind): this machine cannot keep the tick; the tick that would."""
    paces = [float((s.get("pace") or {}).get("recent", 1.0)) for s in statuses]
    worst = max(paces, default=1.0)
    if worst < STRETCH_SAY:
        return
    shown["stretch_said"] = 1
    tick = config.tick_seconds
    progress(
        f"WARNING: this machine cannot keep {tick:g} s ticks: rounds take {worst:.1f}x their "
        f"{100 * tick:g} s (they stretch so the protocols keep their timing; the run takes that much "
        f"longer); --tick-seconds {hold_tick(tick, worst):g} would hold, or run less beside it"
    )


async def _watch(
    addresses: list[str],
    config: RunConfig,
    progress: Callable[[str], None] | None,
    shown: dict[str, Any],
    up: dict[int, asyncio.subprocess.Process] | None = None,
    on_round: Callable[[int, dict[str, Any]], None] | None = None,
) -> None:
    """One line per round from the processes' ``/status``: utility, traffic, send failures and
    refusals, and the adversaries' CIA accuracy when there are any."""
    if progress is None and on_round is None:
        return
    t0 = time.perf_counter()
    said = 0.0  #: when the last "starting" line was printed
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
        while True:
            await asyncio.sleep(config.tick_seconds * 100 / 2)
            waited = time.perf_counter() - t0
            if progress is not None and shown["round"] == 0 and waited - said >= STARTING_EVERY_S:
                said = waited  # no round yet: the processes load data, build nodes, find peers
                progress(
                    f"starting: {len(addresses)} processes preparing (data, nodes, peers)  {waited:5.0f}s"
                )
            statuses = []
            polled = addresses if up is None else [addresses[k] for k in sorted(up)]  # churn: those up
            for a in polled:
                try:
                    async with session.get(f"http://{a}/status") as resp:
                        statuses.append(await resp.json())
                except (TimeoutError, aiohttp.ClientError, OSError, ValueError):
                    pass
            if not statuses or (up is None and len(statuses) < len(polled)):
                continue  # under churn a process (re)starting answers late: the others' line still shows
            rnd = statuses[0]["round"] if up is not None else min(s["round"] for s in statuses)
            if rnd <= shown["round"]:
                continue
            shown["round"] = rnd
            if progress is not None and rnd >= STRETCH_SAY_AFTER and not shown.get("stretch_said"):
                _say_stretch(statuses, config, progress, shown)
            key = metric_for(config).key  # each node's utility in its /status row (report.node_rows)
            hits = [n[key] for s in statuses for n in s["nodes"] if n[key] is not None]
            models = sum(n["models_sent"] for s in statuses for n in s["nodes"])
            nbytes = sum(n["bytes_sent"] for s in statuses for n in s["nodes"])
            failures = sum(s.get("send_failures", 0) for s in statuses)
            refused = sum(s.get("refused", 0) for s in statuses)
            cia = [s["cia"]["aac"] for s in statuses if s.get("cia")]
            hr = sum(hits) / len(hits) if hits else 0.0
            if on_round is not None:
                latest: dict[str, Any] = {key: hr}  # the simulator's evaluation keys
                if cia:
                    latest["cia"] = {"aac": sum(cia) / len(cia)}
                on_round(rnd, latest)
            if progress is None:
                continue
            bounds = [s["cia"]["upper_bound"] for s in statuses if (s.get("cia") or {}).get("upper_bound")]
            elapsed = time.perf_counter() - t0
            first = shown.setdefault("first", (rnd, elapsed))  # the pace is read from here on
            progress(
                f"round {rnd:>4}/{config.rounds}  {metric_for(config).label} {hr:.3f}  "
                f"models {models:>7}  MB {nbytes / 1e6:9.1f}  {elapsed:7.1f}s"
                + time_left(rnd, config.rounds, elapsed, first)
                + (f"  CIA AAC {sum(cia) / len(cia):.3f}" if cia else "")
                + (f" (bound {sum(bounds) / len(bounds):.3f})" if cia and bounds else "")
                + (f"  failed sends {failures}" if failures else "")
                + (f"  refused {refused}" if refused else "")
                + (f"  processes up {len(statuses)}/{len(addresses)}" if up is not None else "")
            )
