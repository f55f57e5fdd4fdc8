"""Datasets on disk: MovieLens-100k from the recbole wheel, read offline from a cache directory.

docs/design.md, Datasets: the wheel of ``recbole==1.2.1`` on PyPI ships ML-100k in
``recbole/dataset_example/ml-100k/``. ``p2pnode data get ml-100k`` takes the files from an
installed recbole (never imported) or from the wheel, which it downloads with pip, and copies
them into the data directory.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from learning.interactions import DataError, Interactions
from p2pnode.data import atomic
from p2pnode.data.tables import LoadReport, TableOptions, load

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
    """All 100,000 ratings of ML-100k as implicit feedback (every rating is an interaction), the
    1-5 stars kept as the interactions' ratings. Read once per process while the file is
    unchanged (0.8 s a read; every run of a process prepares its data); the arrays are read-only."""
    path = dataset_path(data_dir) / "ml-100k.inter"
    if not path.exists():
        raise DataError(f"MovieLens-100k is not in {path.parent}; run `p2pnode data get ml-100k` first")
    stat = path.stat()
    return _read_ml100k(str(path.resolve()), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=2)
def _read_ml100k(where: str, mtime_ns: int, size: int) -> Interactions:
    path = Path(where)
    users: list[str] = []
    items: list[str] = []
    times: list[float] = []
    ratings: list[float] = []
    with path.open() as fh:
        header = fh.readline().rstrip("\n").split("\t")
        cols = {name.split(":")[0]: k for k, name in enumerate(header)}
        if not {"user_id", "item_id", "rating", "timestamp"} <= set(cols):
            raise DataError(f"{path}: header {header} lacks user_id, item_id, rating or timestamp")
        ui, ii, ri, ti = cols["user_id"], cols["item_id"], cols["rating"], cols["timestamp"]
        for lineno, line in enumerate(fh, start=2):
            parts = line.rstrip("\n").split("\t")
            try:
                rating, t = float(parts[ri]), float(parts[ti])
                users.append(parts[ui])
                items.append(parts[ii])
            except (IndexError, ValueError):
                raise DataError(f"{path}:{lineno}: bad row {line.strip()!r}") from None
            times.append(t)
            ratings.append(rating)
    data = Interactions.from_raw(users, items, times, name=ML100K, ratings=ratings)
    for array in (data.users, data.items, data.timestamps, data.ratings):
        if array is not None:
            array.setflags(write=False)  # shared by every run of the process: never changed in place
    return data


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


def load_table(
    path: str | Path, min_interactions: int = 5, options: TableOptions | None = None
) -> Interactions:
    """A user's interaction file in any format ``p2pnode.data.tables`` reads (check-in logs as
    distributed, CSV/TSV tables), preprocessed as ``options`` say; ``min_interactions`` is the
    users' filter when no options are given."""
    return load(path, options or TableOptions(min_interactions=min_interactions))


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


@dataclass(frozen=True)
class Source:
    """One of the CIA paper's data sets (Table I): where a user gets it and how p2pnode reads it."""

    name: str
    users: int
    items: int
    interactions: str
    where: str
    how: str


SOURCES = (
    Source(
        ML100K,
        943,
        1682,
        "100,000 ratings",
        "the recbole 1.2.1 wheel on PyPI (p2pnode data get ml-100k copies it, offline once downloaded)",
        "--dataset ml-100k (the default)",
    ),
    Source(
        "foursquare-nyc",
        1083,
        38333,
        "227,428 check-ins (the paper rounds to 200k)",
        "Dingqi Yang's Foursquare page, https://sites.google.com/site/yangdingqi/home/foursquare-dataset: "
        "dataset_tsmc2014.zip (the TSMC2014 NYC and TKY files); p2pnode reads the zip or "
        "dataset_TSMC2014_NYC.txt from it as they are",
        "--dataset dataset_TSMC2014_NYC.txt (venue categories are kept for --target-genre)",
    ),
    Source(
        "gowalla-nyc",
        718,
        32924,
        "185,932 check-ins",
        "SNAP, https://snap.stanford.edu/data/loc-gowalla.html: loc-gowalla_totalCheckins.txt.gz "
        "(world-wide; p2pnode reads the .gz as it is)",
        "--dataset loc-gowalla_totalCheckins.txt.gz --bbox nyc (the paper's cut to New York; it "
        "gives neither its box nor its filters, so compare the counts `p2pnode data describe` prints)",
    ),
)


def source(name: str) -> Source:
    for s in SOURCES:
        if s.name == name:
            return s
    raise DataError(f"no data set {name!r}; known: {', '.join(s.name for s in SOURCES)}")


def describe(path: str | Path, options: TableOptions) -> list[str]:
    """What ``load`` makes of a file: its format and what each preprocessing step leaves."""
    report = LoadReport(str(path))
    load(path, options, report)
    return report.lines()


#: beside a file ``p2pnode data synth`` wrote: what made it (``FILE.synthetic.json``)
SYNTHETIC_SUFFIX = ".synthetic.json"


def mark_synthetic(path: Path, about: dict[str, object]) -> None:
    """Say beside ``path`` that it is synthetic and what made it, with its SHA-256, so that a
    report of runs on it can say so (a file named as the paper's data set is not the paper's)."""
    import hashlib
    import json

    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    atomic.write_text(Path(f"{path}{SYNTHETIC_SUFFIX}"), json.dumps({**about, "sha256": digest}, indent=1))


def synthetic_origin(path: str | Path) -> dict[str, object] | None:
    """What made ``path`` where ``p2pnode data synth`` wrote it (its marker, whose digest still
    matches the file's bytes), else None: a real file, or one changed since."""
    import hashlib
    import json

    marker = Path(f"{path}{SYNTHETIC_SUFFIX}")
    try:
        about = json.loads(marker.read_text())
        same = about.get("sha256") == hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except (OSError, ValueError, AttributeError):
        return None
    return about if same and isinstance(about, dict) else None
