"""Peer-sampling messages (PeerSwap transaction and Cyclon shuffle). Plain data, no behaviour."""

from __future__ import annotations

from dataclasses import dataclass

Txn = tuple[int, int]  # (initiator id, initiator's counter)


@dataclass(frozen=True, slots=True)
class SwapPropose:
    """PeerSwap step 1, i → j: lock yourself and tell me your views (002 §2.4). Where the
    partner's process judges the views a swap hands it (issue #61), i shows its own views here;
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
    """i → each neighbour of i or j: hold your views still for transaction ``txn``."""

    txn: Txn


@dataclass(frozen=True, slots=True)
class LockReply:
    """Answer to SwapPropose (when busy) or LockRequest: granted or not."""

    txn: Txn
    granted: bool


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
    """k → j, where i's ``SwapCommit`` would move an edge of k with i to j and k's process hosts
    neither i nor j, and another member holds j (issue #61): did you adopt ``txn``, and do the
    views you adopted name me?"""

    txn: Txn


CHECK_REFUSED = 0  #: ``SwapChecked.state``: the partner did not adopt the transaction (or forgot it)
CHECK_PENDING = 1  #: the partner granted it and waits for the adopt: ask again
CHECK_ADOPTED = 2  #: the partner adopted it; ``out`` and ``into`` say where its views name the asker


@dataclass(frozen=True, slots=True)
class SwapChecked:
    """j → k, the answer to ``SwapCheck``: whether j adopted ``txn`` and, if it did, whether
    the views it adopted name k in the out-view (``out``) and in the in-view (``into``)."""

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
