"""A network partition between two hosts (network namespaces, nftables drop rules), then healing.

Two ``p2pnode run`` processes, each in its own network namespace joined by a veth pair, form one
12-node network. An nftables rule in the first namespace drops all traffic to and from the other
one: sends across fail while both halves keep learning on their own. Deleting the rule heals the
partition: failed peers are probed again and sends across succeed. Needs root, ``ip`` and
``nft``; the namespaces are removed even when the test fails. Traffic stays inside them.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from p2pnode.trust.auth import Keyring, save_keyring
from tests.functional.helpers import wait_until

pytestmark = [
    pytest.mark.functional,
    pytest.mark.skipif(
        os.geteuid() != 0 or not all(shutil.which(t) for t in ("ip", "nft", "curl")),
        reason="needs root, iproute2, nftables and curl (network namespaces)",
    ),
]
PORT = 7070


def sh(*args: str) -> str:
    return subprocess.run(args, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def two_hosts() -> Iterator[tuple[str, str, str, str]]:
    tag = f"{os.getpid() % 100000}"
    ns_a, ns_b = f"p2pA{tag}", f"p2pB{tag}"
    net = f"10.{77 + os.getpid() % 50}.{os.getpid() % 250}"
    ip_a, ip_b = f"{net}.1", f"{net}.2"
    try:
        sh("ip", "netns", "add", ns_a)
        sh("ip", "netns", "add", ns_b)
        sh(
            "ip",
            "link",
            "add",
            f"va{tag}",
            "netns",
            ns_a,
            "type",
            "veth",
            "peer",
            "name",
            f"vb{tag}",
            "netns",
            ns_b,
        )
        for ns, dev, addr in ((ns_a, f"va{tag}", ip_a), (ns_b, f"vb{tag}", ip_b)):
            sh("ip", "-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        yield ns_a, ns_b, ip_a, ip_b
    finally:
        for ns in (ns_a, ns_b):
            subprocess.run(["ip", "netns", "pids", ns], capture_output=True)
            for pid in subprocess.run(
                ["ip", "netns", "pids", ns], capture_output=True, text=True
            ).stdout.split():
                subprocess.run(["kill", "-9", pid], capture_output=True)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def status(ns: str, ip: str) -> dict[str, object]:
    out = subprocess.run(
        ["ip", "netns", "exec", ns, "curl", "-s", "-m", "2", f"http://{ip}:{PORT}/status"],
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out) if out else {}


def metric(ns: str, ip: str, name: str) -> float:
    """Sum of a counter over the nodes of one host, read from inside its namespace."""
    out = subprocess.run(
        ["ip", "netns", "exec", ns, "curl", "-s", "-m", "2", f"http://{ip}:{PORT}/metrics"],
        capture_output=True,
        text=True,
    ).stdout
    return sum(float(line.rsplit(" ", 1)[1]) for line in out.splitlines() if line.startswith(name + "{"))


def test_two_halves_learn_apart_and_mix_again_after_the_partition_heals(
    two_hosts: tuple[str, str, str, str], tmp_path: Path
) -> None:
    ns_a, ns_b, ip_a, ip_b = two_hosts
    save_keyring(tmp_path / "k", Keyring.generate("part"))
    common = [
        "--nodes",
        "12",
        "--rounds",
        "100000",
        "--tick-seconds",
        "0.005",
        "--lr",
        "0.01",
        "--sampling",
        "static",
        "--cluster-key-file",
        str(tmp_path / "k"),
        "--quiet",
    ]
    procs = []
    for ns, ip, other, users in ((ns_a, ip_a, ip_b, "0-5"), (ns_b, ip_b, ip_a, "6-11")):
        cmd = [
            "ip",
            "netns",
            "exec",
            ns,
            sys.executable,
            "-m",
            "p2pnode",
            "run",
            "--listen",
            f"{ip}:{PORT}",
            "--peers",
            f"{other}:{PORT}",
            "--users",
            users,
            *common,
        ]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    try:
        wait_until(
            lambda: status(ns_a, ip_a).get("round") and status(ns_b, ip_b).get("round"),
            60,
            "both hosts' processes past their first round",
            every=0.5,
        )
        time.sleep(2.0)

        def fails() -> float:
            return metric(ns_a, ip_a, "p2pnode_send_failures_total") + metric(
                ns_b, ip_b, "p2pnode_send_failures_total"
            )

        def steps() -> tuple[float, float]:  # local training steps: each half learning
            return (
                metric(ns_a, ip_a, "p2pnode_local_steps_total"),
                metric(ns_b, ip_b, "p2pnode_local_steps_total"),
            )

        f0 = fails()
        # partition: drop everything between the two hosts, both directions, inside host A

        def nft_a(*args: str) -> None:
            sh("ip", "netns", "exec", ns_a, "nft", *args)

        nft_a("add", "table", "inet", "p2ppart")
        for chain, match in (("input", "saddr"), ("output", "daddr")):
            nft_a("add", "chain", "inet", "p2ppart", chain, f"{{ type filter hook {chain} priority 0 ; }}")
            nft_a("add", "rule", "inet", "p2ppart", chain, "ip", match, ip_b, "drop")
        time.sleep(1.0)
        steps0 = steps()
        time.sleep(11.0)
        steps1 = steps()
        f1 = fails()
        # heal
        nft_a("delete", "table", "inet", "p2ppart")
        time.sleep(12.0)  # requests cut by the partition time out (10 s); their retries go through
        f2 = fails()
        time.sleep(6.0)
        f3 = fails()
        sent_a = sum(n["models_sent"] for n in status(ns_a, ip_a)["nodes"])  # type: ignore[index,union-attr]
        time.sleep(2.0)
        final_a = status(ns_a, ip_a)
        sent_a2 = sum(n["models_sent"] for n in final_a["nodes"])  # type: ignore[index,union-attr]
        views_a = [n["view"] for n in final_a["nodes"]]  # type: ignore[index,union-attr]
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
    assert all(p.returncode == 0 for p in procs), [p.stderr.read() if p.stderr else "" for p in procs]
    assert f1 > f0  # sends across the partition failed
    assert steps1[0] > steps0[0] and steps1[1] > steps0[1]  # both halves kept training apart
    assert f3 == f2  # healed: no send fails any more
    assert sent_a2 > sent_a  # and host A keeps sending, without failures, ...
    assert any(peer >= 6 for view in views_a for peer in view)  # ... to views that reach host B
