"""`p2pnode run` as a real OS process: progress, /metrics via `p2pnode metrics`, SIGTERM."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from p2plab.follow import follow, scrape
from tests.functional.helpers import free_ports, get_text, run_p2pnode, wait_until

pytestmark = pytest.mark.functional


def start(tmp_path: Path, port: int, rounds: int, extra: list[str]) -> subprocess.Popen[str]:
    return run_p2pnode(
        "run", "--nodes", "8", "--users", "0-7", "--listen", f"127.0.0.1:{port}", "--rounds", str(rounds),
        "--tick-seconds", "0.005", "--sampling", "static", "--lr", "0.01", "--out", str(tmp_path), *extra,
        stderr=subprocess.STDOUT,
    )  # fmt: skip


def wait_http(port: int, path: str, proc: subprocess.Popen[str]) -> None:
    wait_until(lambda: get_text(f"127.0.0.1:{port}", path, timeout=1), 60, f"{path} answering", alive=proc)


def test_sigterm_stops_gracefully_and_writes_results(tmp_path: Path) -> None:
    port = free_ports(1)[0]
    proc = start(tmp_path, port, rounds=100_000, extra=[])
    try:
        wait_http(port, "/status", proc)
        time.sleep(1.5)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=20)
        assert time.monotonic() - t0 < 10
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, out
    assert "round" in out and "done:" in out
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["nodes"] == 8 and 0 < result["rounds"] < 100_000
    # the final /metrics page stays behind for collectors, and agrees with the result
    final = {
        s.labels["node"]: s.value
        for fam in text_string_to_metric_families((tmp_path / "metrics.prom").read_text())
        for s in fam.samples
        if s.name == "p2pnode_local_steps_total"
    }
    assert len(final) == 8 and sum(final.values()) == result["local_steps"] > 0


def test_metrics_endpoint_and_follow_table(tmp_path: Path) -> None:
    port = free_ports(1)[0]
    proc = start(tmp_path, port, rounds=100_000, extra=["--quiet"])
    try:
        wait_http(port, "/metrics", proc)
        time.sleep(1.5)
        text = get_text(f"127.0.0.1:{port}", "/metrics", timeout=5)
        for name in (
            "p2pnode_models_sent_total",
            "p2pnode_models_received_total",
            "p2pnode_bytes_sent_total",
            "p2pnode_bytes_received_total",
            "p2pnode_merges_total",
            "p2pnode_local_steps_total",
            "p2pnode_round",
            "p2pnode_view_size",
            "p2pnode_hit_ratio",
            "p2pnode_ndcg",
            "p2pnode_recall",
            "p2pnode_reciprocal_rank",
        ):
            assert f'{name}{{node="3"' in text, name
        assert 'p2pnode_exposure{figure="usage_max"}' in text  # the process's exposure figures
        row = scrape(f"127.0.0.1:{port}")
        assert row["nodes"] == 8 and row["sent"] > 0 and row["round"] >= 1
        lines: list[str] = []
        assert follow([f"127.0.0.1:{port}"], 0.2, False, lines.append, count=2) == 0
        assert len(lines) == 2 and "endpoint" in lines[0] and f"127.0.0.1:{port}" in lines[1]
        assert lines[0].startswith("HR: share") and "CIA" in lines[1]  # the legend comes once
        cli = subprocess.run(
            [sys.executable, "-m", "p2plab", "metrics", f"127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert cli.returncode == 0 and "merges" in cli.stdout
        # a follow that outlives the run says the endpoint is gone, then ends by itself
        import threading

        tail: list[str] = []
        never = f"127.0.0.1:{free_ports(1)[0]}"
        follower = threading.Thread(
            target=follow, args=([f"127.0.0.1:{port}", never], 0.1, False, tail.append)
        )
        follower.start()
        time.sleep(0.5)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    follower.join(timeout=15)
    assert not follower.is_alive() and tail[-1].startswith("every endpoint has stopped")
    assert "not up yet (" in tail[0] and any("gone (" in t for t in tail)
