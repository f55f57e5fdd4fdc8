"""Frames on their way kept on disk instead of in memory (``sim.spill_dir``, simulator only).

On the virtual clock every selected FedAvg client takes its turn before the server reads the first
update, so a round's updates are all on their way at once (002 Algorithm 3; p2pnode/footprint.py
counts them as ``in_flight``). At the Foursquare-NYC shape that is 1,083 PRME updates of 18.4 MB,
18.6 GiB, beside the server's v_u of every user (9.2 GiB): more than this 24 GiB machine has.

An update is held twice over in that time, one form after the other: as its frame until the
server reads it, then as the server's decoded copy until the round's average (msgpack hands its
binary fields out as new bytes, so the decoded tensors do not view the frame). With a spill
folder both wait on disk:

- ``keep``: a frame of at least ``SPILL_MIN_BYTES`` is written to an unlinked file there and
  carried as a read-only memory map of it (the in-memory network, p2pnode/transport/memory.py);
- ``keep_params``: an update the server has decoded goes the same way, its tensors read-only
  views into one mapped file (the host, p2pnode/host.py).

Their pages are page cache, which the kernel writes out and reads back as memory runs short, so
only what is being read takes memory. The bytes are the same, so no number changes; a file's
blocks are freed when the last view of it goes (the server lets its pending updates go once the
round's average is taken).
"""

from __future__ import annotations

import mmap
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from learning.params import Array
from p2pnode.config import ConfigError
from p2pnode.transport.base import Payload

#: frames (and models) smaller than this stay in memory: control frames, and models too small to matter
SPILL_MIN_BYTES = 1 << 20
_ALIGN = 64  #: where each tensor of a kept model starts in its file


class SpillError(RuntimeError):
    """A frame could not be kept in the spill folder (the disk is full, the folder went away)."""


class Spill:
    """Keeps large frames in unlinked files under ``folder``; counts what it kept."""

    def __init__(self, folder: str | Path, min_bytes: int = SPILL_MIN_BYTES) -> None:
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise ConfigError(f"--spill-dir {folder}: not a folder")
        if not os.access(self.folder, os.W_OK | os.X_OK):
            raise ConfigError(f"--spill-dir {folder}: not writable")
        self.min_bytes = min_bytes
        self.frames = 0  #: frames kept on disk so far
        self.models = 0  #: decoded models kept on disk so far
        self.bytes = 0  #: the bytes of both

    def keep(self, data: Payload) -> Payload:
        """``data`` itself if it is small, else the same bytes as a read-only map of a file."""
        size = len(data)
        if size < self.min_bytes:
            return data
        kept = self._write([(0, data)], size, "a frame")
        self.frames += 1
        self.bytes += size
        return memoryview(kept)  # the map lives as long as a view of it does

    def keep_params(self, params: Mapping[str, Array]) -> Mapping[str, Array]:
        """``params`` itself if it is small, else the same values as read-only arrays viewing
        one mapped file (an update the FedAvg server holds until the round's average)."""
        at, parts = 0, []
        for arr in params.values():
            parts.append((at, np.ascontiguousarray(arr)))
            at += -(-arr.nbytes // _ALIGN) * _ALIGN
        if at < self.min_bytes:
            return params
        kept = self._write([(offset, a.data.cast("B")) for offset, a in parts], at, "a model")
        self.models += 1
        self.bytes += at
        return {
            name: np.frombuffer(kept, dtype=a.dtype, count=a.size, offset=offset).reshape(a.shape)
            for name, (offset, a) in zip(params, parts, strict=True)
        }

    def _write(self, pieces: list[tuple[int, Payload]], size: int, what: str) -> mmap.mmap:
        """A read-only map of an unlinked file holding ``pieces`` at their offsets."""
        try:
            with tempfile.TemporaryFile(dir=self.folder) as f:  # unlinked: nothing is left behind
                for offset, piece in pieces:
                    f.seek(offset)
                    f.write(piece)
                f.truncate(size)
                f.flush()
                return mmap.mmap(f.fileno(), size, access=mmap.ACCESS_READ)
        except OSError as e:
            raise SpillError(f"--spill-dir {self.folder}: could not keep {what} of {size} bytes: {e}") from e
