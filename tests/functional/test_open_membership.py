"""Open membership over real processes: start a network alone, join it through any
live process at any time, leave it, and be out of every live view within the stated bound."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from p2pnode.trust.auth import Keyring, save_keyring
from tests.functional.helpers import free_ports, get_json, run_p2pnode, wait_rounds, wait_until
from tests.functional.test_kill_processes import counter

pytestmark = pytest.mark.functional
TICK = 0.005  # 0.5 s rounds
MAX_AGE = 10  # CyclonConfig.max_age: gone from every live cache within MAX_AGE + 2 rounds


def start(listen: str, users: str, peers: str, tmp: Path) -> subprocess.Popen[str]:
    args = [
        "run", "--listen", listen, "--users", users,
        "--nodes", "12", "--sampling", "cyclon", "--tick-seconds", str(TICK), "--lr", "0.01",
        "--cluster-key-file", str(tmp / "k"), "--quiet",
    ]  # fmt: skip
    if peers:
        args += ["--peers", peers]
    return run_p2pnode(*args)


def views(address: str) -> dict[int, list[int]]:
    with contextlib.suppress(OSError):
        return {n["node"]: n["view"] for n in get_json(address, "/status")["nodes"]}
    return {}


def nodes(address: str) -> list[dict[str, Any]]:
    """Each hosted node's round and view, read in one response."""
    return list(get_json(address, "/status")["nodes"])


def test_a_network_grows_from_one_seed_and_a_leaver_drops_out_of_every_view(tmp_path: Path) -> None:
    save_keyring(tmp_path / "k", Keyring.generate("open"))
    a, b, c = (f"127.0.0.1:{p}" for p in free_ports(3))
    procs = {"a": start(a, "0-3", "", tmp_path)}  # alone, without --rounds: a daemon
    try:
        wait_until(lambda: views(a), 60, "the first process did not start alone")
        procs["b"] = start(b, "4-7", a, tmp_path)
        wait_until(lambda: views(b), 60, "the second process did not join")
        time.sleep(4 * 100 * TICK)
        procs["c"] = start(c, "8-11", b, tmp_path)  # joins late, through the second process

        def mixed() -> bool:  # the late joiners are in the first's views, and the first in theirs
            va, vc = views(a), views(c)
            in_a = {n for v in va.values() for n in v}
            in_c = {n for v in vc.values() for n in v}
            return bool(in_a & set(range(8, 12))) and bool(in_c & set(range(0, 4)))

        # within 20 of the late joiner's own rounds once it serves (rounds stretch on a busy machine)
        wait_until(lambda: views(c), 120, "the late joiner did not start")
        wait_rounds(mixed, c, 20, "the late joiner did not mix with the first process")
        procs["b"].send_signal(signal.SIGTERM)  # leaves: tells its peers
        out, err = procs["b"].communicate(timeout=30)
        assert procs["b"].returncode == 0, err[-2000:]
        assert "HR@20" in out  # it stopped gracefully and printed its summary
        # The bound is per node and in that node's own rounds, from the moment the leaver is gone
        # (its last shuffle may still carry fresh entries of itself while it shuts down).
        left_at = {n["node"]: n["round"] for addr in (a, c) for n in nodes(addr)}
        last_seen: dict[int, int] = {}  # node -> the last round its view was seen holding a leaver

        def gone() -> bool:
            clean = True
            for addr in (a, c):
                for n in nodes(addr):
                    if set(n["view"]) & set(range(4, 8)):
                        last_seen[n["node"]] = n["round"]
                        clean = False
            return clean

        wait_rounds(gone, a, 4 * (MAX_AGE + 2), "the leaver stayed in a live view", 0.05)
        elapsed_rounds = max((last_seen[n] - left_at[n] + 1 for n in last_seen), default=0)
        assert all(views(addr) for addr in (a, c))  # the others run on
        left_msgs = sum(counter(addr, "p2pnode_peers_left_total") for addr in (a, c))
        assert left_msgs >= 1  # the leaver's Leave messages arrived and were counted
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.terminate()
        ended = {}
        for name, p in procs.items():
            with contextlib.suppress(subprocess.TimeoutExpired, ValueError):
                ended[name] = p.communicate(timeout=30)
    assert elapsed_rounds <= MAX_AGE + 2, (elapsed_rounds, last_seen, left_at)
    assert procs["a"].returncode == 0 and procs["c"].returncode == 0
    assert "starts a network (no --peers)" in ended["a"][1]  # the first process says it waits
