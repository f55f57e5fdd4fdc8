"""Calibrated σ kept on disk (p2pnode/data/sigma_store.py): the same σ without the search, and a
stored σ that the calibration would not accept is never used."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import opacus.accountants.utils as opacus_utils
import pytest

from learning import dp
from p2pnode.data import sigma_store
from p2pnode.data.sigma_store import FileSigmaStore

EPS, DELTA, Q, STEPS = 1.0, 1e-6, 0.01, 10  # a quick search (~0.25 s)


def _calibrate() -> float:
    return dp.calibrate_noise.__wrapped__(EPS, DELTA, Q, STEPS)  # past the per-process cache


@pytest.fixture
def searches(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[float]]:
    """Counts Opacus' binary searches (each still runs)."""
    calls: list[float] = []
    real = opacus_utils.get_noise_multiplier

    def counted(**kwargs: Any) -> float:
        sigma = float(real(**kwargs))
        calls.append(sigma)
        return sigma

    monkeypatch.setattr(opacus_utils, "get_noise_multiplier", counted)
    yield calls
    dp.use_sigma_store(None)


def test_a_stored_sigma_is_reused_and_a_wrong_one_is_searched_again(
    tmp_path: Path, searches: list[float]
) -> None:
    path = tmp_path / "cache" / "dp-sigma.jsonl"
    dp.use_sigma_store(None)
    alone = _calibrate()  # no store: Opacus' answer
    dp.use_sigma_store(FileSigmaStore(path))
    assert _calibrate() == alone and len(searches) == 2
    (line,) = path.read_text().splitlines()
    assert json.loads(line) == {"key": dp.calibration_key(EPS, DELTA, Q, STEPS), "sigma": alone}

    dp.use_sigma_store(FileSigmaStore(path))  # another process: reads the file, no search
    assert _calibrate() == alone and len(searches) == 2

    # a σ the search would not end on (too little noise: ε overspent; too much: not within the
    # tolerance) is not taken; garbage and torn lines are passed over
    for wrong in (alone * 0.9, alone * 1.5, float("nan"), -alone):
        entry = json.dumps({"key": dp.calibration_key(EPS, DELTA, Q, STEPS), "sigma": wrong})
        path.write_text("not json\n" + '{"key": 3}\n' + entry + "\n" + '{"key": "x", "si')
        dp.use_sigma_store(FileSigmaStore(path))
        before = len(searches)
        assert _calibrate() == alone and len(searches) == before + 1
    assert json.loads(path.read_text().splitlines()[-1])["sigma"] == alone  # the right one appended


def test_other_inputs_are_other_keys_and_an_unwritable_store_still_calibrates(
    tmp_path: Path, searches: list[float]
) -> None:
    keys = {
        dp.calibration_key(EPS, DELTA, Q, STEPS),
        dp.calibration_key(EPS * 2, DELTA, Q, STEPS),
        dp.calibration_key(EPS, DELTA * 10, Q, STEPS),
        dp.calibration_key(EPS, DELTA, Q / 2, STEPS),
        dp.calibration_key(EPS, DELTA, Q, STEPS + 1),
    }
    assert len(keys) == 5
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    store = FileSigmaStore(blocked / "dp-sigma.jsonl")  # its folder is a file: no write succeeds
    dp.use_sigma_store(store)
    first = _calibrate()
    assert store.unwritable and _calibrate() == first and len(searches) == 1  # kept in memory


def test_the_cache_folder_follows_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("P2PNODE_CACHE", str(tmp_path))
    assert sigma_store.cache_dir() == tmp_path
    monkeypatch.setenv("P2PNODE_CACHE", "none")
    assert sigma_store.cache_dir() is None
    monkeypatch.delenv("P2PNODE_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert sigma_store.cache_dir() == tmp_path / ".cache" / "p2pnode"
