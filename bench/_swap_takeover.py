"""``p2pnode`` as a member that runs whole PeerSwap transactions as the far side's word: the
``swap-takeover`` and ``takeover-poison`` rows of ``bench.hostile_members`` run B's process as
``python -m bench._swap_takeover run ...`` (the lie the other process's checks of
its own nodes cannot see).

Every swap between one of the member's nodes and a node of another process is a real transaction
(the other node's neighbours are locked and relabelled), except that the member's side of it is
made up: the views its node claims, shown in the proposal and handed in the ``SwapAdopt`` as
initiator, or sent in the ``SwapAccept`` as partner, name the member's own ids. The other node then
takes the member's place with neighbours all the member's, while the member's id takes the other
node's honest neighbours. Its nodes also pick a partner outside the process whenever they have
one, so that every swap they start is a takeover, and start swaps ``TAKEOVER_HASTE`` (5) times as
often as the network's rate.

``TAKEOVER_KEEP=1``: the claimed views keep one real neighbour of another process (along the edge
the member's node really holds with it), so that one member's ids hold all places but one: the
most a process that judges views (``PeerSwap.vet``, five of six places) lets through.

:func:`lie` puts the same lie on one sampler (tests run it in memory and over HTTP in one Python
process); run as a module, the member's build puts it on every sampler of its process.
"""

from __future__ import annotations

import dataclasses
import os
import random
import types
from typing import Any

from p2pcore.effects import Effect, NodeId, Send
from p2pnode.cli import main
from peer_sampling import peerswap
from peer_sampling.messages import SwapAccept, SwapAdopt, SwapPropose, Txn

#: the member's nodes start swaps this many times as often as the network's rate (its own code:
#: the network's settings check sees only the rate it announces)
_HASTE = float(os.environ.get("TAKEOVER_HASTE", "5"))
_KEEP = os.environ.get("TAKEOVER_KEEP", "0") == "1"
_OWN = range(int(os.environ.get("TAKEOVER_FIRST", "20")), int(os.environ.get("TAKEOVER_LAST", "39")) + 1)
_made_up = random.Random(11)
_claimed: dict[Txn, tuple[tuple[NodeId, ...], tuple[NodeId, ...]]] = {}


def _claim(s: peerswap.PeerSwap, far: NodeId, far_in_out: bool) -> tuple[tuple[NodeId, ...], ...]:
    """Views the member's node ``s`` claims for a swap with ``far``: ``far`` where the edge
    between them is (in the out-view when ``s`` points to it), the rest the member's own ids, but
    for one real neighbour of another process with ``TAKEOVER_KEEP``."""
    me = s.node_id
    out_keep = [n for n in s.out_view() if n not in _OWN and n != far][:1] if _KEEP else []
    in_keep = [n for n in s.in_view() if n not in _OWN and n != far][:1] if _KEEP and not out_keep else []
    out = ([far] if far_in_out else []) + out_keep
    into = ([] if far_in_out else [far]) + in_keep
    pool = [n for n in _OWN if n not in (me, far)]
    fill = _made_up.sample(pool, len(s.out_view()) + len(s.in_view()) - len(out) - len(into))
    cut = len(s.out_view()) - len(out)
    return tuple(sorted(out + fill[:cut])), tuple(sorted(into + fill[cut:]))


_init = peerswap.PeerSwap.__init__
_grant = peerswap.PeerSwap._grant
_commit = peerswap.PeerSwap._commit
_initiate = peerswap.PeerSwap._initiate


def _hasty_init(self: peerswap.PeerSwap, *args: Any, **kwargs: Any) -> None:
    _init(self, *args, **kwargs)
    self.config = dataclasses.replace(self.config, rate_per_round=self.config.rate_per_round * _HASTE)


def _lying_grant(
    self: peerswap.PeerSwap,
    sender: NodeId,
    txn: Txn,
    now: float,
    accept_with_views: bool,
    about: NodeId | None = None,
) -> list[Effect]:
    effects = _grant(self, sender, txn, now, accept_with_views, about)
    if not accept_with_views or sender in _OWN:
        return effects
    out_view, in_view = _claim(self, sender, far_in_out=False)  # the initiator points to us
    return [
        Send(e.to, SwapAccept(txn, out_view, in_view))
        if isinstance(e, Send) and isinstance(e.message, SwapAccept)
        else e
        for e in effects
    ]


def _initiate_outside(self: peerswap.PeerSwap, now: float, rng: random.Random) -> list[Effect]:
    effects = _initiate(self, now, rng)
    pending = self._pending
    if pending is None:
        return effects
    outside = [n for n in self._out if n not in _OWN]
    if pending.partner in _OWN and outside:
        pending.partner = outside[rng.randrange(len(outside))]
    if pending.partner in _OWN:
        return effects
    claimed = _claim(self, pending.partner, far_in_out=True)
    _claimed[pending.txn] = claimed
    shown = claimed if self.vet is not None else ((), ())
    return [
        Send(pending.partner, SwapPropose(pending.txn, *shown))
        if isinstance(e, Send) and isinstance(e.message, SwapPropose)
        else e
        for e in effects
    ]


def _lying_commit(self: peerswap.PeerSwap, now: float) -> list[Effect]:
    pending = self._pending
    assert pending is not None
    me, partner, txn = self.node_id, pending.partner, pending.txn
    effects = _commit(self, now)
    claimed = _claimed.pop(txn, None)
    if claimed is None:
        return effects
    out_view = tuple(peerswap._relabel(claimed[0], me, partner))
    in_view = tuple(peerswap._relabel(claimed[1], me, partner))
    return [
        Send(e.to, SwapAdopt(txn, out_view, in_view))
        if isinstance(e, Send) and isinstance(e.message, SwapAdopt)
        else e
        for e in effects
    ]


def lie(sampler: peerswap.PeerSwap) -> None:
    """Make one sampler the member's: its swaps with other processes' nodes hand made-up views
    (``_OWN`` its process's ids, ``_KEEP`` one real neighbour kept), at its own rate."""
    sampler._grant = types.MethodType(_lying_grant, sampler)  # type: ignore[method-assign]
    sampler._commit = types.MethodType(_lying_commit, sampler)  # type: ignore[method-assign]
    sampler._initiate = types.MethodType(_initiate_outside, sampler)  # type: ignore[method-assign]


if __name__ == "__main__":
    peerswap.PeerSwap.__init__ = _hasty_init  # type: ignore[method-assign]
    peerswap.PeerSwap._grant = _lying_grant  # type: ignore[method-assign]
    peerswap.PeerSwap._commit = _lying_commit  # type: ignore[method-assign]
    peerswap.PeerSwap._initiate = _initiate_outside  # type: ignore[method-assign]
    raise SystemExit(main())
