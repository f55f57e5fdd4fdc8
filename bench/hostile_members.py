"""What a member holding the cluster key and one process's identity can do to a live cluster.

Two ``p2pnode run`` processes on loopback with process identities: A hosts nodes
0-19, B nodes 20-39 (PeerSwap views, Base GL, GMF on ML-100k, lr 0.01). The attacker is the
operator of B: it holds the cluster keyring and B's identity, so it signs as B's ids and no
others. For each attack a fresh cluster runs ``--rounds`` rounds while the attacker acts once a
round; the script prints the answers A gave, the mean HR@20 of all 40 nodes at the end and over
the attack's rounds (each round's mean as every process first reported it, from round 1: the
measure, far less noisy than the last round's 40 hits), and the models A's nodes
took per second (``ratio``: all of them; ``honest``: the attack's own taken models
off, which also counts a member displacing its own ids' honest models at the sender gate;
``others``: the models A took from every process but the member's, A's own nodes' and C's, which
A runs as ``bench._tally`` to count), each beside the clean run's:

- ``as-A's-id``: models signed as node 5 (an A node) to every A node;
- ``flood-90x``: B's ids 37-39 post a model at 90x an initial model's norm to every A node;
- ``escalate``: the same, each round's frames 1.5x farther than the last (from 10x);
- ``poison-10%``: B's ids 36-39 each post one 90x model a round to a random node of the network;
- ``swap-forgery``: a SwapPropose then a SwapAdopt handing views of 37-39, as 37, to every A node;
- ``pin-renewal``: zero models as every A id with an incarnation 4 s ahead (version pins);
- ``neighbour-90x``: every B id that is an in-neighbour of an A node (B's own views say which)
  posts a 90x model to it each round: the member in honest neighbour places;
- ``neighbour-escalate``: the same with escalating frames (10x, then 1.5x farther each round);
- ``lock-flood``: every B id asks A's nodes 0-4 for their PeerSwap lock with its best-ranked
  transactions, from 8 threads without pause, and never commits (A's swaps committed and
  aborted are printed);
- ``eclipse-poison``: swap-forgery for the first 10 rounds, then neighbour-escalate from the
  places B's ids then hold;
- ``label-blowup``: B's process is a patched build that refuses every frame it would take with a
  new 2 kB ``X-P2P-Reason`` (A's ``/metrics`` size and its ``other`` failures are printed);
- ``swap-takeover``: B's process is a patched build (``bench._swap_takeover``) whose nodes run real
  PeerSwap transactions with A's nodes (A's side locked and relabelled, so A's own checks pass)
  but hand over made-up views of B's ids only, as initiator and as partner, swapping with A's
  nodes whenever they can and 5x as often as the default (the lie A's process cannot see: A's
  out-view places naming A's nodes at the end are printed);
- ``takeover-keep``: the same, with one real neighbour of A kept in every claimed view (the most
  one member's ids may hold of a view that A's process judges: five places of six);
- ``takeover-poison``: swap-takeover, then neighbour-escalate from round 10;
- ``freeride``: B's process is a patched build (``bench._freeride``) whose nodes send no model
  to any node outside B: the member withholding its own nodes' models, the share of A's intake
  no defence can make it give (the line beside which ``takeover-keep``'s intake is read);
- ``cyclon-steer`` (with ``--sampling cyclon``): A's nodes get shuffle requests in turn without
  pause, each from a random B id naming itself first hand and three other A nodes relayed:
  entries that steer A's caches toward A's own nodes (A's and B's intakes, and the share of A's
  out-view places that name A's nodes at the end, are printed);
- ``slow-uploads``: 96 signed model posts as B's ids from 4 addresses, each body at 1 byte a
  second and posted again when it ends (A's honest intake is the figure to read).

    .venv/bin/python -m bench.hostile_members [--rounds 30] [--clip-factor C] [--attacks flood-90x ...]
        [--processes 3] [--sampling cyclon --attacks cyclon-steer] [--repeats 3]

``--repeats R`` runs the clean cluster and every attack R times, with seeds 1..R (the clean and
the attacked run of one seed paired): each figure is then the mean over the R runs, and ``Δ
rounds`` the paired difference in HR@20 over the rounds as mean ± sd.

``--processes 3`` adds an honest third process C (nodes 40-59, 60 nodes in all; the member is
still B): the slow uploads then show whether B's uploads hold capacity C's nodes need at A (C's
failed sends are printed beside A's intake), and every row prints C's intake from A's and C's
nodes (C runs as ``bench._tally`` too) beside the clean run's.

``--clip-factor 0 --norm-band 0 --steady-pull 0`` gives the papers' plain merge (the daemon clips
at 1, keeps the norm band at 0.05 and the steady-pull memory at 0.7 by default,
protocols.robust.NormBand and SteadyPull).

The targets: no attack moves mean HR@20 by more than 5 points from the clean run, or A's
honest intake by more than 20%.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

from bench.hostile_outsiders import counter, free_port, get, stop, wait_for_round
from p2pnode.config import RunConfig
from p2pnode.nodes.prepare import prepare
from p2pnode.trust.auth import Keyring, load_keyring, save_keyring, sign
from p2pnode.trust.identity import Authority, Identity, load_identity, save_identity
from p2pnode.wire.codec import encode_model_frame, encode_sampling_frame
from p2pnode.wire.delta import DeltaEncoder
from peer_sampling.messages import LockRequest, ShuffleRequest, SwapAdopt, SwapPropose
from peer_sampling.peerswap import _rank

A, B, C = range(20), range(20, 40), range(40, 60)
ATTACKS = (
    "clean",
    "as-A's-id",
    "flood-90x",
    "escalate",
    "poison-10%",
    "swap-forgery",
    "pin-renewal",
    "neighbour-90x",
    "neighbour-escalate",
    "lock-flood",
    "slow-uploads",
    "eclipse-poison",
    "label-blowup",
    "swap-takeover",
    "takeover-keep",
    "takeover-poison",
    "freeride",
    "cyclon-steer",
)
BAND = [0.05, 0.7]  #: the processes' --norm-band and --steady-pull (set from the command line)
SAMPLING = ["peerswap"]  #: the processes' --sampling (set from the command line)
ECLIPSE_ROUNDS = 10  #: eclipse-poison: rounds of SwapAdopt lies before the poisoning
LOCKED = range(5)  #: the A nodes the lock flood asks
#: rows whose B process is a patched build (the member runs its own code)
B_MODULE = {
    "label-blowup": "bench._made_up_reasons",
    "swap-takeover": "bench._swap_takeover",
    "takeover-keep": "bench._swap_takeover",
    "takeover-poison": "bench._swap_takeover",
    "freeride": "bench._freeride",
}
B_ENV = {"takeover-keep": {"TAKEOVER_KEEP": "1"}}  #: B's environment in some rows


def best_ranked(sender: int, count: int = 64) -> list[int]:
    """Transaction counters of ``sender`` whose wait-die rank is in the top of 20,000: requests
    that wait for a lock rather than die (peer_sampling.peerswap._rank)."""
    return sorted(range(1, 20_000), key=lambda c: _rank((sender, c)), reverse=True)[:count]


class Member:
    """The attacker: B's identity and the cluster key; posts frames to a node of A or B."""

    def __init__(self, keyring: Path, identity: Identity, addresses: dict[int, str]) -> None:
        self.keyring = load_keyring(keyring)
        self.identity = identity
        self.addresses = addresses
        self.answers: Counter[str] = Counter()
        self.life = (int(time.time()) << 32) + 1_000  # an incarnation of now
        self.version = 0
        self.taken = 0  #: models A's nodes took from the attacker (off A's honest intake)
        self._mutex = threading.Lock()
        self.b_address = addresses[B[0]]

    def _count(self, answer: str) -> None:
        with self._mutex:  # the lock flood posts from several threads
            self.answers[answer] += 1

    def flood_locks(self, ids: Sequence[int], stop: threading.Event) -> None:
        """Ask A's nodes 0-4 for their lock as ``ids``, with best-ranked transactions, without
        pause until ``stop`` (one of 8 threads). B's own honest nodes answer a grant for a
        transaction they never began with an Unlock, so a lock is held about a round trip each
        time: the flood's weight is its rate."""
        ranked = {src: best_ranked(src) for src in ids}
        n = 0
        while not stop.is_set():
            for src in ids:
                txn = (src, ranked[src][n % len(ranked[src])])
                for dst in LOCKED:
                    self.post(src, dst, "sampling", encode_sampling_frame(src, dst, LockRequest(txn)))
            n += 1

    def steer_caches(self, stop: threading.Event) -> None:
        """Shuffle requests to A's nodes in turn without pause until ``stop``, each from a random
        B id naming itself first hand and three other A nodes relayed."""
        rng = random.Random(11)
        while not stop.is_set():
            for dst in A:
                src = rng.choice(B)
                named = [src, *rng.sample([a for a in A if a != dst], 3)]
                entries = tuple((n, f"{n}@{self.addresses[n]}", 0) for n in named)
                self.post(src, dst, "sampling", encode_sampling_frame(src, dst, ShuffleRequest(entries)))

    def slow_uploads(self, params: dict[str, np.ndarray], stop: threading.Event) -> None:
        """96 signed model posts as B's ids to A's nodes from 4 addresses (127.0.0.2-5), each
        body sent at 1 byte a second, each posted again when it ends, until ``stop``."""
        asyncio.run(self._slow_uploads(params, stop))

    async def _slow_uploads(self, params: dict[str, np.ndarray], stop: threading.Event) -> None:
        sessions = [
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(local_addr=(f"127.0.0.{k}", 0), limit=0))
            for k in range(2, 6)
        ]

        async def trickle(body: bytes) -> AsyncIterator[bytes]:
            for i in range(len(body)):
                if stop.is_set():
                    return
                yield body[i : i + 1]
                await asyncio.sleep(1.0)

        async def one(n: int) -> None:
            sender, dest = B[n % 20], A[n % 20]
            path = f"/v1/nodes/{dest}/gossip"
            while not stop.is_set():
                self.version += 1
                frame = DeltaEncoder(False).encode(dest, self.life + self.version, params)
                body = bytes(encode_model_frame(sender, dest, frame))
                headers = sign(
                    self.keyring, "POST", path, sender, body, int(time.time() * 1000), identity=self.identity
                )
                headers["Content-Length"] = str(len(body))
                url = f"http://{self.addresses[dest]}{path}"
                try:
                    async with sessions[n % 4].post(url, data=trickle(body), headers=headers) as r:
                        self._count(f"{r.status} {r.headers.get('X-P2P-Reason') or 'taken'}")
                except (aiohttp.ClientError, OSError):
                    self._count("cut")
                await asyncio.sleep(0.1)

        try:
            await asyncio.gather(*(one(n) for n in range(96)))
        finally:
            for session in sessions:
                await session.close()

    def b_views(self) -> dict[int, list[int]]:
        """B's nodes' out-views now (the attacker operates B, so it reads its own status)."""
        nodes = json.loads(get(self.b_address, "/status"))["nodes"]
        return {int(n["node"]): [int(v) for v in n["view"]] for n in nodes}

    def post(self, sender: int, dest: int, channel: str, frame: bytes) -> int:
        path = f"/v1/nodes/{dest}/{channel}"
        headers = sign(
            self.keyring, "POST", path, sender, frame, int(time.time() * 1000), identity=self.identity
        )
        request = urllib.request.Request(
            f"http://{self.addresses[dest]}{path}", frame, headers, method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as r:
                self._count(f"{r.status} {r.headers.get('X-P2P-Reason') or 'taken'}")
                return int(r.status)
        except urllib.error.HTTPError as err:
            self._count(f"{err.code} {err.headers.get('X-P2P-Reason', '')}")
            return int(err.code)
        except OSError:
            self._count("no answer")
            return 0

    def model(
        self, sender: int, dest: int, params: dict[str, np.ndarray], version: int | None = None
    ) -> None:
        self.version += 1
        ver = self.life + self.version if version is None else version
        frame = bytes(encode_model_frame(sender, dest, DeltaEncoder(False).encode(dest, ver, params)))
        if self.post(sender, dest, "gossip", frame) == 200 and dest in A:
            self.taken += 1  # A's intake is counted without the attack's own models


def actions(name: str, init: dict[str, np.ndarray]) -> Callable[[Member, int, random.Random], None]:
    """What the attacker does in round ``r``."""
    scaled = {k: v * 90 for k, v in init.items()}

    def act(m: Member, r: int, rng: random.Random) -> None:
        if name == "as-A's-id":
            for dst in A:
                m.model(5, dst, scaled) if dst != 5 else None
        elif name == "flood-90x":
            for src in (37, 38, 39):
                for dst in A:
                    m.model(src, dst, scaled)
        elif name == "escalate":
            far = {k: v * 10 * 1.5**r for k, v in init.items()}
            for src in (37, 38, 39):
                for dst in A:
                    m.model(src, dst, far)
        elif name == "poison-10%":
            for src in (36, 37, 38, 39):
                m.model(src, rng.randrange(40), scaled)
        elif name in ("eclipse-poison", "takeover-poison") and r >= ECLIPSE_ROUNDS:  # poison from the places
            far = {k: v * 10 * 1.5 ** (r - ECLIPSE_ROUNDS) for k, v in init.items()}
            for src, view in m.b_views().items():
                for dst in set(view) & set(A):
                    m.model(src, dst, far)
        elif name in ("swap-forgery", "eclipse-poison"):
            for dst in A:
                txn = (37, 1000 + r * 100 + dst)
                m.post(37, dst, "sampling", encode_sampling_frame(37, dst, SwapPropose(txn)))
                adopt = SwapAdopt(txn, (37, 38, 39), (37, 38, 39))
                m.post(37, dst, "sampling", encode_sampling_frame(37, dst, adopt))
        elif name.startswith("neighbour-"):
            factor = 90.0 if name == "neighbour-90x" else 10 * 1.5**r
            frame = {k: v * factor for k, v in init.items()}
            for src, view in m.b_views().items():
                for dst in set(view) & set(A):
                    m.model(src, dst, frame)
        elif name == "pin-renewal":
            ahead = ((int(time.time()) + 4) << 32) + r
            zero = {k: np.zeros_like(v) for k, v in init.items()}
            for src in A:
                m.model(src, (src + 1) % 20, zero, version=ahead)

    return act


@contextlib.contextmanager
def cluster(
    tmp: Path,
    rounds: int,
    tick: float,
    clip: float,
    processes: int = 2,
    b_module: str = "p2pnode",
    seed: int = 1,
    b_env: dict[str, str] | None = None,
) -> Iterator[tuple[dict[int, str], list[str]]]:
    """A (0-19), B (20-39) and with ``processes`` 3 C (40-59), with identities, until the block
    ends: (node -> address, [A, B(, C)]); B runs ``b_module`` (a patched build for some rows)."""
    groups = [("a", A), ("b", B), ("c", C)][:processes]
    authority = Authority.generate("members")
    save_keyring(tmp / "k", Keyring.generate("members").trust(authority.public_key))
    for name, ids in groups:
        save_identity(tmp / f"{name}.identity", authority.issue([(ids[0], ids[-1])]))
    listen = [f"127.0.0.1:{free_port()}" for _ in groups]
    nodes = 20 * processes

    def start(listen: str, peer: str, ids: range, name: str) -> subprocess.Popen[str]:
        module = b_module if name == "b" else "bench._tally"  # A and C count their intake by sender
        args = [
            sys.executable, "-m", module, "run", "--listen", listen, "--peers", peer,
            "--users", f"{ids[0]}-{ids[-1]}", "--nodes", str(nodes), "--rounds", str(rounds),
            "--tick-seconds", str(tick), "--lr", "0.01", "--seed", str(seed),
            "--cluster-key-file", str(tmp / "k"), "--identity", str(tmp / f"{name}.identity"), "--quiet",
            "--clip-factor", str(clip), "--norm-band", str(BAND[0]), "--steady-pull", str(BAND[1]),
            "--sampling", SAMPLING[0],
        ]  # fmt: skip
        with open(tmp / f"{name}.stderr", "w") as log:  # a file: a pipe nobody reads fills and blocks it
            env = {**os.environ, **(b_env or {})} if name == "b" else None
            return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log, text=True, env=env)

    procs = [
        start(listen[k], ",".join(x for j, x in enumerate(listen) if j != k), ids, name)
        for k, (name, ids) in enumerate(groups)
    ]
    try:
        wait_for_round(listen, procs, 1, 120.0)
        yield {n: listen[k] for k, (_, ids) in enumerate(groups) for n in ids}, listen
    except Exception as e:  # say what the processes said
        tails = {name: (tmp / f"{name}.stderr").read_text()[-2000:] for name, _ in groups}
        raise RuntimeError(f"{e}; rc {[p.poll() for p in procs]}; stderr {tails}") from e
    finally:
        stop(procs)


