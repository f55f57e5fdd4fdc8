"""What a report and the summary of all experiments write (p2plab/experiment_report.py)."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest

from p2plab import experiment as ex
from p2plab import experiment_report
from tests.sim.experiments.helpers import TINY


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


def test_the_summary_reads_every_finished_experiment_against_the_paper(tmp_path: Path) -> None:
    """``p2pnode experiment summary DIR``: per row and column with a paper number, the
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


def test_the_lab_says_where_nothing_is_and_counts_in_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from p2plab.cli import main as lab_main
    from p2plab.cli import plural

    (tmp_path / "results").mkdir()
    assert lab_main(["experiment", "summary", str(tmp_path / "results")]) == 0
    out = capsys.readouterr().out
    assert f"in {tmp_path / 'results'}/" in out and "p2pnode experiment summary experiments/reports" in out
    assert (plural(1, "row"), plural(3, "row")) == ("1 row", "3 rows")
    line = experiment_report._changed_note({"nodes": 40, "learning": {"lr": 0.05}})
    assert line.endswith("not that of these runs") and "learning.lr=0.05" in line


def test_an_experiment_prints_its_table_at_the_end(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from p2plab.cli import main as lab_main

    kept = Path(__file__).resolve().parents[3] / "experiments" / "reports" / "pard-planted" / "runs"
    shutil.copytree(kept, tmp_path / "runs")
    assert lab_main(["experiment", "pard-planted", "--out", str(tmp_path), "--report-only"]) == 0
    out = capsys.readouterr().out
    table = [line for line in out.splitlines() if line.startswith("|")]
    rows = [r.label for r in ex.load("pard-planted").rows]
    assert table[0].startswith("| setting |") and len(table) == 2 + len(rows)
    assert all(label in "\n".join(table) for label in rows)
    assert out.rstrip().splitlines()[-1].startswith(f"pard-planted: {len(rows)} rows in")
