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
    spec = tmp_path / "small.toml"
    spec.write_text(SPEC)
    data = ratings_file(tmp_path / "ratings.csv")
    out = tmp_path / "out"
    argv = ["experiment", str(spec), "--dataset", str(data), "--out", str(out), "--quiet"]
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
    assert {p.name for p in out.glob("*.png")} == {"mae_k.png", "data_usage.png", "neighbours_q.png"}
    assert (out / "results.csv").read_text().count("\n") == 1 + 2 * 9  # header, 2 ks x 9 methods


def test_gossip_options_do_not_apply_to_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "small.toml"
    spec.write_text(SPEC)
    assert lab_main(["experiment", str(spec), "--nodes", "10", "--out", str(tmp_path / "o")]) == 2
    assert "--nodes do not apply (edit the [reuseknn] table)" in capsys.readouterr().err
