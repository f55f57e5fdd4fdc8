"""A real Prometheus (the Debian package) scrapes a launched cluster with the configuration
``launch --out`` generates, and every query of the generated Grafana dashboard runs on it
(watching a testbed the way operators do)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from p2plab.launch import LOCAL_CLUSTER
from p2plab.monitoring import queries
from tests.functional.helpers import free_ports, wait_until

pytestmark = pytest.mark.functional

PROMETHEUS = shutil.which("prometheus")


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return json.loads(resp.read())


def _query(base: str, expr: str) -> dict[str, Any]:
    doc: dict[str, Any] = _get(f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    return doc


@pytest.mark.skipif(PROMETHEUS is None, reason="no prometheus binary (apt-get install prometheus)")
def test_prometheus_scrapes_every_process_and_the_dashboards_queries_run(tmp_path: Path) -> None:
    run = tmp_path / "run"
    launch = subprocess.Popen(
        [sys.executable, "-m", "p2plab", "launch", "--nodes", "12", "--processes", "2", "--rounds", "40",
         "--tick-seconds", "0.01", "--lr", "0.01", "--attack", "cia", "--target-k", "3",
         "--out", str(run), "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    prometheus = None
    try:
        config = run / "monitoring" / "prometheus.yml"
        wait_until(config.is_file, 30, "launch writes monitoring/prometheus.yml", every=0.5)
        dashboard = json.loads((run / "monitoring" / "grafana" / "dashboard.json").read_text())
        assert len(dashboard["panels"]) == 8
        check = subprocess.run(
            [str(Path(PROMETHEUS or "").with_name("promtool")), "check", "config", str(config)],
            capture_output=True,
            text=True,
        )
        if shutil.which("promtool"):
            assert check.returncode == 0, check.stdout + check.stderr
        port = free_ports(1)[0]
        base = f"http://127.0.0.1:{port}"
        prometheus = subprocess.Popen(
            [str(PROMETHEUS), f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip

        def every_target_up() -> bool:
            targets = _get(f"{base}/api/v1/targets")["data"]["activeTargets"]
            return len(targets) == 2 and all(t["health"] == "up" for t in targets)

        wait_until(every_target_up, 40, "both processes' /metrics scraped and up", every=0.5)
        targets = _get(f"{base}/api/v1/targets")["data"]["activeTargets"]
        assert sorted(t["labels"]["unit"] for t in targets) == ["proc0", "proc1"]
        assert {t["labels"]["cluster"] for t in targets} == {LOCAL_CLUSTER}

        def cia_series() -> list[Any]:
            result: list[Any] = _query(base, "p2pnode_cia_accuracy")["data"]["result"]
            return result

        def every_cia_series() -> list[Any]:
            # both processes' scrapes, not the first one alone: --attack cia makes every node an
            # adversary, so 12 series (under load the second process's first scrape comes later)
            result = cia_series()
            return result if len(result) == 12 else []

        series = wait_until(every_cia_series, 40, "a CIA accuracy series of each of the 12 nodes", every=0.5)
        assert len(series) == 12
        time.sleep(3)  # a few more scrapes, so that the rates have two points
        answered = {}
        for title, expr in queries(LOCAL_CLUSTER, rate_interval="30s"):
            doc = _query(base, expr)
            assert doc["status"] == "success", (title, expr, doc)
            answered[expr] = doc["data"]["result"]
        one = {expr: float(r[0]["value"][1]) for expr, r in answered.items() if len(r) == 1}
        assert one[f'sum(up{{job="p2pnode", cluster="{LOCAL_CLUSTER}"}})'] == 2
        assert one[f'count(p2pnode_round{{cluster="{LOCAL_CLUSTER}"}})'] == 12
        assert 0 <= one[f'avg(p2pnode_hit_ratio{{cluster="{LOCAL_CLUSTER}"}})'] <= 1
        rate = f'sum(rate(p2pnode_models_sent_total{{cluster="{LOCAL_CLUSTER}"}}[30s]))'
        assert one[rate] > 0  # models flow
        swaps = answered[
            f'sum by (outcome) (rate(p2pnode_view_swaps_total{{cluster="{LOCAL_CLUSTER}"}}[30s]))'
        ]
        assert {r["metric"]["outcome"] for r in swaps} >= {"committed"}
        # SIGTERM stops a launch as Ctrl-C does: its node processes end with it
        launch.terminate()
        assert launch.wait(timeout=60) == 143, launch.stderr.read() if launch.stderr else ""
        left = subprocess.run(["pgrep", "-f", f"--config-json {run}"], capture_output=True, text=True)
        assert left.stdout == "", f"node processes outlived their launch: {left.stdout}"
    finally:
        if prometheus is not None:
            prometheus.terminate()
            prometheus.wait(timeout=20)
        launch.terminate()
        launch.wait(timeout=60)
