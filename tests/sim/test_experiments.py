"""Every reproduced table runs end to end at a tiny size, writes its outputs, and resumes."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from p2plab import experiment as ex
from p2plab import experiment_report
from p2pnode.config import ConfigError, RunConfig
from p2pnode.sim import simulate

TINY = {"nodes": 24, "rounds": 2, "attack": {"target_k": 3}}


@pytest.mark.parametrize("name", [n for n in ex.names() if ex.load(n).kind == "runs"])
def test_each_experiment_runs_tiny_and_writes_its_report(name: str, tmp_path: Path) -> None:
    exp = ex.load(name)
    doc = ex.run_experiment(exp, tmp_path, TINY, seeds=[0])
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
    assert saved["experiment"] == name and saved["overrides"] == TINY
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
    """--report-only is p2plab/experiment_report.py's job alone (issue #34): a fresh interpreter
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
        "('p2plab.experiment', 'p2pnode.sim', 'p2plab.launch', 'p2plab.fanout', 'torch')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["0", "[]"], out.stdout + out.stderr
    assert "| 5% colluders |" in (tmp_path / "report.md").read_text()


def test_a_utility_column_carries_the_random_rankings_value_and_its_plot_draws_it(tmp_path: Path) -> None:
    """HR@20 under a random ranking of 1 test item among 100 negatives (K = 20): 20/101 (issue #34,
    item 7: table4's utility plot had no random line)."""
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


def test_lookup_and_bad_experiment_files(tmp_path: Path) -> None:
    summary = {"cia": {"max_aac": 0.25, "mia_proxy": {"precision": [0.5, 0.1]}}, "flag": True}
    assert ex.lookup(summary, "cia.max_aac") == 0.25
    assert ex.lookup(summary, "cia.mia_proxy.precision.1") == 0.1
    assert ex.lookup(summary, "cia.mia_proxy.precision.7") is None
    assert ex.lookup(summary, "flag") is None and ex.lookup(summary, "nope.x") is None
    with pytest.raises(ConfigError, match="no experiment 'nope'"):
        ex.load("nope")
    (tmp_path / "bad.toml").write_text('title = "x"\n[[rows]]\nlabel = "a"\n')
    with pytest.raises(ConfigError, match="malformed"):
        ex.load("bad", tmp_path)
    (tmp_path / "badkey.toml").write_text(
        'title = "x"\n[[columns]]\nkey = "m"\nlabel = "M"\npath = "cia.max_aac"\n'
        '[[rows]]\nlabel = "a"\nset = { protocol = "gossip" }\n'
    )
    with pytest.raises(ConfigError, match="protocol"):
        ex.load("badkey", tmp_path)
    # any experiment file by its path, not only the bundled folder's
    mine = tmp_path / "mine.toml"
    mine.write_text((ex.EXPERIMENTS_DIR / "table2.toml").read_text())
    assert ex.load(str(mine)).name == "mine" and ex.load(str(mine)).rows
    with pytest.raises(ConfigError, match="no experiment file"):
        ex.load(str(tmp_path / "missing.toml"))


def test_list_paths_reducers_and_the_value_at_the_best_round() -> None:
    summary = {
        "history": [{"hr": 0.2}, {"hr": 0.5}, {"hr": 0.4}],
        "mia": {"accuracy": [0.9, 0.7, 0.8]},
        "bad": [{"hr": "x"}],
    }
    assert ex.lookup_list(summary, "history.*.hr") == [0.2, 0.5, 0.4]
    assert ex.lookup(summary, "history.*.hr|max") == 0.5
    assert ex.lookup(summary, "history.*.hr|min") == 0.2
    assert ex.lookup(summary, "mia.accuracy|last") == 0.8
    assert ex.lookup(summary, "history.*.hr|median") is None  # unknown reducer
    assert ex.lookup(summary, "bad.*.hr|max") is None  # not numbers
    assert ex.lookup_at_max(summary, "mia.accuracy", "history.*.hr") == 0.7  # MIA at the best-HR round
    assert ex.lookup_at_max(summary, "mia.accuracy", "history.*.nope") is None


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


def simulator_as_real(config: RunConfig, progress: Any = None) -> dict[str, Any]:
    return simulate(config)


def test_long_runs_pass_on_throttled_progress() -> None:
    lines: list[str] = []
    quiet = ex.throttled(lines.append, seconds=3600)
    quiet("round 1/9")
    assert lines == []
    loud = ex.throttled(lines.append, seconds=0)
    loud("round 2/9")
    assert lines == ["    round 2/9"]


def test_runs_recorded_before_a_setting_existed_are_reused(tmp_path: Path) -> None:
    """A run file whose config lacks a key (older p2pnode) counts as that key's default."""
    exp = ex.load("table2")
    ex.run_experiment(exp, tmp_path, TINY, seeds=[0])
    files = sorted((tmp_path / "runs").glob("simulate-*.json"))
    for f in files:  # pretend they were written before attack.mia_holdout existed
        doc = json.loads(f.read_text())
        del doc["config"]["attack"]["mia_holdout"]
        f.rename(f.with_name("simulate-0000older" + f.name[-10:]))
        (f.with_name("simulate-0000older" + f.name[-10:])).write_text(json.dumps(doc))
    calls: list[int] = []

    def counting(config: RunConfig, progress: Any = None) -> dict[str, Any]:
        calls.append(config.seed)
        return simulate(config)

    ex.run_experiment(exp, tmp_path, TINY, seeds=[0], runner=counting)
    assert calls == []  # nothing reran
    changed = {**TINY, "learning": {"batch_size": 128}}  # both models read it
    ex.run_experiment(exp, tmp_path, changed, seeds=[0], runner=counting)
    assert len(calls) == 2  # a recorded value that differs is a different run


