"""Calibrated DP-SGD noise multipliers kept on disk between runs (learning.dp.SigmaStore).

A node's σ is calibrated from its target ε, δ, sampling rate and step budget by Opacus' binary
search: ~3.5 s for each distinct (q, steps), ~50 s of every 943-node DP run's build, and the
same numbers again for every seed, row and experiment with the same ε. The search is a pure
function of its inputs, so its answer is kept here, one JSON line per calibration, and the next
process reads it instead. ``learning.dp.calibrate_noise`` still checks every stored σ with one ε
reading before it uses it, so this file can save time and nothing else: an edited, stale or
torn line costs the search again, never a weaker guarantee.

The file is ``$P2PNODE_CACHE/dp-sigma.jsonl`` (default ``~/.cache/p2pnode``); ``P2PNODE_CACHE=none``
keeps nothing. Lines are appended with one ``write`` on a file opened for appending (whole lines
under concurrent writers on a local file system); a line that does not parse is passed over.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from learning.dp import use_sigma_store

FILE_NAME = "dp-sigma.jsonl"


def cache_dir() -> Path | None:
    """``$P2PNODE_CACHE`` or ``~/.cache/p2pnode``; None when ``P2PNODE_CACHE=none``."""
    env = os.environ.get("P2PNODE_CACHE")
    if env is not None and env.strip().lower() in ("none", "off", ""):
        return None
    return Path(env) if env else Path.home() / ".cache" / "p2pnode"


class FileSigmaStore:
    """σ by calibration key, read from an append-only JSON-lines file once, then appended to."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._known: dict[str, float] | None = None
        self.unwritable = False  #: set after a failed write; the store then only reads

    def _load(self) -> dict[str, float]:
        if self._known is None:
            self._known = {}
            try:
                text = self.path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                text = ""
            for line in text.splitlines():
                try:
                    entry = json.loads(line)
                    key, sigma = entry["key"], entry["sigma"]
                except (ValueError, TypeError, KeyError):
                    continue
                if isinstance(key, str) and isinstance(sigma, float) and math.isfinite(sigma):
                    self._known[key] = sigma
        return self._known

    def get(self, key: str) -> float | None:
        return self._load().get(key)

    def put(self, key: str, sigma: float) -> None:
        known = self._load()
        if known.get(key) == sigma:
            return
        known[key] = sigma
        if self.unwritable:
            return
        line = (json.dumps({"key": key, "sigma": sigma}) + "\n").encode()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                size = os.fstat(fd).st_size
                if size and os.pread(fd, 1, size - 1) != b"\n":
                    line = b"\n" + line  # after a torn last line: this one stands on its own
                os.write(fd, line)
            finally:
                os.close(fd)
        except OSError:
            self.unwritable = True  # a read-only home: calibrations still work, one process long


_INSTALLED: list[Path | None] = []


def install() -> None:
    """Use the file store for this process's calibrations (once; again if the folder changed)."""
    folder = cache_dir()
    if [folder] == _INSTALLED:
        return
    _INSTALLED[:] = [folder]
    use_sigma_store(FileSigmaStore(folder / FILE_NAME) if folder is not None else None)