def run(
    name: str, rounds: int, tick: float, clip: float, processes: int = 2, seed: int = 1
) -> dict[str, Any]:
    init = prepare(RunConfig(nodes=20 * processes)).init
    with (
        tempfile.TemporaryDirectory() as tmp,
        cluster(
            Path(tmp), rounds, tick, clip, processes, B_MODULE.get(name, "p2pnode"), seed, B_ENV.get(name)
        ) as (addresses, procs),
    ):
        member = Member(Path(tmp) / "k", load_identity(Path(tmp) / "b.identity"), addresses)
        act = actions(name, init)
        rng = random.Random(7)
        t0, start_models = time.time(), counter(procs[0], "p2pnode_models_received_total")
        start_b = counter(procs[1], "p2pnode_models_received_total")
        start_from = labelled(get(procs[0], "/metrics"), "bench_models_taken_total", "sender")
        c_failed0 = counter(procs[2], "p2pnode_send_failures_total") if processes > 2 else 0.0
        c_from0 = (
            labelled(get(procs[2], "/metrics"), "bench_models_taken_total", "sender") if processes > 2 else {}
        )
        swaps0 = swaps(procs[0])
        views_before = [n["view"] for n in json.loads(get(procs[0], "/status"))["nodes"]]
        done = 0
        stop_flood = threading.Event()
        flood = [
            threading.Thread(target=member.flood_locks, args=(ids, stop_flood), daemon=True)
            for ids in (B[k::8] for k in range(8))
            if name == "lock-flood"
        ]
        if name == "cyclon-steer":
            flood.append(threading.Thread(target=member.steer_caches, args=(stop_flood,), daemon=True))
        if name == "slow-uploads":
            flood.append(threading.Thread(target=member.slow_uploads, args=(init, stop_flood), daemon=True))
        for t in flood:
            t.start()
        trace: list[dict[int, list[float]]] = [{} for _ in procs]  #: per process: round -> its hits
        while True:
            status = [json.loads(get(p, "/status")) for p in procs]
            for k, s in enumerate(status):
                trace[k].setdefault(int(s["round"]), node_hits(s))
            current = min(int(s["round"]) for s in status)
            if max(int(s["round"]) for s in status) >= rounds - 1:
                break  # read before the first process finishes and stops listening (one may lag)
            if current > done:
                done = current
                act(member, current, rng)
            time.sleep(0.05)
        models = counter(procs[0], "p2pnode_models_received_total") - start_models
        models_b = counter(procs[1], "p2pnode_models_received_total") - start_b
        c_failed = counter(procs[2], "p2pnode_send_failures_total") - c_failed0 if processes > 2 else 0.0
        c_from = (
            labelled(get(procs[2], "/metrics"), "bench_models_taken_total", "sender") if processes > 2 else {}
        )
        swaps1 = swaps(procs[0])
        metrics = get(procs[0], "/metrics")
        b_reasons = failure_reasons(get(procs[1], "/metrics"))
        taken_from = labelled(metrics, "bench_models_taken_total", "sender")
        stop_flood.set()  # after the counters: a slow upload ends when A answers it
        seconds = time.time() - t0
        nodes = [n for s in status for n in s["nodes"]]
        views_after = [n["view"] for n in status[0]["nodes"]]
    for t in flood:  # the cluster is stopped: what the attacker still had open fails at once
        t.join(timeout=30)
    hits = [n[status[0]["metric"]] for n in nodes if n.get(status[0]["metric"]) is not None]
    hits_a = [n[status[0]["metric"]] for n in status[0]["nodes"] if n.get(status[0]["metric"]) is not None]
    own = {37, 38, 39}
    return {
        "hr": float(np.mean(hits)) if hits else float("nan"),
        "hr_rounds": over_rounds(trace),
        "hr_a": float(np.mean(hits_a)) if hits_a else float("nan"),  #: A's nodes only
        "intake": models / seconds,  #: every model A's nodes took, the attacker's included
        "honest": (models - member.taken) / seconds,  #: the attacker's taken models off
        #: models A's nodes took from every process but the member's (A's own, C's)
        "others": sum(v - start_from.get(k, 0.0) for k, v in taken_from.items() if k != "b") / seconds,
        "intake_b": models_b / seconds,  #: B's nodes' intake (the member's process)
        "answers": dict(member.answers),
        "views": (sum(len(own & set(v)) for v in views_before), sum(len(own & set(v)) for v in views_after)),
        "a_share": a_share(views_after),  #: A's out-view places that name A's own nodes, at the end
        "swaps": {k: swaps1[k] - swaps0[k] for k in swaps1},
        "c_failed": c_failed,  #: C's sends (to A and B) that failed, with 3 processes
        #: models C's nodes took from A's and C's, with 3 processes
        "c_others": sum(v - c_from0.get(k, 0.0) for k, v in c_from.items() if k != "b") / seconds,
        "metrics_kb": len(metrics) / 1000,  #: A's /metrics page at the end
        "reasons": failure_reasons(metrics),  #: A's failed sends by reason label
        "b_reasons": b_reasons,  #: B's failed sends by reason (its honest nodes' sends to A among them)
        "bounded": labelled(metrics, "p2pnode_models_bounded_total", "how"),  #: A's models moved
    }


