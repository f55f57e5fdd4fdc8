"""Attribute inference over real HTTP: a `p2pnode run` process hosting a FedAvg server and its
clients publishes the attack's gauges on /metrics as the rounds go."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from adversary.plan import colluder_groups
from p2plab.launch import launch
from p2pnode.config import RunConfig
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


def test_colluders_pool_attribute_features_across_processes(tmp_path: Path) -> None:
    # the group's members are spread over both processes: their features reach the read member
    # inside the CIA's multicasts over HTTP, and the merged summary has the group's scores
    config = (
        RunConfig(nodes=40, rounds=4, seed=3, dataset="synthetic", tick_seconds=0.02)
        .replace(
            **{
                "attack.kind": "cia,aia",
                "attack.target_k": 5,
                "attack.colluders": 0.25,
                "attack.aia_epochs": 5,
                "attack.aia_every": 4,
                "attack.aia_public": 0.5,
            }
        )
        .validate()
    )
    group = colluder_groups(40, 3, 0.25, 1)[0]
    assert {m < 20 for m in group} == {True, False}  # members in both processes
    total = asyncio.run(launch(config, 2, tmp_path))
    pooled = total["aia"]["colluders 0"]["last"]
    assert pooled["observed"] > 0
    refused = total["rejected"]
    assert not {"schema", "not-partner", "not-colluder", "non-finite"} & set(refused), refused
    assert set(total["aia"]) == {"omniscient (process 0)", "omniscient (process 1)", "colluders 0"}
