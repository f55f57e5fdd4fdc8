"""Every reproduced table runs end to end at a tiny size, writes its outputs, and resumes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from p2pnode import experiment as ex
from p2pnode.config import ConfigError, RunConfig
from p2pnode.sim import simulate

TINY = {"nodes": 24, "rounds": 2, "attack": {"target_k": 3}}


@pytest.mark.parametrize("name", ex.names())
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
            assert "mean" in row["cells"][col.key], (row["label"], col.key)  # every path resolves
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["experiment"] == name and saved["overrides"] == TINY
    report = (tmp_path / "report.md").read_text()
    assert "| setting |" in report and all(r.label in report for r in exp.rows)


def test_an_interrupted_experiment_resumes_without_rerunning_finished_runs(tmp_path: Path) -> None:
    exp = ex.load("table2")
    calls: list[int] = []

    def flaky(config: RunConfig) -> dict[str, Any]:
        calls.append(config.seed)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return simulate(config)

    with pytest.raises(KeyboardInterrupt):
        ex.run_experiment(exp, tmp_path, TINY, seeds=[0, 1], runner=flaky)
    assert len(list((tmp_path / "runs").glob("*.json"))) == 2  # finished runs are on disk
    assert not list((tmp_path / "runs").glob("*.tmp"))
    calls.clear()

    def counting(config: RunConfig) -> dict[str, Any]:
        calls.append(config.seed)
        return simulate(config)

    doc = ex.run_experiment(exp, tmp_path, TINY, seeds=[0, 1], runner=counting)
    assert len(calls) == 2  # only the two runs that had not finished
    assert all(len(r["cells"]["max_aac"]["values"]) == 2 for r in doc["rows"])


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
