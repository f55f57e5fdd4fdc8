"""A real process: 1..M nodes behind one aiohttp server, talking HTTP to the other processes.

Start-up: serve, learn the other processes' nodes from ``--peers`` (``GET /v1/members``), build
the nodes (static and PeerSwap need every node id to draw the shared initial graph; Cyclon needs
only its seeds), start them on the monotonic clock. Each round the process evaluates its nodes and
prints one line. It stops after ``rounds`` rounds or on SIGTERM/SIGINT: timers are cancelled,
in-flight sends finish (bounded), the server closes after in-flight requests, the session closes.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import math
import os
import signal
import ssl
import sys
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from p2pcore.plugin import PluginError
from p2pnode.clock import ElasticClock
from p2pnode.config import ConfigError, RunConfig, network_differences, network_settings
from p2pnode.data import checkpoint
from p2pnode.nodes.host import Host, body_limit
from p2pnode.nodes.prepare import Prepared, prepare
from p2pnode.runners.build import (
    make_node,
    make_server,
    population,
    server_id,
    set_owner,
    set_siblings,
    set_vet,
)
from p2pnode.runners.report import metric_for, summary
from p2pnode.runners.rounds import RoundLog, RoundRunner
from p2pnode.telemetry.exposure import ExposureLedger
from p2pnode.telemetry.metrics import Metrics
from p2pnode.transport.admission import Admission
from p2pnode.transport.http import ADMISSION, HttpTransport, listen, make_app, stop_listening
from p2pnode.trust.auth import KeyHolder, process_keys
from p2pnode.trust.identity import IdentityError, new_challenge
from p2pnode.trust.limits import Limits, client_timeout
from p2pnode.trust.swapjudge import SwapJudge
from p2pnode.trust.tls import TlsFiles, client_context, server_context
from protocols.gossip import TimingConfig

log = logging.getLogger("p2pnode.real")
ROUND_TICKS = TimingConfig().round_ticks
STRETCH_SAY = 1.5  #: rounds stretched this much say so (with the tick that would hold) ...
STRETCH_SAY_AFTER = 3  #: ... after this many rounds
LINGER_ROUNDS = 10  #: the longest a finished process waits for its peers to finish, in rounds
LINGER_PEERS = 16  #: the peer processes it asks


def hold_tick(tick_s: float, stretch: float) -> float:
    """The tick a machine that stretched ``tick_s`` ticks by ``stretch`` would keep: the
    stretched tick with a fifth to spare, rounded up to two significant digits."""
    want = tick_s * max(1.0, stretch) * 1.2
    digits = 10 ** (math.floor(math.log10(want)) - 1)
    return float(math.ceil(want / digits - 1e-9) * digits)


class StartupError(RuntimeError):
    """The process could not join the network (peers unreachable, ids clash, ...)."""

    exit_status = 1  #: the command's exit status: 1, or 2 where the processes' settings disagree


class MismatchError(StartupError):
    """The processes were started with settings that cannot make one network (another
    network's settings, a node hosted twice): the user's mistake, exit status 2."""

    exit_status = 2


@dataclass(frozen=True)
class ProcessSpec:
    """What one ``p2pnode run`` process hosts and where it listens."""

    users: tuple[int, ...]
    listen_host: str
    listen_port: int
    peers: tuple[str, ...] = ()
    out: Path | None = None
    bootstrap_timeout_s: float = 60.0
    server: bool = False  #: also host the FedAvg server node
    key_file: Path | None = (
        None  #: cluster keyring (p2pnode.trust.auth); else $P2PNODE_CLUSTER_KEY; else open
    )
    identity_file: Path | None = None  #: this process's key and credential (p2pnode.trust.identity)
    limits: Limits | None = None  #: load bounds of the HTTP server (default Limits())
    state_dir: Path | None = None  #: checkpoints: resume from here, save here (p2pnode.data.checkpoint)
    checkpoint_every: int = 10  #: rounds between checkpoints (and one when the process stops)
    tls: TlsFiles | None = None  #: mutual TLS between processes (p2pnode.trust.tls)
    forever: bool = False  #: run until SIGTERM/SIGINT instead of ``config.rounds`` rounds

    @property
    def address(self) -> str:
        return f"{self.listen_host}:{self.listen_port}"


class NodeProcess:
    """The running process: host, server, transport and the round loop."""

    def __init__(self, config: RunConfig, spec: ProcessSpec, prep: Prepared | None = None) -> None:
        self.config = config.validate()
        self.spec = spec
        if self.config.stop_at:  # each process would stop on its own nodes' utility alone
            raise ConfigError("the early stop (stop_at) is simulated only")
        for u in spec.users:  # before the data is read: a user's mistake is said at once
            if not 0 <= u < self.config.nodes:
                raise ConfigError(
                    f"--users: user {u} is outside the network's 0..{self.config.nodes - 1} (--nodes "
                    f"{self.config.nodes})"
                )
        if spec.server and self.config.protocol != "fedavg":
            raise ConfigError("--server hosts the FedAvg server; it needs --protocol fedavg")
        self.prep = prep or prepare(self.config)
        self.metrics = Metrics()
        self.host = Host(self.metrics, body_limit(self.prep.model_bytes))
        if self.config.protocol != "fedavg":  # who merged whose models (p2pnode/telemetry/exposure.py)
            self.host.ledger = ExposureLedger(self.config.nodes)
        self.hosted = (*spec.users, server_id(self.config)) if spec.server else spec.users
        self.addresses: dict[int, str] = {u: spec.address for u in self.hosted}
        self.transport: HttpTransport | None = None
        self.keys = self._keys()
        self._client_ssl: ssl.SSLContext | None = None
        self.runner: web.AppRunner | None = None
        self.listener: asyncio.Server | None = None
        #: judges the views swaps hand this process's PeerSwap nodes (with identities, THREAT_MODEL.md)
        self.judge: SwapJudge | None = None
        self.round = 0
        self.log = RoundLog(self.config, self.prep, self.host.nodes, wall_time=True)
        self._stop = asyncio.Event()
        #: a user's plug-in failed in a node: the process stops and ``run`` raises it
        self.failure: PluginError | None = None
        self.resumed = 0  #: nodes restored from checkpoints
        self.resumes: list[dict[str, Any]] = []  #: every resume of this process: round and wall time
        #: its --state-dir: checkpoints saved and restored (p2pnode.data.checkpoint)
        self.state = (
            checkpoint.StateDir(spec.state_dir, self.metrics.checkpoint_failures.inc)
            if spec.state_dir is not None
            else None
        )
        self.late_rounds = 0  #: rounds that began more than half a round behind schedule
        self._t0 = 0.0
        self.clock: ElasticClock | None = None  #: the nodes' clock and the rounds' (from start)
        self._start_round = 0  #: the round the process started at (a resumed process's)
        self._tick0 = 0.0  #: the clock's tick then
        self._said_stretch = False
        self._mark: tuple[float, float] | None = None  #: (elapsed, held) at the first round's end

    def _keys(self) -> KeyHolder | None:
        """The process's keyring and identity (p2pnode.trust.auth.process_keys); with none, say loudly
        that the nodes accept anyone's frames."""
        server = server_id(self.config) if self.config.protocol == "fedavg" else -1

        def known(sender: int) -> bool:
            return 0 <= sender < self.config.nodes or sender == server

        spec = self.spec
        try:
            holder = process_keys(
                spec.key_file, spec.identity_file, os.environ, known, self.hosted, log.warning
            )
        except IdentityError as exc:
            raise StartupError(str(exc)) from None
        if holder is not None:
            return holder
        print(
            f"p2pnode: WARNING: no cluster key, nodes on {spec.address} run OPEN: anyone who "
            "can reach this port can send them models (give --cluster-key-file or $P2PNODE_CLUSTER_KEY)",
            file=sys.stderr,
            flush=True,
        )
        return None

    # -- HTTP views ----------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """The ``/status`` page: the process's round and utility, and a row per hosted node with
        the keys of the summary's ``per_node`` (``report.node_rows``) and, live, its round, view,
        model version and refusals by reason (``rejected``, as the summary's)."""
        nodes = self.log.node_rows()
        for row, n in zip(nodes, self.host.nodes.values(), strict=True):
            row.update(
                round=n.round,
                view=list(n.node.sampler.out_view()),
                model_version=n.learner.version,
                rejected=dict(n.counters.rejected),
            )
        hits = [n.last_hit for n in self.host.nodes.values() if n.last_hit is not None]
        cia = self.log.last.get("cia")
        return {
            "address": self.spec.address,
            "protocol": self.config.protocol,
            "sampling": self.config.sampling,
            "round": self.round,
            "rounds": None if self.spec.forever else self.config.rounds,
            "hit_ratio": sum(hits) / len(hits) if hits else None,
            "metric": self.log.metric.key,  #: the key of each node's utility in its row
            "send_failures": sum(n.counters.send_failures for n in self.host.nodes.values()),
            "refused": sum(sum(n.counters.rejected.values()) for n in self.host.nodes.values()),
            #: the adversaries' mean accuracy and bound at the last evaluation (None: no attack)
            "cia": None if cia is None else {"aac": cia["aac"], "upper_bound": cia["upper_bound"]},
            #: how the process keeps its tick: its rounds' stretch so far and since its first round
            "pace": {"stretch": self.pace()["stretch"], "recent": round(self.recent_stretch(), 4)},
            "nodes": nodes,
        }

    def cache_sizes(self, admission: Admission) -> dict[str, int]:
        """Every table the process keeps about its peers, by name (``p2pnode_cache_entries``):
        the verifier's nonces, holders and credentials, admission's buckets and per-address
        counts, the client's per-address state, the swap judge's owners."""
        out = dict(admission.sizes())
        if self.keys is not None:
            out.update(self.keys.verifier.sizes())
        if self.transport is not None:
            out.update(self.transport.sizes())
        if self.judge is not None:
            out.update(self.judge.sizes())
        return out

    def members(self) -> dict[str, Any]:
        """The ``/v1/members`` page: this process's address, nodes and the settings every
        process of the network must share (a joining process compares them)."""
        return {
            "address": self.spec.address,
            "nodes": sorted(self.hosted),
            "settings": network_settings(self.config),
        }

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Build the nodes, serve, learn the peers, then start the nodes' timers."""
        self._client_ssl = client_context(self.spec.tls) if self.spec.tls is not None else None
        self.transport = HttpTransport(
            self.addresses,
            timeout_s=client_timeout(self.host.max_frame_bytes),  # sized from the model
            keys=self.keys,
            ssl_context=self._client_ssl,
            local=self.host if self.config.wire.local_delivery else None,
            batch_bytes=self.host.max_frame_bytes if self.config.wire.batch else 0,
        )
        clock = self.clock = ElasticClock(self.config.tick_seconds, self.config.max_lag_ticks)
        seeds: list[tuple[int, str]] = []
        # this life of the nodes: peers take their models as newer than any before the restart
        # (a resumed node continues above its checkpoint's incarnation, whichever is larger)
        incarnation = int(time.time())
        for u in self.spec.users:
            runtime = make_node(
                self.prep,
                u,
                clock,
                self.transport,
                self.metrics,
                address=f"{u}@{self.spec.address}",
                seeds=seeds,
                on_learned=self._learned,
            )
            runtime.incarnation, runtime.wall = incarnation, time.time
            self.host.add(runtime)
        if self.spec.server:
            server = make_server(self.prep, clock, self.transport, self.metrics)
            server.incarnation, server.wall = incarnation, time.time
            self.host.add(server)
        for runtime in self.host.nodes.values():
            runtime.on_plugin_error = self._plugin_failed
        self._resume()
        # The nodes' data live as long as the process; the collector's full passes walked all of
        # it every ~15 s (0.14-0.3 s with the event loop stopped, freeing nothing) and the lag
        # shed peers' frames. Frozen, those passes see only what was allocated since.
        gc.collect()
        gc.freeze()
        self.host.accepting = False  # until the nodes start, below: they cannot answer yet
        # a model's body gets the time its bytes take (strangers' headers get no more)
        limits = (self.spec.limits or Limits()).sized(self.host.max_frame_bytes)
        app = make_app(
            self.host,
            self.status,
            self.members,
            self.keys,
            limits,
            self.spec.tls is not None,
            address=self.spec.address,
        )
        admission = app[ADMISSION]
        self.metrics.watch_caches(lambda: self.cache_sizes(admission))
        server_ssl = server_context(self.spec.tls) if self.spec.tls is not None else None
        try:
            self.runner, self.listener = await listen(
                app,
                self.spec.listen_host,
                self.spec.listen_port,
                server_ssl,
                limits,
                on_refused=self.metrics.refused_connections.inc,
                on_malformed=lambda _kind: self.host.refusals.count(None, "malformed-http"),
            )
        except OSError as exc:  # the port in use, an address not of this machine, no permission
            raise StartupError(f"cannot listen on {self.spec.address}: {exc.strerror or exc}") from None
        if self.round >= self.config.rounds:  # resumed after its last round: nothing left to run,
            self._t0 = time.perf_counter()  # and its peers may be gone; run() writes the result
            self.host.accepting = True
            return
        seeds.extend(await self._bootstrap())
        seeds.extend((u, f"{u}@{self.spec.address}") for u in self.spec.users)
        hosted = {i: runtime.node for i, runtime in self.host.nodes.items()}
        set_siblings(hosted)
        if self.keys is not None and self.keys.verifier.trust is not None:
            # with identities: who holds each id is known
            self.judge = SwapJudge(self._member_of, self._member_ids, population(self.config))
            set_vet(hosted, self.judge)
        for runtime in self.host.nodes.values():
            runtime.node.sampler.add_seeds(seeds)
            set_owner(runtime.node, self._owner, self._member)
            runtime.start()
        self.host.accepting = True
        self._t0 = time.perf_counter() - self.round * ROUND_TICKS * self.config.tick_seconds
        self._start_round, self._tick0 = self.round, clock.now()  # rounds count from here

    def _owner(self, sender: int) -> Hashable:
        """Who stands behind a node id, for the limits a member's ids share (PeerSwap's
        ``LockShare``, the clip window's places): None for a node hosted here, the member whose
        credential signed for it (with identities), else the id itself."""
        if sender in self.host.nodes:
            return None
        serial = self.keys.verifier.holder(sender) if self.keys is not None else None
        return sender if serial is None else f"serial {serial}"

    def _member(self, sender: int) -> Hashable:
        """The member whose credential signed for ``sender`` (with identities), None for a node
        hosted here, a node not seen signing, or a process without identities: whose relayed
        Cyclon entries are weighed."""
        if sender in self.host.nodes or self.keys is None:
            return None
        serial = self.keys.verifier.holder(sender)
        return None if serial is None else f"serial {serial}"

    def _member_ids(self, member: Hashable) -> int | None:
        """How many of the network's ids ``member`` (as :meth:`_member_of` names it) holds."""
        if self.keys is None or not isinstance(member, str) or not member.startswith("serial "):
            return None
        return self.keys.verifier.ids_named(int(member.removeprefix("serial ")), population(self.config))

    def _member_of(self, node: int) -> Hashable | None:
        """The member whose credential names ``node`` (whether or not it ever wrote to this
        process), None for a node hosted here or an id no credential seen names."""
        if node in self.host.nodes or self.keys is None:
            return None
        serial = self.keys.verifier.owner_of(node)
        return None if serial is None else f"serial {serial}"

    def _resume(self) -> None:
        """Restore every hosted node that has a checkpoint in ``state_dir``; rounds continue."""
        if self.state is None:
            return
        try:
            rounds = self.state.restore(self.host.nodes.values(), self.config.tick_seconds)
        except checkpoint.CheckpointError as exc:
            raise StartupError(str(exc)) from None
        if rounds:
            self.round = min(rounds)
            self.resumed = len(rounds)
            saved = self.state.process_state()
            self.log.history = [h for h in saved.get("history", []) if h.get("round", 0) <= self.round]
            resume: dict[str, Any] = {"round": self.round, "time": time.time()}
            reached = self.state.progress()
            if reached is not None and reached[0] > self.round:
                resume["reached"], resume["reached_time"] = reached  # the rounds this resume replays
            self.resumes = [*saved.get("resumes", []), resume]
            print(  # what a restart did, said once as the cluster-key line is: not a warning
                f"p2pnode: resumed {len(rounds)} node(s) from {self.state.path} at round {self.round}",
                file=sys.stderr,
                flush=True,
            )

    def _checkpoint(self) -> None:
        if self.state is not None:
            self.state.save_or_say(self.round, self._process_state(), self.host.nodes.values())

    def save_checkpoints(self) -> int:
        """Checkpoint every hosted node and the process's history and resumes; returns the bytes
        written (0 without a state directory). Raises OSError."""
        if self.state is None:
            return 0
        return self.state.save(self.round, self._process_state(), self.host.nodes.values())

    def _process_state(self) -> dict[str, Any]:
        return {"history": self.log.history, "resumes": self.resumes}

    def _learned(self, node: int, address: str, first_hand: bool) -> None:
        """An address a Cyclon entry brought (THREAT_MODEL.md). A node may advertise only its own
        address: the entry a node sends about itself (authenticated as that node, and under mutual
        TLS by its certificate) may re-point it once its current address stops answering
        (``HttpTransport.move``); an entry relayed about another node only fills an address this
        process does not know. Hosted nodes are never re-pointed. Ids outside the
        network were refused when the entry was decoded."""
        _, _, hostport = address.partition("@")
        if not hostport or hostport == "sim" or node in self.hosted:
            return
        if first_hand and self.transport is not None:
            self.transport.move(node, hostport)  # while its address answers, the node stays there
        elif first_hand or node not in self.addresses:
            self.addresses[node] = hostport

    def _in_network(self, node: int) -> bool:
        """A node id of this network: a user's, or the FedAvg server's."""
        return 0 <= node < self.config.nodes or (
            self.config.protocol == "fedavg" and node == server_id(self.config)
        )

    def _claims(self, peer: str, listed: list[int], why: str, keep: Callable[[int], bool]) -> list[int]:
        """The entries of ``peer``'s members page that ``keep`` accepts; the others are left out
        with one warning (a page is the peer's word: it may not place nodes it cannot hold)."""
        kept = [u for u in listed if keep(u)]
        if len(kept) < len(listed):
            left = sorted(set(listed) - set(kept))
            log.warning("%s lists %d node(s) %s: left out (first: %s)", peer, len(left), why, left[:5])
        return kept

    async def _bootstrap(self) -> list[tuple[int, str]]:
        """Learn who hosts which node; returns Cyclon seeds (the nodes of the seed processes)."""
        fedavg = self.config.protocol == "fedavg"
        need_all = fedavg or self.config.sampling in ("static", "peerswap")
        deadline = time.monotonic() + self.spec.bootstrap_timeout_s
        pending = [p for p in self.spec.peers if p != self.spec.address]
        said = 0  #: the last wait, in s, a line was printed for
        seeds: list[tuple[int, str]] = []
        scheme = "https" if self._client_ssl is not None else "http"
        mine = network_settings(self.config)
        connector = aiohttp.TCPConnector(ssl=self._client_ssl if self._client_ssl is not None else True)
        async with aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=3), connector=connector
        ) as session:
            while pending:
                still: list[str] = []
                trust = self.keys.verifier.trust if self.keys is not None else None
                for peer in pending:
                    try:
                        challenge = new_challenge()
                        params = {"challenge": challenge} if trust is not None else None
                        async with session.get(f"{scheme}://{peer}/v1/members", params=params) as resp:
                            body = await resp.json()
                        listed = [int(u) for u in body["nodes"]]
                        theirs = body.get("settings")
                        differ = network_differences(mine, theirs) if isinstance(theirs, dict) else []
                        if differ:
                            raise MismatchError(
                                f"{peer} runs another network: {'; '.join(differ)} "
                                "(start every process of a network with the same settings)"
                            )
                        if trust is not None:  # only the nodes the peer proves it holds
                            cred = trust.check_proof(body, challenge, peer)
                            if cred is None or cred.serial in trust.revoked:
                                raise StartupError(
                                    f"{peer} could not prove a credential of this cluster's authority"
                                )
                            listed = self._claims(peer, listed, "its credential does not name", cred.names)
                        twice = sorted(set(listed) & set(self.hosted))
                        if twice and (self.keys is None or trust is not None):
                            # open, or proved by the peer's credential: two processes started
                            # with overlapping --users (or credentials), not a member's lie
                            raise MismatchError(
                                f"{len(twice)} node(s) are hosted both here and by {peer} (first: "
                                f"{twice[:5]}): give each process its own --users"
                                + (" and its own identity" if trust is not None else "")
                            )
                        # with the cluster key alone a page may list another process's nodes (a
                        # member's lie): never this process's own, which would stop it from
                        # starting (THREAT_MODEL.md), nor ids outside the network
                        listed = self._claims(peer, listed, "hosted here", lambda u: u not in self.hosted)
                        listed = self._claims(peer, listed, "outside the network", self._in_network)
                        for u in listed:
                            if u in self.addresses and self.addresses[u] != peer:
                                raise StartupError(
                                    f"node {u} is hosted by both {peer} and {self.addresses[u]}"
                                )
                            self.addresses[int(u)] = peer
                            seeds.append((int(u), f"{u}@{peer}"))
                    except (TimeoutError, aiohttp.ClientError, OSError, ValueError):
                        still.append(peer)
                pending = still
                if pending and seeds and not need_all:  # open membership: one live process will do
                    log.info("joining through the peers that answered; not reachable: %s", ", ".join(pending))
                    break
                if pending:
                    if time.monotonic() > deadline:
                        raise StartupError(
                            f"peers not reachable after {self.spec.bootstrap_timeout_s:g} s: "
                            f"{', '.join(pending)} (--peer-wait sets how long to wait)"
                        )
                    waited = time.monotonic() - (deadline - self.spec.bootstrap_timeout_s)
                    if waited >= said + 10:
                        said = int(waited // 10) * 10
                        log.warning(
                            "waiting for peers: %s not reachable yet (%d s of %g)",
                            ", ".join(pending), said, self.spec.bootstrap_timeout_s,
                        )  # fmt: skip
                    with contextlib.suppress(asyncio.TimeoutError):  # SIGTERM ends the wait
                        await asyncio.wait_for(self._stop.wait(), 0.2)
                    if self._stop.is_set():
                        log.info("stopped while waiting for peers: %s", ", ".join(pending))
                        break
        if need_all and not self._stop.is_set():
            expected = set(range(self.config.nodes)) | ({server_id(self.config)} if fedavg else set())
            missing = sorted(expected - set(self.addresses))
            if missing:
                what = "--protocol fedavg" if fedavg else f"--sampling {self.config.sampling}"
                raise StartupError(
                    f"{len(missing)} of {len(expected)} node ids are hosted by no process "
                    f"(first: {missing[:5]}); {what} needs all of them at the start (a fixed population)"
                    + (
                        " (is one process started with --server?)"
                        if fedavg
                        else "; for a network that nodes join and leave while it runs, use --sampling cyclon"
                    )
                )
        return seeds

    async def run(self, progress: Callable[[str], None] | None = None) -> dict[str, Any]:
        """Run until ``rounds`` rounds passed or ``stop`` is called; returns the summary."""
        round_s = ROUND_TICKS * self.config.tick_seconds
        self.log.progress = progress
        last = None if self.spec.forever else self.config.rounds
        runner = RoundRunner(self.log, last, self.round, (self._after_round,))
        while (r := runner.next_round()) is not None and not self._stop.is_set():
            late_s = await self._round_end(r)
            if self._stop.is_set():
                break
            self._check_pace(late_s, round_s)
            runner.end_round(r, time.perf_counter() - self._t0)
            if r == self._start_round + 1 and self.clock is not None:  # past start-up's first round
                self._mark = (self.clock.elapsed_s(), self.clock.held_s)
            self._check_stretch(r)
        self._checkpoint()  # at the end and on SIGTERM/SIGINT (stop ends the loop)
        if self.failure is not None:
            raise self.failure
        result = runner.result(
            time.perf_counter() - self._t0,
            mode="real",
            address=self.spec.address,
            users=list(self.spec.users),
            late_rounds=self.late_rounds,
            pace=self.pace(),
            resumes=self.resumes,
            local_frames=self.transport.delivered_locally if self.transport is not None else 0,
            batched_frames=self.transport.batched if self.transport is not None else 0,
            batches=self.transport.batches if self.transport is not None else 0,
        )
        if not self._stop.is_set() and any(p != self.spec.address for p in self.spec.peers):
            await self._linger(round_s)
            if "knn" in result:  # answers to the last round's asks came in the linger: counted
                result["knn"] = self.log.knn_result()
        return result

    async def _round_end(self, r: int) -> float:
        """Wait until round ``r`` ends on the nodes' clock (or a stop); how late its end came,
        in wall seconds (a clock that holds back keeps this within its slack)."""
        assert self.clock is not None
        clock = self.clock
        end = self._tick0 + (r - self._start_round) * ROUND_TICKS
        ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def done() -> None:
            if not ended.done():
                ended.set_result(None)

        handle = clock.call_at(end, done)
        stop: asyncio.Future[Any] = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait([ended, stop], return_when=asyncio.FIRST_COMPLETED)
        finally:
            handle.cancel()
            stop.cancel()
        return max(0.0, (clock.now() - end) * clock.tick_seconds)

    def pace(self) -> dict[str, Any]:
        """How the process kept its tick: ``stretch`` (wall time over the ticks its clock showed:
        1.8 when its rounds took 1.8 times their tick), the seconds its clock held back, how many
        times, and the latest a timer fired."""
        clock = self.clock
        if clock is None:
            return {"stretch": 1.0, "held_s": 0.0, "holds": 0, "worst_lag_s": 0.0}
        return {
            "stretch": round(clock.stretch(), 4),
            "held_s": round(clock.held_s, 4),
            "holds": clock.holds,
            "worst_lag_s": round(clock.worst_lag_s, 4),
        }

    def recent_stretch(self) -> float:
        """The rounds' stretch since the first round ended (the first has start-up's one-off
        work: caches filled, the first evaluation), or so far before that."""
        clock = self.clock
        if clock is None:
            return 1.0
        if self._mark is None:
            return clock.stretch()
        wall = clock.elapsed_s() - self._mark[0]
        shown = wall - (clock.held_s - self._mark[1])
        return wall / shown if shown > 0 and wall > 0 else 1.0

    def _check_stretch(self, round_no: int) -> None:
        """Say once, in the first rounds, when this machine cannot keep the tick: the rounds
        stretch by more than half, and the tick that would hold."""
        if self._said_stretch or self.clock is None or round_no - self._start_round < STRETCH_SAY_AFTER:
            return
        stretch = self.recent_stretch()
        if stretch < STRETCH_SAY:
            return
        self._said_stretch = True
        tick = self.config.tick_seconds
        print(
            f"p2pnode: WARNING: {self.spec.address} cannot keep {tick:g} s ticks on this machine: its "
            f"rounds take {stretch:.1f}x their {ROUND_TICKS * tick:g} s (its timers ran up to "
            f"{self.clock.worst_lag_s:.2f} s late), so the run takes that much longer; "
            f"--tick-seconds {hold_tick(tick, stretch):g} would hold (or give it fewer nodes)",
            file=sys.stderr,
            flush=True,
        )

    async def _linger(self, round_s: float) -> None:
        """After the last round, keep answering with the nodes' timers stopped (when other
        processes take part): processes start their rounds a moment apart, and one whose clock
        held back more (a busier process) ends later; a peer still in its last rounds would
        otherwise meet a stopped process (503 "stopping") where the simulator's nodes all end at
        once. At least one round; then until every peer process (the first LINGER_PEERS known)
        says on its ``/status`` that it reached its last round or cannot be reached, at most
        LINGER_ROUNDS rounds of this process's pace. Ended early by ``stop``."""
        for runtime in self.host.nodes.values():
            runtime.pause()
        loop = asyncio.get_running_loop()
        stretch = self.clock.stretch() if self.clock is not None else 1.0
        deadline = loop.time() + LINGER_ROUNDS * round_s * stretch
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._stop.wait(), round_s)
        peers = sorted({a for a in self.addresses.values() if a != self.spec.address})[:LINGER_PEERS]
        while peers and not self._stop.is_set() and loop.time() < deadline:
            behind = [p for p in peers if await self._peer_running(p)]
            if not behind:
                return
            peers = behind
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stop.wait(), min(0.5, round_s))

    async def _peer_running(self, address: str) -> bool:
        """Whether the process at ``address`` is still before its last round (its ``/status``);
        False when it does not answer or runs for ever."""
        if self.transport is None:
            return False
        url = f"{self.transport.scheme}://{address}/status"
        try:
            async with self.transport.session.get(url, timeout=aiohttp.ClientTimeout(total=2)) as resp:
                page = await resp.json() if resp.status == 200 else {}
            reached, last = int(page.get("round", 0)), page.get("rounds")
        except (TimeoutError, aiohttp.ClientError, OSError, ValueError, TypeError, AttributeError):
            return False
        return isinstance(last, int) and reached < last

    def _after_round(self, round_no: int) -> None:
        """A real process's part of a round's end: the round number, checkpoints, progress."""
        self.round = round_no
        if self.state is not None:
            if round_no % self.spec.checkpoint_every == 0:
                self._checkpoint()
            self.state.mark_progress(round_no)

    def _check_pace(self, late_s: float, round_s: float) -> None:
        """Count rounds that start more than half a round late; say so once, with the remedy."""
        if late_s <= 0.5 * round_s:
            return
        self.late_rounds += 1
        if self.late_rounds == 3:
            print(
                f"p2pnode: WARNING: {self.spec.address} runs {late_s:.1f} s behind its {round_s:.1f} s "
                "rounds: it cannot keep up, so messages arrive late and PeerSwap swaps time out; "
                "give it fewer nodes or raise --tick-seconds",
                file=sys.stderr,
                flush=True,
            )

    def stop(self) -> None:
        self._stop.set()

    def _plugin_failed(self, exc: PluginError) -> None:
        """A node's plug-in raised: the first failure stops the process (its summary would hold
        a half-run attack or merge rule), and :meth:`run` raises it after the checkpoint."""
        if self.failure is None:
            self.failure = exc
        self._stop.set()

    async def shutdown(self) -> None:
        """Graceful: tell the peers the nodes leave (Cyclon), stop timers, let in-flight sends
        finish, close server and session; hand the frozen start-up heap back to the collector
        (an interpreter that runs processes one after another, a test or a notebook, would keep
        every finished one's garbage otherwise)."""
        for node in self.host.nodes.values():
            node.leave()
            node.stop()
        if self.transport is not None:
            await self.transport.drain(timeout_s=5.0)
        if self.runner is not None and self.listener is not None:
            await stop_listening(self.runner, self.listener)
        if self.transport is not None:
            await self.transport.close()
        gc.unfreeze()


