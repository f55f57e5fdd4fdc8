"""Memory and CPU per hosted node, for sizing a deployment (deploy/README.md).

Starts one ``p2pnode run`` process per size (25, 50, 100, 200 nodes by default; Base GL, PeerSwap,
GMF on ML-100k, 1 s rounds), lets it settle, then samples its resident memory and CPU time from
/proc over a steady window of rounds. Prints RSS and CPU share per process and the fitted cost of
one more node (slope over the sizes, so the interpreter's fixed cost is not counted per node).

    .venv/bin/python -m bench.node_footprint [--sizes 25,50,100,200] [--rounds 20] [--attack]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from p2plab.launch import free_ports

TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")


def status(address: str) -> dict[str, object]:
    with urllib.request.urlopen(f"http://{address}/status", timeout=3) as resp:
        return dict(json.loads(resp.read()))


def sample(pid: int) -> tuple[float, float]:
    """(RSS in MiB, CPU seconds) of a process."""
    rss = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            rss = int(line.split()[1]) / 1024
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / TICKS_PER_SECOND
    return rss, cpu


def wait_round(address: str, at_least: int, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if int(str(status(address)["round"])) >= at_least:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{address} did not reach round {at_least}")


def measure(nodes: int, rounds: int, attack: bool) -> dict[str, float]:
    port = free_ports(1)[0]
    address = f"127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as tmp:
        args = [
            sys.executable, "-m", "p2pnode", "run", "--listen", address, "--nodes", str(nodes),
            "--rounds", str(rounds), "--tick-seconds", "0.01", "--quiet",
            "--out", tmp, *(["--attack", "cia", "--target-k", "10"] if attack else []),
        ]  # fmt: skip
        env = dict(os.environ, OMP_NUM_THREADS="1")
        proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            warm = max(3, rounds // 4)
            wait_round(address, warm)
            rss0, cpu0 = sample(proc.pid)
            t0 = time.perf_counter()
            wait_round(address, rounds - 2)
            rss1, cpu1 = sample(proc.pid)
            wall = time.perf_counter() - t0
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
    return {"nodes": nodes, "rss_mib": max(rss0, rss1), "cpu_share": (cpu1 - cpu0) / wall}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="25,50,100,200")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--attack", action="store_true", help="every node also runs the CIA")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = [measure(n, args.rounds, args.attack) for n in sizes]
    print(f"{'nodes':>6} {'RSS MiB':>9} {'CPU (cores)':>12}   (1 s rounds, steady window)")
    for r in rows:
        print(f"{r['nodes']:>6.0f} {r['rss_mib']:>9.0f} {r['cpu_share']:>12.2f}")
    if len(rows) >= 2:
        n = [r["nodes"] for r in rows]
        mean_n = sum(n) / len(n)

        def slope(key: str) -> float:
            ys = [r[key] for r in rows]
            mean_y = sum(ys) / len(ys)
            return sum((x - mean_n) * (y - mean_y) for x, y in zip(n, ys, strict=True)) / sum(
                (x - mean_n) ** 2 for x in n
            )

        per_rss, per_cpu = slope("rss_mib"), slope("cpu_share")
        fixed = rows[0]["rss_mib"] - per_rss * rows[0]["nodes"]
        print(
            f"per node: {per_rss:.2f} MiB RSS, {per_cpu * 1000:.1f} millicores at 1 s rounds "
            f"({per_cpu * 1000 / 3:.1f} at 3 s rounds); fixed per process: ~{fixed:.0f} MiB"
        )


if __name__ == "__main__":
    main()
