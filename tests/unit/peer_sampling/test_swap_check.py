"""A commit that moves a node's edge to another member's node waits for that node's word
(``SwapCheck``): with three processes, a member's initiator could relabel its id's
neighbours in a third process to the victim's node while handing the victim views without them,
so those neighbours sent to a node that refused them."""

from __future__ import annotations

import random
from collections.abc import Hashable

from p2pcore.effects import Send, SetTimer
from peer_sampling.messages import (
    CHECK_ADOPTED,
    CHECK_PENDING,
    CHECK_REFUSED,
    LockReply,
    LockRequest,
    SwapAccept,
    SwapAdopt,
    SwapCheck,
    SwapChecked,
    SwapCommit,
    SwapPropose,
)
from peer_sampling.peerswap import CHECK_TICKS, CHECK_TIMER, PeerSwap, PeerSwapConfig

RNG = random.Random(0)
CFG = PeerSwapConfig(lease_ticks=100.0)


def _owner(v: int) -> Hashable:
    """C hosts 0-9 (None), the member B holds 10-19, A 20-29."""
    return None if v < 10 else "B" if v < 20 else "A"


def _node() -> PeerSwap:
    """C's node 5: points to B's 12 and to 2, 3; pointed to by 4, 6 and A's 22."""
    node = PeerSwap(5, [2, 3, 12], [4, 6, 22], CFG)
    node.owner = _owner
    node.ask_partners = True
    return node


def _commit(node: PeerSwap, txn: tuple[int, int], a: int, b: int, now: float = 0.0) -> list[object]:
    node.on_message(a, LockRequest(txn), now, RNG)
    return node.on_message(a, SwapCommit(txn, a, b), now, RNG)


def test_a_commit_to_another_member_s_node_waits_for_its_word() -> None:
    """B's 12 commits (12, 21): 5 asks 21 before moving its edge; it moves it only when 21 says
    it adopted views that name 5 in its in-view (5 will point to it), and drops the commit when
    21 refused, forgot it, or adopted views without 5."""
    node = _node()
    effects = _commit(node, (12, 1), 12, 21)
    assert Send(21, SwapCheck((12, 1))) in effects and SetTimer(CHECK_TIMER, CHECK_TICKS) in effects
    assert node.out_view() == (2, 3, 12) and node.lock == (12, 1)
    assert node.on_message(20, SwapChecked((12, 1), CHECK_ADOPTED, False, True), 1.0, RNG) == []
    assert node.ignored == 1 and node.lock == (12, 1)  # only the partner answers for itself
    node.on_message(21, SwapChecked((12, 1), CHECK_ADOPTED, False, True), 1.0, RNG)
    assert node.out_view() == (2, 3, 21) and node.lock is None and node.stats.unconfirmed == 0

    for answer in (
        SwapChecked((12, 1), CHECK_REFUSED),
        SwapChecked((12, 1), CHECK_ADOPTED, True, False),  # names 5, but not where 5 points to it
    ):
        node = _node()
        _commit(node, (12, 1), 12, 21)
        node.on_message(21, answer, 1.0, RNG)
        assert node.out_view() == (2, 3, 12) and node.lock is None and node.stats.unconfirmed == 1


def test_a_partner_that_waits_for_its_adopt_is_asked_again_and_silence_drops_the_commit() -> None:
    node = _node()
    _commit(node, (12, 1), 12, 21)
    effects = node.on_message(21, SwapChecked((12, 1), CHECK_PENDING), 1.0, RNG)
    assert effects == [SetTimer(CHECK_TIMER, 3.0)]
    assert Send(21, SwapCheck((12, 1))) in node.on_timer(CHECK_TIMER, 3.0, RNG)
    assert node.on_timer(CHECK_TIMER, 5.0, RNG) == [SetTimer(CHECK_TIMER, 7.0)]  # asked lately
    t = 7.0
    while node.lock is not None:  # no word: asked every CHECK_TICKS, dropped after a lease
        node.on_timer(CHECK_TIMER, t, RNG)
        t += 2.0
    assert t > CFG.lease_ticks and node.out_view() == (2, 3, 12) and node.stats.unconfirmed == 1


def test_commits_that_need_no_word_are_applied_at_once() -> None:
    """Between two ids of one member (its own business), from a node of this process, or in a
    process that does not ask (without identities; the lab): applied at once."""
    node = _node()
    assert _commit(node, (12, 1), 12, 15) == [] and node.out_view() == (2, 3, 15)
    node = _node()
    node.on_message(7, LockRequest((7, 1)), 0.0, RNG)  # 7: hosted here (owner None)
    assert node.on_message(7, SwapCommit((7, 1), 7, 4), 0.0, RNG) == []
    assert node.in_view() == (6, 7, 22)
    node = _node()
    node.ask_partners = False
    assert _commit(node, (12, 1), 12, 21) == [] and node.out_view() == (2, 3, 21)


def _owner_a(v: int) -> Hashable:
    """As A's process sees ids: A hosts 20-29 (None), the member B holds 10-19, C 0-9."""
    return None if 20 <= v < 30 else "B" if 10 <= v < 20 else "C"


