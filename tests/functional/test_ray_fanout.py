"""``experiment --ray``: simulations fanned out on a real Ray cluster (a head started here, with
its own raylet and worker processes), against the same experiment run sequentially."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from p2plab import experiment as ex
from p2plab import fanout
from p2pnode.config import ConfigError
from tests.functional.helpers import free_ports, wait_until

ray = pytest.importorskip("ray", reason="the cluster extra (scripts/bootstrap.sh installs it)")

TINY = {"nodes": 24, "rounds": 2, "attack": {"target_k": 3}}
#: the memory the head offers to tasks: two tiny runs (~0.5 GB each) fit, a 943-node one (~1.5 GB) not
OFFERED = 1_000_000_000

# a Ray cluster running simulations: no timed rounds, so beside the other worker's tests rather
# than in the functional tests' one line (tests/conftest.py); its module's tests share one cluster
pytestmark = [pytest.mark.untimed, pytest.mark.xdist_group("ray")]


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    port = free_ports(1)[0]
    tmp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # Ray's socket paths must stay short
    ray_cli = Path(sys.executable).with_name("ray")
    head = subprocess.Popen(
        [
            str(ray_cli), "start", "--head", "--block", f"--port={port}", "--num-cpus=2",
            f"--memory={OFFERED}", "--include-dashboard=false", "--disable-usage-stats",
            f"--temp-dir={tmp}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        # Ray starts its workers at niceness 15: beside the suite's other worker a Ray worker
        # then took 27 s to import torch (1.4 s at 0), most of these tests' time
        env={**os.environ, "RAY_worker_niceness": "0"},
    )  # fmt: skip
    address = f"127.0.0.1:{port}"
    try:

        def serving() -> bool:  # the head serves once a driver can connect and sees its CPUs
            try:
                probe = subprocess.run(
                    [sys.executable, "-c", f"import ray; ray.init(address={address!r}, logging_level=40); "
                     "assert ray.cluster_resources().get('CPU') == 2"],
                    capture_output=True,
                    timeout=30,  # a driver waits on for a head that is gone (the head's exit is then seen)
                )  # fmt: skip
            except subprocess.TimeoutExpired:
                said[:] = ["(no answer in 30 s)"]
                return False
            said[:] = [probe.stderr.decode()[-2000:]]
            return probe.returncode == 0

        said = [""]
        try:
            wait_until(serving, 60, "the Ray head serving 2 CPUs", every=1, alive=head)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the last driver said: {said[0]}") from None
        yield address
    finally:
        head.terminate()
        try:
            head.wait(30)
        except subprocess.TimeoutExpired:
            head.kill()
        shutil.rmtree(tmp, ignore_errors=True)


def _without_times(path: Path) -> dict[str, object]:
    run = json.loads(path.read_text())
    run.pop("seconds")
    run.pop("_seconds")
    for h in run["history"]:
        h.pop("seconds")
    return dict(run)


def test_ray_gives_the_runs_a_sequential_experiment_gives(cluster: str, tmp_path: Path) -> None:
    exp = dataclasses.replace(ex.load("churn"), rows=ex.load("churn").rows[:3])
    lines: list[str] = []
    seq = ex.run_experiment(exp, tmp_path / "seq", TINY, seeds=[0])
    par = ex.run_experiment(exp, tmp_path / "ray", TINY, seeds=[0], workers=0, ray_address=cluster,
                            progress=lines.append)  # fmt: skip
    assert any("3 runs on the Ray cluster" in line for line in lines)
    assert [r["cells"] for r in par["rows"]] == [r["cells"] for r in seq["rows"]]
    files = sorted((tmp_path / "seq" / "runs").glob("*.json"))
    assert len(files) == 3
    for f in files:
        assert _without_times(f) == _without_times(tmp_path / "ray" / "runs" / f.name)
    again: list[str] = []  # resumable: nothing left to run, nothing submitted
    ex.run_experiment(exp, tmp_path / "ray", TINY, seeds=[0], ray_address=cluster, progress=again.append)
    assert sum("already done, kept" in line for line in again) == 3
    assert not any("Ray cluster" in line for line in again)


def test_ray_refuses_a_run_no_machine_has_memory_for(cluster: str, tmp_path: Path) -> None:
    exp = dataclasses.replace(ex.load("churn"), rows=ex.load("churn").rows[:1])
    big = {"rounds": 2, "attack": {"target_k": 10}}  # the experiment's 943 nodes
    with pytest.raises(ConfigError, match=r"--ray: a run of 943 nodes needs about .* GiB and the largest"):
        ex.run_experiment(exp, tmp_path, big, seeds=[0], ray_address=cluster)
    assert not list((tmp_path / "runs").glob("*.json"))


def test_ray_refuses_results_of_other_code(
    cluster: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fanout, "code_digest", lambda: "0123456789abcdef")  # the driver's side only
    # a run submitted before the check would come back as None and fail to unpack (TypeError)
    monkeypatch.setattr(fanout, "_simulate_on_ray", lambda config: None)
    exp = dataclasses.replace(ex.load("churn"), rows=ex.load("churn").rows[:1])
    with pytest.raises(ConfigError, match=r"runs other p2pnode code or libraries .* here 0123456789abcdef"):
        ex.run_experiment(exp, tmp_path, TINY, seeds=[0], ray_address=cluster)
    assert not list((tmp_path / "runs").glob("*.json"))


def test_no_cluster_at_the_address_is_a_clear_error(tmp_path: Path) -> None:
    exp = dataclasses.replace(ex.load("churn"), rows=ex.load("churn").rows[:1])
    with pytest.raises(ConfigError, match=r"--ray 127.0.0.1:\d+: no Ray cluster there"):
        ex.run_experiment(exp, tmp_path, TINY, seeds=[0], ray_address=f"127.0.0.1:{free_ports(1)[0]}")
