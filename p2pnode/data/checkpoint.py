"""Crash-safe node state: one checkpoint file per node, written atomically, checked on load.

A checkpoint holds everything a node needs to continue after a restart: its model and optimizer
moments, model version, random streams, view, per-sender sequence numbers, protocol buffer, CIA
observer state and DP accountant (so ε never goes backwards). The file is
``MAGIC | SHA-256(payload) | payload`` where the payload is msgpack (arrays as dtype, shape and
raw bytes; never pickle). It is written to a temporary file, fsynced, renamed over the old one
and the directory fsynced: a ``kill -9`` at any moment leaves the previous checkpoint or the new
one, never a mix. A file that fails its digest or its schema is an error, not a silent reset.

:class:`StateDir` is a process's ``--state-dir``: a checkpoint per hosted node, the process's
history and resumes (``process.json``) and the last round reached (``progress.json``); it saves
them, and restores every hosted node from them at a start.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

import msgpack
import numpy as np

from p2pnode.data.atomic import write_bytes, write_text

log = logging.getLogger("p2pnode.checkpoint")
PROCESS_STATE = "process.json"  #: in --state-dir: the history and resumes of the process
PROGRESS = "progress.json"  #: in --state-dir: the last round reached, written every round

MAGIC = b"P2PNODE-CKPT-1\n"
_DTYPES = {"<f4", "<f8", "<f2", "<i8", "<i4", "|u1", "|b1"}
_MAX_BYTES = 1 << 33


class CheckpointError(Exception):
    """A checkpoint file that cannot be trusted (torn, corrupt, or from another schema)."""


def path_for(state_dir: Path, node_id: int) -> Path:
    return state_dir / f"node-{node_id}.ckpt"


def _encode(obj: Any) -> Any:
    if isinstance(obj, np.ndarray):
        arr = np.ascontiguousarray(obj)
        if arr.dtype.str not in _DTYPES:
            raise TypeError(f"checkpoint: unsupported array dtype {arr.dtype}")
        return {"__nd__": [arr.dtype.str, list(arr.shape), arr.tobytes()]}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        return {k: _encode(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_encode(v) for v in obj]
    if isinstance(obj, int) and not -(2**63) <= obj < 2**64:
        return {"__int__": str(obj)}
    return obj


def _decode(obj: Any) -> Any:
    if isinstance(obj, dict):
        if "__nd__" in obj and len(obj) == 1:
            dtype, shape, raw = obj["__nd__"]
            if dtype not in _DTYPES or not isinstance(raw, bytes):
                raise CheckpointError(f"array of dtype {dtype!r}")
            dt = np.dtype(dtype)
            shape = tuple(int(d) for d in shape)
            if int(np.prod(shape, dtype=np.int64)) * dt.itemsize != len(raw):
                raise CheckpointError("array bytes do not match its shape")
            return np.frombuffer(raw, dtype=dt).reshape(shape).copy()
        if "__int__" in obj and len(obj) == 1:
            return int(obj["__int__"])
        return {k: _decode(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_decode(v) for v in obj]
    return obj


def dumps(state: dict[str, Any]) -> bytes:
    payload = bytes(msgpack.packb(_encode(state), use_bin_type=True))
    return MAGIC + hashlib.sha256(payload).digest() + payload


def loads(data: bytes) -> dict[str, Any]:
    if not data.startswith(MAGIC):
        raise CheckpointError("not a p2pnode checkpoint (bad magic)")
    digest, payload = data[len(MAGIC) : len(MAGIC) + 32], data[len(MAGIC) + 32 :]
    if hashlib.sha256(payload).digest() != digest:
        raise CheckpointError("checksum mismatch (torn or corrupted file)")
    try:
        raw = msgpack.unpackb(payload, raw=False, strict_map_key=False, max_bin_len=_MAX_BYTES)
    except (ValueError, msgpack.exceptions.ExtraData) as exc:
        raise CheckpointError(f"unreadable payload ({exc})") from None
    state = _decode(raw)
    if not isinstance(state, dict):
        raise CheckpointError("payload is not a map")
    return state


def save(path: Path, state: dict[str, Any]) -> int:
    """Write atomically (temp file, fsync, rename, fsync the directory); returns the bytes written."""
    return write_bytes(path, dumps(state), mode=0o600)


def load(path: Path) -> dict[str, Any] | None:
    """The checkpoint at ``path``; None when there is none; CheckpointError when it is bad."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return loads(data)
    except CheckpointError as exc:
        raise CheckpointError(f"{path}: {exc}") from None


class Checkpointed(Protocol):
    """A hosted node as its checkpoints see it (``p2pnode.nodes.node.NodeRuntime``)."""

    node_id: int
    round: int

    def checkpoint_state(self) -> dict[str, Any]: ...

    def restore_state(self, state: dict[str, Any]) -> None: ...

    def away(self, ticks: float) -> None:
        """Its views aged by ``ticks`` while the process was down."""


