"""experiments/bound_rounds.py: the round at which each run's upper bound reached the paper's."""

from __future__ import annotations

import json
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = runpy.run_path(str(ROOT / "experiments" / "bound_rounds.py"))


def _run(folder: Path, row: str, seed: int, bounds: list[float]) -> None:
    rounds = [20 * (k + 1) for k in range(len(bounds))]
    aac = [b / 5 for b in bounds]
    cia = {"rounds": rounds, "upper_bounds": bounds, "aac": aac, "max_aac": aac[-1]}
    (folder / "runs" / f"simulate-{row[:4]}{seed}.json").write_text(
        json.dumps({"_row": row, "_seed": seed, "cia": cia})
    )


def test_runs_of_an_unfinished_experiment_are_read_by_the_folders_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "table3-bound"  # no results.json yet: the experiment is still running
    (folder / "runs").mkdir(parents=True)
    _run(folder, "Rand-Gossip GMF, 3,000 rounds", 0, [0.5, 0.79, 0.81, 0.9])  # paper bound 81
    _run(folder, "Rand-Gossip GMF, 3,000 rounds", 1, [0.6, 0.85, 0.9, 0.95])
    _run(folder, "Pers-Gossip GMF, 4,200 rounds", 0, [0.3, 0.5, 0.6, 0.7])  # paper 72: not reached
    SCRIPT["main"]([str(folder)])
    out = capsys.readouterr().out
    assert "| Rand-Gossip GMF, 3,000 rounds | 0 | 81 | 60 | 81.0 | 16.2 | 80 | 90.0 | 18.0 |" in out
    assert "| Rand-Gossip GMF, 3,000 rounds | 1 | 81 | 40 | 85.0 |" in out
    assert "| Pers-Gossip GMF, 4,200 rounds | 0 | 72 | not reached |" in out
    assert "Rand-Gossip GMF, 3,000 rounds: the bound reached the paper's at round 50 ± 14 (2 runs)" in out


def test_a_folder_without_runs_or_of_no_experiment_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="no runs/ folder"):
        SCRIPT["main"]([str(tmp_path / "missing")])
    (tmp_path / "mine" / "runs").mkdir(parents=True)
    with pytest.raises(SystemExit, match="give --experiment NAME"):
        SCRIPT["main"]([str(tmp_path / "mine")])
