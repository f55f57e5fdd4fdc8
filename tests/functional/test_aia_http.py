"""Attribute inference over real HTTP: a `p2pnode run` process hosting a FedAvg server and its
clients publishes the attack's gauges on /metrics as the rounds go (issue #59)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.functional.helpers import free_ports, get_text, run_p2pnode, stop, wait_until

pytestmark = pytest.mark.functional


def _gauges(address: str) -> dict[tuple[str, str], float]:
    out = {}
    for family in text_string_to_metric_families(get_text(address, "/metrics")):
        if family.name == "p2pnode_aia_score":
            for sample in family.samples:
                out[(sample.labels["observer"], sample.labels["attribute"])] = sample.value
    return out


def test_the_servers_attribute_inference_is_on_metrics_and_in_the_result(tmp_path: Path) -> None:
    port = free_ports(1)[0]
    address = f"127.0.0.1:{port}"
    proc = run_p2pnode(
        "run", "--nodes", "60", "--users", "0-59", "--server", "--protocol", "fedavg",
        "--dataset", "synthetic", "--attack", "aia", "--aia-epochs", "20", "--aia-every", "1",
        "--rounds", "4", "--lr", "0.05", "--tick-seconds", "0.02",
        "--listen", address, "--out", str(tmp_path), stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        wait_until(
            lambda: ("server", "planted") in _gauges(address), 90, "the server's AIA gauge", alive=proc
        )
        gauges = _gauges(address)
        assert 0.0 <= gauges[("server", "planted")] <= 1.0 and ("omniscient", "planted") in gauges
        out, _ = proc.communicate(timeout=120)
    finally:
        stop(proc)
    assert proc.returncode == 0, out[-2000:]
    assert "AIA (server, I'_u oracle" in out
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["aia"]["server"]["last"]["observed"] == 60