class StateDir:
    """A process's ``--state-dir``: saves its nodes' checkpoints and its history, restores them.

    A full or failing disk never stops the nodes: a failed save is said once (and again when
    saves work again), counted in ``on_failure``, and the previous files stay whole. A start that
    cannot trust what it finds (a bad checkpoint, some hosted nodes without one) raises
    CheckpointError saying what to do.
    """

    def __init__(self, path: Path, on_failure: Callable[[], None] = lambda: None) -> None:
        self.path = path
        self.on_failure = on_failure
        self._progress_failing = False  #: progress.json could not be written last round
        self._checkpoint_failing = False  #: the last checkpoint could not be written

    # -- start ---------------------------------------------------------------------------------

    def restore(self, nodes: Iterable[Checkpointed], tick_seconds: float) -> list[int]:
        """Restore every node that has a checkpoint here; returns the rounds the restored ones reached."""
        self.path.mkdir(parents=True, exist_ok=True)
        runtimes = list(nodes)
        states = {}
        for runtime in runtimes:
            try:
                states[runtime.node_id] = load(path_for(self.path, runtime.node_id))
            except CheckpointError as exc:
                raise CheckpointError(f"{exc}; move the file away to start this node afresh") from None
        partial = any(st is None for st in states.values()) and any(st is not None for st in states.values())
        if partial and not (self.path / PROCESS_STATE).exists():
            # no save ever completed: the first one was cut short (a crash, a full disk) after
            # some nodes' files; they are from that round alone, so every node starts afresh
            some = sorted(n for n, st in states.items() if st is not None)
            log.warning(
                "%s: the first checkpoint was cut short (%d of %d nodes saved, no process state): "
                "every node starts afresh",
                self.path,
                len(some),
                len(states),
            )
            return []
        self._check_complete(states)
        rounds = []
        for runtime in runtimes:
            state = states[runtime.node_id]
            if state is None:
                continue
            try:
                runtime.restore_state(state)
                if state.get("saved_at") is not None:  # its views aged while it was down
                    away = max(0.0, time.time() - float(state["saved_at"]))
                    runtime.away(away / tick_seconds)
            except (ValueError, KeyError, TypeError) as exc:
                raise CheckpointError(
                    f"node {runtime.node_id}: cannot resume from its checkpoint: {exc}"
                ) from None
            rounds.append(runtime.round)
        return rounds

    def _check_complete(self, states: dict[int, dict[str, Any] | None]) -> None:
        """Some hosted nodes have a checkpoint and others none: the saves that made them did not
        all complete (a full disk fails the rest of a save). Resuming those few while the others
        start afresh would mix a run's rounds silently, so the start stops and says which."""
        have = sorted(n for n, st in states.items() if st is not None)
        if not have or len(have) == len(states):
            return
        missing = sorted(n for n, st in states.items() if st is None)
        rounds = sorted({int(st.get("round", 0)) for st in states.values() if st is not None})
        where = f"round {rounds[0]}" if len(rounds) == 1 else f"rounds {rounds[0]}-{rounds[-1]}"
        raise CheckpointError(
            f"{self.path}: {len(have)} of {len(states)} hosted nodes have a checkpoint "
            f"({where}), {len(missing)} have none (first: {missing[:5]}): a save did not complete "
            "(was the disk full? the run said 'cannot write checkpoints'). Resuming would restart "
            "those nodes afresh beside the others; free space and restore the missing files, or "
            "move the state directory away to start every node afresh"
        )

    def process_state(self) -> dict[str, Any]:
        """The history and resumes saved with the last checkpoints (empty when unreadable)."""
        path = self.path / PROCESS_STATE
        try:
            saved = json.loads(path.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("%s unreadable (%s): the history before this resume is lost", path, exc)
            return {}
        return saved if isinstance(saved, dict) else {}

    def progress(self) -> tuple[int, float] | None:
        """The last round reached before the stop, and when (None: not known)."""
        try:
            rnd, when = json.loads((self.path / PROGRESS).read_text())
            return int(rnd), float(when)
        except (OSError, ValueError, TypeError):
            return None

    # -- while running -------------------------------------------------------------------------

    def mark_progress(self, round_no: int) -> None:
        """The round just reached and when, for the next resume to say what it replays."""
        path = self.path / PROGRESS
        try:  # every round: atomic, not fsynced (a power cut costs only the note)
            write_text(path, json.dumps([round_no, time.time()]), sync=False)
        except OSError as exc:  # a full disk must not stop the node: only the resume note suffers
            if not self._progress_failing:
                log.warning("cannot write %s (%s): a resume will not know the last round reached", path, exc)
            self._progress_failing = True
            return
        if self._progress_failing:
            log.warning("%s written again", path)
        self._progress_failing = False

    def save(self, round_no: int, process: dict[str, Any], nodes: Iterable[Checkpointed]) -> int:
        """Checkpoint every node (atomic per node) and the process's ``process`` state (its
        history and resumes); returns the bytes written. Raises OSError."""
        total = 0
        for runtime in nodes:
            runtime.round = round_no
            total += save(path_for(self.path, runtime.node_id), runtime.checkpoint_state())
        # last: its presence says that a save of every node completed at least once (restore)
        total += write_text(self.path / PROCESS_STATE, json.dumps({"round": round_no, **process}))
        return total

    def save_or_say(self, round_no: int, process: dict[str, Any], nodes: Iterable[Checkpointed]) -> None:
        """:meth:`save`; a full or failing disk is said once and counted, and the nodes run on
        (each file is replaced atomically, so the previous checkpoint stays whole)."""
        try:
            self.save(round_no, process, nodes)
        except OSError as exc:
            self.on_failure()
            if not self._checkpoint_failing:
                log.warning(
                    "cannot write checkpoints to %s (%s): the previous ones are kept, the nodes run on",
                    self.path,
                    exc,
                )
            self._checkpoint_failing = True
            return
        if self._checkpoint_failing:
            log.warning("checkpoints written to %s again", self.path)
        self._checkpoint_failing = False
