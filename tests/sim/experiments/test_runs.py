"""Every reproduced table runs end to end at a tiny size, writes its report, and resumes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from p2plab import experiment as ex
from p2plab import experiment_report
from p2pnode.config import ConfigError, RunConfig
from p2pnode.runners.sim import simulate
from tests.sim.experiments.helpers import TINY, simulator_as_real


def _uses_dp(name: str) -> bool:
    exp = ex.load(name)
    return any(exp.config(row, 0, TINY).learning.dp for row in exp.rows)


#: the experiments with DP-SGD rows run on one worker, one after the other: their nodes' σ
#: calibrations (a few seconds each, learning.dp.calibrate_noise) are then computed once for all
#: of them, fig5 first, whose ε values cover the others' (fig5 alone 78 s, dp-probes after it 7 s)
_RUNS = [n for n in ex.names() if ex.load(n).kind == "runs"]
_DP = sorted((n for n in _RUNS if _uses_dp(n)), key=lambda n: n != "fig5")  # fig5's ε cover the rest
_TINY_RUNS = [pytest.param(n, marks=pytest.mark.xdist_group("dp-calibrations")) for n in _DP] + [
    n for n in _RUNS if n not in _DP
]


@pytest.mark.parametrize("name", _TINY_RUNS)
def test_each_experiment_runs_tiny_and_writes_its_report(name: str, tmp_path: Path) -> None:
    exp = ex.load(name)
    tiny: dict[str, Any] = TINY
    if any(exp.config(row, 0, TINY).attack.aia for row in exp.rows):  # a tiny classifier too
        tiny = {**TINY, "attack": {**TINY["attack"], "aia_epochs": 10}}
    doc = ex.run_experiment(exp, tmp_path, tiny, seeds=[0])
    for f in ("results.json", "results.csv", "report.md"):
        assert (tmp_path / f).stat().st_size > 0
    pngs = list(tmp_path.glob("*.png"))
    assert len(pngs) >= len(exp.columns) and all(p.read_bytes()[:4] == b"\x89PNG" for p in pngs)
    assert [r["label"] for r in doc["rows"]] == [r.label for r in exp.rows]
    for row in doc["rows"]:
        for col in exp.columns:
            if not col.optional:
                assert "mean" in row["cells"][col.key], (row["label"], col.key)  # every path resolves
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["experiment"] == name and saved["overrides"] == tiny
    report = (tmp_path / "report.md").read_text()
    assert "| setting |" in report and all(r.label in report for r in exp.rows)
    # the file's title (K = 50, 943 nodes) stands above runs of another setting: it says so
    assert "**Run with overrides**" in report.split("| setting |")[0]


def test_an_interrupted_experiment_resumes_without_rerunning_finished_runs(tmp_path: Path) -> None:
    exp = ex.load("table2")
    calls: list[int] = []

    def flaky(config: RunConfig, progress: Any = None) -> dict[str, Any]:
        calls.append(config.seed)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return simulate(config)

    with pytest.raises(KeyboardInterrupt):
        ex.run_experiment(exp, tmp_path, TINY, seeds=[0, 1], runner=flaky)
    assert len(list((tmp_path / "runs").glob("*.json"))) == 2  # finished runs are on disk
    assert not list((tmp_path / "runs").glob("*.tmp"))
    calls.clear()

    def counting(config: RunConfig, progress: Any = None) -> dict[str, Any]:
        calls.append(config.seed)
        return simulate(config)

    partial = ex.run_experiment(exp, tmp_path, TINY, seeds=[0, 1], runner=counting, report_only=True)
    assert calls == []  # --report-only runs nothing
    assert [len(r["cells"]["max_aac"]["values"]) for r in partial["rows"]] == [2, 0]
    assert "| GMF |" in (tmp_path / "report.md").read_text()
    doc = ex.run_experiment(exp, tmp_path, TINY, seeds=[0, 1], runner=counting)
    assert len(calls) == 2  # only the two runs that had not finished
    assert all(len(r["cells"]["max_aac"]["values"]) == 2 for r in doc["rows"])


def test_the_report_of_a_finished_folder_loads_neither_the_runner_nor_the_simulator(tmp_path: Path) -> None:
    """--report-only is p2plab/experiment_report.py's job alone: a fresh interpreter
    reports finished runs without importing p2plab.experiment, the simulator or the launcher."""
    import subprocess
    import sys

    exp = ex.load("table4")
    ex.run_experiment(dataclasses.replace(exp, rows=exp.rows[:1]), tmp_path, TINY, seeds=[0])
    (tmp_path / "report.md").unlink()
    code = (
        "import sys; from p2plab.cli import main; "
        f"rc = main(['experiment', 'table4', '--report-only', '--out', {str(tmp_path)!r}, "
        "'--nodes', '24', '--rounds', '2', '--seeds', '0', '--set', 'attack.target_k=3', "
        "'--rows', '5% colluders', '--quiet']); "
        "print(rc, sorted(m for m in sys.modules if m in "
        "('p2plab.experiment', 'p2pnode.runners.sim', 'p2plab.launch', 'p2plab.fanout', 'torch')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "[]"], out.stdout + out.stderr
    assert "| 5% colluders |" in (tmp_path / "report.md").read_text()


def test_a_utility_column_carries_the_random_rankings_value_and_its_plot_draws_it(tmp_path: Path) -> None:
    """HR@20 under a random ranking of 1 test item among 100 negatives (K = 20): 20/101 (table4's utility
    plot had no random line)."""
    exp = ex.load("table4")
    doc = ex.run_experiment(dataclasses.replace(exp, rows=exp.rows[:2]), tmp_path, TINY, seeds=[0])
    for row in doc["rows"]:
        assert row["cells"]["utility"]["random_ranking"] == pytest.approx(20 / 101)
        assert "random_ranking" not in row["cells"]["max_aac"]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    experiment_report._draw_random_ranking(ax, exp.columns[-1], doc["rows"])
    assert [ln.get_label() for ln in ax.get_lines()] == ["random ranking (19.8)"]
    plt.close(fig)


def test_mixing_experiment_writes_its_report(tmp_path: Path) -> None:
    from p2plab.mixing import MixingSpec, run_mixing

    exp = ex.load("mixing")
    assert exp.kind == "mixing" and exp.mixing is not None and exp.mixing.degrees == (2, 5, 10, 25)
    spec = MixingSpec(nodes=30, degrees=(2, 4), iterations=6, runs=3, compare_at=4)
    doc = run_mixing("t", spec, tmp_path, seed=0, command="x")
    for f in ("results.json", "results.csv", "report.md", "lambda2.png"):
        assert (tmp_path / f).stat().st_size > 0
    assert len(doc["points"]) == 2 * 2 * 6
    for s in doc["summary"]:
        assert s["dynamic_final"] < s["static_final"]
    assert "dynamic below static at T = 4 for every k: yes" in (tmp_path / "report.md").read_text()
    (tmp_path / "m.toml").write_text('kind = "mixing"\n[mixing]\nnodes = 9\ndegrees = [3]\n')
    with pytest.raises(ConfigError, match="no 3-regular graph on 9 nodes"):
        ex.load("m", tmp_path)
    (tmp_path / "k.toml").write_text('kind = "mixed"\n')
    with pytest.raises(ConfigError, match="unknown experiment kind"):
        ex.load("k", tmp_path)


def test_simulator_and_real_runs_of_one_experiment_are_reported_side_by_side(tmp_path: Path) -> None:
    """--real into the same --out: the report shows both modes for each row (fake real runner)."""
    exp = ex.load("table2")

    def pretend_real(config: RunConfig, progress: Any = None) -> dict[str, Any]:
        result = simulate(config)
        result["cia"]["max_aac"] = 0.5  # a distinguishable figure
        return result

    ex.run_experiment(exp, tmp_path, TINY, seeds=[0])
    doc = ex.run_experiment(exp, tmp_path, TINY, seeds=[0], runner=pretend_real, mode="real")
    assert doc["mode"] == "real" and doc["other"]["mode"] == "simulate"
    assert [r["cells"]["max_aac"]["mean"] for r in doc["rows"]] == [0.5, 0.5]
    sims = [r["cells"]["max_aac"]["mean"] for r in doc["other"]["rows"]]
    assert all(v != 0.5 for v in sims)
    report = (tmp_path / "report.md").read_text()
    assert "## simulator and real HTTP, same configurations" in report
    assert "50.0 (n=1)" in report


def test_each_run_records_its_machine_and_the_report_says_where_each_mode_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real-HTTP run's figures depend on its cores (REPRODUCTION finding 5): a run file records
    the machine, and the report lists each mode's machines, runs from before as not recorded."""
    from p2plab.machine import describe, machine

    exp = ex.load("table2")
    here = machine()
    assert here["cpus"] >= 1 and here["python"] and here["torch"]
    ex.run_experiment(exp, tmp_path, TINY, seeds=[0])
    runs = sorted((tmp_path / "runs").glob("simulate-*.json"))
    assert len(runs) == 2 and all(json.loads(f.read_text())["_machine"] == here for f in runs)
    old = json.loads(runs[0].read_text())  # a run made before runs recorded their machine
    del old["_machine"]
    runs[0].write_text(json.dumps(old))
    big = {**here, "cpus": 16, "cpu": "Some Processor"}
    monkeypatch.setattr(ex, "machine", lambda: big)
    doc = ex.run_experiment(exp, tmp_path, TINY, seeds=[0], runner=simulator_as_real, mode="real")
    assert doc["machines"] == {
        "real": [{"machine": describe(big), "runs": 2}],
        "simulate": sorted(
            [{"machine": describe(here), "runs": 1}, {"machine": "not recorded", "runs": 1}],
            key=lambda m: str(m["machine"]),
        ),
    }
    report = (tmp_path / "report.md").read_text()
    assert f"Real-HTTP runs ran on: {describe(big)} (2 runs)." in report
    assert "16 CPUs (Some Processor)" in describe(big)
    assert f"Simulator runs ran on: {describe(here)} (1 run); not recorded (1 run)." in report


