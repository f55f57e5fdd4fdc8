"""Datasets on disk: MovieLens-100k from the recbole wheel, read offline from a cache directory.

docs/design.md, Datasets: the wheel of ``recbole==1.2.1`` on PyPI ships ML-100k in
``recbole/dataset_example/ml-100k/``. ``p2pnode data get ml-100k`` takes the files from an
installed recbole (never imported) or from the wheel, which it downloads with pip, and copies
them into the data directory.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from learning.interactions import DataError, Interactions
from p2pnode import atomic

ML100K = "ml-100k"
ML100K_FILES = ("ml-100k.inter", "ml-100k.user", "ml-100k.item")
RECBOLE_PIN = "recbole==1.2.1"
_WHEEL_DIR = "recbole/dataset_example/ml-100k/"


def default_data_dir() -> Path:
    """``$P2PNODE_DATA`` or ``~/.cache/p2pnode/data``."""
    env = os.environ.get("P2PNODE_DATA")
    return Path(env) if env else Path.home() / ".cache" / "p2pnode" / "data"


def dataset_path(data_dir: str | Path | None, name: str = ML100K) -> Path:
    return Path(data_dir or default_data_dir()) / name


def load_ml100k(data_dir: str | Path | None = None) -> Interactions:
    """All 100,000 ratings of ML-100k as implicit feedback (every rating is an interaction)."""
    path = dataset_path(data_dir) / "ml-100k.inter"
    if not path.exists():
        raise DataError(f"MovieLens-100k is not in {path.parent}; run `p2pnode data get ml-100k` first")
    users: list[str] = []
    items: list[str] = []
    times: list[float] = []
    with path.open() as fh:
        header = fh.readline().rstrip("\n").split("\t")
        cols = {name.split(":")[0]: k for k, name in enumerate(header)}
        if not {"user_id", "item_id", "timestamp"} <= set(cols):
            raise DataError(f"{path}: header {header} lacks user_id, item_id or timestamp")
        ui, ii, ti = cols["user_id"], cols["item_id"], cols["timestamp"]
        for lineno, line in enumerate(fh, start=2):
            parts = line.rstrip("\n").split("\t")
            try:
                users.append(parts[ui])
                items.append(parts[ii])
                times.append(float(parts[ti]))
            except (IndexError, ValueError):
                raise DataError(f"{path}:{lineno}: bad row {line.strip()!r}") from None
    return Interactions.from_raw(users, items, times, name=ML100K)


def load_ml100k_genres(data_dir: str | Path | None = None) -> dict[str, set[str]]:
    """Raw item id → its ML-100k genres (``ml-100k.item``, ``class`` column)."""
    path = dataset_path(data_dir) / "ml-100k.item"
    if not path.exists():
        raise DataError(f"MovieLens-100k item data is not in {path.parent}; run `p2pnode data get ml-100k`")
    out: dict[str, set[str]] = {}
    with path.open(encoding="utf-8", errors="replace") as fh:
        header = fh.readline().rstrip("\n").split("\t")
        cols = {name.split(":")[0]: k for k, name in enumerate(header)}
        if not {"item_id", "class"} <= set(cols):
            raise DataError(f"{path}: header {header} lacks item_id or class")
        for line in fh:
            parts = line.rstrip("\n").split("\t")
            if len(parts) > max(cols["item_id"], cols["class"]):
                out[parts[cols["item_id"]]] = set(parts[cols["class"]].split())
    return out


def load_table(path: str | Path, min_interactions: int = 5) -> Interactions:
    """A plain file of ``user, item[, timestamp]`` rows: CSV or TSV, header optional.

    The separator is a tab if the first line has one, else a comma. The first line is a header
    when its first two fields mention ``user`` and ``item``. Without a timestamp column the row
    order is the time order. Users with fewer than ``min_interactions`` distinct items are
    dropped (item ids are kept for the rest). Every bad row is an error naming its line.
    """
    path = Path(path)
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        raise DataError(f"dataset file {path} does not exist") from None
    except UnicodeDecodeError:
        raise DataError(f"{path}: not a text file") from None
    if not lines:
        raise DataError(f"{path}: the file is empty")
    sep = "\t" if "\t" in lines[0] else ","
    first = [f.strip().lower() for f in lines[0].split(sep)]
    start = 1 if len(first) >= 2 and "user" in first[0] and "item" in first[1] else 0
    users: list[str] = []
    items: list[str] = []
    times: list[float] = []
    width = 0
    for lineno, line in enumerate(lines[start:], start=start + 1):
        if not line.strip():
            continue
        fields = [f.strip() for f in line.split(sep)]
        if len(fields) not in (2, 3) or not fields[0] or not fields[1]:
            raise DataError(f"{path}:{lineno}: expected user{sep}item[{sep}timestamp], got {line!r}")
        if width and len(fields) != width:
            raise DataError(f"{path}:{lineno}: {len(fields)} fields where earlier rows have {width}")
        width = len(fields)
        users.append(fields[0])
        items.append(fields[1])
        if width == 3:
            try:
                times.append(float(fields[2]))
            except ValueError:
                raise DataError(f"{path}:{lineno}: timestamp {fields[2]!r} is not a number") from None
        else:
            times.append(float(lineno))
    if not users:
        raise DataError(f"{path}: no interactions")
    data = Interactions.from_raw(users, items, times, name=path.name)
    return _min_interactions(data, min_interactions, path)


def _min_interactions(data: Interactions, minimum: int, path: Path) -> Interactions:
    """Drop users with fewer than ``minimum`` distinct items, renumbering the users kept."""
    if minimum <= 1:
        return data
    pairs = np.unique(np.stack((data.users, data.items)), axis=1)
    counts = np.bincount(pairs[0], minlength=data.n_users)
    keep_users = np.flatnonzero(counts >= minimum)
    if len(keep_users) < 2:
        raise DataError(
            f"{path}: only {len(keep_users)} user(s) have at least {minimum} items (lower --min-interactions)"
        )
    new_id = np.full(data.n_users, -1, dtype=np.int64)
    new_id[keep_users] = np.arange(len(keep_users))
    mask = new_id[data.users] >= 0
    return Interactions(
        new_id[data.users[mask]],
        data.items[mask],
        data.timestamps[mask],
        tuple(data.raw_user_ids[u] for u in keep_users),
        data.raw_item_ids,
        data.name,
    )


def fetch_ml100k(data_dir: str | Path | None = None, wheel: Path | None = None) -> Path:
    """Make ML-100k available in ``data_dir``; returns the dataset directory."""
    target = dataset_path(data_dir)
    if all((target / f).exists() for f in ML100K_FILES):
        return target
    source = _installed_recbole()
    if source is not None:
        _copy_files(lambda name: (source / name).read_bytes(), target)
        return target
    if wheel is None:
        with tempfile.TemporaryDirectory() as tmp:
            wheel = _download_wheel(Path(tmp))
            _extract(wheel, target)
    else:
        _extract(wheel, target)
    return target


def _installed_recbole() -> Path | None:
    spec = importlib.util.find_spec("recbole")
    if spec is None or not spec.submodule_search_locations:
        return None
    for loc in spec.submodule_search_locations:
        d = Path(loc) / "dataset_example" / ML100K
        if all((d / f).exists() for f in ML100K_FILES):
            return d
    return None


def _download_wheel(dest: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(dest)]
    proc = subprocess.run([*cmd, RECBOLE_PIN], capture_output=True, text=True, check=False)
    wheels = sorted(dest.glob("recbole-*.whl"))
    if proc.returncode != 0 or not wheels:
        raise DataError(
            f"could not download {RECBOLE_PIN} with pip ({proc.stderr.strip()[-300:]}); "
            "download the wheel elsewhere and pass it with --wheel"
        )
    return wheels[0]


def _extract(wheel: Path, target: Path) -> None:
    try:
        with zipfile.ZipFile(wheel) as zf:
            names = set(zf.namelist())
            missing = [f for f in ML100K_FILES if _WHEEL_DIR + f not in names]
            if missing:
                raise DataError(f"{wheel} does not contain {', '.join(missing)}")
            _copy_files(lambda name: zf.read(_WHEEL_DIR + name), target)
    except (zipfile.BadZipFile, FileNotFoundError) as exc:
        raise DataError(f"{wheel}: {exc}") from None


def _copy_files(read: object, target: Path) -> None:
    assert callable(read)
    target.mkdir(parents=True, exist_ok=True)
    for name in ML100K_FILES:
        atomic.write_bytes(target / name, read(name))
    shutil.rmtree(target / "__pycache__", ignore_errors=True)