def node_hits(status: dict[str, Any]) -> list[float]:
    """The utility (HR@20: 1 or 0) of each of a process's nodes that has been evaluated."""
    key = status["metric"]
    return [float(n[key]) for n in status["nodes"] if n.get(key) is not None]


def over_rounds(trace: list[dict[int, list[float]]]) -> float:
    """Mean HR@20 of all nodes over the rounds the attack ran (from round 1, each round as every
    process reported it first): the issue's measure, far less noisy than one round's 40 hits."""
    common = set.intersection(*(set(t) for t in trace)) - {0}
    per_round = [
        np.mean([h for t in trace for h in t[r]]) for r in sorted(common) if all(t[r] for t in trace)
    ]
    return float(np.mean(per_round)) if per_round else float("nan")


def a_share(views: list[list[int]]) -> float:
    """The share of A's out-view places that name A's own nodes."""
    places = sum(len(v) for v in views)
    return sum(len(set(v) & set(A)) for v in views) / places if places else float("nan")


def bounded(r: dict[str, Any]) -> str:
    """A's taken models the clip, the norm band and the steady-pull memory moved."""
    return "/".join(f"{r['bounded'].get(how, 0):.0f}" for how in ("clipped", "banded", "damped"))


def failure_reasons(metrics: str) -> dict[str, float]:
    """A process's failed sends by their ``reason`` label, from its /metrics page."""
    return labelled(metrics, "p2pnode_send_failures_total", "reason")