def test_a_run_recorded_before_the_estimator_existed_is_a_first_reading_run(tmp_path: Path) -> None:
    """Runs written before ``attack.momentum_estimator`` existed used v_u^0 = Θ_u^0: they are
    reused for ``first`` and never passed off as runs of today's default (debiased)."""
    exp = ex.load("table2")
    first = {**TINY, "attack": {**TINY["attack"], "momentum_estimator": "first"}}
    ex.run_experiment(exp, tmp_path, first, seeds=[0])
    for f in sorted((tmp_path / "runs").glob("simulate-*.json")):
        doc = json.loads(f.read_text())
        del doc["config"]["attack"]["momentum_estimator"]
        f.unlink()
        f.with_name("simulate-0000older" + f.name[-10:]).write_text(json.dumps(doc))
    calls: list[str] = []

    def counting(config: RunConfig, progress: Any = None) -> dict[str, Any]:
        calls.append(config.attack.momentum_estimator)
        return simulate(config)

    ex.run_experiment(exp, tmp_path, first, seeds=[0], runner=counting)
    assert calls == []  # reused as the 'first' runs they were
    ex.run_experiment(exp, tmp_path, TINY, seeds=[0], runner=counting)
    assert calls == ["debiased", "debiased"]  # today's default is a different run


def test_settings_only_real_processes_read_do_not_split_simulated_runs(tmp_path: Path) -> None:
    """The simulator reads neither ``tick_seconds`` nor ``wire.local_delivery``: a simulated run's
    key leaves them out, a real run's keeps them; simulated runs filed under a key that still held
    them (before this) are found again, so a changed default of either reruns nothing."""
    base = RunConfig()
    for change in ({"tick_seconds": 0.03}, {"wire.local_delivery": False}):
        assert ex.run_key(base.replace(**change)) == ex.run_key(base)
        assert ex.run_key(base.replace(**change), "real") != ex.run_key(base, "real")
    exp = dataclasses.replace(ex.load("table2"), rows=ex.load("table2").rows[:1])
    old_default = {**TINY, "wire": {"local_delivery": False}}
    ex.run_experiment(exp, tmp_path, old_default, seeds=[0])
    (f,) = sorted((tmp_path / "runs").glob("simulate-*.json"))
    f.rename(f.with_name("simulate-" + ex.run_key(exp.config(exp.rows[0], 0, old_default), "real") + ".json"))
    calls: list[int] = []

    def counting(config: RunConfig, progress: Any = None) -> dict[str, Any]:
        calls.append(config.seed)
        return simulate(config)

    doc = ex.run_experiment(exp, tmp_path, TINY, seeds=[0], runner=counting)
    assert calls == [] and doc["rows"][0]["cells"]["max_aac"]["values"]  # found, reported, not rerun


def test_attack_settings_that_cannot_act_do_not_split_runs() -> None:
    fed = RunConfig(protocol="fedavg").replace(**{"attack.kind": "cia"})
    assert ex.run_key(fed.replace(**{"attack.multicast": "v"})) == ex.run_key(fed)  # no colluders
    assert ex.run_key(fed.replace(**{"attack.momentum_estimator": "first"})) != ex.run_key(fed)
    flat = fed.replace(**{"attack.momentum": 0.0})
    assert ex.run_key(flat.replace(**{"attack.momentum_estimator": "first"})) == ex.run_key(flat)
    honest = RunConfig()
    assert ex.run_key(honest.replace(**{"attack.momentum_estimator": "zero"})) == ex.run_key(honest)
    group = RunConfig().replace(**{"attack.kind": "cia", "attack.colluders": 0.1})
    assert ex.run_key(group.replace(**{"attack.multicast": "v"})) != ex.run_key(group)


def test_settings_a_model_never_reads_do_not_split_runs() -> None:
    """GMF ignores the PRME settings and PRME the GMF ones; anything a model reads keys the run."""
    gmf = RunConfig()
    assert gmf.model == "gmf"
    prme = dataclasses.replace(gmf, model="prme")

    def learning(config: RunConfig, **changes: Any) -> RunConfig:
        return dataclasses.replace(config, learning=dataclasses.replace(config.learning, **changes))

    assert ex.run_key(learning(gmf, prme_lr=0.2, prme_dim=8)) == ex.run_key(gmf)
    assert ex.run_key(learning(gmf, lr=0.02)) != ex.run_key(gmf)
    assert ex.run_key(learning(prme, lr=0.02, factors=8, negatives=2)) == ex.run_key(prme)
    assert ex.run_key(learning(prme, prme_lr=0.2)) != ex.run_key(prme)
    assert ex.run_key(prme) != ex.run_key(gmf)
    for config in (gmf, prme):  # every name left out is a real learning setting
        assert set(ex.UNUSED_BY_MODEL[config.model]) <= set(config.to_dict()["learning"])


