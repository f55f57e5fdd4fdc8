"""``p2pnode experiment`` of kind reuseknn (paper 003) end to end on a small ratings file: the
tables, the CSV, the figures, and the options that do not apply refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from p2plab.cli import main as lab_main

SPEC = """
title = "ReuseKNN on a small file"
kind = "reuseknn"
[reuseknn]
ks = [5, 10]
folds = 2
seed = 3
report_k = 10
"""


def ratings_file(path: Path) -> Path:
    """60 users with a taste each for one of three item groups, 1-5 stars."""
    rng = np.random.default_rng(0)
    rows = ["user,item,rating"]
    for u in range(60):
        group = u % 3
        for i in rng.choice(90, size=25, replace=False):
            liked = i % 3 == group
            rows.append(f"u{u},i{i},{int(np.clip(rng.normal(4.3 if liked else 2.2, 0.7), 1, 5).round())}")
    path.write_text("\n".join(rows) + "\n")
    return path


def test_the_reuseknn_experiment_writes_its_tables_and_figures(tmp_path: Path) -> None:
    data = ratings_file(tmp_path / "ratings.csv")
    out = tmp_path / "out"
    # the bundled experiment, made small with --set on its [reuseknn] keys (it used to need a
    # copied TOML: "--set ... do not apply")
    small = ["--set", "ks=[5, 10]", "--set", "folds=2", "--set", "seed=3", "--set", "report_k=10"]
    argv = ["experiment", "reuseknn", *small, "--dataset", str(data), "--out", str(out), "--quiet"]
    assert lab_main(argv) == 0
    doc = json.loads((out / "results.json").read_text())
    assert doc["users"] == 60 and doc["ratings"] == 1500 and doc["spec"]["dataset"] == str(data)
    m = doc["means"]["10"]
    for label in ("UserKNN", "Expect", "Gain", "UserKNN_DP", "UserKNN_DP^full", "Expect_DP"):
        assert 0 < m[label]["mae"] < 4 and 0 <= m[label]["vulnerable"] <= 100
    assert m["UserKNN_DP^full"]["privacy_risk"] == 0.0  # every use through randomized response
    assert m["UserKNN"]["privacy_risk"] > m["UserKNN_DP"]["privacy_risk"] > 0  # DP past τ caps real uses
    report = (out / "report.md").read_text()
    for table in ("## Table 4", "## Table 5", "## Table 6"):
        assert table in report
    cells = [c.strip() for line in report.splitlines() if line.startswith("| ") for c in line.split("|")]
    assert not [
        c for c in cells if c.startswith("**") or (c.count("**") % 2 and "\\*\\*" not in c)
    ]  # balanced
    assert doc["spec"]["folds"] == 2 and doc["spec"]["ks"] == [5, 10]
    assert {p.name for p in out.glob("*.png")} == {"mae_k.png", "data_usage.png", "neighbours_q.png"}
    assert (out / "results.csv").read_text().count("\n") == 1 + 2 * 9  # header, 2 ks x 9 methods


def test_gossip_options_do_not_apply_to_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "small.toml"
    spec.write_text(SPEC)
    assert lab_main(["experiment", str(spec), "--nodes", "10", "--out", str(tmp_path / "o")]) == 2
    assert (
        "--nodes do not apply (its [reuseknn] table's keys do, with --set: dataset, ks"
        in capsys.readouterr().err
    )
    assert lab_main(["experiment", str(spec), "--set", "nodes=10", "--out", str(tmp_path / "o")]) == 2
    assert "--set: unknown [reuseknn] keys ['nodes']" in capsys.readouterr().err


def test_a_method_keeps_its_colour_with_dp_and_without() -> None:
    from p2plab.reuseknn_lab import METHODS, method_colour

    for plain in ("UserKNN", "UserKNN+Reuse", "Expect", "Gain"):
        assert method_colour(plain) == method_colour(f"{plain}_DP") is not None
    assert len({method_colour(label) for label, _, _ in METHODS}) == 5  # four choices and DP^full
