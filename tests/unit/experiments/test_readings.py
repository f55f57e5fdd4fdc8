"""Which reading of a paper a table runs under, which paper it reproduces, and which of its rows
are probes (experiments/README.md's format; p2plab/experiment_spec.py, experiment_summary.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from p2plab.experiment_spec import PAPERS, Reading, load, names
from p2plab.experiment_summary import by_paper, readings, render, summarize
from p2pnode.config import ConfigError

HEAD = 'title = "t"\nseeds = [0]\n'
ROW = '[[rows]]\nlabel = "a"\npaper = { x = 10 }\n'
COLUMN = '[[columns]]\nkey = "x"\nlabel = "X"\npath = "cia.max_aac"\n'


def _load(tmp_path: Path, text: str) -> object:
    path = tmp_path / "mine.toml"
    path.write_text(text)
    return load(str(path))


def test_a_file_whose_rows_carry_a_papers_numbers_says_whose(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="reproduces = '000'"):
        _load(tmp_path, HEAD + ROW + COLUMN)
    with pytest.raises(ConfigError, match="reproduces = '001'"):
        _load(tmp_path, HEAD + 'reproduces = "001"\n' + ROW + COLUMN)
    exp = _load(tmp_path, HEAD + 'reproduces = "004"\n' + ROW + COLUMN)
    assert exp.reproduces == "004" and exp.reading is None  # type: ignore[attr-defined]


def test_a_reading_needs_its_name_and_the_papers_text(tmp_path: Path) -> None:
    good = HEAD + 'reproduces = "000"\n[reading]\nname = "eq. 3"\ntext = """\n§IV-B:\n  the score\n"""\n'
    exp = _load(tmp_path, good + ROW + COLUMN)
    assert exp.reading == Reading("eq. 3", "§IV-B: the score", "")  # type: ignore[attr-defined]
    for broken, said in [
        ('[reading]\nname = "eq. 3"\n', "needs text"),
        ('[reading]\ntext = "§IV"\n', "needs name"),
        ('[reading]\nname = "eq. 3"\ntext = "  "\n', "needs text"),
        ('[reading]\nname = "a"\ntext = "b"\nsource = "c"\n', "unknown field"),
        ('[reading]\nname = "a"\ntext = "b"\nwhy = 3\n', "why must be a string"),
        ('reading = "eq. 3"\n', "must be a table"),
    ]:
        with pytest.raises(ConfigError, match=said):
            _load(tmp_path, HEAD + 'reproduces = "000"\n' + broken + ROW + COLUMN)


def test_a_row_probe_says_why(tmp_path: Path) -> None:
    for bad in ("true", '""', '"   "', "1"):
        with pytest.raises(ConfigError, match="probe must say why"):
            _load(tmp_path, HEAD + 'reproduces = "000"\n' + ROW + f"probe = {bad}\n" + COLUMN)
    exp = _load(tmp_path, HEAD + 'reproduces = "000"\n' + ROW + 'probe = """400\n rounds"""\n' + COLUMN)
    assert exp.rows[0].probe == "400 rounds"  # type: ignore[attr-defined]


def test_every_counted_table_states_its_reading_and_paper() -> None:
    """Each bundled file whose rows carry a paper's numbers and that the summary counts names the
    reading it runs under, with the paper's text (issue: one reading the text supports, stated in
    the file)."""
    counted = []
    for name in names():
        exp = load(name)
        if any(r.paper or r.papers for r in exp.rows):
            assert exp.reproduces in PAPERS, name
            if not exp.probe:
                counted.append(name)
                assert exp.reading is not None and exp.reading.text, f"{name} states no [reading]"
    assert {"table2", "table3", "table3-bound", "table4", "pard-table3"} <= set(counted)


def _report(folder: Path, name: str, rows: dict[str, float], *, probe: bool = False) -> None:
    """A results.json as experiment_report writes it, with one column (Max AAC, paper 14.6)."""
    out = folder / name
    out.mkdir(parents=True)
    doc = {
        "experiment": name,
        "probe": probe,
        "seeds": [0],
        "columns": [{"key": "max_aac", "label": "Max AAC", "percent": True}],
        "rows": [
            {
                "label": label,
                "reading": "debiased",
                "code": ["c0de"],
                "runs": [f"{name}-{label}"],
                "cells": {"max_aac": {"paper": 14.6, "mean": mean, "values": [mean], "path": "cia.max_aac"}},
            }
            for label, mean in rows.items()
        ],
    }
    (out / "results.json").write_text(json.dumps(doc))


def test_the_summary_counts_a_file_as_its_file_says_and_lists_a_rows_probe_apart(tmp_path: Path) -> None:
    # table3's 400-round GMF rows are probes (their file says why); its PRME row is counted;
    # table3-bound's report says probe (it was one when it ran) but its file no longer does
    _report(tmp_path, "table3", {"Rand-Gossip GMF": 0.10, "Rand-Gossip PRME": 0.053})
    _report(tmp_path, "table3-bound", {"Rand-Gossip GMF, 3,000 rounds": 0.169}, probe=True)
    lines = summarize(tmp_path)
    groups = {(ln.experiment.split(" (")[0], ln.row): ln.group for ln in lines}
    assert groups == {
        ("table3", "Rand-Gossip GMF"): "probe",
        ("table3", "Rand-Gossip PRME"): "table",
        ("table3-bound", "Rand-Gossip GMF, 3,000 rounds"): "table",
    }
    probe = next(ln for ln in lines if ln.group == "probe")
    assert probe.experiment.startswith("table3 (this row: 400 rounds")
    assert {ln.paper_id for ln in lines} == {"000"}
    text = render(lines, readings(tmp_path))
    assert text.startswith("### The readings the counted tables run under")
    said = "| table3-bound | the rounds at which the adversaries reach the paper's accuracy upper bound |"
    assert said in text
    # the per-paper count: 2 counted figures, 16.9 within 5 of 14.6, 5.3 explained (finding 1)
    assert "| 000 (the CIA paper) | 2 | 1 | 1 | 0 | 5.8 |" in text
    assert "Mean absolute difference over 2 figures" in text  # the probe is left out


def test_by_paper_counts_each_figure_once_per_paper(tmp_path: Path) -> None:
    _report(tmp_path, "table3", {"Rand-Gossip PRME": 0.053})
    _report(tmp_path, "pard-table3", {"FedAvg (FedNCF), 004's training": 0.70})
    lines = summarize(tmp_path)
    doubled = lines + lines  # the same runs' figure in two experiments counts once
    rows = by_paper(doubled)
    assert rows[2].startswith("| 000 (the CIA paper) | 1 | 0 | 1 |")
    assert rows[3].startswith("| 004 (PARD) | 1 | 0 | 1 | 0 |")  # its file's row names finding 14
    assert by_paper([]) == []