def labelled(metrics: str, name: str, label: str) -> dict[str, float]:
    """A counter of a process's /metrics page summed over its nodes, by the value of ``label``."""
    out: dict[str, float] = {}
    for line in metrics.splitlines():
        if line.startswith(name + "{"):
            value = line.split(f'{label}="', 1)[1].split('"', 1)[0]
            out[value] = out.get(value, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


def swaps(address: str) -> dict[str, float]:
    """The PeerSwap transactions the process's nodes initiated so far, by outcome, and the swaps
    handed to them that they refused as unconfirmed by their own process's nodes or vetoed for
    the views they would hand them."""
    text = get(address, "/metrics")
    out = {"committed": 0.0, "aborted": 0.0, "unconfirmed": 0.0, "vetoed": 0.0}
    for line in text.splitlines():
        if line.startswith("p2pnode_view_swaps_total{"):
            for k in out:
                if f'outcome="{k}"' in line:
                    out[k] += float(line.rsplit(" ", 1)[1])
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--tick-seconds", type=float, default=0.01)
    parser.add_argument(
        "--attacks", nargs="+", default=[a for a in ATTACKS if a != "cyclon-steer"], choices=ATTACKS
    )
    parser.add_argument(
        "--clip-factor", type=float, default=1.0, help="the processes' --clip-factor (daemon default: 1)"
    )
    parser.add_argument(
        "--norm-band", type=float, default=0.05, help="the processes' --norm-band (daemon: 0.05; 0: off)"
    )
    parser.add_argument(
        "--steady-pull", type=float, default=0.7, help="the processes' --steady-pull (daemon: 0.7; 0: off)"
    )
    parser.add_argument(
        "--processes", type=int, default=2, choices=(2, 3), help="3: an honest process C beside A and B"
    )
    parser.add_argument(
        "--sampling", default="peerswap", choices=("peerswap", "cyclon"), help="the processes' --sampling"
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=1,
        help="runs of each row, seeds 1, 2, ... (clean and attack paired by seed): means, and the "
        "paired HR difference over the rounds as mean ± sd",
    )
    args = parser.parse_args(argv)
    if ("cyclon-steer" in args.attacks) != (args.sampling == "cyclon") or (
        args.sampling == "cyclon" and set(args.attacks) - {"clean", "cyclon-steer"}
    ):
        parser.error("--sampling cyclon runs the cyclon-steer attack, and only it")
    BAND[:] = [args.norm_band, args.steady_pull]
    SAMPLING[:] = [args.sampling]
    print(
        f"{args.processes} x 20 nodes with identities, {args.sampling}, Base GL, lr 0.01, "
        f"{args.rounds} rounds, "
        f"--clip-factor {args.clip_factor}, --norm-band {args.norm_band}, --steady-pull {args.steady_pull}; "
        "attacker: B's operator"
    )
    seeds = range(1, 1 + args.repeats)

    def runs(name: str) -> list[dict[str, Any]]:
        return [run(name, args.rounds, args.tick_seconds, args.clip_factor, args.processes, s) for s in seeds]

    cleans = runs("clean")
    clean = merge(cleans)
    third = args.processes > 2
    print(
        f"{'attack':<18} {'HR@20':>6} {'Δ':>6} {'A only':>6} {'rounds':>6} {'Δ rounds':>12}  "
        f"{'A intake/s':>10} {'ratio':>6} {'honest':>6} {'others':>6}  {'A swaps ok/aborted':>18}  "
        f"{'A clip/band/damp':>16}  answers to the attack"
    )
    print(
        f"{'clean':<18} {clean['hr']:6.3f} {0:6.3f} {clean['hr_a']:6.3f} {clean['hr_rounds']:6.3f} "
        f"{spread([c['hr_rounds'] for c in cleans]):>12}  {clean['intake']:10.1f} {1:6.2f} "
        f"{1:6.2f} {1:6.2f}  "
        f"{clean['swaps']['committed']:8.0f}/{clean['swaps']['aborted']:<9.0f}  {bounded(clean):>16}  -"
        + (
            f"  (C's failed sends {clean['c_failed']:.0f}, C's intake from A and C {clean['c_others']:.1f}/s)"
            if third
            else ""
        ),
        flush=True,
    )
    for name in args.attacks:
        if name == "clean":
            continue
        each = runs(name)
        r = merge(each)
        sw = r["swaps"]
        paired = [a["hr_rounds"] - c["hr_rounds"] for a, c in zip(each, cleans, strict=True)]
        extra = (
            f"; A's out-view places held by 37-39: {r['views'][0]:.0f} -> {r['views'][1]:.0f}, swaps A's "
            f"nodes refused as unconfirmed: {sw['unconfirmed']:.0f}"
            if name in ("swap-forgery", "eclipse-poison")
            else f"; A's /metrics {clean['metrics_kb']:.0f} -> {r['metrics_kb']:.0f} kB, A's failed sends by "
            f"reason {json.dumps(r['reasons'], sort_keys=True)}"
            if name == "label-blowup"
            else f"; B's intake {clean['intake_b']:.1f} -> {r['intake_b']:.1f}/s, A's out-view places "
            f"naming A's nodes at the end {clean['a_share']:.2f} -> {r['a_share']:.2f}"
            if name == "cyclon-steer"
            else f"; A's out-view places naming A's nodes at the end {clean['a_share']:.2f} -> "
            f"{r['a_share']:.2f}, swaps A's nodes refused as unconfirmed {sw['unconfirmed']:.0f}, "
            f"vetoed {sw['vetoed']:.0f}"
            if name in ("swap-takeover", "takeover-keep", "takeover-poison", "freeride")
            else ""
        )
        print(
            f"{name:<18} {r['hr']:6.3f} {r['hr'] - clean['hr']:+6.3f} {r['hr_a']:6.3f} {r['hr_rounds']:6.3f} "
            f"{spread(paired, signed=True):>12}  {r['intake']:10.1f} "
            f"{r['intake'] / clean['intake']:6.2f} {r['honest'] / clean['honest']:6.2f} "
            f"{r['others'] / clean['others']:6.2f}  "
            f"{sw['committed']:8.0f}/{sw['aborted']:<9.0f}  "
            f"{bounded(r):>16}  {json.dumps(r['answers'], sort_keys=True)}{extra}; B's failed sends "
            f"{json.dumps(clean['b_reasons'], sort_keys=True)} -> "
            f"{json.dumps(r['b_reasons'], sort_keys=True)}"
            + (
                f"  (C's failed sends {r['c_failed']:.0f}, C's intake from A and C "
                f"x{r['c_others'] / clean['c_others']:.2f})"
                if third
                else ""
            ),
            flush=True,
        )


def spread(values: Sequence[float], signed: bool = False) -> str:
    """``mean ± sd`` of ``values`` (the mean alone for one)."""
    mean = f"{np.mean(values):+.3f}" if signed else f"{np.mean(values):.3f}"
    return f"{mean} ± {np.std(values, ddof=1):.3f}" if len(values) > 1 else mean


def merge(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The mean of each figure over repeated runs (per key for counts by label; answers summed)."""

    def mean(values: list[Any]) -> Any:
        first = values[0]
        if isinstance(first, dict):
            keys = sorted({k for v in values for k in v})
            if all(isinstance(v.get(k, 0), int) for v in values for k in v):  # answer counts
                return {k: sum(v.get(k, 0) for v in values) for k in keys}
            return {k: float(np.mean([v.get(k, 0.0) for v in values])) for k in keys}
        if isinstance(first, tuple):
            return tuple(float(np.mean(col)) for col in zip(*values, strict=True))
        return float(np.mean(values))

    return {key: mean([r[key] for r in runs]) for key in runs[0]}


if __name__ == "__main__":
    main()
