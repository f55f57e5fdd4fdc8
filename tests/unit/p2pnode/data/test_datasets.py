"""`p2pnode data get ml-100k` from a wheel file, and the errors around the dataset files."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from learning.interactions import DataError
from p2pnode.data.datasets import ML100K_FILES, fetch_ml100k, load_ml100k

INTER = "user_id:token\titem_id:token\trating:float\ttimestamp:float\n1\t10\t5\t100\n1\t11\t3\t200\n"


def fake_wheel(path: Path, files: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(f"recbole/dataset_example/ml-100k/{name}", text)
    return path


def test_get_from_wheel_then_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("p2pnode.data.datasets._installed_recbole", lambda: None)
    files = {name: "header\n" for name in ML100K_FILES} | {"ml-100k.inter": INTER}
    wheel = fake_wheel(tmp_path / "recbole.whl", files)
    target = fetch_ml100k(tmp_path / "data", wheel=wheel)
    assert sorted(p.name for p in target.iterdir()) == sorted(ML100K_FILES)
    data = load_ml100k(tmp_path / "data")
    assert (data.n_users, data.n_items, len(data)) == (1, 2, 2)


def test_wheel_without_the_dataset_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("p2pnode.data.datasets._installed_recbole", lambda: None)
    wheel = fake_wheel(tmp_path / "recbole.whl", {"ml-100k.inter": INTER})
    with pytest.raises(DataError, match="does not contain"):
        fetch_ml100k(tmp_path / "data", wheel=wheel)
    (tmp_path / "junk.whl").write_bytes(b"not a zip")
    with pytest.raises(DataError, match=r"junk\.whl"):
        fetch_ml100k(tmp_path / "data", wheel=tmp_path / "junk.whl")


def test_missing_dataset_names_the_command(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="p2pnode data get ml-100k"):
        load_ml100k(tmp_path)


def test_bad_row_names_the_line(tmp_path: Path) -> None:
    d = tmp_path / "ml-100k"
    d.mkdir()
    (d / "ml-100k.inter").write_text(INTER + "2\t10\t4\tnot-a-time\n")
    with pytest.raises(DataError, match=r"ml-100k.inter:4"):
        load_ml100k(tmp_path)
