"""Runs are keyed by a data file's bytes, not its path, and what a report records of a run
names nothing of the machine that made it (p2plab/portable.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from p2plab.experiment_spec import _legacy_file_key, command_line, run_key, stored_runs
from p2plab.portable import portable_argv, portable_config, portable_overrides
from p2pnode.config import RunConfig

ROWS = "u1\tv1\t1\nu1\tv2\t2\nu2\tv1\t3\n"


def _config(dataset: Path | str, **changes: object) -> RunConfig:
    return RunConfig().replace(dataset=str(dataset), **changes)


def test_the_same_bytes_at_two_paths_are_one_run_and_other_bytes_another(tmp_path: Path) -> None:
    a = tmp_path / "a" / "checkins.tsv"
    b = tmp_path / "b" / "renamed.tsv"
    for path in (a, b):
        path.parent.mkdir()
        path.write_text(ROWS)
    assert run_key(_config(a)) == run_key(_config(b))
    c = tmp_path / "c.tsv"
    c.write_text(ROWS + "u2\tv3\t4\n")
    assert run_key(_config(c)) != run_key(_config(a))
    # where this machine keeps things changes no key
    assert run_key(_config(a, data_dir=str(tmp_path))) == run_key(_config(a))
    assert run_key(_config(a, **{"sim.spill_dir": str(tmp_path)})) == run_key(_config(a))
    # a named data set keeps the key it always had (the data directory keyed as the default)
    assert run_key(RunConfig().replace(data_dir="/elsewhere")) == run_key(RunConfig())


def test_a_run_kept_under_its_path_key_is_found_while_the_path_holds_the_same_bytes(tmp_path: Path) -> None:
    data = tmp_path / "checkins.tsv"
    data.write_text(ROWS)
    config = _config(data)
    runs = tmp_path / "runs"
    runs.mkdir()
    old = runs / f"simulate-{_legacy_file_key(config, 'simulate')}.json"
    old.write_text(json.dumps({"hit_ratio_at_20": 0.5, "config": config.to_dict()}))
    plan = [(None, 0, config)]
    found, missing = stored_runs(plan, runs, "simulate")  # type: ignore[arg-type]
    assert list(found) == [run_key(config)] and not missing
    data.write_text(ROWS + "u3\tv1\t5\n")  # other bytes at that path now: not the same run
    found, missing = stored_runs([(None, 0, _config(data))], runs, "simulate")  # type: ignore[arg-type]
    assert not found and len(missing) == 1


def test_a_run_record_names_its_file_by_name_and_keeps_no_folder_of_this_machine(tmp_path: Path) -> None:
    config = RunConfig().replace(
        dataset=str(tmp_path / "poi" / "dataset_TSMC2014_NYC.txt"),
        data_dir=str(tmp_path / "data"),
        **{"sim.spill_dir": str(tmp_path / "spill")},
    )
    kept = portable_config(config.to_dict())
    assert kept["dataset"] == "dataset_TSMC2014_NYC.txt"
    assert kept["data_dir"] == "" and kept["sim"]["spill_dir"] == ""
    assert kept["sim"]["mmap_threshold_mib"] == config.sim.mmap_threshold_mib  # the rest as it was
    assert config.to_dict()["dataset"].startswith(str(tmp_path))  # the configuration itself is untouched
    assert portable_config(RunConfig().to_dict())["dataset"] == "ml-100k"


def test_a_reports_overrides_and_command_leave_the_machine_out(tmp_path: Path) -> None:
    spill, data, poi = str(tmp_path / "spill"), str(tmp_path / "data"), tmp_path / "poi"
    overrides = {
        "sim": {"spill_dir": spill, "mmap_threshold_mib": 1},
        "dataset": str(poi / "loc-gowalla_totalCheckins.txt"),
        "nodes": 718,
    }
    assert portable_overrides(overrides) == {
        "sim": {"mmap_threshold_mib": 1},
        "dataset": "loc-gowalla_totalCheckins.txt",
        "nodes": 718,
    }
    assert portable_overrides({"sim": {"spill_dir": spill}}) == {}  # an emptied section goes
    argv = [
        "experiment",
        "table2",
        "--dataset",
        str(poi / "dataset_TSMC2014_NYC.txt"),
        "--set",
        f"sim.spill_dir={spill}",
        "--set=sim.mmap_threshold_mib=1",
        f"--spill-dir={spill}",
        "--data-dir",
        data,
        "--out",
        "results/t2",
    ]
    assert portable_argv(argv) == [
        "experiment",
        "table2",
        "--dataset",
        "dataset_TSMC2014_NYC.txt",
        "--set=sim.mmap_threshold_mib=1",
        "--out",
        "results/t2",
    ]
    assert portable_argv([f"--dataset={poi / 'c.csv'}", "--dataset", "ml-100k"]) == [
        "--dataset=c.csv",
        "--dataset",
        "ml-100k",
    ]
    assert command_line(["experiment", "x", "--dataset", str(poi / "my file.csv")]) == (
        "p2pnode experiment x --dataset 'my file.csv'"
    )


def test_a_kept_run_file_moves_with_its_data_file(tmp_path: Path) -> None:
    """Keyed by bytes, a folder of runs made beside one copy of a file is found beside another."""
    here = tmp_path / "here" / "f.tsv"
    there = tmp_path / "there" / "f.tsv"
    here.parent.mkdir()
    here.write_text(ROWS)
    there.parent.mkdir()
    shutil.copy(here, there)
    runs = tmp_path / "runs"
    runs.mkdir()
    key = run_key(_config(here))
    (runs / f"simulate-{key}.json").write_text(
        json.dumps({"config": portable_config(_config(here).to_dict())})
    )
    found, _ = stored_runs([(None, 0, _config(there))], runs, "simulate")  # type: ignore[arg-type]
    assert list(found) == [key]
