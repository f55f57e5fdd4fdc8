"""Crash-safe node state: one checkpoint file per node, written atomically, checked on load.

A checkpoint holds everything a node needs to continue after a restart: its model and optimizer
moments, model version, random streams, view, per-sender sequence numbers, protocol buffer, CIA
observer state and DP accountant (so ε never goes backwards). The file is
``MAGIC | SHA-256(payload) | payload`` where the payload is msgpack (arrays as dtype, shape and
raw bytes; never pickle). It is written to a temporary file, fsynced, renamed over the old one
and the directory fsynced: a ``kill -9`` at any moment leaves the previous checkpoint or the new
one, never a mix. A file that fails its digest or its schema is an error, not a silent reset.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import msgpack
import numpy as np

from p2pnode.atomic import write_bytes

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
