"""experiments/aac_windows.py: a run's mean CIA accuracy per window of rounds."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = runpy.run_path(str(ROOT / "experiments" / "aac_windows.py"))


def test_each_window_averages_its_own_rounds_and_round_zero_is_left_out() -> None:
    means = SCRIPT["windows"]([0, 10, 20, 30, 40, 50], [0.9, 0.1, 0.3, 0.5, 0.7, 0.2], 20)
    assert means == pytest.approx({0: 0.2, 1: 0.6, 2: 0.2})  # 1–20: 10, 20; 21–40: 30, 40; 41–60: 50
    with pytest.raises(ValueError, match="at least 1"):
        SCRIPT["windows"]([1], [0.1], 0)


def test_runs_are_printed_by_row_and_seed_with_their_peak_and_windows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "runs").mkdir()

    def run(name: str, row: str, seed: int, aac: list[float]) -> None:
        rounds = [20 * k for k in range(len(aac))]
        best = max(range(len(aac)), key=aac.__getitem__)
        cia = {"rounds": rounds, "aac": aac, "max_aac": aac[best], "round_of_max": rounds[best]}
        (tmp_path / "runs" / name).write_text(json.dumps({"_row": row, "_seed": seed, "cia": cia}))

    run("simulate-b.json", "β = 0", 1, [0.0, 0.10, 0.30, 0.20, 0.20])
    run("simulate-a.json", "β = 0", 0, [0.0, 0.20, 0.40, 0.10, 0.30])
    (tmp_path / "runs" / "simulate-c.json").write_text(json.dumps({"_row": "no attack", "cia": None}))
    SCRIPT["main"]([str(tmp_path), "--window", "40"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "| row | seed | Max AAC % (round) | 1–40 | 41–80 |"
    assert lines[2] == "| β = 0 | 0 | 40.0 (40) | 30.0 | 20.0 |"
    assert lines[3] == "| β = 0 | 1 | 30.0 (40) | 20.0 | 20.0 |"
    assert len(lines) == 4  # the run without the CIA has no row


def test_a_folder_without_runs_or_a_bad_window_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="no finished run"):
        SCRIPT["main"]([str(tmp_path)])
    with pytest.raises(SystemExit, match="at least 1 round"):
        SCRIPT["main"]([str(tmp_path), "--window", "0"])
