"""Peer-sampling messages (PeerSwap transaction and Cyclon shuffle). Plain data, no behaviour."""

from __future__ import annotations

from dataclasses import dataclass

Txn = tuple[int, int]  # (initiator id, initiator's counter)


@dataclass(frozen=True, slots=True)
class SwapPropose:
    """PeerSwap step 1, i → j: lock yourself and tell me your views (002 §2.4). Where the
    partner's process judges the views a swap hands it (THREAT_MODEL.md), i shows its own views here;
    otherwise none (empty)."""

    txn: Txn
    out_view: tuple[int, ...] = ()
    in_view: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class SwapAccept:
    """j → i: locked; here are my out- and in-views."""

    txn: Txn
    out_view: tuple[int, ...]
    in_view: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class LockRequest:
    """i → each neighbour of i or j: hold your views still for transaction ``txn``. ``about``
    (i and j held by two other members' processes than the neighbour's): j, whose
    views name the neighbour; say in the reply where your views name i or j."""

    txn: Txn
    about: int | None = None


@dataclass(frozen=True, slots=True)
class LockReply:
    """Answer to SwapPropose (when busy) or LockRequest: granted or not; asked ``about`` j,
    whether the granting node's views name i or j in its out-view (``out``) and in-view (``into``)."""

    txn: Txn
    granted: bool
    out: bool = False
    into: bool = False


@dataclass(frozen=True, slots=True)
class SwapCommit:
    """i → every locked neighbour: exchange ``a`` and ``b`` in your views and unlock."""

    txn: Txn
    a: int
    b: int


@dataclass(frozen=True, slots=True)
class SwapAdopt:
    """i → j: take over these views (i's old views with i and j exchanged) and unlock."""

    txn: Txn
    out_view: tuple[int, ...]
    in_view: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class SwapCheck:
    """k → an end of ``txn``, where a ``SwapCommit`` would move k's edges to it and two other
    members' processes host the ends (THREAT_MODEL.md): did you take the swap's views (the partner
    adopted them, the initiator committed), and where do they name me?"""

    txn: Txn


CHECK_REFUSED = 0  #: ``SwapChecked.state``: it did not take the swap (or forgot it)
CHECK_PENDING = 1  #: the partner granted it and waits for the adopt: ask again
CHECK_ADOPTED = 2  #: it took the swap; ``out`` and ``into`` say where its views name the asker


@dataclass(frozen=True, slots=True)
class SwapChecked:
    """The answer to ``SwapCheck``: whether the end took the swap's views and, if it did, whether
    they name the asker in the out-view (``out``) and in the in-view (``into``)."""

    txn: Txn
    state: int
    out: bool = False
    into: bool = False


@dataclass(frozen=True, slots=True)
class Unlock:
    """i → every node it locked: the transaction is aborted, views unchanged."""

    txn: Txn


CyclonEntry = tuple[int, str, int]  # (node id, address, age)


@dataclass(frozen=True, slots=True)
class ShuffleRequest:
    """Cyclon: p → q, a subset of p's cache with p itself at age 0."""

    entries: tuple[CyclonEntry, ...]


@dataclass(frozen=True, slots=True)
class ShuffleReply:
    """Cyclon: q → p, a subset of q's cache."""

    entries: tuple[CyclonEntry, ...]


@dataclass(frozen=True, slots=True)
class Leave:
    """Cyclon: a node leaving for good tells the peers in its cache, which drop it at once."""


SAMPLING_MESSAGES: tuple[type, ...] = (
    SwapPropose,
    SwapAccept,
    LockRequest,
    LockReply,
    SwapCommit,
    SwapAdopt,
    Unlock,
    SwapCheck,
    SwapChecked,
    ShuffleRequest,
    ShuffleReply,
    Leave,
)
