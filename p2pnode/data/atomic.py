"""Atomic file writes: a temporary file, fsync, rename over the target, fsync the directory.

A reader (or a restart after ``kill -9``) sees the old file or the new one, never a torn mix.
Used for checkpoints, key files, datasets, experiment run files, reports and the deploy bundle.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def write_bytes(path: Path, data: bytes, mode: int = 0o644, sync: bool = True) -> int:
    """Replace ``path`` with ``data`` atomically (file created with ``mode``); returns its size.
    ``sync=False`` skips the fsyncs: still never torn, but a power cut may lose the new file."""
    with replacing(path, sync) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
    return len(data)


def write_text(path: Path, text: str, mode: int = 0o644, sync: bool = True) -> int:
    return write_bytes(path, text.encode(), mode, sync)


@contextmanager
def replacing(path: Path, sync: bool = True) -> Iterator[Path]:
    """A temporary path next to ``path`` to write to; on success it replaces ``path`` (and the
    directory is fsynced), on an exception it is removed and ``path`` is left as it was."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if sync:
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