def test_a_long_plot_title_is_wrapped_to_stay_inside_the_figure(tmp_path: Path) -> None:
    """Experiment titles run to 100+ characters; a plot must show them whole, not cut off."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    title = ex.load("fig3").title + ": Max AAC"
    for fontsize in (9, 10):
        fig, ax = plt.subplots(figsize=(6.4, 4.8))
        ax.set_title(title, fontsize=fontsize)
        experiment_report.save_figure(fig, tmp_path / "t.png")
        assert ax.title.get_text().replace("\n", " ") == title  # nothing lost, only wrapped
        assert ax.title.get_text().count("\n") >= 1
        fig.canvas.draw()  # the figure is closed, not destroyed: its text still lays out
        box = ax.title.get_window_extent()
        assert box.x0 >= 0 and box.x1 <= fig.bbox.x1 and box.y1 <= fig.bbox.y1


def test_report_cells_write_numbers_out_at_the_precision_of_the_mean() -> None:
    """A budget of 1000 is not '1e+03', and float noise in an sd is not '1.74e-14'."""
    assert experiment_report._mean_sd(999.99657, 0.0, percent=False) == "1000 ± 0"
    assert experiment_report._mean_sd(100.0, 1.74e-14, percent=False) == "100 ± 0"
    assert experiment_report._mean_sd(0.9993, 1.36e-16, percent=False) == "0.999 ± 0.000"
    assert experiment_report._mean_sd(12.34, 0.56, percent=False) == "12.3 ± 0.6"
    assert experiment_report._mean_sd(0.2917, 0.0012, percent=True) == "29.2 ± 0.1"
    assert experiment_report._mean_sd(2.5e-5, 1e-6, percent=False) == "2.5e-05 ± 1e-06"
    # one run has no spread to show
    assert experiment_report._mean_sd(0.105, 0.0, percent=True, n=1) == "10.5"
    assert experiment_report._mean_sd(1000.0, 0.0, percent=False, n=1) == "1000"


def test_the_dp_gradient_norm_probe_runs_and_measures(capsys: pytest.CaptureFixture[str]) -> None:
    """experiments/dp_gradient_norms.py (REPRODUCTION finding 7) at a tiny size."""
    import runpy

    script = Path(__file__).resolve().parents[2] / "experiments" / "dp_gradient_norms.py"
    main = runpy.run_path(str(script))["main"]
    main(["--users", "2", "--epochs", "1", "--nodes", "30", "--budgets", "1000:60"])
    out = capsys.readouterr().out
    assert out.count("examples of 2 users") == 2
    # at θ_0 every example's gradient is the bias term's 0.5: σ(0·…) − y = ±0.5 (up to the
    # tiny item and user parts), which is what the finding's argument rests on
    first = out.split("after")[0]
    assert "median 5.00e-01" in first and "clipped at C = 2.0: 0.0%" in first
    assert "σC = 0.325" in out  # ε = 1000 over 60 steps at q = 0.5, Opacus' calibration


def test_the_fedavg_score_bias_probe_runs_and_measures(capsys: pytest.CaptureFixture[str]) -> None:
    """experiments/fedavg_score_bias.py (REPRODUCTION finding 7) at a tiny size."""
    import re
    import runpy

    script = Path(__file__).resolve().parents[2] / "experiments" / "fedavg_score_bias.py"
    namespace = runpy.run_path(str(script))
    spearman = namespace["spearman"]
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    namespace["main"](["--nodes", "40", "--rounds", "2", "--k", "5"])
    out = capsys.readouterr().out
    assert "40 nodes, 2 rounds, no noise" in out
    rho = float(re.search(r"median\s+([+-][0-9.]+)", out).group(1))  # type: ignore[union-attr]
    assert -1.0 <= rho <= 1.0
    sizes = re.search(r"every user (\d+), weighted by membership of C (\d+)", out)
    assert sizes is not None
    # the true communities lean towards heavy users: the data's fact the finding rests on
    assert int(sizes.group(2)) > int(sizes.group(1))
    ranked = re.search(r"largest first ([0-9.]+), smallest first ([0-9.]+)", out)
    assert ranked is not None and float(ranked.group(1)) > float(ranked.group(2))


def test_the_short_prediction_probe_runs_and_caps_accuracy(capsys: pytest.CaptureFixture[str]) -> None:
    """experiments/fedavg_short_prediction.py (REPRODUCTION finding 2, Table VII) at a tiny size."""
    import re
    import runpy

    script = Path(__file__).resolve().parents[2] / "experiments" / "fedavg_short_prediction.py"
    namespace = runpy.run_path(str(script))
    assert namespace["short_accuracy"]([1, 2, 3], [2, 3, 4, 5], 4) == 0.5
    namespace["main"](["--nodes", "40", "--rounds", "2", "--k", "10", "--predict", "5", "--fictive-user"])
    out = capsys.readouterr().out
    found = re.search(r"Max AAC over rounds: 10 predicted ([0-9.]+), 5 predicted ([0-9.]+)", out)
    assert found is not None
    full, short = float(found.group(1)), float(found.group(2))
    # five predictions can match at most five of ten members, and never more than ten predictions do
    assert short <= 0.5 and short <= full
    assert out.count("  round ") == 2
    with pytest.raises(SystemExit):
        namespace["main"](["--k", "10", "--predict", "11"])


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
    for png in ("utility.png", "cia.png", "churn.png"):
        assert (out / png).read_bytes()[:4] == b"\x89PNG" and f"![{png}]" in report
    with pytest.raises(ConfigError, match=r"no result\.json or summary\.json"):
        from p2plab.run_report import report_run

        report_run(tmp_path)


def test_workers_give_the_runs_a_sequential_experiment_gives(tmp_path: Path) -> None:
    exp = dataclasses.replace(ex.load("churn"), rows=ex.load("churn").rows[:3])
    seq = ex.run_experiment(exp, tmp_path / "seq", TINY, seeds=[0])
    par = ex.run_experiment(exp, tmp_path / "par", TINY, seeds=[0], workers=2)
    assert [r["cells"] for r in par["rows"]] == [r["cells"] for r in seq["rows"]]
    for f in sorted((tmp_path / "seq" / "runs").glob("*.json")):
        a, b = json.loads(f.read_text()), json.loads((tmp_path / "par" / "runs" / f.name).read_text())
        for run in (a, b):  # wall-clock times aside
            run.pop("seconds")
            run.pop("_seconds")
            for h in run["history"]:
                h.pop("seconds")
        assert a == b


def test_workers_start_a_run_only_where_it_fits_beside_those_under_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``--workers N`` runs at most N at once, and a run starts only where its estimate fits in
    free memory beside the runs under way; a run that alone does not fit is refused before
    anything starts (Table III's two PRME rows, ~11.8 GiB estimated each, beside ~4.1 GiB GMF
    ones on this 24 GiB machine, were refused as a whole before)."""
    from p2plab import fanout

    monkeypatch.setattr(fanout, "available_bytes", lambda: 3 << 30)
    configs = [RunConfig(nodes=943)] * 4
    gmf = fanout.Footprint(215_000)
    needs, budget = fanout.check_memory(configs, lambda c: gmf)
    assert budget == 3 << 30 and len(set(needs)) == 1 and 2 * needs[0] <= budget < 3 * needs[0]
    assert fanout.fits_at_once(needs, 4, budget) == 2
    # one run that alone does not fit is refused before it starts, not OOM-killed halfway
    attacked = [RunConfig(nodes=943, rounds=400)] * 2
    every_node_observes = fanout.Footprint(215_000, adversaries=943, observer_bytes=6_900)
    alone = r"a run of 943 nodes \(base, ml-100k\) needs about 3.8 GiB and 3.0 GiB is free"
    with pytest.raises(ConfigError, match=alone):
        fanout.check_memory(attacked, lambda c: every_node_observes)
    # the schedule: first fit in plan order, never above the budget, never more than the workers
    big, small = 12, 4
    nxt = fanout.next_fitting
    assert nxt([big, big, small, small], [], 2, 22) == 0  # nothing under way: the first starts
    assert nxt([big, small, small], [big], 2, 22) == 1  # a second big one would not fit: a small one
    assert nxt([big, small], [big, small], 2, 22) is None  # both workers busy
    assert nxt([big, big], [big], 2, 22) is None  # waits for the big one under way to end
    assert nxt([big, big], [big], 2, None) == 0  # memory unknown: workers alone decide
    pending, running, peak, started = [big, big, small, small, big, small], [], 0, []
    while pending or running:  # the schedule run to the end, the oldest run ending first
        while (i := nxt(pending, running, 2, 22)) is not None:
            started.append(pending[i])
            running.append(pending.pop(i))
        peak = max(peak, sum(running))
        running.pop(0)
    assert sorted(started) == sorted([big, big, small, small, big, small]) and peak <= 22