async def run_process(
    config: RunConfig,
    spec: ProcessSpec,
    progress: Callable[[str], None] | None = None,
    install_signals: bool = True,
) -> dict[str, Any]:
    """Run one process to completion (or SIGTERM/SIGINT) and write ``result.json`` to ``out``."""
    proc = NodeProcess(config, spec)
    loop = asyncio.get_running_loop()
    keys = proc.keys
    if install_signals:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, proc.stop)
        if keys is not None:  # SIGHUP: re-read the key file now (it is also polled every second)
            loop.add_signal_handler(signal.SIGHUP, lambda: keys.reload(force=True))
    try:
        await proc.start()
        result = await proc.run(progress)
    finally:
        await proc.shutdown()
        if install_signals:
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                loop.remove_signal_handler(sig)
    if progress is not None:
        progress(summary(result, metric_for(config)))
    if spec.out is not None:
        from prometheus_client import generate_latest

        spec.out.mkdir(parents=True, exist_ok=True)
        (spec.out / "result.json").write_text(json.dumps(result, indent=1))
        # the final /metrics page, for whoever collects the run after the process is gone
        (spec.out / "metrics.prom").write_bytes(generate_latest(proc.metrics.registry))
    return result


def parse_users(text: str) -> tuple[int, ...]:
    """``0-99,120,130-131`` → node ids."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            a = int(lo)
            b = int(hi) if sep else a
        except ValueError:
            raise ValueError(f"--users: {part!r} is not N or N-M") from None
        if a < 0 or b < a:
            raise ValueError(f"--users: {part!r} is not a valid range")
        out.extend(range(a, b + 1))
    if len(set(out)) != len(out):
        raise ValueError("--users lists a node twice")
    if not out:
        raise ValueError("--users is empty")
    return tuple(out)


def parse_hostport(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{text!r} is not HOST:PORT")
    return host, int(port)


def split_users(n: int, parts: int) -> list[tuple[int, ...]]:
    """Contiguous, near-equal ranges of 0..n-1."""
    parts = max(1, min(parts, n))
    bounds = [round(k * n / parts) for k in range(parts + 1)]
    return [tuple(range(bounds[k], bounds[k + 1])) for k in range(parts)]
