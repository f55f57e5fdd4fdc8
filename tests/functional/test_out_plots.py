"""``simulate --out``, ``launch --out`` and ``run --out`` write the run's report and the PNG
panels that ``Result.plot()`` draws: the same panels, one file each."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from p2plab.cli import main as lab_main
from p2plab.run_report import panels, run_file, run_size
from p2pnode.config import RunConfig, from_mapping
from tests.functional.helpers import free_ports

pytestmark = pytest.mark.functional

SMALL = ["--nodes", "12", "--rounds", "2", "--lr", "0.01", "--seed", "1"]


def drawn(folder: Path) -> set[str]:
    """The panels ``Result.plot()`` draws for the run in ``folder``, by file name."""
    path = run_file(folder)
    assert path is not None
    result = json.loads(path.read_text())
    config = from_mapping(result["config"], RunConfig(), source=str(path))
    return {name for name, _ in panels(result, config, run_size(result, config))}


def pngs(folder: Path) -> set[str]:
    return {p.name for p in folder.glob("*.png") if p.stat().st_size > 1000}


def test_simulate_and_launch_write_the_panels_result_plot_draws(tmp_path: Path) -> None:
    sim, launched = tmp_path / "sim", tmp_path / "launch"
    argv = [*SMALL, "--attack", "cia", "--target-k", "2", "--quiet"]
    assert lab_main(["simulate", *argv, "--out", str(sim)]) == 0
    assert lab_main(["launch", *argv, "--tick-seconds", "0.004", "--out", str(launched)]) == 0
    for folder in (sim, launched):
        assert pngs(folder) == drawn(folder) == {"utility.png", "cia.png"}
        assert "![utility.png](utility.png)" in (folder / "report.md").read_text()
    # a launch sums its processes' merges by sender: every Base GL merge counted once (exposure)
    total = json.loads((launched / "summary.json").read_text())
    assert total["exposure"]["usage"]["mean"] * 12 == pytest.approx(total["merges"])
    # a launch sets itself against the simulator's runs of its setting (p2plab/selfcheck.py)
    check = total["self_check"]
    assert check["probe_rounds"] == 2 and len(check["simulator"]) == 3
    assert check["line"].startswith("self-check: ") and check["line"] in (launched / "report.md").read_text()
    # (--no-self-check: tests/functional/test_plugins_both_ways.py launches with it)
    # a launch without the attack into the simulate's folder: nothing of the earlier run is left
    # beside it (its cia.png used to stay, and its result.json to be reported as the new run)
    (sim / "notes.txt").write_text("the user's own")
    plain = [*SMALL, "--quiet", "--tick-seconds", "0.004", "--no-self-check"]
    assert lab_main(["launch", *plain, "--processes", "1", "--out", str(sim)]) == 0
    assert pngs(sim) == drawn(sim) == {"utility.png"} and not (sim / "result.json").exists()
    assert (sim / "summary.json").exists() and (sim / "notes.txt").read_text() == "the user's own"


def test_run_writes_the_panels_of_its_own_nodes(tmp_path: Path) -> None:
    port = free_ports(1)[0]
    done = subprocess.run(
        [sys.executable, "-m", "p2plab", "run", *SMALL, "--users", "0-11", "--listen", f"127.0.0.1:{port}",
         "--tick-seconds", "0.004", "--sampling", "static", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert pngs(tmp_path) == drawn(tmp_path) == {"utility.png"}
    assert f"report and plots in {tmp_path}" in done.stderr