def test_no_memory_check_starts_a_run_the_estimate_refuses_and_changes_nothing_else(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``p2pnode experiment --no-memory-check`` is for a run capped from outside (a memory cgroup):
    the estimate errs high (Table III on the Gowalla shape, Pers-Gossip: 12.0 GiB estimated, a
    10.3 GiB peak). Without the flag such a run is refused before anything is written; with it
    the run goes, alone and with workers, and gives what an unrefused run gives."""
    from p2plab import fanout
    from p2plab.cli import main

    exp = dataclasses.replace(ex.load("churn"), rows=ex.load("churn").rows[:2])
    free = ex.run_experiment(exp, tmp_path / "free", TINY, seeds=[0])
    monkeypatch.setattr(fanout, "available_bytes", lambda: 1 << 20)  # 1 MiB free
    with pytest.raises(ConfigError, match=r"needs about .* GiB and 0.0 GiB is free"):
        ex.run_experiment(exp, tmp_path / "refused", TINY, seeds=[0])
    assert not list((tmp_path / "refused").glob("runs/*.json"))
    with pytest.raises(ConfigError, match="is free"):
        ex.run_experiment(exp, tmp_path / "refused", TINY, seeds=[0], workers=2)
    for workers in (1, 2):
        capped = ex.run_experiment(
            exp, tmp_path / f"capped{workers}", TINY, seeds=[0], workers=workers, memory_check=False
        )
        assert [r["cells"] for r in capped["rows"]] == [r["cells"] for r in free["rows"]]
    needs, budget = fanout.check_memory([RunConfig(nodes=943)], lambda c: fanout.Footprint(215_000), False)
    assert budget == 1 << 20 and needs[0] > budget  # measured, not refused
    # the flag reaches run_experiment from the command line
    calls: list[tuple[Any, ...]] = []

    def stand_in(*args: Any) -> dict[str, Any]:
        calls.append(args)
        return {"rows": [], "seconds": 0}

    monkeypatch.setattr(ex, "run_experiment", stand_in)
    for flags in ([], ["--no-memory-check"]):
        assert main(["experiment", "churn", "--out", str(tmp_path / "cli"), "--quiet", *flags]) == 0
    assert [a[-1] for a in calls] == [True, False]


def test_a_fedavg_runs_estimate_counts_the_servers_observations_and_the_updates_in_flight() -> None:
    """The FedAvg server hears from every selected client each round, and with every user's
    items as targets keeps a whole item table of each; the round's updates are held once while in
    flight, and the clients share one copy of the item table (learning/workbench.py). Measured: 200
    clients of a Gowalla-shaped file (32,924 venues) peak at 3.56 GiB (``python -m
    bench.fedavg_memory --clients 200``; 5.18 GiB before the workbench and the in-flight change);
    the estimate counts FedAvg's parts 17% higher (footprint.FEDAVG_MARGIN), the largest gap
    measured at full POI size, so at 200 clients it is well above the peak."""
    from p2plab import fanout

    table = 32_924 * 32 * 4
    model = table + 32 * 4 + 32 * 4 + 4
    fed = RunConfig(nodes=200, rounds=30, protocol="fedavg")
    kept = model - 16_000  # every venue row (every user's items are targets), not the users' table
    bench = {"workbench_bytes": table, "workbench_clients": 200}
    fp = fanout.Footprint(model, 1, kept, heard_per_round=200, in_flight=200, **bench)
    est = fanout.run_bytes(fed, fp) / 2**30
    assert 3.56 <= est <= 3.56 * 1.2
    honest = fanout.run_bytes(fed, fanout.Footprint(model, in_flight=200, **bench)) / 2**30
    assert est - honest > 0.75  # the server's v_u of 200 users, ~4.2 MB each
    own = fanout.run_bytes(fed, fanout.Footprint(model, 1, kept, heard_per_round=200, in_flight=200))
    assert own / 2**30 - est > 200 * table / 2**30  # without the workbench: a table a client


def test_with_a_fixed_mmap_threshold_fedavg_is_estimated_near_its_parts_and_a_refusal_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Table II on the Gowalla shape (718 clients, e_A at the server) peaks at 13.81 GiB under
    glibc's own threshold and at 11.81 GiB with it fixed at 1 MiB, the sum of its parts (heap
    fragmentation, p2pnode.process.set_mmap_threshold): the estimate counts 17% over the parts in
    the one case and 3% in the other, and a run refused for memory that would fit with the threshold fixed is
    told so in its one line."""
    from p2pnode import footprint
    from p2pnode.prepare import prepare

    table = 32_924 * 32 * 4
    model = table + 32 * 4 + 32 * 4 + 4
    fed = RunConfig(nodes=718, rounds=30, protocol="fedavg")
    fixed = fed.replace(**{"sim.mmap_threshold_mib": 1.0})
    kept = model - 16_000
    bench = {"workbench_bytes": table, "workbench_clients": 718}
    fp = footprint.Footprint(model, 1, kept, heard_per_round=718, in_flight=718, **bench)
    parts = (footprint.run_bytes(fed, fp) - footprint.BASE_BYTES) / footprint.FEDAVG_MARGIN
    assert footprint.run_bytes(fixed, fp) == int(footprint.BASE_BYTES + parts * 1.03)
    assert footprint.run_bytes(fixed, fp) / 2**30 >= 11.81  # the measured peak with it fixed
    assert footprint.run_bytes(fed, fp) / 2**30 == pytest.approx(13.81, rel=0.01)  # and without (13.78)

    small = RunConfig(nodes=20, rounds=2, protocol="fedavg").validate()
    small_fixed = small.replace(**{"sim.mmap_threshold_mib": 1.0})
    prep = prepare(small)
    need = footprint.run_bytes(small, footprint.footprint_of(small, prep))
    need_fixed = footprint.run_bytes(small_fixed, footprint.footprint_of(small_fixed, prep))
    assert need_fixed < need
    monkeypatch.setattr(footprint, "available_bytes", lambda: need_fixed)  # fits only fixed
    with pytest.raises(ConfigError, match=r"with --mmap-threshold-mib 1 .* which fits"):
        footprint.check_fits(small, prep)
    footprint.check_fits(small_fixed, prep)  # and fixed, it runs
    monkeypatch.setattr(footprint, "available_bytes", lambda: need_fixed - 1)  # fits in neither
    with pytest.raises(ConfigError) as refused:
        footprint.check_fits(small, prep)
    assert "mmap" not in str(refused.value)


def test_a_fedavg_run_that_fits_only_with_its_updates_spilled_is_told_so(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A round's updates are all on their way at once; with ``--spill-dir`` they wait in files
    (p2pnode/transport/spill.py) and the estimate leaves them out. A run that fits only so is
    refused with the flag in its one line, and runs with it."""
    from p2pnode import footprint
    from p2pnode.prepare import prepare

    small = RunConfig(nodes=20, rounds=2, protocol="fedavg").validate()
    spilled = small.replace(**{"sim.spill_dir": str(tmp_path)})
    prep = prepare(small)
    fp = footprint.footprint_of(small, prep)
    need = footprint.run_bytes(small, fp)
    need_fixed = footprint.run_bytes(small.replace(**{"sim.mmap_threshold_mib": 1.0}), fp)
    need_spilled = footprint.run_bytes(spilled, fp)
    left_out = fp.in_flight * fp.model_bytes * footprint.FEDAVG_MARGIN  # the updates on their way
    assert fp.in_flight == 20 and abs(need - need_spilled - left_out) <= 2  # up to int() rounding
    assert need_spilled < need_fixed
    monkeypatch.setattr(footprint, "available_bytes", lambda: need_spilled)
    with pytest.raises(ConfigError, match=r"with --spill-dir DIR .* which fits") as refused:
        footprint.check_fits(small, prep)
    assert "mmap" not in str(refused.value)
    footprint.check_fits(spilled, prep)


def test_real_fedavg_processes_are_estimated_with_a_table_a_client() -> None:
    """The shared tables are the simulator's (learning/workbench.py): ``launch`` estimates FedAvg
    clients holding their own, the simulator one copy for all of them and no client's delta base."""
    from p2pnode.footprint import FEDAVG_MARGIN, Footprint, launch_bytes, run_bytes

    table = 32_924 * 32 * 4
    model = table + 32 * 4 + 32 * 4 + 4
    fed = RunConfig(nodes=200, rounds=30, protocol="fedavg")
    shared = Footprint(model, in_flight=200, workbench_bytes=table, workbench_clients=200)
    own = Footprint(model, in_flight=200)
    delta = min(0.9 * model, fed.wire.delta_budget_bytes)
    saved = (199 * table + 200 * delta) * FEDAVG_MARGIN
    assert run_bytes(fed, own) - run_bytes(fed, shared) == pytest.approx(saved, abs=2)
    assert launch_bytes(fed, shared, 2) == launch_bytes(fed, own, 2)


def test_a_poi_runs_memory_is_estimated_from_its_model_and_what_its_observers_keep() -> None:
    """The estimate against measurements: 1,083 Foursquare-shaped nodes, every one an adversary
    keeping 103 target rows on average of each user it hears from (0.5 new users a round), peak
    at 15.72 GiB at round 26 (bench.scale) and at 18.1 GiB over Table III's 400 rounds; the
    estimate is above each, by less than 10%."""
    from p2plab import fanout
    from p2pnode.footprint import SENDER_RATE

    model = (38_333 + 1) * 32 * 4 + 32 * 4 + 4
    fp = fanout.Footprint(
        model, adversaries=1083, observer_bytes=105 * 128 + 256, heard_per_round=SENDER_RATE
    )
    short = fanout.run_bytes(RunConfig(nodes=1083, rounds=26), fp) / 2**30
    assert 15.72 <= short <= 15.72 * 1.1
    long = fanout.run_bytes(RunConfig(nodes=1083, rounds=400), fp) / 2**30
    assert 18.1 <= long <= 18.1 * 1.1


def test_an_experiment_runs_on_a_poi_file_beside_the_papers_numbers_for_it(tmp_path: Path) -> None:
    """``--dataset FILE``: every user of the file is a node, the paper's numbers are those of the
    data set the file's name says it is, and new contents at the same path are new runs."""
    from learning import synthetic
    from p2plab.cli import main as lab_main

    small = synthetic.POIConfig(users=30, venues=300, checkins=1500, neighbourhoods=6)
    path = tmp_path / "dataset_TSMC2014_NYC.txt"
    path.write_text("".join(synthetic.tsmc_lines(synthetic.poi_checkins(small))))
    out = tmp_path / "t3"
    argv = ["experiment", "table3", "--dataset", str(path), "--rows", "Rand-Gossip GMF", "--rounds", "2"]
    argv += ["--seeds", "0", "--set", "attack.target_k=3", "--out", str(out), "--quiet"]
    assert lab_main(argv) == 0
    report = (out / "report.md").read_text()
    assert "dataset_TSMC2014_NYC.txt" in report and "[paper: foursquare-nyc]" in report
    assert "| Rand-Gossip GMF | 7.12 |" in report  # the paper's Foursquare-NYC Max AAC
    runs = sorted((out / "runs").glob("simulate-*.json"))
    assert len(runs) == 1
    assert json.loads(runs[0].read_text())["config"]["nodes"] == 30
    path.write_text("".join(synthetic.tsmc_lines(synthetic.poi_checkins(dataclasses.replace(small, seed=1)))))
    assert lab_main(argv) == 0
    assert len(list((out / "runs").glob("simulate-*.json"))) == 2
    assert lab_main([*argv[:-3], "--paper", "gowalla-nyc", "--out", str(tmp_path / "g"), "--quiet"]) == 0
    assert "| Rand-Gossip GMF | 11 |" in (tmp_path / "g" / "report.md").read_text()
    assert lab_main(["experiment", "table3", "--paper", "gowalla-nyc", "--quiet"]) == 2  # no --dataset


def test_a_file_changes_its_settings_on_one_data_shape_and_the_report_says_why(tmp_path: Path) -> None:
    """``[on.foursquare-nyc]``: table3's PRME rows step at lr 0.1 on a file of a POI shape (at 0.2
    heavy users diverge there, REPRODUCTION finding 11) and at 0.2 on ML-100k; GMF runs keep their
    keys; the report and the summary's reading say so, and a file without a reason is refused."""
    from learning import synthetic
    from p2plab.cli import main as lab_main
    from p2plab.experiment_summary import summarize

    exp = ex.load("table3")
    assert exp.config(exp.rows[1], 0, {}).learning.prme_lr == 0.2
    for shape in ("foursquare-nyc", "gowalla-nyc"):
        on = exp.on_dataset("x.txt", shape)
        assert on.applied == shape and on.applied_settings() == ["learning.prme_lr = 0.1"]
        assert on.config(on.rows[1], 0, {}).learning.prme_lr == 0.1
        gmf = (exp.config(exp.rows[0], 0, {}), on.config(on.rows[0], 0, {}))
        assert ex.run_key(gmf[0]) == ex.run_key(gmf[1])  # GMF does not read prme_lr
    assert exp.on_dataset("u.data", "ml-100k").applied == ""
    small = synthetic.POIConfig(users=30, venues=300, checkins=1500, neighbourhoods=6)
    path = tmp_path / "dataset_TSMC2014_NYC.txt"
    path.write_text("".join(synthetic.tsmc_lines(synthetic.poi_checkins(small))))
    argv = ["experiment", "table3", "--dataset", str(path), "--rows", "Rand-Gossip PRME", "--rounds", "2"]
    argv += ["--seeds", "0", "--set", "attack.target_k=3", "--out", str(tmp_path / "r" / "t3"), "--quiet"]
    assert lab_main(argv) == 0
    run = json.loads(next((tmp_path / "r" / "t3" / "runs").glob("simulate-*.json")).read_text())
    assert run["config"]["learning"]["prme_lr"] == 0.1
    report = (tmp_path / "r" / "t3" / "report.md").read_text()
    assert "**On the foursquare-nyc shape** the experiment file sets `learning.prme_lr = 0.1`: PRME" in report
    assert {ln.reading for ln in summarize(tmp_path / "r")} == {
        "debiased; learning.prme_lr = 0.1 (on the foursquare-nyc shape)"
    }
    text = (ex.EXPERIMENTS_DIR / "table3.toml").read_text()
    (tmp_path / "why.toml").write_text(text.replace('why = "PRME at lr 0.2', 'why = " "\nx = "'))
    with pytest.raises(ConfigError, match="must say why"):
        ex.load("why", tmp_path)
    (tmp_path / "shape.toml").write_text(text.replace("[on.gowalla-nyc]", "[on.gowalla]"))
    with pytest.raises(ConfigError, match=r"settings on \['gowalla'\]"):
        ex.load("shape", tmp_path)
    (tmp_path / "bad.toml").write_text(text.replace("prme_lr = 0.1 }", "prme_lr = -1 }"))
    with pytest.raises(ConfigError, match="prme-lr must be > 0") as refused:
        ex.load("bad", tmp_path)
    # the refusal names the file, the first row it fails for and the table that set the value
    named = f"{tmp_path / 'bad.toml'}: row 'Rand-Gossip GMF' under [on.gowalla-nyc]: "
    assert str(refused.value).startswith(named)
    (tmp_path / "base.toml").write_text(text.replace("rounds = 400", "rounds = 0", 1))
    with pytest.raises(ConfigError, match="rounds") as refused:
        ex.load("base", tmp_path)
    assert str(refused.value).startswith(f"{tmp_path / 'base.toml'}: row 'Rand-Gossip GMF': ")
    # a key a file needs left out, or a field misspelt, is refused in the file's terms
    pathless = text.replace('path = "cia.max_aac"\n', "", 1)
    assert pathless != text
    malformed = {
        "cols": (text.replace("[[columns]]", "[[figures]]"), r"no 'columns' \(a file needs"),
        "label": (text.replace('label = "Rand-Gossip GMF"', 'name = "Rand-Gossip GMF"', 1), r"no 'label' "),
        "path": (pathless, r"\[\[columns\]\] 'max_aac' has no 'path' \(a column needs key, label and path"),
        "field": (
            text.replace('key = "max_aac"', 'key = "max_aac"\npercnt = true', 1),
            r"\[\[columns\]\] 'max_aac' has unknown field\(s\) 'percnt' \(known: key, label",
        ),
        "whyless": (
            text.replace('why = "PRME at lr 0.2', 'reason = "PRME at lr 0.2', 1),
            r"\[on.gowalla-nyc\] has no 'why' \(it needs set = ",
        ),
    }
    for name, (changed, refusal) in malformed.items():
        (tmp_path / f"{name}.toml").write_text(changed)
        with pytest.raises(ConfigError, match=rf"{name}.toml: malformed experiment: {refusal}"):
            ex.load(name, tmp_path)


def test_runs_on_a_file_data_synth_wrote_are_said_synthetic_in_the_summary(tmp_path: Path) -> None:
    """A file named as the paper's data set but made by ``p2pnode data synth`` carries a marker
    beside it (its generator and SHA-256); the report records it and the summary labels those
    figures synthetic, and stops doing so once the file's bytes are no longer the ones marked."""
    from p2plab.cli import main as lab_main
    from p2plab.experiment_summary import summarize
    from p2pnode import datasets

    path = tmp_path / "dataset_TSMC2014_NYC.txt"
    synth = ["data", "synth", "foursquare-nyc", str(path), "--users", "30", "--venues", "300"]
    assert lab_main(synth) == 0
    about = datasets.synthetic_origin(path)
    assert about is not None and about["shape"] == "foursquare-nyc" and about["users"] == 30
    argv = ["experiment", "table3", "--dataset", str(path), "--rows", "Rand-Gossip GMF", "--rounds", "2"]
    argv += ["--seeds", "0", "--set", "attack.target_k=3", "--out", str(tmp_path / "r" / "t3"), "--quiet"]
    assert lab_main(argv) == 0
    doc = json.loads((tmp_path / "r" / "t3" / "results.json").read_text())
    users = doc["overrides"]["nodes"]
    assert doc["data"] == {"file": path.name, "sha256": about["sha256"], "synthetic": about, "users": users}
    for record in (tmp_path / "r" / "t3").rglob("*.json"):  # #57: nothing of this machine's folders
        assert str(tmp_path) not in record.read_text(), record.name
    assert doc["overrides"]["dataset"] == path.name  # the command: sys.argv here (pytest's)
    lines = summarize(tmp_path / "r")
    assert lines and {ln.group for ln in lines} == {"probe"}  # 2 rounds, K = 3: not the table's setting
    assert lines[0].experiment == (  # a probe says what its command changed
        "t3 (table3), data dataset_TSMC2014_NYC.txt, synthetic, of foursquare-nyc's shape; "
        "set attack.target_k = 3, rounds = 2"
    )  # fmt: skip
    path.write_text(path.read_text() + path.read_text().splitlines(keepends=True)[0])  # changed since
    assert datasets.synthetic_origin(path) is None


def test_a_prme_runs_estimate_holds_no_optimizer_moments() -> None:
    """PRME trains with plain SGD: a node holds its 18.4 MB model (60 dimensions, two 38,334-row
    tables) and no Adam moments. Measured: 100 Foursquare-shaped PRME nodes peak at 2.17 GiB."""
    from p2plab import fanout

    model = 18_400_080
    prme = fanout.run_bytes(RunConfig(nodes=100, rounds=5), fanout.Footprint(model, copies=1)) / 2**30
    assert 2.17 <= prme <= 2.17 * 1.1
    assert fanout.run_bytes(RunConfig(nodes=100, rounds=5), fanout.Footprint(model)) / 2**30 > 2 * prme


def test_a_prme_observers_estimate_counts_what_it_keeps_not_the_table_it_drops() -> None:
    """A PRME observer keeps the target rows of the preference table and the user row; the
    sequential table it drops (adversary/models.py) is not counted. Measured by ``python -m
    bench.cia_memory`` (943 nodes, 20 rounds): 25.4 kB a user heard from; the estimate counted
    both tables before (50.9 kB)."""
    from learning import gmf, prme
    from p2pnode.prepare import prepare

    kept_rows = {}
    for model, table, whole in (
        ("gmf", gmf.ITEM, (gmf.USER, gmf.H, gmf.B)),
        ("prme", prme.ITEM_P, (prme.USER_P,)),
    ):
        config = RunConfig(nodes=60, rounds=5, model=model).replace(
            **{"attack.kind": "cia", "attack.target_k": 3}
        )
        fp = ex.footprint(config)
        init = prepare(config).init
        row = init[table].nbytes / init[table].shape[0]
        kept_rows[model] = (fp.observer_bytes - 256 - sum(init[n].nbytes for n in whole)) / row
    # the same targets' rows of one item table for both models: nothing of PRME's sequential table
    assert kept_rows["prme"] == kept_rows["gmf"] and kept_rows["gmf"] == int(kept_rows["gmf"]) > 0


def test_the_summary_reads_every_finished_experiment_against_the_paper(tmp_path: Path) -> None:
    """``p2pnode experiment summary DIR`` (issue #33): per row and column with a paper number, the
    paper's value, ours over seeds, the difference, the reading and code the runs ran under; a
    difference above 5 points is explained where the row names a finding."""
    import re

    from p2plab import experiment_summary
    from p2plab.cli import main as lab_main
    from p2plab.experiment_summary import render, summarize

    text = re.sub(r"(?m)^finding = .*\n", "", (ex.EXPERIMENTS_DIR / "table4.toml").read_text())
    mine = tmp_path / "mine.toml"
    mine.write_text(text.replace('paper = { max_aac = 24.8, best10 = 40 }',
                                 'paper = { max_aac = 24.8, best10 = 40 }\nfinding = "6"', 1))  # fmt: skip
    exp = ex.load(str(mine))
    assert exp.rows[0].finding == "6" and exp.rows[1].finding == ""
    small = dataclasses.replace(exp, rows=exp.rows[:2])
    ex.run_experiment(small, tmp_path / "results" / "mine", TINY, seeds=[0, 1])
    lines = summarize(tmp_path / "results")
    assert [(ln.row, ln.column) for ln in lines] == [
        ("5% colluders", "Max AAC"),
        ("5% colluders", "Best-10% AAC"),
        ("10% colluders", "Max AAC"),
        ("10% colluders", "Best-10% AAC"),
    ]
    doc = json.loads((tmp_path / "results" / "mine" / "results.json").read_text())
    cell = doc["rows"][0]["cells"]["max_aac"]
    first = lines[0]
    assert first.paper == 24.8 and first.seeds == 2 and first.mean == pytest.approx(cell["mean"])
    assert first.difference == pytest.approx(abs(100 * cell["mean"] - 24.8))
    assert first.reading == "debiased, forwarding, fused"  # today's defaults
    assert first.code == ex.code_digest() and len(first.code) == 12
    for ln in lines:  # 24 nodes, 2 rounds: far from the paper; the first row names its finding
        expected = (
            "within 5 points"
            if ln.difference <= 5
            else ("differs, explained (finding 6)" if ln.row == "5% colluders" else "differs, unexplained")
        )
        assert ln.status == expected
    # the report records each row's reading and code, so a report copied without its runs (as
    # experiments/reports/ holds them) still says how its rows were obtained
    assert doc["rows"][0]["reading"] == first.reading and doc["rows"][0]["code"] == [first.code]
    shutil.rmtree(tmp_path / "results" / "mine" / "runs")
    assert summarize(tmp_path / "results") == lines
    # runs at another size are a probe: listed, left out of the means
    assert {ln.group for ln in lines} == {"probe"} and "Mean absolute" not in render(lines)
    out = render([dataclasses.replace(ln, group="table") for ln in lines])
    mean = sum(ln.difference for ln in lines) / 4
    assert f"Mean absolute difference over 4 figures with a paper number: {mean:.1f} points." in out
    assert out.count("| mine; set attack.target_k = 3, nodes = 24, rounds = 2 | ") == 4  # what TINY set
    # the same runs reported by a second experiment count once in the means; equal values of
    # different runs (the two rows' bounds are both 100% here) count as two figures
    shutil.copytree(tmp_path / "results" / "mine", tmp_path / "results" / "again")
    both = [dataclasses.replace(ln, group="table") for ln in summarize(tmp_path / "results")]
    assert len(both) == 8 and "over 4 figures" in render(both) and "(4 more repeat" in render(both)
    for folder in ("mine", "again"):  # reports from before run keys were recorded: each its own figure
        doc_path = tmp_path / "results" / folder / "results.json"
        old = json.loads(doc_path.read_text())
        for row in old["rows"]:
            row.pop("runs")
        doc_path.write_text(json.dumps(old))
    both = [dataclasses.replace(ln, group="table") for ln in summarize(tmp_path / "results")]
    assert "over 8 figures" in render(both) and "repeat" not in render(both)
    shutil.rmtree(tmp_path / "results" / "again")
    twins = [
        dataclasses.replace(ln, group="table", paper=1.0, mean=0.5, identity=(ln.row, "x")) for ln in lines
    ]
    assert "over 2 figures" in render(twins)  # two rows, each with its own runs
    # which part a report belongs to: the file's setting, the same on a data file, or a probe
    group = experiment_summary._group
    assert group({"overrides": {}}, exp) == "table"
    assert group({"overrides": {"dataset": "gowalla.txt", "nodes": 718}}, exp) == "data set"
    assert group({"overrides": {"dataset": "g.txt", "attack": {"fictive_user": True}}}, exp) == "probe"
    assert group({"overrides": {}, "mode": "real"}, exp) == "probe"
    # where the allocator puts blocks, or whether FedAvg clients share tables, changes no number
    fixed = {"dataset": "f.txt", "nodes": 1083, "sim": {"mmap_threshold_mib": 1.0, "shared_tables": False}}
    assert group({"overrides": fixed}, exp) == "data set"
    assert group({"overrides": {"sim": {"mmap_threshold_mib": 1.0}}}, exp) == "table"
    assert group({"overrides": {"sim": {"drop": 0.1}}}, exp) == "probe"
    assert group({"overrides": {}}, ex.load("fl-probes")) == "probe"
    # ... and a probe's name says what made it one: settings that change no number, and the data
    # file's own users, are left out; nodes without a data file are a size
    settings = experiment_summary._settings
    assert settings({"overrides": fixed}) == ""
    assert settings({"overrides": {"nodes": 100, "sim": {"drop": 0.1, "spill_dir": "/x"}}}) == (
        "; set nodes = 100, sim.drop = 0.1"
    )
    assert settings({"overrides": {"rounds": 100}, "mode": "real"}) == "; over real HTTP; set rounds = 100"
    # a smaller look at a data file than its users is a probe of that size, where the report
    # recorded the file's users; reports from before they were recorded are read as every user
    small = {"overrides": {"dataset": "g.txt", "nodes": 80}, "data": {"users": 718}}
    assert group(small, exp) == "probe" and settings(small) == "; set nodes = 80"
    every = {"overrides": {"dataset": "g.txt", "nodes": 718}, "data": {"users": 718}}
    assert group(every, exp) == "data set" and settings(every) == ""
    older = {"overrides": {"dataset": "g.txt", "nodes": 80}, "data": {"file": "g.txt"}}
    assert group(older, exp) == "data set"
    # REPRODUCTION.md's block is replaced in place, and only a well-formed block is
    target = tmp_path / "REPRODUCTION.md"
    target.write_text(f"# head\n{experiment_summary.BEGIN}\nold table\n{experiment_summary.END}\ntail\n")
    assert lab_main(["experiment", "summary", str(tmp_path / "results"), "--write", str(target)]) == 0
    written = target.read_text()
    assert "old table" not in written and render(lines) in written and written.endswith("tail\n")
    target.write_text("# no block\n")
    assert lab_main(["experiment", "summary", str(tmp_path / "results"), "--write", str(target)]) == 2
    assert target.read_text() == "# no block\n"
    assert lab_main(["experiment", "summary", str(tmp_path / "results")]) == 0
    assert lab_main(["experiment", "table4", str(tmp_path)]) == 2  # a folder is only for summary


def test_the_prme_divergence_probe_tells_users_who_overflow_from_those_who_do_not() -> None:
    """experiments/prme_divergence.py (REPRODUCTION finding 11): a step far too large overflows
    every user within a few rounds and is counted; a small one overflows none."""
    from experiments.prme_divergence import describe, train_alone

    config = RunConfig(nodes=6, dataset="ml-100k", model="prme", seed=0)
    with np.errstate(all="ignore"):
        wild = train_alone(config.replace(**{"learning.prme_lr": 1e8}), rounds=5, fedavg=False)
        calm = train_alone(config.replace(**{"learning.prme_lr": 0.05}), rounds=5, fedavg=False)
    assert all(t.diverged_at is not None and 1 <= t.diverged_at <= 5 for t in wild)
    assert all(t.diverged_at is None for t in calm) and calm[0].transitions > 0
    assert describe(wild, 1e8).startswith("lr 1e+08: 6 of 6 users diverged")
    assert describe(calm, 0.05).startswith("lr 0.05: 0 of 6 users diverged")
