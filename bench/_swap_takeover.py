"""``p2pnode`` as a member that runs whole PeerSwap transactions as the far side's word: the
``swap-takeover`` and ``takeover-poison`` rows of ``bench.hostile_members`` run B's process as
``python -m bench._swap_takeover run ...`` (issue #61: the lie the process's own checks cannot see).

Every swap between one of the member's nodes and a node of another process is a real transaction
(the other node's neighbours are locked and relabelled, so its process's checks all pass), except
that the member's side of it is made up: the views its node hands over, as initiator in the
``SwapAdopt`` and as partner in the ``SwapAccept``, name only the member's own ids. The other node
then takes the member's place with neighbours all the member's, while the member's id takes the
other node's honest neighbours. Its nodes also pick a partner outside the process whenever they
have one, so that every swap they start is a takeover, and start swaps ``TAKEOVER_HASTE`` (5)
times as often as the network's rate.
"""

from __future__ import annotations

import dataclasses
import os
import random
from collections.abc import Sequence
from typing import Any

from p2pcore.effects import Effect, NodeId, Send
from p2pnode.cli import main
from peer_sampling import peerswap
from peer_sampling.messages import SwapAccept, SwapAdopt, SwapPropose, Txn

#: the member's nodes start swaps this many times as often as the network's rate (its own code:
#: the network's settings check sees only the rate it announces)
_HASTE = float(os.environ.get("TAKEOVER_HASTE", "5"))
_OWN = range(int(os.environ.get("TAKEOVER_FIRST", "20")), int(os.environ.get("TAKEOVER_LAST", "39")) + 1)
_made_up = random.Random(11)


def _own_views(me: NodeId, far: NodeId, sizes: Sequence[int]) -> tuple[tuple[NodeId, ...], ...]:
    """Views of the member's own ids of the given sizes, naming neither end of the swap."""
    pool = [n for n in _OWN if n not in (me, far)]
    return tuple(tuple(sorted(_made_up.sample(pool, size))) for size in sizes)


_init = peerswap.PeerSwap.__init__
_grant = peerswap.PeerSwap._grant
_commit = peerswap.PeerSwap._commit
_initiate = peerswap.PeerSwap._initiate


def _lying_grant(
    self: peerswap.PeerSwap, sender: NodeId, txn: Txn, now: float, accept_with_views: bool
) -> list[Effect]:
    effects = _grant(self, sender, txn, now, accept_with_views)
    if not accept_with_views or sender in _OWN:
        return effects
    out_view, in_view = _own_views(self.node_id, sender, (len(self._out), len(self._in)))
    return [
        Send(e.to, SwapAccept(txn, out_view, in_view))
        if isinstance(e, Send) and isinstance(e.message, SwapAccept)
        else e
        for e in effects
    ]


def _lying_commit(self: peerswap.PeerSwap, now: float) -> list[Effect]:
    pending = self._pending
    assert pending is not None
    partner = pending.partner
    effects = _commit(self, now)
    if partner in _OWN:
        return effects
    out_view, in_view = _own_views(self.node_id, partner, (len(self._out), len(self._in)))
    return [
        Send(e.to, SwapAdopt(e.message.txn, out_view, in_view))
        if isinstance(e, Send) and isinstance(e.message, SwapAdopt)
        else e
        for e in effects
    ]


def _initiate_outside(self: peerswap.PeerSwap, now: float, rng: random.Random) -> list[Effect]:
    effects = _initiate(self, now, rng)
    pending = self._pending
    outside = [n for n in self._out if n not in _OWN]
    if pending is None or pending.partner not in _OWN or not outside:
        return effects
    partner = outside[rng.randrange(len(outside))]
    pending.partner = partner
    return [
        Send(partner, e.message) if isinstance(e, Send) and isinstance(e.message, SwapPropose) else e
        for e in effects
    ]


def _hasty_init(self: peerswap.PeerSwap, *args: Any, **kwargs: Any) -> None:
    _init(self, *args, **kwargs)
    self.config = dataclasses.replace(self.config, rate_per_round=self.config.rate_per_round * _HASTE)


peerswap.PeerSwap.__init__ = _hasty_init  # type: ignore[method-assign]
peerswap.PeerSwap._grant = _lying_grant  # type: ignore[method-assign]
peerswap.PeerSwap._commit = _lying_commit  # type: ignore[method-assign]
peerswap.PeerSwap._initiate = _initiate_outside  # type: ignore[method-assign]

if __name__ == "__main__":
    raise SystemExit(main())
