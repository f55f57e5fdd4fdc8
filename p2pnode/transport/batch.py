"""Batches: the small frames a process sends to another process in one turn, in one request.

Nodes often send several small frames to the nodes of another process at once: a PeerSwap
initiator asks every neighbour for its lock in one go, and commits or unlocks them in one go
(002 §2.4), and the neighbours of one process answer a batch of lock requests in the same turn;
a colluder multicasts to its partners. The transport collects, per destination address, the small
frames of one turn of the event loop and posts them together to ``POST /v1/batch``, where each is
judged as if it had come alone: with a cluster key every entry carries the authentication headers
its own post would have carried (its sender, time, nonce, body digest and MAC over its own path),
checked as those headers would be, then rate-limited, decoded and answered with its own status.
The request itself is signed too (by its first entry's sender), so a stranger's batch is refused
from its headers before its body is read.

Body: a msgpack array of ``[dst, channel, frame, auth]`` (2 to :data:`MAX_FRAMES` entries; ``auth``
a map of header name to value, empty in an open cluster); answer: a msgpack array of
``[status, reason]``, one per entry, in order. A body that is not exactly that is refused whole
(400 ``bad-batch``) before any frame is delivered.
"""

from __future__ import annotations

from typing import Any

import msgpack

from p2pnode.transport.base import Outcome
from p2pnode.trust.identity import MAX_CREDENTIAL_CHARS
from p2pnode.wire.schema import Channel, WireError

MAX_FRAMES = 64  #: frames in one batch
SMALL_SHARE = 4  #: a frame joins a batch if it is at most 1/SMALL_SHARE of the body limit
ENTRY_BYTES = 1024  #: room an entry takes besides its frame (its auth headers, credential included)
_CHANNELS = {int(c) for c in Channel}


Entry = tuple[int, Channel, bytes, dict[str, str]]  #: destination, channel, frame, its auth headers
MAX_AUTH = 10  #: headers in one entry's auth map
MAX_HEADER = MAX_CREDENTIAL_CHARS  #: characters in one of them (a credential is the longest)


def pack_batch(entries: list[Entry]) -> bytes:
    return bytes(
        msgpack.packb([[dst, int(ch), frame, auth] for dst, ch, frame, auth in entries], use_bin_type=True)
    )


def parse_batch(data: bytes) -> list[Entry]:
    """The entries of a batch body; raises WireError(bad-batch) unless it is exactly a batch."""
    try:
        obj: Any = msgpack.unpackb(
            data,
            raw=False,
            max_array_len=MAX_FRAMES,
            max_map_len=MAX_AUTH,
            max_str_len=MAX_HEADER,
            max_ext_len=0,
        )
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise WireError("bad-batch", f"not a msgpack array: {type(exc).__name__}") from None
    if not isinstance(obj, list) or not 2 <= len(obj) <= MAX_FRAMES:
        raise WireError("bad-batch", f"a batch is an array of 2 to {MAX_FRAMES} entries")
    out = []
    for entry in obj:
        if (
            not isinstance(entry, list)
            or len(entry) != 4
            or type(entry[0]) is not int
            or entry[0] < 0
            or type(entry[1]) is not int
            or entry[1] not in _CHANNELS
            or not isinstance(entry[2], bytes)
            or not isinstance(entry[3], dict)
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in entry[3].items())
        ):
            raise WireError("bad-batch", "an entry is [node id, channel 1-4, frame bytes, auth map]")
        out.append((entry[0], Channel(entry[1]), entry[2], entry[3]))
    return out


def pack_outcomes(outcomes: list[Outcome]) -> bytes:
    return bytes(msgpack.packb([[o.status, o.reason] for o in outcomes], use_bin_type=True))


def parse_outcomes(data: bytes, count: int) -> list[Outcome] | None:
    """The per-entry outcomes of a batch answer (None if it is not ``count`` of them)."""
    try:
        obj: Any = msgpack.unpackb(data, raw=False, max_array_len=max(count, 2), max_map_len=0)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError):
        return None
    if not isinstance(obj, list) or len(obj) != count:
        return None
    out = []
    for item in obj:
        if not (
            isinstance(item, list) and len(item) == 2 and type(item[0]) is int and isinstance(item[1], str)
        ):
            return None
        out.append(Outcome(item[0], item[1][:64]))
    return out
