"""The whole deploy on a three-host testbed built on this machine (``deploy/testbed.sh``).

Each host is a network namespace on a bridge with a container booting systemd and sshd. The test
runs what a user runs against a LAN: ``p2pnode deploy install`` (Ansible over ssh: wheelhouse,
venv, dataset, key, units), ``start``, ``watch``, the fault scenario (``deploy/scenario.sh``: a
cut link, a tbf bandwidth limit, 30% packet loss with nftables, SIGKILL of a host's nodes) and
``collect``. Nodes on different hosts must exchange models and learn, the killed process must be
restarted by systemd and resume from its checkpoint, and the collected report must place every
fault on the rounds. The testbed is torn down even when the test fails.

Needs root, systemd-nspawn, sshd, nftables, tc and ansible-core; skipped (saying which) otherwise.
Takes 3-5 minutes, most of it ``pip install`` of torch on three hosts at once, so it is marked
``testbed`` and left out of a plain ``pytest`` run: ``.venv/bin/python -m pytest -m testbed``
runs it (CI runs it after the suite).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.functional.helpers import get_json, wait_until

ROOT = Path(__file__).resolve().parents[2]
TESTBED = ROOT / "deploy" / "testbed.sh"
ANSIBLE = Path(sys.executable).parent / "ansible-playbook"
TOOLS = ("systemd-nspawn", "sshd", "nft", "tc", "ip", "ssh")
MISSING = [t for t in TOOLS if shutil.which(t) is None and not Path(f"/usr/sbin/{t}").exists()]

pytestmark = [
    pytest.mark.functional,
    pytest.mark.slow,
    pytest.mark.testbed,
    pytest.mark.skipif(os.geteuid() != 0, reason="the testbed needs root"),
    pytest.mark.skipif(bool(MISSING), reason=f"the testbed needs {', '.join(MISSING)}"),
    pytest.mark.skipif(
        not ANSIBLE.exists(), reason="ansible-core is not installed (pip install -e '.[deploy]')"
    ),
]
NODES_PER_HOST = 16
ROUNDS = 50


@pytest.fixture
def testbed(tmp_path: Path) -> Iterator[dict[str, str]]:
    tag = os.getpid() % 1000
    env = dict(
        os.environ,
        P2PNODE_TESTBED=str(tmp_path / "testbed"),
        P2PNODE_TESTBED_PREFIX=f"pt{tag}",
        P2PNODE_TESTBED_NET=f"10.{200 + tag % 50}.{tag % 250}",
    )
    try:
        up = subprocess.run(["bash", str(TESTBED), "up", "3"], env=env, capture_output=True, text=True)
        assert up.returncode == 0, up.stdout + up.stderr
        yield env
    finally:
        down = subprocess.run(["bash", str(TESTBED), "down"], env=env, capture_output=True, text=True)
        links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
        spaces = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert down.returncode == 0, down.stderr
        assert f"pt{tag}" not in links and f"pt{tag}-" not in spaces  # nothing left behind


def deploy(env: dict[str, str], *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "p2plab", "deploy", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, f"deploy {args[0]}: {proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def status(address: str) -> dict[str, Any]:
    return dict(get_json(address, "/status"))


def test_deploy_on_a_three_host_testbed_learns_through_faults_and_collects(
    testbed: dict[str, str], tmp_path: Path
) -> None:
    env = dict(testbed, P2PNODE_WHEELHOUSE=str(Path.home() / ".cache" / "p2pnode" / "wheelhouse"))
    tb = Path(env["P2PNODE_TESTBED"])
    net = env["P2PNODE_TESTBED_NET"]
    inv = tmp_path / "inventory.yml"
    base = (tb / "inventory.yml").read_text().split("    p2pnode_settings:")[0]
    base = base.replace("p2pnode_nodes: 20", f"p2pnode_nodes: {NODES_PER_HOST}")
    inv.write_text(
        base
        + f"    p2pnode_settings: {{rounds: {ROUNDS}, tick_seconds: 0.01, seed: 3, "
        + "learning: {lr: 0.01}, attack: {kind: cia, target_k: 5, attackers: '0,20,40'}}\n"
    )
    out = tmp_path / "run"
    common = ["-i", str(inv), "--out", str(out)]

    plan = deploy(env, "check", "-i", str(inv)).stdout
    assert f"{3 * NODES_PER_HOST} nodes" in plan and f"{net}.13:7070" in plan

    deploy(env, "install", *common)
    (tb / "faults.jsonl").write_text("")
    deploy(env, "start", "--fresh", *common)
    addresses = [f"{net}.{11 + k}:7070" for k in range(3)]

    def all_running() -> bool:  # every process up and past its first round
        return all(status(a)["round"] >= 1 for a in addresses)

    wait_until(all_running, 90, "the processes starting", every=0.5)

    # the fault scenario runs on the wall clock from now (its kill at 22 s lands mid-run)
    scenario = subprocess.Popen(
        ["bash", str(ROOT / "deploy" / "scenario.sh"), "1"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        h1 = status(addresses[0])
        remote = {n for node in h1["nodes"] for n in node["view"] if n >= NODES_PER_HOST}
        assert remote  # h1's nodes gossip with nodes hosted on h2 and h3
        out_, err_ = scenario.communicate(timeout=120)
        assert scenario.returncode == 0, out_ + err_
    finally:
        if scenario.poll() is None:
            scenario.kill()
    shown = deploy(env, "status", *common).stdout
    units = [line for line in shown.splitlines() if "p2pnode@0" in line]
    assert len(units) == 3 and "TASK" not in shown  # systemd's view, one line per process
    assert not any("failed" in line for line in units), shown
    # h2, killed at the scenario's end, is back (systemd restarted it)
    wait_until(all_running, 90, "the killed process coming back", every=0.5)
    watch = deploy(env, "watch", "-i", str(inv), "--count", "1").stdout
    assert all(a in watch for a in addresses) and "not up yet" not in watch and "gone (" not in watch
    report = deploy(env, "collect", "--wait", "120", "--faults", str(tb / "faults.jsonl"), *common).stdout

    summary = json.loads((out / "collected" / "summary.json").read_text())
    procs = {p["host"]: p for p in summary["processes"]}
    assert set(procs) == {"h1", "h2", "h3"}
    assert all(p["rounds"] == ROUNDS for p in procs.values())  # every process ran to the end
    assert summary["hit_ratio_at_20"] > 0.3  # random ranking: 0.198
    assert summary["history"][-1]["hit_ratio_at_20"] > summary["history"][0]["hit_ratio_at_20"]
    assert summary["send_failures"] > 0  # the cut and the losses were felt across hosts
    # the SIGKILLed process: restarted by systemd, back from its checkpoint
    assert procs["h2"]["restarts"] >= 1
    assert procs["h2"]["resumes"] and procs["h2"]["resumes"][0]["round"] >= 10
    assert "cia" in summary  # the attackers on each host
    # the deployment set against the simulator's runs of its setting (p2plab/selfcheck.py)
    check = summary["self_check"]
    assert len(check["simulator"]) == 3 and check["line"] in report
    faults = summary["faults"]
    assert [(f["host"], f["fault"], f["action"]) for f in faults] == [
        ("h3", "cut", "on"),
        ("h3", "all", "off"),
        ("h2", "tbf", "on"),
        ("h2", "all", "off"),
        ("h1", "drop", "on"),
        ("h1", "all", "off"),
        ("h2", "kill", "on"),
    ]
    rounds = [f["round"] for f in faults]
    assert all(r is not None for r in rounds[1:])  # placed on the rounds of the run
    assert "## Faults" in report and (out / "collected" / "h2" / "journal.log").exists()
    for host in ("h1", "h2", "h3"):  # each process's final /metrics page came back too
        assert (
            "p2pnode_models_received_total" in (out / "collected" / host / "metrics" / "0.prom").read_text()
        )

    deploy(env, "uninstall", *common)
    key, known = tb / "id_ed25519", tb / "known_hosts"
    paths = "/opt/p2pnode /etc/p2pnode /var/lib/p2pnode /etc/systemd/system/p2pnode@.service"
    left = subprocess.run(
        ["ssh", "-i", str(key), "-o", f"UserKnownHostsFile={known}", "-o", "BatchMode=yes",
         f"root@{net}.12", f"ls -d {paths}; id p2pnode"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert left.stdout.strip() == ""  # nothing install made is left on the host
    assert left.stderr.count("No such file") == 4 and "no such user" in left.stderr
