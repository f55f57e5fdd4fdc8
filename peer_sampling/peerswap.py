"""PeerSwap dynamic views (002 §2.4, after Guerraoui et al. 2024) as a locked message exchange.

When its swap timer fires (inter-swap times ~ Exp(rate) rounds, CIA paper §V-B), node i picks a
random out-neighbour j and they exchange positions in the graph: with π the transposition (i j),
every edge (a, b) becomes (π(a), π(b)). The graph stays k-out/k-in regular and every view stays
consistent with its peers' (j ∈ out(i) ⇔ i ∈ in(j)).

No node sees the global graph. The exchange is a small transaction driven by i:

1. i locks itself and sends ``SwapPropose`` to j; j locks itself and answers ``SwapAccept`` with
   its views (or ``LockReply(granted=False)`` if it is already in another swap).
2. i sends ``LockRequest`` to every neighbour of i or j; each locks itself and answers.
3. If all granted: i adopts π(views of j), sends ``SwapAdopt`` (π(views of i)) to j and
   ``SwapCommit`` to the neighbours, who apply π to their views and unlock.
   If any refused or the transaction timed out: ``Unlock`` to everyone locked; nothing changes.

Locks carry a lease so a crashed initiator cannot freeze its neighbours; a commit is applied even
after its lease ran out, since applying it is what keeps the views consistent with the others.

On a network messages take time, so swaps overlap and meet nodes locked by other swaps (with the
simulator's default instantaneous delivery they never do, and neither rule below ever runs):

- A busy node keeps a request whose transaction outranks the one holding its lock and grants it
  when that one is done (with its views of that moment), or refuses it after a share of the
  transaction timeout (``max_wait_share``);
  a request ranked below is refused at once. Ranks
  are a fixed hash of the transaction id, so every node orders two transactions alike and waits
  never form a cycle (wait-die, Rosenkrantz, Stearns and Lewis 1978).
- A swap that met a busy node is tried again after a random backoff that doubles each time, at
  most ``max_retries`` times, so that contention delays view changes instead of losing them and
  the views change at the configured rate. Waiting is what keeps retries from collapsing under
  heavy contention, where every retry would take locks that make the next one fail.

Every check against a lying peer (what a member cannot do to a node through a swap) is in
:mod:`peer_sampling.swap_checks`, a layer this machine consults at the steps above: which
messages are applied, which views a node may take, whether a process's other nodes agree.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from p2pcore.effects import Effect, NodeId, Send, SetTimer
from p2pcore.roundtrips import RoundTrips
from peer_sampling.messages import (
    LockReply,
    LockRequest,
    SwapAccept,
    SwapAdopt,
    SwapCheck,
    SwapChecked,
    SwapCommit,
    SwapPropose,
    Txn,
    Unlock,
)
from peer_sampling.swap_checks import (
    CHECK_TICKS,
    CHECK_TIMER,
    GRANTED_MEMORY,
    PARK_TICKS,
    PARK_TIMER,
    LockShare,
    SwapChecks,
    SwapStats,
    Vet,
    _alone,
    _Check,
    _near,
    _own,
)

SWAP_TIMER = "ps:swap"
TXN_TIMER = "ps:txn"
LEASE_TIMER = "ps:lease"
RETRY_TIMER = "ps:retry"
QUEUE_TIMER = "ps:queue"
#: a slow network stretches the transaction timeout and the lease to at most this many times theirs
STRETCH_CAP = 4.0


#: told of a swap that moved a node's views: (node, old out, old in, new out, new in)
_Views: TypeAlias = Sequence[NodeId]
Watch: TypeAlias = Callable[[NodeId, _Views, _Views, _Views, _Views], None]


@dataclass(frozen=True)
class PeerSwapConfig:
    """Rates and timeouts, in rounds and ticks."""

    rate_per_round: float = 0.1
    round_ticks: float = 100.0
    txn_timeout_ticks: float = 50.0
    lease_ticks: float = 100.0
    #: a swap that met a busy node tries again after ~Exp(mean retry_ticks), doubling the mean at
    #: each of at most ``max_retries`` tries; 0 turns retries off
    retry_ticks: float = 10.0
    max_retries: int = 4
    #: lock requests a busy node keeps waiting (wait-die: only those of a transaction that outranks
    #: the one holding the lock); 0 refuses every request while locked
    wait_queue: int = 8
    #: a request that waited this share of the transaction timeout (20 ticks by default) is refused
    #: (its initiator aborts as for a busy node and retries) rather than left to hold the
    #: initiator's other locks until its transaction times out
    max_wait_share: float = 0.4
    #: the share of the time one owner's transactions may hold this node's lock, long-run (a
    #: member's lock requests that never commit would otherwise keep a node locked and its
    #: swaps stalled); ``LockShare``. 0 turns the limit off
    lock_share: float = 0.2


@dataclass
class _Pending:
    txn: Txn
    partner: NodeId
    partner_out: tuple[NodeId, ...] = ()
    partner_in: tuple[NodeId, ...] = ()
    waiting: set[NodeId] = field(default_factory=set)
    granted: set[NodeId] = field(default_factory=set)
    accepted: bool = False
    #: neighbours of a third member's that the partner's views name, asked in the lock request
    #: where they name us or the partner: (out, in) their grants must show (THREAT_MODEL.md)
    asked: dict[NodeId, tuple[bool, bool]] = field(default_factory=dict)
    proposed_at: float = 0.0  #: when the proposal went (its accept's round trip is measured)
    asked_at: float = 0.0  #: when the lock requests went


class PeerSwap(SwapChecks):
    """A node's PeerSwap view state machine.

    The views form a graph, so a node knows who may send it models (:meth:`expects`): its
    in-neighbours, and for one round those a swap removed (a model an in-neighbour sent before a
    swap moved it away may arrive after the swap's commit); the 2P removed last at most, so that
    a member who swaps often does not collect places.
    """

    tracks_senders = True

    def __init__(
        self,
        node_id: NodeId,
        out_view: Sequence[NodeId],
        in_view: Sequence[NodeId],
        config: PeerSwapConfig = PeerSwapConfig(),
    ) -> None:
        self.node_id = node_id
        self.config = config
        self._out = sorted(out_view)
        self._in = sorted(in_view)
        #: in-neighbours a swap removed lately and when, newest last (their models may still arrive)
        self._former: OrderedDict[NodeId, float] = OrderedDict()
        self.lock: Txn | None = None
        self._pending: _Pending | None = None
        self._counter = 0
        self.stats = SwapStats()
        #: transactions this node locked for, and whether as the partner (adopt) or a neighbour
        self._granted: OrderedDict[Txn, bool] = OrderedDict()
        self.ignored = 0  #: messages that named no transaction of ours, or carried bad views
        self._retries = 0  #: retries of the current swap event so far
        #: lock requests waiting for this node's lock: (initiator, transaction, as the partner)
        self._queue: list[tuple[NodeId, Txn, bool, float, NodeId | None]] = []
        #: who stands behind an initiator id (the process sets it: the member whose credential
        #: names it, None for the process's own nodes); the id itself by default
        self.owner: Callable[[NodeId], Hashable] = _own
        self.lock_share = LockShare(config.lock_share, config.lease_ticks)
        self._holder: tuple[Hashable, float] | None = None  #: the granted lock's owner, since when
        #: the sampler of a node hosted by the same process, None for any other id (the process
        #: sets it; a node alone checks nothing against others)
        self.siblings: Callable[[NodeId], SwapChecks | None] = _alone
        #: the ids of the nodes the same process hosts, this one among them (the process sets it)
        self.sibling_ids: Callable[[], Iterable[NodeId]] = tuple
        #: the views this node handed each initiator it granted as the partner (its neighbours then)
        self._offered: dict[Txn, tuple[tuple[NodeId, ...], tuple[NodeId, ...]]] = {}
        #: judges the views a swap would hand this node, (far end, out-view, in-view) -> take them
        #: (the process sets it, THREAT_MODEL.md); None: any views that fit. With it set, proposals carry
        #: the initiator's views, so the partner judges them before anything is locked
        self.vet: Vet | None = None
        #: told of every swap that moved this node's views: (node, old out, old in, new out, new
        #: in); the process that judges swaps keeps its count of places by member with it
        self.watch: Watch | None = None
        #: the views proposals of in-neighbours would hand this node, as this node judged them,
        #: by transaction: an initiator's last one, and the one this node granted it as the
        #: partner while its adopt is on the way (the initiator, done, may propose again first)
        self._proposed: dict[Txn, tuple[tuple[NodeId, ...], tuple[NodeId, ...]]] = {}
        #: commits that move this node's edge to a hosted partner that has not adopted yet:
        #: (a, b, since), applied once it has, dropped if it refused
        self._parked: dict[Txn, tuple[NodeId, NodeId, float]] = {}
        #: transactions applied lately, and whether as the partner: siblings' checks read them
        self._applied: OrderedDict[Txn, bool] = OrderedDict()
        #: ask the ends of another member's swap for their word before a commit moves an edge to
        #: them (the process sets it, with identities); the answers need the views this
        #: node took lately as an end, by transaction (at most GRANTED_MEMORY)
        self.ask_partners = False
        self._adopted: OrderedDict[Txn, tuple[frozenset[NodeId], frozenset[NodeId]]] = OrderedDict()
        #: commits waiting for their partner's answer to a SwapCheck
        self._checks: dict[Txn, _Check] = {}
        #: how long this node's proposals and lock requests took to be answered, in ticks
        self.round_trips = RoundTrips()

    def stretch(self) -> float:
        """How much this network's answers stretch the transaction timeout, the lease and the
        waits: 1 while two exchanges of the time within which nearly every answer came
        (``RoundTrips.bound``) fit in the configured timeout, else their ratio to it (a loaded
        machine answers late), at most :data:`STRETCH_CAP`. With instantaneous delivery, 1."""
        base = self.config.txn_timeout_ticks
        if base <= 0:
            return 1.0
        return max(1.0, min(STRETCH_CAP, 2 * self.round_trips.bound() / base))

    def txn_timeout(self) -> float:
        """How long a transaction waits for its answers (the configured ticks, stretched)."""
        return self.config.txn_timeout_ticks * self.stretch()

    def _max_wait(self) -> float:
        """How long a lock request may wait in the queue (a share of the transaction timeout)."""
        return self.config.max_wait_share * self.txn_timeout()

    def lease(self) -> float:
        """How long a granted lock waits for its commit (the configured lease, stretched as the
        transaction timeout is: a lock must outlast the transaction that holds it)."""
        return self.config.lease_ticks * self.stretch()

    def latency(self) -> RoundTrips:
        return self.round_trips

    def view_changes(self) -> dict[str, int]:
        return dict(vars(self.stats))  # read once a round per node: a flat copy, not asdict's deep one

    def out_view(self) -> tuple[NodeId, ...]:
        return tuple(self._out)

    def in_view(self) -> tuple[NodeId, ...]:
        return tuple(self._in)

    def expects(self, sender: NodeId, now: float) -> bool:
        if sender in self._in:
            return True
        removed = self._former.get(sender)
        return removed is not None and now - removed <= self.config.round_ticks

    def _set_in(self, in_view: list[NodeId], now: float) -> None:
        """The new in-view at ``now``; the ids it drops are kept as former in-neighbours (the
        last 2P, for one round)."""
        for gone in sorted(set(self._in) - set(in_view)):
            self._former.pop(gone, None)
            self._former[gone] = now
        for back in in_view:
            self._former.pop(back, None)
        while len(self._former) > 2 * max(1, len(in_view)):
            self._former.popitem(last=False)
        self._in = in_view

    def _take(self, out_view: list[NodeId], in_view: list[NodeId], now: float) -> None:
        """The views a swap gives this node (as either end, or relabelled as a neighbour)."""
        old_out, old_in = self._out, self._in
        self._out = out_view
        self._set_in(in_view, now)
        if self.watch is not None:
            self.watch(self.node_id, old_out, old_in, self._out, self._in)

    def state(self) -> dict[str, Any]:
        return {"out": list(self._out), "in": list(self._in), "counter": self._counter}

    def restore(self, state: dict[str, Any]) -> None:
        """A swap in flight at the checkpoint is dropped: the partner times it out and aborts."""
        self._out = sorted(int(n) for n in state["out"])
        self._in = sorted(int(n) for n in state["in"])
        self._counter = int(state.get("counter", 0))
        self.lock = None
        self._pending = None
        self._queue = []
        self._holder = None
        self._offered = {}
        self._checks = {}

    # -- timers ---------------------------------------------------------------------------------

    def start(self, now: float, rng: random.Random) -> list[Effect]:
        return [self._next_swap(now, rng)]

    def _next_swap(self, now: float, rng: random.Random) -> SetTimer:
        if self.config.rate_per_round <= 0:
            return SetTimer(SWAP_TIMER, float("inf"))
        wait_rounds = rng.expovariate(self.config.rate_per_round)
        return SetTimer(SWAP_TIMER, now + wait_rounds * self.config.round_ticks)

    def on_timer(self, key: str, now: float, rng: random.Random) -> list[Effect]:
        if key == SWAP_TIMER:
            self._retries = 0
            return [self._next_swap(now, rng), *self._initiate(now, rng)]
        if key == RETRY_TIMER:
            return self._initiate(now, rng)
        if key == TXN_TIMER and self._pending is not None:
            self.stats.aborted_timeout += 1
            return self._abort(now)
        if (
            key == LEASE_TIMER
            and self.lock is not None
            and self._pending is None
            and self.lock not in self._checks
        ):
            return self._release(self.lock, now)  # a commit waiting for the ends' word drops by itself
        if key == QUEUE_TIMER:
            return self._expire_waits(now)
        if key == PARK_TIMER:
            return self._settle_parked(now)
        if key == CHECK_TIMER:
            return self._check_again(now)
        return []

    def _initiate(self, now: float, rng: random.Random) -> list[Effect]:
        if self.lock is not None or not self._out:
            self.stats.skipped_busy += 1
            return self._retry(now, rng) if self.lock is not None else []
        self._counter += 1
        txn = (self.node_id, self._counter)
        partner = self._out[rng.randrange(len(self._out))]
        self.lock = txn
        self._pending = _Pending(txn, partner, proposed_at=now)
        propose = (
            SwapPropose(txn, tuple(self._out), tuple(self._in)) if self.vet is not None else SwapPropose(txn)
        )
        return [
            Send(partner, propose),
            SetTimer(TXN_TIMER, now + self.txn_timeout()),
        ]

    # -- messages -------------------------------------------------------------------------------

    def on_message(self, sender: NodeId, message: object, now: float, rng: random.Random) -> list[Effect]:
        match message:
            case SwapPropose(txn=txn, out_view=out_view, in_view=in_view):
                # judged only for an in-neighbour initiator (anyone else is refused below unread)
                if self.vet is not None and sender == txn[0] != self.node_id and self.expects(sender, now):
                    me = self.node_id
                    handed = (tuple(_relabel(out_view, sender, me)), tuple(_relabel(in_view, sender, me)))
                    if not self._fits(*handed) or not self.vet(sender, *handed):
                        self.stats.vetoed += 1  # views it may not hand us (or none): refused at once
                        return [Send(sender, LockReply(txn, granted=False))]
                    self._proposed = {
                        t: p
                        for t, p in self._proposed.items()
                        if self.expects(t[0], now) and (t[0] != sender or self._granted.get(t) is True)
                    }
                    self._proposed[txn] = handed
                return self._on_lock_request(sender, txn, now, accept_with_views=True)
            case LockRequest(txn=txn, about=about):
                return self._on_lock_request(sender, txn, now, accept_with_views=False, about=about)
            case SwapAccept():
                return self._on_accept(sender, message, now)
            case LockReply():
                return self._on_lock_reply(sender, message, now, rng)
            case SwapCommit(txn=txn, a=a, b=b):
                if self._granted.get(txn) is not False or sender != txn[0] or a != sender:
                    self.ignored += 1
                    return []
                partner = self.siblings(b) if b != self.node_id else None
                del self._granted[txn]
                if partner is not None:
                    decided = partner.decided(txn)
                    if decided is None:  # b granted it as partner and has not adopted yet: wait
                        self._parked[txn] = (a, b, now)
                        return [SetTimer(PARK_TIMER, now + PARK_TICKS)] if len(self._parked) == 1 else []
                    if not decided:
                        self.stats.unconfirmed += 1  # b is hosted here and never took a's place
                        return self._release(txn, now)
                elif wait := self._asks(a, b, now):
                    self._checks[txn] = _Check(a, b, now, wait)
                    timer = [SetTimer(CHECK_TIMER, now + CHECK_TICKS)] if len(self._checks) == 1 else []
                    return [*(Send(end, SwapCheck(txn)) for end in wait), *timer]
                return self._apply_commit(txn, a, b, now)
            case SwapCheck(txn=txn):
                return [Send(sender, self._answer(sender, txn))]
            case SwapChecked():
                return self._on_checked(sender, message, now)
            case SwapAdopt(txn=txn, out_view=out_view, in_view=in_view):
                if (
                    self._granted.get(txn) is not True
                    or sender != txn[0]
                    or not self._fits(out_view, in_view)
                ):
                    self.ignored += 1
                    return []
                confirmed = self._confirmed(txn, out_view, in_view)
                vetted = self.vet is None or (
                    _near(self._shown(sender, txn), (out_view, in_view))
                    and self.vet(sender, out_view, in_view, settled=True)
                )
                del self._granted[txn]  # refused, the hosted neighbours refuse its commits too
                self._offered.pop(txn, None)
                if not confirmed or not vetted:
                    if not confirmed:
                        self.stats.unconfirmed += 1
                    else:
                        self.stats.vetoed += 1  # not (near) the views it proposed, or not fit
                    return self._release(txn, now)
                self._applied_now(txn, as_partner=True)
                self._took(txn, out_view, in_view)
                self._take(sorted(out_view), sorted(in_view), now)
                return self._release(txn, now)
            case Unlock(txn=txn):
                if sender != txn[0]:
                    self.ignored += 1  # only its initiator aborts a transaction (ids are guessable)
                    return []
                self._granted.pop(txn, None)  # aborted: its commit or adopt can no longer come
                self._offered.pop(txn, None)
                self._queue = [w for w in self._queue if w[1] != txn or w[0] != sender]
                return self._release(txn, now)
        return []

    def _apply_commit(self, txn: Txn, a: NodeId, b: NodeId, now: float) -> list[Effect]:
        self._applied_now(txn, as_partner=False)
        self._take(_relabel(self._out, a, b), _relabel(self._in, a, b), now)
        return self._release(txn, now)

    def _on_lock_request(
        self, sender: NodeId, txn: Txn, now: float, accept_with_views: bool, about: NodeId | None = None
    ) -> list[Effect]:
        if sender != txn[0] or sender == self.node_id:
            self.ignored += 1  # only a transaction's initiator asks to lock for it
            return []
        if accept_with_views and not self.expects(sender, now):
            # an initiator proposes to one of its out-neighbours: a member that is not an
            # in-neighbour of this node may not swap with it (and hand it views, THREAT_MODEL.md)
            self.ignored += 1
            return [Send(sender, LockReply(txn, granted=False))]
        if not self.lock_share.allows(self.owner(sender), now):
            return [Send(sender, LockReply(txn, granted=False))]  # its owner held our lock enough
        if self.lock is not None:
            if (
                _rank(txn) > _rank(self.lock)
                and len(self._queue) < self.config.wait_queue
                and all(w[0] != sender for w in self._queue)  # an initiator has one swap at a time
            ):
                self._queue.append((sender, txn, accept_with_views, now, about))  # outranks the holder
                if len(self._queue) == 1:
                    return [SetTimer(QUEUE_TIMER, now + self._max_wait())]
                return []
            return [Send(sender, LockReply(txn, granted=False))]  # wait-die: the lower rank dies
        return self._grant(sender, txn, now, accept_with_views, about)

    def _grant(
        self, sender: NodeId, txn: Txn, now: float, accept_with_views: bool, about: NodeId | None = None
    ) -> list[Effect]:
        self.lock = txn
        self._holder = (self.owner(sender), now)
        self._granted[txn] = accept_with_views
        while len(self._granted) > GRANTED_MEMORY:
            self._granted.popitem(last=False)
        self._offered = {t: v for t, v in self._offered.items() if t in self._granted}
        lease = SetTimer(LEASE_TIMER, now + self.lease())
        if accept_with_views:
            views = (tuple(self._out), tuple(self._in))
            self._offered[txn] = views
            return [Send(sender, SwapAccept(txn, *views)), lease]
        if about is None:
            return [Send(sender, LockReply(txn, granted=True)), lease]
        ends = {sender, about}  # asked where our views name the swap's ends (THREAT_MODEL.md)
        reply = LockReply(txn, True, bool(ends & set(self._out)), bool(ends & set(self._in)))
        return [Send(sender, reply), lease]

    def _on_accept(self, sender: NodeId, msg: SwapAccept, now: float) -> list[Effect]:
        p = self._pending
        if p is None or p.txn != msg.txn or sender != p.partner:
            return [Send(sender, Unlock(msg.txn))]
        p.accepted = True
        self.round_trips.add(now - p.proposed_at)
        sizes = (len(msg.out_view), len(msg.in_view)) == (len(self._out), len(self._in))
        if (
            not sizes
            or len(set(msg.out_view)) != len(msg.out_view)
            or len(set(msg.in_view)) != len(msg.in_view)
        ):
            self.ignored += 1  # views a regular graph cannot have: swap nothing
            return self._abort(now)
        me, j = self.node_id, p.partner
        if self.vet is not None and not self.vet(
            j, _relabel(msg.out_view, j, me), _relabel(msg.in_view, j, me)
        ):
            self.stats.vetoed += 1  # views we may not take: abort before anything is locked
            return self._abort(now)
        p.partner_out, p.partner_in = msg.out_view, msg.in_view
        neighbours = set(self._out) | set(self._in) | set(msg.out_view) | set(msg.in_view)
        p.waiting = neighbours - {me, j}
        p.asked = self._named_elsewhere(j, msg.out_view, msg.in_view)
        if not p.waiting:
            return self._commit(now)
        p.asked_at = now
        return [Send(k, LockRequest(p.txn, j if k in p.asked else None)) for k in sorted(p.waiting)]

    def _on_lock_reply(self, sender: NodeId, msg: LockReply, now: float, rng: random.Random) -> list[Effect]:
        p = self._pending
        if p is None or p.txn != msg.txn:
            return [Send(sender, Unlock(msg.txn))] if msg.granted else []
        if not msg.granted:
            if p.accepted:
                self.stats.aborted_neighbour_busy += 1
            else:
                self.stats.aborted_partner_busy += 1
            return [*self._abort(now), *self._retry(now, rng)]
        if sender in p.waiting:
            self.round_trips.add(now - p.asked_at)
            p.waiting.discard(sender)
            p.granted.add(sender)
            out, into = p.asked.get(sender, (False, False))
            if (out and not msg.out) or (into and not msg.into):
                # a third member's node the partner's views name along an edge it does not hold
                self.stats.unconfirmed += 1
                return self._abort(now)
        return self._commit(now) if not p.waiting else []

    def _commit(self, now: float) -> list[Effect]:
        p = self._pending
        assert p is not None
        me, j = self.node_id, p.partner
        if not self._claims_hold({j}, p.partner_out, p.partner_in, skip={me}) or not self._claims_whole(
            j, p.txn, p.partner_out, p.partner_in
        ):
            # the partner's views name a node of this process along an edge it does not hold, or
            # leave out an edge with it of a node this transaction locked (its commit relabels
            # every edge it holds with the partner); judged now: every neighbour granted our lock,
            # so its earlier commits are applied
            self.stats.unconfirmed += 1
            return self._abort(now)
        adopt = SwapAdopt(p.txn, tuple(_relabel(self._out, me, j)), tuple(_relabel(self._in, me, j)))
        effects: list[Effect] = [Send(j, adopt)]
        effects += [Send(k, SwapCommit(p.txn, me, j)) for k in sorted(p.granted)]
        taken = (_relabel(list(p.partner_out), me, j), _relabel(list(p.partner_in), me, j))
        self._took(p.txn, *taken)
        self._take(*taken, now)
        self._pending = None
        self.stats.committed += 1
        return effects + self._release(p.txn, now)

    def _abort(self, now: float) -> list[Effect]:
        p = self._pending
        assert p is not None
        locked = set(p.granted) | ({p.partner} if p.accepted else set())
        effects: list[Effect] = [Send(k, Unlock(p.txn)) for k in sorted(locked)]
        # A partner that has not answered yet may still lock itself; Unlock it too (idempotent).
        if not p.accepted:
            effects.append(Send(p.partner, Unlock(p.txn)))
        # neighbours that have not answered may hold the request in their queue: withdraw it
        effects += [Send(k, Unlock(p.txn)) for k in sorted(p.waiting)]
        self._pending = None
        self.stats.aborted += 1
        return effects + self._release(p.txn, now)

    def _retry(self, now: float, rng: random.Random) -> list[Effect]:
        """Try a swap that met a busy node again soon, so that busy nodes delay view changes rather
        than lose them (a network's messages take time, so swaps overlap; with instant delivery
        they never do and nothing is retried)."""
        if self.config.retry_ticks <= 0 or self._retries >= self.config.max_retries:
            return []
        mean = self.config.retry_ticks * 2**self._retries  # back off: busy nodes stay busy longer
        self._retries += 1
        return [SetTimer(RETRY_TIMER, now + rng.expovariate(1.0 / mean))]

    def _expire_waits(self, now: float) -> list[Effect]:
        """Refuse the requests that waited their limit; wake again for the next one."""
        limit = self._max_wait()
        expired = [w for w in self._queue if w[3] + limit <= now]  # the sum the timer was set to
        self._queue = [w for w in self._queue if w[3] + limit > now]
        effects: list[Effect] = [Send(w[0], LockReply(w[1], granted=False)) for w in expired]
        if self._queue:
            effects.append(SetTimer(QUEUE_TIMER, min(w[3] for w in self._queue) + limit))
        return effects

    def _release(self, txn: Txn, now: float) -> list[Effect]:
        """Unlock if ``txn`` holds the lock, and grant it to the best-ranked waiting request; the
        others now wait for a transaction that outranks them, so they are refused (wait-die)."""
        if self.lock != txn:
            return []
        self.lock = None
        if self._holder is not None:
            self.lock_share.pay(self._holder[0], now - self._holder[1], now)
            self._holder = None
        if not self._queue:
            return []
        queue, self._queue = self._queue, []
        fits = [w for w in queue if self.lock_share.allows(self.owner(w[0]), now)]
        if not fits:
            return [Send(w[0], LockReply(w[1], granted=False)) for w in queue]
        best = max(fits, key=lambda w: _rank(w[1]))
        effects = self._grant(best[0], best[1], now, best[2], best[4])  # a later QUEUE_TIMER finds none
        effects += [Send(w[0], LockReply(w[1], granted=False)) for w in queue if w is not best]
        return effects


def _rank(txn: Txn) -> int:
    """A transaction's fixed pseudo-random rank (splitmix64 of its id), the same at every node:
    a request waits for a lock only when it outranks the holder, so waits never form a cycle
    (wait-die, Rosenkrantz et al. 1978) and every node ranks two transactions alike."""
    z = ((txn[0] & 0xFFFFFFFF) << 32 | (txn[1] & 0xFFFFFFFF)) + 0x9E3779B97F4A7C15
    z &= 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return z ^ (z >> 31)


def _relabel(view: Iterable[NodeId], a: NodeId, b: NodeId) -> list[NodeId]:
    """Apply the transposition (a b) to every id in ``view``."""
    return sorted(b if v == a else a if v == b else v for v in view)
