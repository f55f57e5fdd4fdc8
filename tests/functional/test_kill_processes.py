"""Real processes: a third of the network is killed with SIGKILL, one process returns from its state."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from p2pnode.data import checkpoint
from p2pnode.trust.auth import Keyring, save_keyring
from tests.functional.helpers import free_ports, get_json, get_text, run_p2pnode, wait_until

pytestmark = pytest.mark.functional
PROCS = 6  # two nodes each: 12 nodes


def counter(address: str, name: str) -> float:
    # one read, no retry: a node busy with its 5 ms ticks on a loaded machine may take seconds
    text = get_text(address, "/metrics", timeout=20.0)
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{"))


def start(k: int, addrs: list[str], peers: list[str], tmp: Path) -> subprocess.Popen[str]:
    return run_p2pnode(
        "run", "--listen", addrs[k], "--peers", ",".join(peers),
        "--users", f"{2 * k}-{2 * k + 1}", "--nodes", str(2 * PROCS), "--rounds", "100000",
        "--tick-seconds", "0.005", "--sampling", "cyclon", "--lr", "0.01",
        "--state-dir", str(tmp / f"state{k}"), "--checkpoint-every", "4",
        "--cluster-key-file", str(tmp / "k"), "--quiet",
        stdout=subprocess.DEVNULL,
    )  # fmt: skip


def wait_round(address: str, at_least: int, timeout: float = 60.0) -> int:
    def reached() -> int:
        rnd = int(get_json(address, "/status")["round"])
        return rnd if rnd >= at_least else 0

    return wait_until(reached, timeout, f"{address} reaching round {at_least}", every=0.3)


def test_survivors_keep_learning_and_a_killed_process_rejoins_from_its_checkpoint(tmp_path: Path) -> None:
    save_keyring(tmp_path / "k", Keyring.generate("kill"))
    addrs = [f"127.0.0.1:{p}" for p in free_ports(PROCS)]
    procs = {k: start(k, addrs, [a for a in addrs if a != addrs[k]], tmp_path) for k in range(PROCS)}
    survivors = [0, 1, 2, 3]
    try:
        for a in addrs:
            wait_round(a, 8)  # at least two checkpoints written
        for k in (4, 5):  # a third of the network dies, without warning
            procs[k].send_signal(signal.SIGKILL)
            procs[k].wait(timeout=10)
        saved = checkpoint.load(tmp_path / "state4" / "node-8.ckpt")
        assert saved is not None and saved["round"] >= 4
        reached, _ = json.loads((tmp_path / "state4" / "progress.json").read_text())
        assert reached >= max(8, saved["round"])  # how far it got: what its resume will replay
        steps0 = sum(counter(addrs[k], "p2pnode_local_steps_total") for k in survivors)
        time.sleep(5.0)
        steps1 = sum(counter(addrs[k], "p2pnode_local_steps_total") for k in survivors)
        procs[4] = start(4, addrs, [addrs[k] for k in survivors], tmp_path)  # back, from its state
        back_round = wait_round(addrs[4], saved["round"] + 2)
        time.sleep(4.0)
        received_back = counter(addrs[4], "p2pnode_models_received_total")
        steps2 = sum(counter(addrs[k], "p2pnode_local_steps_total") for k in survivors)
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        codes = {k: p.wait(timeout=60) for k, p in procs.items()}
    assert steps1 > steps0 and steps2 > steps1  # the survivors kept training all along
    assert back_round >= saved["round"]  # the returned process continued its rounds, not from 0
    assert received_back > 0  # and its nodes get models again
    assert all(codes[k] == 0 for k in (*survivors, 4)), {k: procs[k].stderr.read() for k in procs if codes[k]}  # type: ignore[union-attr]
