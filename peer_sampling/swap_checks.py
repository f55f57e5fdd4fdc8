"""PeerSwap's checks against lying peers (THREAT_MODEL.md): the layer
:class:`peer_sampling.peerswap.PeerSwap` consults before it applies what a swap's messages say.

What a member cannot do (THREAT_MODEL.md): a ``SwapAdopt`` or ``SwapCommit`` is applied only for a
transaction this node granted, and only when it comes from that transaction's initiator; proposals,
lock requests and unlocks must come from their initiator, and a proposal from an in-neighbour
(THREAT_MODEL.md: with process identities a member proposes only as its own ids, so it can swap only
with the nodes it points to, as an honest node); adopted views must keep the view sizes, hold no id
twice and not the node itself. Anything else is ignored, and the views do not change. A node queues
at most ``wait_queue`` requests, one per initiator, and lets one owner's transactions (a member's,
whatever number of ids it holds) hold its lock at most ``lock_share`` of the time
(:class:`LockShare`): lock requests that never commit cannot stall its swaps.

A process that hosts several nodes also checks a swap against its own nodes (THREAT_MODEL.md,
:attr:`PeerSwap.siblings`): a transaction relabels every neighbour of i and j, so each hosted
neighbour must have been locked for it. A partner adopts the views it is handed only if every
hosted node among its old neighbours and among the ids the new views name took part in the
transaction as a neighbour, and a neighbour applies a commit that moves its edge to a hosted node
only if that node is the transaction's partner. A member handing a node views of its own ids
without the relabelling a swap is (the node would refuse its honest in-neighbours' models and
send to ids that do not expect it), or moving a hosted node's edges to its own ids, is refused
(:attr:`SwapStats.unconfirmed`) and nothing changes. A hosted node the handed views name must
also hold the edge they claim (with the initiator, or with the partner for the views a partner
sends), and a commit that moves an edge to a hosted partner waits until that partner has adopted
(dropped if it refused), so a refused adopt leaves the process's nodes as they were.

What those checks cannot see is the far side's own neighbourhood: a member's build can run a
whole transaction whose far side names only its own ids, and the node taking them is cut off
(the swap takeover, THREAT_MODEL.md). So a process also judges the views a swap would hand its
nodes (:attr:`PeerSwap.vet`; ``p2pnode.trust.swapjudge``: one other member may hold at most
five of a node's six places): its nodes' proposals then show the initiator's views, and a partner
judges them before it locks (refused at once), takes an adopt only if it is what was proposed
but for one id a view and still passes, and an initiator judges the partner's views in the
accept before it locks anyone (:attr:`SwapStats.vetoed`). Honest swaps are refused only where
one member holds all six places, before anything changed. The process also weighs the places all
its nodes give one member against that member's share of the ids (``p2pnode.trust.swapjudge``): at the
proposal and the accept only, since at the adopt the initiator has committed (``Vet``'s
``settled``). A partner keeps the judged views of the transaction it granted until its adopt
comes, even if the initiator, done, proposes again first (:attr:`PeerSwap._proposed`).

A process hosts neither end of a swap between two other members' nodes, so it cannot read them
as siblings: a member's commit could move its id's neighbours there to the victim's node while
the views it hands the victim leave them out. With identities (:attr:`PeerSwap.ask_partners`), a
commit whose two ends other members hold (not the same one) waits for their word (``SwapCheck``):
the partner's, that it adopted views naming this node along the edges moved to it, and where
edges with the partner move to the initiator, the initiator's, of the views it took. It is
applied only on every word, dropped on a refusal (or no word within a lease), asked again while
the partner still waits for its adopt. An end answers from the views it took in that transaction
(the last ``GRANTED_MEMORY``), and only about the node asking. An initiator whose partner another
member holds asks, in its ``LockRequest`` (``about``), each third member's node the partner's
views name where its views name the initiator or the partner, and aborts before committing if a
claimed edge is not there (``LockReply.out`` and ``into``). A partner asks no one at its adopt:
the initiator has committed by then, so a refusal there would leave both ends inconsistent, and
a member's node that disagreed (its own views are its word) could make honest partners refuse.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from p2pcore.effects import Effect, NodeId, Send, SetTimer
from peer_sampling.base import PeerSampler
from peer_sampling.messages import CHECK_ADOPTED, CHECK_PENDING, CHECK_REFUSED, SwapCheck, SwapChecked, Txn

GRANTED_MEMORY = 16  #: transactions granted lately, whose commit or adopt is still expected
PARK_TIMER = "ps:park"
PARK_TICKS = 2.0  #: how often a parked commit looks whether its hosted partner has decided
CHECK_TIMER = "ps:check"
CHECK_TICKS = 10.0  #: a SwapCheck not answered (or answered "pending") this long is sent again


class Vet(Protocol):
    """Judges the views a swap would hand a node, (far end, out-view, in-view) -> take them.
    ``settled``: the initiator has already committed (the adopt), so only what the views are
    may count, not what the process's other nodes hold at this moment: an honest adopt refused
    there would leave the two ends inconsistent."""

    def __call__(
        self, far: NodeId, out_view: Sequence[NodeId], in_view: Sequence[NodeId], *, settled: bool = False
    ) -> bool: ...


@dataclass
class _Check:
    """A neighbour's commit that waits for the word of the ends it moves its edges to
    (``SwapCheck``)."""

    a: NodeId  #: the initiator
    b: NodeId  #: the partner
    since: float
    #: the ends still to answer: where the views each took must name this node (in the out-view:
    #: the end will point here; in the in-view: this node will point to it), and when each was
    #: last asked
    wait: dict[NodeId, tuple[bool, bool, float]]


@dataclass
class SwapStats:
    """Counts a test or a metric can read."""

    committed: int = 0
    aborted: int = 0
    skipped_busy: int = 0
    #: why swaps aborted: the partner was in another swap, a neighbour was, or no answer in time
    aborted_partner_busy: int = 0
    aborted_neighbour_busy: int = 0
    aborted_timeout: int = 0
    #: adopts and commits refused because a node of this process that the swap must have relabelled
    #: took no part in it (:attr:`PeerSwap.siblings`)
    unconfirmed: int = 0
    #: swaps refused because the views they would hand this node failed the process's judgement
    #: (:attr:`PeerSwap.vet`): at the proposal or the accept, before anything changed, or at the
    #: adopt when the views handed differ from those proposed
    vetoed: int = 0


class LockShare:
    """How long each owner's transactions may hold one node's lock (THREAT_MODEL.md).

    An owner is who stands behind a requesting initiator: with process identities the member
    whose credential names it, else the initiator id (``PeerSwap.owner``). Each owner has a
    credit of lock ticks, earned at ``share`` per tick up to two leases; a lock is granted only
    while the owner's credit covers a whole lease, and the ticks it was held are paid when it is
    released (committed, unlocked or run out). An honest transaction holds a lock for a network
    round trip or two, so an honest owner never runs short; a member whose requests never commit
    holds each lock for its whole lease and so holds a node's lock at most about ``share`` of the
    time, whatever number of ids it holds.
    """

    def __init__(self, share: float, lease: float, owners: int = 1024) -> None:
        self.share = share
        self.lease = lease
        self.cap = 2 * lease
        self.owners = owners
        self._credit: OrderedDict[Hashable, tuple[float, float]] = OrderedDict()  #: (ticks, at)
        self.refused = 0  #: lock requests refused for their owner's share

    def allows(self, owner: Hashable, now: float) -> bool:
        if self.share <= 0 or owner is None:
            return True
        if self._at(owner, now) >= self.lease:
            return True
        self.refused += 1
        return False

    def pay(self, owner: Hashable, held: float, now: float) -> None:
        """``owner``'s lock was held ``held`` ticks until ``now``."""
        if self.share <= 0 or owner is None:
            return
        self._credit[owner] = (self._at(owner, now) - max(0.0, held), now)
        self._credit.move_to_end(owner)
        while len(self._credit) > self.owners:
            self._credit.popitem(last=False)

    def _at(self, owner: Hashable, now: float) -> float:
        ticks, at = self._credit.get(owner, (self.cap, now))
        return min(self.cap, ticks + self.share * max(0.0, now - at))


