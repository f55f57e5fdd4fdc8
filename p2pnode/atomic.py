"""Atomic file writes: a temporary file, fsync, rename over the target, fsync the directory.

A reader (or a restart after ``kill -9``) sees the old file or the new one, never a torn mix.
Used for checkpoints, key files, experiment run files and reports.
"""

from __future__ import annotations

import os
from pathlib import Path


def write_bytes(path: Path, data: bytes, mode: int = 0o644) -> int:
    """Replace ``path`` with ``data`` atomically (file created with ``mode``); returns its size."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return len(data)


def write_text(path: Path, text: str, mode: int = 0o644) -> int:
    return write_bytes(path, text.encode(), mode)