def test_a_row_whose_learning_diverged_says_so_in_the_report(tmp_path: Path) -> None:
    """A run whose models kept going non-finite (Table III PRME on the Gowalla shape at lr 0.2)
    is not the paper's run: the report names the row, the seed and the recoveries."""
    exp = ex.load("table2")

    def diverging(config: RunConfig, progress: Any = None) -> dict[str, Any]:
        with np.errstate(all="ignore"):
            result = simulate(config.replace(**{"learning.lr": 1e30}) if config.model == "gmf" else config)
        result["config"] = config.to_dict()  # the run the plan asked for
        return result

    doc = ex.run_experiment(exp, tmp_path / "table2", TINY, seeds=[0], runner=diverging)
    gmf, prme = doc["rows"]
    assert set(gmf["recoveries"]) == {"0"} and gmf["recoveries"]["0"]["events"] > 0
    assert "recoveries" not in prme
    r = gmf["recoveries"]["0"]
    report = (tmp_path / "table2" / "report.md").read_text()
    assert "**Learning diverged**" in report
    assert (
        f"- {gmf['label']}, seed 0: {r['events']} non-finite models recovered at {r['nodes']} nodes" in report
    )
    from p2plab.experiment_summary import summarize

    lines = summarize(tmp_path)
    assert {ln.row for ln in lines if "diverged in 1 of 1 runs" in ln.reading} == {gmf["label"]}
    clean = tmp_path / "clean"
    ex.run_experiment(exp, clean, TINY, seeds=[0])
    assert "Learning diverged" not in (clean / "report.md").read_text()


def test_a_finished_simulate_run_folder_gets_its_report(tmp_path: Path) -> None:
    from p2plab.cli import main as lab_main

    out = tmp_path / "run"
    argv = ["simulate", "--nodes", "24", "--rounds", "3", "--sampling", "cyclon", "--churn", "exp"]
    argv += [
        "--uptime",
        "3",
        "--downtime",
        "1",
        "--attack",
        "cia",
        "--target-k",
        "3",
        "--mia",
        "--mia-holdout",
        "3",
        "--quiet",
        "--out",
        str(out),
    ]
    assert lab_main(argv) == 0
    assert lab_main(["experiment", str(out)]) == 2  # says: add --report-only
    assert lab_main(["experiment", "--report-only", str(out), "--quiet"]) == 0
    report = (out / "report.md").read_text()
    assert (
        "24 nodes, 3 rounds, seed 0 (simulate)" in report and "HR@20" in report and "CIA: Max AAC" in report
    )
    for png in ("utility.png", "cia.png", "churn.png", "mia_roc.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG" and f"![{png}]" in report
    with pytest.raises(ConfigError, match=r"no result\.json or summary\.json"):
        from p2plab.run_report import report_run

        report_run(tmp_path)
