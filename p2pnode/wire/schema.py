"""Wire version, the append-only message-type enum, limits, and the rejection error."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

WIRE_VERSION = 1


class MsgType(IntEnum):
    """Message types. Append only: never renumber or reuse a value."""

    MODEL = 1
    SWAP_PROPOSE = 2
    SWAP_ACCEPT = 3
    LOCK_REQUEST = 4
    LOCK_REPLY = 5
    SWAP_COMMIT = 6
    SWAP_ADOPT = 7
    UNLOCK = 8
    SHUFFLE_REQUEST = 9
    SHUFFLE_REPLY = 10
    FED_GLOBAL = 11
    FED_UPDATE = 12
    COLLUDE = 13  #: a colluder's multicast of an observed (u, v_u) to its partners (CIA Alg. 2 l.14)
    LEAVE = 14  #: a node leaving the network for good (Cyclon drops it from its cache)
    PUBLIC = 15  #: rows of PARD's public set D_pub (paper 004 Alg. 1 line 23), on the gossip route
    KNN_PROBE = 16  #: a querier's profile shown to a candidate neighbour (protocols/knn.py)
    KNN_PROFILE = 17  #: the candidate's similarity, co-rated count and item ids
    KNN_ASK = 18  #: a query's ask for one neighbour's rating of an item
    KNN_ANSWER = 19  #: the neighbour's rating (randomized past τ), or none
    SWAP_CHECK = 20  #: a PeerSwap neighbour asks a transaction's partner whether it adopted (THREAT_MODEL.md)
    SWAP_CHECKED = 21  #: the partner's answer: adopted or not, and whether its views name the asker


MODEL_TYPES = frozenset({MsgType.MODEL, MsgType.FED_GLOBAL, MsgType.FED_UPDATE})
KNN_TYPES = frozenset({MsgType.KNN_PROBE, MsgType.KNN_PROFILE, MsgType.KNN_ASK, MsgType.KNN_ANSWER})


@dataclass(frozen=True, slots=True)
class SharedFrame:
    """One frame of a multicast sent within a process: its bytes are ``head`` followed by
    ``body``, and every frame of the multicast holds the same ``body`` object. A FedAvg server's
    global model goes to every selected client alike, so a round holds one body instead of one
    frame a client (at the Foursquare-NYC shape 1,083 of 18.4 MB). Only the simulator's network
    carries such frames (p2pnode/transport/memory.py); a socket carries bytes."""

    head: bytes  #: the envelope up to the body: a map of 5, keys v, t, src, dst with their values, and "b"
    body: bytes | memoryview  #: the packed body, the same object for every frame of the multicast

    def __len__(self) -> int:
        return len(self.head) + len(self.body)

    def __bytes__(self) -> bytes:
        return b"".join((self.head, self.body))


class Channel(IntEnum):
    """Which ``/v1/`` route a message type travels on."""

    GOSSIP = 1
    SAMPLING = 2
    COLLUDE = 3
    KNN = 4  #: the KNN service's messages (protocols/knn.py)


MAX_VIEW_IDS = 4096
MAX_PROFILE_ITEMS = MAX_VIEW_IDS  #: the most items a KNN profile names (protocols/knn.py): one msgpack array
MAX_NEAR = 32  #: the most peer ids a KNN profile suggests (ranked candidates, protocols/knn.py)
MAX_CYCLON_ENTRIES = 256
MAX_ADDRESS_LEN = 255
MAX_TENSORS = 64
MAX_NAME_LEN = 64
MAX_NODE_ID = 2**40


#: every reason a decoder refusal can carry (the label of p2pnode_rejected_messages_total)
DECODE_REASONS = frozenset(
    {
        "malformed",
        "truncated",
        "too-large",
        "version",
        "unknown-type",
        "schema",
        "dtype",
        "shape",
        "non-finite",
        "no-base",
        "unknown-id",
    }
)


INCARNATION_SHIFT = 32  #: a model's wire version: the sender's incarnation << 32 | its own count
MAX_VERSION_JUMP = 100_000  #: within one incarnation, how far ahead of the last one a model may be


class WireError(Exception):
    """A peer's message was refused. ``reason`` labels the metric; ``status`` is the HTTP answer."""

    def __init__(self, reason: str, detail: str, status: int = 400) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
        self.status = status