def test_a_partner_adopts_without_asking_and_answers_from_the_views_it_adopted() -> None:
    """A's 21 takes B's 12's place; the views 12 hands it name C's 5 (5 -> 21). The initiator has
    committed by then, so 21 asks no one (a refusal would leave both ends inconsistent); 5's
    question (did 21 adopt?) is answered "pending" until the adopt, then from the views 21 took,
    about 5 only."""
    partner = PeerSwap(21, [22, 23, 24], [12, 25, 26], CFG)  # 12 points to it: may propose
    partner.owner = _owner_a
    partner.ask_partners = True
    txn = (12, 1)
    assert partner.on_message(5, SwapCheck(txn), 0.0, RNG) == [Send(5, SwapChecked(txn, CHECK_REFUSED))]
    accept = partner.on_message(12, SwapPropose(txn), 0.0, RNG)
    assert isinstance(accept[0], Send) and isinstance(accept[0].message, SwapAccept)
    assert partner.on_message(5, SwapCheck(txn), 0.0, RNG) == [Send(5, SwapChecked(txn, CHECK_PENDING))]
    effects = partner.on_message(12, SwapAdopt(txn, (13, 14, 22), (5, 25, 26)), 1.0, RNG)
    assert not [e for e in effects if isinstance(e, Send)]
    assert partner.in_view() == (5, 25, 26) and partner.lock is None
    assert partner.on_message(5, SwapCheck(txn), 2.0, RNG) == [
        Send(5, SwapChecked(txn, CHECK_ADOPTED, out=False, into=True))
    ]
    assert partner.on_message(4, SwapCheck(txn), 2.0, RNG) == [
        Send(4, SwapChecked(txn, CHECK_ADOPTED, out=False, into=False))
    ]


def test_a_neighbour_asked_about_the_partner_says_where_it_names_the_ends_in_its_grant() -> None:
    node = _node()  # C's 5: out 2, 3, 12; in 4, 6, 22
    effects = node.on_message(21, LockRequest((21, 1), about=12), 0.0, RNG)
    assert Send(21, LockReply((21, 1), True, out=True, into=False)) in effects  # 5 points to 12
    node = _node()
    effects = node.on_message(21, LockRequest((21, 1)), 0.0, RNG)
    assert Send(21, LockReply((21, 1), True)) in effects  # not asked: says nothing


def test_edges_with_the_partner_wait_for_the_initiator_s_word_too() -> None:
    """A's 22 swaps with the member's 12, which 5 points to (22 points to 5): the commit moves
    5's edge with 12 to 22 and 22's with 5 to 12. A member's accept may leave 5 out of the views
    22 took, so 5 asks both ends and moves its edges only when each names it along them."""
    for word_of_22, moved in ((True, True), (False, False)):
        node = _node()
        effects = _commit(node, (22, 1), 22, 12)
        assert {e.to for e in effects if isinstance(e, Send)} == {12, 22}
        node.on_message(12, SwapChecked((22, 1), CHECK_ADOPTED, out=True, into=False), 1.0, RNG)
        assert node.lock == (22, 1)  # one end answered
        node.on_message(22, SwapChecked((22, 1), CHECK_ADOPTED, out=False, into=word_of_22), 1.0, RNG)
        assert node.lock is None
        views = ((2, 3, 22), (4, 6, 12)) if moved else ((2, 3, 12), (4, 6, 22))
        assert (node.out_view(), node.in_view()) == views and node.stats.unconfirmed == (not moved)


def _initiator_met_by_the_member(word: LockReply | None) -> tuple[PeerSwap, tuple[int, int], list[object]]:
    """A's 21 swaps with B's 12, whose views name C's 5 (12 -> 5) and B's own ids; every lock
    granted, 5's with ``word`` (None: as its process would answer, 12 pointing to it). Returns
    21, the transaction and what it sent."""
    node = PeerSwap(21, [12, 22, 23], [24, 25, 26], CFG)
    node.owner = _owner_a
    node.ask_partners = True
    node.on_timer("ps:swap", 0.0, random.Random(3))
    pending = node._pending
    assert pending is not None
    pending.partner = 12  # whichever it drew: the member's 12
    txn = pending.txn
    effects = node.on_message(12, SwapAccept(txn, (5, 13, 14), (15, 16, 21)), 1.0, RNG)
    for k in (13, 14, 15, 16, 22, 23, 24, 25, 26, 5):
        reply = (word or LockReply(txn, True, out=False, into=True)) if k == 5 else LockReply(txn, True)
        effects += node.on_message(k, reply, 1.0, RNG)
    return node, txn, effects


def test_an_initiator_asks_a_third_member_s_nodes_its_partner_s_views_name_in_the_lock_request() -> None:
    """21 asks 5, in its lock request, where 5 names 21 or 12; it commits when 5's grant shows
    that 12 points to it (then answers from the views it took) and aborts when it does not:
    nothing changes. B's own 13-16 are not asked."""
    node, txn, effects = _initiator_met_by_the_member(None)
    requests = [e.message for e in effects if isinstance(e, Send) and isinstance(e.message, LockRequest)]
    assert {m.about for m in requests} == {None, 12} and LockRequest(txn, about=12) in requests
    assert sum(m.about == 12 for m in requests) == 1
    assert any(isinstance(e, Send) and isinstance(e.message, SwapAdopt) for e in effects)
    assert node.out_view() == (5, 13, 14) and node.stats.committed == 1
    assert node.on_message(5, SwapCheck(txn), 2.0, RNG) == [
        Send(5, SwapChecked(txn, CHECK_ADOPTED, out=True, into=False))
    ]
    node, txn, effects = _initiator_met_by_the_member(LockReply(txn, True))
    assert not any(isinstance(e, Send) and isinstance(e.message, SwapAdopt) for e in effects)
    assert node.out_view() == (12, 22, 23) and node.stats.unconfirmed == 1 and node.lock is None
