"""Open membership over real processes (issue #19): start a network alone, join it through any
live process at any time, leave it, and be out of every live view within the stated bound."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from p2pnode.auth import Keyring, save_keyring
from tests.functional.test_http_nodes import ports
from tests.functional.test_kill_processes import get

pytestmark = pytest.mark.functional
TICK = 0.005  # 0.5 s rounds
MAX_AGE = 10  # CyclonConfig.max_age: gone from every live cache within MAX_AGE + 2 rounds


def start(listen: str, users: str, peers: str, tmp: Path) -> subprocess.Popen[str]:
    args = [
        sys.executable, "-m", "p2pnode", "run", "--listen", listen, "--users", users,
        "--nodes", "12", "--sampling", "cyclon", "--tick-seconds", str(TICK), "--lr", "0.01",
        "--cluster-key-file", str(tmp / "k"), "--quiet",
    ]  # fmt: skip
    if peers:
        args += ["--peers", peers]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def views(address: str) -> dict[int, list[int]]:
    with contextlib.suppress(OSError):
        return {n["id"]: n["view"] for n in json.loads(get(address, "/status"))["nodes"]}
    return {}


def round_of(address: str) -> int:
    return int(json.loads(get(address, "/status"))["round"])


def wait_for(check, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.time() + timeout
    while time.time() < deadline:
        if check():
            return
        time.sleep(0.25)
    raise AssertionError(what)


def test_a_network_grows_from_one_seed_and_a_leaver_drops_out_of_every_view(tmp_path: Path) -> None:
    save_keyring(tmp_path / "k", Keyring.generate("open"))
    a, b, c = (f"127.0.0.1:{p}" for p in ports(3))
    procs = {"a": start(a, "0-3", "", tmp_path)}  # alone, without --rounds: a daemon
    try:
        wait_for(lambda: views(a), 60, "the first process did not start alone")
        procs["b"] = start(b, "4-7", a, tmp_path)
        wait_for(lambda: views(b), 60, "the second process did not join")
        time.sleep(4 * 100 * TICK)
        procs["c"] = start(c, "8-11", b, tmp_path)  # joins late, through the second process

        def mixed() -> bool:  # the late joiners are in the first's views, and the first in theirs
            va, vc = views(a), views(c)
            in_a = {n for v in va.values() for n in v}
            in_c = {n for v in vc.values() for n in v}
            return bool(in_a & set(range(8, 12))) and bool(in_c & set(range(0, 4)))

        wait_for(mixed, 20 * 100 * TICK + 10, "the late joiner did not mix with the first process")
        left_at = round_of(a)
        procs["b"].send_signal(signal.SIGTERM)  # leaves: tells its peers
        out, err = procs["b"].communicate(timeout=30)
        assert procs["b"].returncode == 0, err[-2000:]
        assert "HR@20" in out  # it stopped gracefully and printed its summary

        def gone() -> bool:
            left = set(range(4, 8))
            return all(not (set(v) & left) for addr in (a, c) for v in views(addr).values())

        wait_for(gone, 4 * (MAX_AGE + 2) * 100 * TICK + 10, "the leaver stayed in a live view")
        elapsed_rounds = round_of(a) - left_at  # counted by the process, whatever its pace
        assert all(views(addr) for addr in (a, c))  # the others run on
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.terminate()
        ended = {}
        for name, p in procs.items():
            with contextlib.suppress(subprocess.TimeoutExpired, ValueError):
                ended[name] = p.communicate(timeout=30)
    assert elapsed_rounds <= MAX_AGE + 2, elapsed_rounds
    assert procs["a"].returncode == 0 and procs["c"].returncode == 0
    assert "starts a network (no --peers)" in ended["a"][1]  # the first process says it waits
