"""Frames on their way kept on disk instead of in memory (``sim.spill_dir``, simulator only).

On the virtual clock every selected FedAvg client takes its turn before the server reads the first
update, so a round's updates are all on their way at once (002 Algorithm 3; p2pnode/runners/footprint.py
counts them as ``in_flight``). At the Foursquare-NYC shape that is 1,083 PRME updates of 18.4 MB,
18.6 GiB, beside the server's v_u of every user (9.2 GiB): more than this 24 GiB machine has.

The server adds each update to a running sum as it reads it, in client order
(protocols/fedavg.py); one that comes before a client with a smaller id has answered (a network
with delays) is held until then, as the server's decoded copy (msgpack hands its binary fields out
as new bytes, so the decoded tensors do not view the frame). With a spill folder both wait on disk:

- ``keep``: a frame of at least ``SPILL_MIN_BYTES`` is written to a region of an unlinked file
  there and carried as a read-only memory map of it (the in-memory network,
  p2pnode/transport/memory.py; the server's global model to its clients is one body behind a
  head each, wire.schema.SharedFrame, held once and not spilled);
- ``keep_params``: an update the server decoded and holds goes the same way, its tensors
  read-only views into one mapped region (the host, p2pnode/nodes/host.py).

Their pages are page cache, which the kernel writes out and reads back as memory runs short, so
only what is being read takes memory. The bytes are the same, so no number changes; a region is
free for the next frame or model when the last view of it goes (a frame once it is read, a held
update once it is in the sum).
"""

from __future__ import annotations

import errno
import mmap
import os
import resource
import tempfile
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import IO

import numpy as np

from learning.params import Array
from p2pnode.config import ConfigError
from p2pnode.transport.base import Payload

#: frames (and models) smaller than this stay in memory: control frames, and models too small to matter
SPILL_MIN_BYTES = 1 << 20
_ALIGN = 64  #: where each tensor of a kept model starts in its region
_CLASS = 1 << 20  #: regions are whole MiB (a multiple of mmap's offset granularity)


class SpillError(RuntimeError):
    """A frame could not be kept in the spill folder (the disk is full, the folder went away)."""


class Spill:
    """Keeps large frames and models in one unlinked file under ``folder``; counts what it kept.

    The file is an arena of regions: a kept thing takes a free region of its size class (its size
    rounded up to whole MiB) or a new one at the end, and gives it back when the last view of it
    goes. Writing over pages the file already has is ~10x faster than giving each frame a file of
    its own (3.8 against 36.7 ms for 18.4 MB here: a new file's pages are allocated, and freed
    when it goes), and a round's updates are alike in size, so the file grows to what is kept at
    once and no further; its blocks are freed when the run ends.
    """

    def __init__(self, folder: str | Path, min_bytes: int = SPILL_MIN_BYTES) -> None:
        self.folder = Path(folder)
        if not self.folder.is_dir():
            raise ConfigError(f"--spill-dir {folder}: not a folder")
        if not os.access(self.folder, os.W_OK | os.X_OK):
            raise ConfigError(f"--spill-dir {folder}: not writable")
        self.min_bytes = min_bytes
        # every region's map holds a descriptor of the file (CPython's mmap keeps a duplicate), and
        # a POI-shaped FedAvg round holds ~2,200 regions at once: past a soft limit of 1,024
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        self.frames = 0  #: frames kept on disk so far
        self.models = 0  #: decoded models kept on disk so far
        self.bytes = 0  #: the bytes of both
        self._file: IO[bytes] | None = None  #: the arena, opened with the first thing kept
        self._end = 0  #: the arena's length
        self._free: dict[int, list[int]] = {}  #: size class -> offsets of free regions
        self.in_use = 0  #: bytes of regions held now

    @property
    def size(self) -> int:
        """The arena's length: the most bytes of regions held at once, by size class."""
        return self._end

    def keep(self, data: Payload) -> Payload:
        """``data`` itself if it is small, else the same bytes as a read-only map of the arena."""
        size = len(data)
        if size < self.min_bytes:
            return data
        kept = self._write([(0, data)], size, "a frame")
        self.frames += 1
        self.bytes += size
        return memoryview(kept)  # the map lives as long as a view of it does

    def keep_params(self, params: Mapping[str, Array]) -> Mapping[str, Array]:
        """``params`` itself if it is small, else the same values as read-only arrays viewing
        one mapped region (an update the FedAvg server holds until it can go into the sum)."""
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
        """A read-only map of a region of the arena holding ``pieces`` at their offsets."""
        span = -(-size // _CLASS) * _CLASS
        try:
            if self._file is None:
                # unlinked, so nothing is left behind; it lives as long as this Spill
                self._file = tempfile.TemporaryFile(dir=self.folder)  # noqa: SIM115
        except OSError as e:
            raise SpillError(f"--spill-dir {self.folder}: could not open a file there: {e}") from e
        fd = self._file.fileno()
        free = self._free.get(span)
        start = free.pop() if free else self._end
        if start == self._end:
            self._end += span
        try:
            for offset, piece in pieces:
                _write_all(fd, memoryview(piece), start + offset)
            if start + span > os.fstat(fd).st_size:
                os.ftruncate(fd, start + span)
            kept = mmap.mmap(fd, size, access=mmap.ACCESS_READ, offset=start)
        except OSError as e:
            self._free.setdefault(span, []).append(start)  # the region is free again
            hint = " (open files: raise ulimit -n)" if e.errno == errno.EMFILE else ""
            raise SpillError(
                f"--spill-dir {self.folder}: could not keep {what} of {size} bytes: {e}{hint}"
            ) from e
        self.in_use += span
        weakref.finalize(kept, self._release, start, span)
        return kept

    def _release(self, start: int, span: int) -> None:
        """The last view of a region went: it takes the next thing of its size class."""
        self._free.setdefault(span, []).append(start)
        self.in_use -= span


def _write_all(fd: int, data: memoryview, at: int) -> None:
    """``os.pwrite`` until all of ``data`` is written (a regular file takes it in one call)."""
    data = data.cast("B") if data.format != "B" or data.ndim != 1 else data
    while data:
        n = os.pwrite(fd, data, at)
        data, at = data[n:], at + n