def _own(sender: NodeId) -> Hashable:
    return sender


def _alone(node: NodeId) -> SwapChecks | None:
    return None


def _near(
    proposed: tuple[Sequence[NodeId], Sequence[NodeId]] | None,
    handed: tuple[Sequence[NodeId], Sequence[NodeId]],
) -> bool:
    """Whether the views an adopt hands are those a proposal showed, but for at most one id in
    each view (a commit of an earlier transaction that reached the initiator late relabels one)."""
    if proposed is None:
        return False
    return all(len(set(new) - set(old)) <= 1 for old, new in zip(proposed, handed, strict=True))


class SwapChecks(PeerSampler):
    """The checks of one node's PeerSwap machine: its state is the machine's (``PeerSwap``
    sets every attribute below); the protocol calls these at the steps where a message would be
    applied or a view taken, and they say whether it may be (and count what they refused)."""

    node_id: NodeId
    _out: list[NodeId]
    _in: list[NodeId]
    stats: SwapStats
    ignored: int
    _granted: OrderedDict[Txn, bool]
    _offered: dict[Txn, tuple[tuple[NodeId, ...], tuple[NodeId, ...]]]
    _proposed: dict[Txn, tuple[tuple[NodeId, ...], tuple[NodeId, ...]]]
    _parked: dict[Txn, tuple[NodeId, NodeId, float]]
    _applied: OrderedDict[Txn, bool]
    _adopted: OrderedDict[Txn, tuple[frozenset[NodeId], frozenset[NodeId]]]
    _checks: dict[Txn, _Check]
    ask_partners: bool
    owner: Callable[[NodeId], Hashable]
    siblings: Callable[[NodeId], SwapChecks | None]
    sibling_ids: Callable[[], Iterable[NodeId]]

    def lease(self) -> float:
        """How long a granted lock waits for its commit (the protocol's, stretched)."""
        raise NotImplementedError

    def _release(self, txn: Txn, now: float) -> list[Effect]:
        raise NotImplementedError  # the protocol's: unlock, grant the best waiting request

    def _apply_commit(self, txn: Txn, a: NodeId, b: NodeId, now: float) -> list[Effect]:
        raise NotImplementedError  # the protocol's: relabel this node's views as the swap does

    def _fits(self, out_view: Sequence[NodeId], in_view: Sequence[NodeId]) -> bool:
        """Views a swap may hand this node: the same sizes (the graph stays regular), no id twice,
        not the node itself."""
        return all(
            len(new) == len(old) and len(set(new)) == len(new) and self.node_id not in new
            for new, old in ((out_view, self._out), (in_view, self._in))
        )

    def took_part(self, txn: Txn, as_partner: bool) -> bool:
        """Whether this node granted ``txn`` (as its partner, or as a neighbour) and still expects
        its adopt or commit, or applied it lately."""
        granted = self._granted.get(txn)
        if granted is not None:
            return granted is as_partner
        if txn in self._parked or txn in self._checks:
            return not as_partner  # its commit waits for the partner's adopt (or the ends' word)
        return self._applied.get(txn) is as_partner

    def _shown(self, initiator: NodeId, txn: Txn) -> tuple[tuple[NodeId, ...], tuple[NodeId, ...]] | None:
        """The views ``initiator``'s proposal of ``txn`` would have handed this node, as judged."""
        return self._proposed.pop(txn, None) if txn[0] == initiator else None

    def decided(self, txn: Txn) -> bool | None:
        """As the partner of ``txn``: True once this node adopted it, None while it granted it
        and waits for the adopt, False if it refused it or never took part as the partner."""
        if self._applied.get(txn) is True:
            return True
        if self._granted.get(txn) is True:
            return None
        return False

    def _asks(self, a: NodeId, b: NodeId, now: float) -> dict[NodeId, tuple[bool, bool, float]]:
        """The ends whose word a commit of initiator ``a`` with partner ``b`` waits for, neither
        hosted here (a hosted partner is read directly; a hosted initiator checked this process's
        nodes before it committed): with identities, when different members stand behind them (a
        member moving edges between its own ids moves nothing of anyone else's). The partner
        always (did it adopt? and, if this node holds edges with ``a``, which move to it, do its
        views name this node along them?); the initiator too when this node holds edges with
        ``b``, which move to it (a member's accept may leave them out of the views the initiator
        took). Empty: applied at once."""
        if not self.ask_partners or self.node_id in (a, b):
            return {}
        owner_a, owner_b = self.owner(a), self.owner(b)
        if owner_a is None or owner_b is None or owner_a == owner_b:
            return {}
        wait = {b: (a in self._in, a in self._out, now)}
        if b in self._in or b in self._out:
            wait[a] = (b in self._in, b in self._out, now)
        return wait

    def _took(self, txn: Txn, out_view: Sequence[NodeId], in_view: Sequence[NodeId]) -> None:
        """Keep the views this node took as an end of ``txn`` (where the process asks: the word
        it gives its neighbours' ``SwapCheck``), the last GRANTED_MEMORY."""
        if self.ask_partners:
            self._adopted[txn] = (frozenset(out_view), frozenset(in_view))
            while len(self._adopted) > GRANTED_MEMORY:
                self._adopted.popitem(last=False)

    def _answer(self, asker: NodeId, txn: Txn) -> SwapChecked:
        """As either end of ``txn``: whether it took the swap's views (the partner adopted them,
        the initiator committed) and where they name ``asker`` (only about the asker itself)."""
        views = self._adopted.get(txn)
        if views is not None:
            return SwapChecked(txn, CHECK_ADOPTED, asker in views[0], asker in views[1])
        return SwapChecked(txn, CHECK_PENDING if self._granted.get(txn) is True else CHECK_REFUSED)

    def _named_elsewhere(
        self, partner: NodeId, out_view: Sequence[NodeId], in_view: Sequence[NodeId]
    ) -> dict[NodeId, tuple[bool, bool]]:
        """As an initiator: the nodes the partner's views name that a third member holds (neither
        hosted here nor the partner's member's), with where each must name this node or the
        partner (out: it points to one of them; in: one of them points to it). With identities,
        for a partner of another member (a hosted partner's views were read directly)."""
        owner_partner = self.owner(partner)
        if not self.ask_partners or owner_partner is None:
            return {}
        asked: dict[NodeId, tuple[bool, bool]] = {}
        for node in sorted((set(out_view) | set(in_view)) - {partner, self.node_id}):
            owner = self.owner(node)
            if self.siblings(node) is None and owner is not None and owner != owner_partner:
                asked[node] = (node in in_view, node in out_view)
        return asked

    def _on_checked(self, sender: NodeId, msg: SwapChecked, now: float) -> list[Effect]:
        """An end's word on a waiting commit: applied once every end asked said it took the swap
        and names this node where it must; dropped on a refusal (its views would not expect us,
        or it never took the swap); asked again soon while a partner waits for its adopt."""
        check = self._checks.get(msg.txn)
        if check is None or sender not in check.wait:
            self.ignored += 1
            return []
        out, into, _asked = check.wait[sender]
        if msg.state == CHECK_PENDING:
            check.wait[sender] = (out, into, now - CHECK_TICKS + PARK_TICKS)
            return [SetTimer(CHECK_TIMER, now + PARK_TICKS)]
        if msg.state == CHECK_ADOPTED and (msg.out or not out) and (msg.into or not into):
            del check.wait[sender]
            if check.wait:
                return []
            del self._checks[msg.txn]
            return self._apply_commit(msg.txn, check.a, check.b, now)
        return self._give_up(msg.txn, now)

    def _give_up(self, txn: Txn, now: float) -> list[Effect]:
        """A waiting commit refused (or left without word for a lease): nothing changes."""
        del self._checks[txn]
        self.stats.unconfirmed += 1
        return self._release(txn, now)

    def _check_again(self, now: float) -> list[Effect]:
        """Ask again the ends that have not answered lately; drop a commit whose word has not come
        within a lease (as a hosted partner's, ``_settle_parked``)."""
        effects: list[Effect] = []
        for txn, check in list(self._checks.items()):
            if now - check.since >= self.lease():
                effects += self._give_up(txn, now)
            else:
                for end, (out, into, asked) in list(check.wait.items()):
                    if now - asked >= CHECK_TICKS - 1e-9:
                        check.wait[end] = (out, into, now)
                        effects.append(Send(end, SwapCheck(txn)))
        if self._checks:
            effects.append(SetTimer(CHECK_TIMER, now + PARK_TICKS))
        return effects

    def _settle_parked(self, now: float) -> list[Effect]:
        """Apply each parked commit whose hosted partner adopted, drop those it refused (or did
        not decide within a lease: its adopt is lost), and look again soon for the others."""
        effects: list[Effect] = []
        for txn, (a, b, since) in list(self._parked.items()):
            partner = self.siblings(b)
            decided = partner.decided(txn) if partner is not None else False
            if decided is None and now - since < self.lease():
                continue
            del self._parked[txn]
            if decided:
                effects += self._apply_commit(txn, a, b, now)
            else:
                self.stats.unconfirmed += 1
                effects += self._release(txn, now)
        if self._parked:
            effects.append(SetTimer(PARK_TIMER, now + PARK_TICKS))
        return effects

    def _applied_now(self, txn: Txn, as_partner: bool) -> None:
        self._applied[txn] = as_partner
        while len(self._applied) > GRANTED_MEMORY:
            self._applied.popitem(last=False)

    def _confirmed(self, txn: Txn, out_view: Sequence[NodeId], in_view: Sequence[NodeId]) -> bool:
        """Whether every node hosted by this process that the swap ``txn`` relabels took part in
        it as a neighbour: those among this node's neighbours when it granted (they must now point
        at the initiator) and those the handed views name (the initiator's neighbours, which must
        now point here). The initiator itself is not asked. A hosted node the new views name must
        also hold the edge they claim: one in the new out-view points to the initiator (or, its
        commit applied, here), one in the new in-view is pointed to by it (a member's views may
        not name a hosted node, locked for show, that it has no edge with)."""
        i, me = txn[0], self.node_id
        before = self._offered.get(txn, (tuple(self._out), tuple(self._in)))
        named = set(before[0]) | set(before[1]) | set(out_view) | set(in_view)
        for node in sorted(named - {i, me}):
            sibling = self.siblings(node)
            if sibling is not None and not sibling.took_part(txn, as_partner=False):
                return False
        return self._claims_hold({i, me}, out_view, in_view, skip={i, me}) and self._claims_whole(
            i, txn, out_view, in_view
        )

    def _claims_whole(
        self, i: NodeId, txn: Txn, out_view: Sequence[NodeId], in_view: Sequence[NodeId]
    ) -> bool:
        """Whether the handed views name every node of this process that holds an edge with the
        initiator ``i`` and took part in ``txn`` as a neighbour, along that edge: its commit will
        move the edge here, so a view without it leaves that node sending to an id that refuses it
        (or waiting for models that never come). A member's build may claim views of its own ids
        while locking, and relabelling, its id's real neighbours of this process (THREAT_MODEL.md,
        ``takeover-keep``): A's nodes' intake from A fell to x0.61 before this check. An initiator
        reads the partner's views the same way (``i`` the partner) before it commits: a member's
        accept that names a locked node along one of its two edges with the member's id, but not
        the other, left that node pointing to the initiator unexpected."""
        for node in self.sibling_ids():
            sibling = self.siblings(node) if node not in (i, self.node_id) else None
            if sibling is None or not sibling.took_part(txn, as_partner=False):
                continue
            if i in sibling.out_view() and node not in in_view:
                return False
            if i in sibling.in_view() and node not in out_view:
                return False
        return True

    def _claims_hold(
        self, ends: set[NodeId], out_view: Sequence[NodeId], in_view: Sequence[NodeId], skip: set[NodeId]
    ) -> bool:
        """Whether the nodes of this process that views name (but ``skip``) hold the edges the
        views claim with one of ``ends``: one in the out-view has it in its in-view, one in the
        in-view points to it. Read once every such node granted the transaction's lock (its views
        then hold every commit it granted before)."""
        for node in (set(out_view) | set(in_view)) - skip:
            sibling = self.siblings(node)
            if sibling is None:
                continue
            if node in out_view and not ends & set(sibling.in_view()):
                return False
            if node in in_view and not ends & set(sibling.out_view()):
                return False
        return True
