"""A process judging the views swaps hand its nodes (p2pnode.trust.swapjudge): the per-node
and the per-process bound on one member's places, alone and in many-node networks in memory."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from bench import _swap_takeover as takeover
from p2pnode.trust.swapjudge import SwapJudge, line_sd
from peer_sampling.graph import in_views, random_regular_digraph
from peer_sampling.peerswap import PeerSwap, PeerSwapConfig
from tests.unit.peer_sampling.test_peer_sampling import PureNet, _process, assert_regular_and_consistent


def _member(v: int) -> str | None:
    return None if v < 8 else "member"


def _judged(
    views: dict[int, tuple[list[int], list[int]]],
    ids: int = 8,
    population: int = 16,
    margin_sd: float | None = 2.0,
) -> SwapJudge:
    hosted = {v: PeerSwap(v, out, into) for v, (out, into) in views.items()}
    _process(hosted)
    judge = SwapJudge(_member, lambda m: ids, population, margin_sd=margin_sd)
    judge.attach(hosted)
    return judge


def test_the_line_is_tighter_the_larger_a_member_s_share_of_the_ids() -> None:
    """The default margin is the normal quantile 1 - 0.3 p: about one deviation for a member with
    half the ids (2 x 20 nodes), 1.3 with a third (3 x 20), 1.9 with a tenth (10 x 10), so the
    chance an honest network's count crosses some member's line stays about 0.3 however many
    members it holds."""
    assert line_sd(20 / 39) == pytest.approx(1.02, abs=0.01)
    assert line_sd(20 / 59) == pytest.approx(1.27, abs=0.01)
    assert line_sd(10 / 99) == pytest.approx(1.88, abs=0.01)
    assert line_sd(1.0) < line_sd(0.5) < line_sd(0.1) < line_sd(0.01)
    assert line_sd(0.0) > 5  # no ids: no place beyond the one always let
    views = {
        v: ([(v + 1) % 8, (v + 2) % 8, (v + 3) % 8], [(v - 1) % 8, (v - 2) % 8, (v - 3) % 8])
        for v in range(8)
    }
    judge = _judged(views, margin_sd=None)  # 8 ids of 16: 8/15 of 48 places, 25.6, sd 3.46
    assert judge.limit("member") == pytest.approx(25.6 + line_sd(8 / 15) * 3.456 + 1, abs=0.01)


def test_a_member_may_hold_its_share_of_a_process_s_places_and_a_margin() -> None:
    """8 hosted nodes, a member holding the other 8 ids of 16: its share is 8/15 of the 48
    places, 25.6, and the line with a margin of two deviations 25.6 + 2 sd (6.9) + 1. A swap that
    would lift it over the line is refused; one that lowers it is taken however far above; an
    adopt (the initiator committed) is not weighed against the count."""
    # every hosted node with two of the member's places in each view: 32 of 48
    views = {
        v: ([(v + 1) % 8, 8 + v, 8 + (v + 1) % 8], [(v - 1) % 8, 8 + (v + 2) % 8, 8 + (v + 3) % 8])
        for v in range(8)
    }
    judge = _judged(views)
    assert judge.places == 48 and judge.held["member"] == 32
    limit = judge.limit("member")
    assert limit is not None and 33 < limit < 34
    node = judge._samplers[0]
    assert node.vet is not None and (node.out_view(), node.in_view()) == ((1, 8, 9), (7, 10, 11))
    # 0 takes the member's 8's place: five of six places the member's and one hosted node (1),
    # against four and two (1, 7) now; the hosted nodes that named 0 name 8 after (+2), the one
    # named in the handed views names 0 instead of 8 (-1): +2 in all
    handed = ([1, 9, 10], [11, 12, 13])
    judge.held["member"] = 31
    assert node.vet(8, *handed) is True  # 33 <= 33.5
    judge.held["member"] = 32
    assert node.vet(8, *handed) is False and judge.refused_process == 1  # 34 > 33.5
    assert node.vet(8, *handed, settled=True) is True  # the adopt: not weighed against the count
    # a swap that gives the member fewer places (-6) is taken however far above the line
    judge.held["member"] = 40
    assert node.vet(8, [1, 2, 8], [3, 4, 7]) is True
    # six of six the member's: the per-node bound, whatever the count
    judge.held["member"] = 0
    assert node.vet(8, [8, 9, 10], [11, 12, 13]) is False and judge.refused_node == 1


def test_the_count_follows_the_swaps_that_move_a_process_s_nodes() -> None:
    """``PeerSwap.watch``: every view a swap changes (adopted, committed, relabelled as a
    neighbour) moves the judge's count, which agrees with a fresh count after 200 rounds of
    honest swaps between two processes of 20 nodes."""
    samplers, judges = _judged_net([20, 20], seed=1, rounds=200)
    for p, judge in enumerate(judges):
        fresh = Counter(
            1 - p
            for v, s in samplers.items()
            if v // 20 == p
            for w in (*s.out_view(), *s.in_view())
            if w // 20 != p
        )
        assert +judge.held == fresh and judge.places == 120
    assert sum(s.stats.committed for s in samplers.values()) > 1000


def _judged_net(
    sizes: list[int],
    seed: int,
    rounds: int,
    margin_sd: float | None = None,
    liars: range = range(0),
    ask: bool = True,
) -> tuple[dict[int, PeerSwap], list[SwapJudge]]:
    """Processes of ``sizes`` consecutive ids on a random 3-regular graph, each judging its
    nodes' swaps (and, ``ask``, asking another member's partner before a commit moves an edge to
    it); ``liars``: nodes running the member's takeover, keeping one real neighbour."""
    n = sum(sizes)
    starts = [sum(sizes[:p]) for p in range(len(sizes))]

    def proc(v: int) -> int:
        return max(p for p, s in enumerate(starts) if v >= s)

    out = random_regular_digraph(range(n), 3, random.Random(seed))
    ins = in_views(out)
    cfg = PeerSwapConfig(rate_per_round=0.3, txn_timeout_ticks=1e9, lease_ticks=1e9)
    samplers = {v: PeerSwap(v, out[v], ins[v], cfg) for v in range(n)}
    judges = []
    for p in range(len(sizes)):
        hosted = {v: s for v, s in samplers.items() if proc(v) == p}
        _process(hosted)
        judge = SwapJudge(
            lambda v, p=p: None if proc(v) == p else proc(v), lambda m: sizes[m], n, margin_sd=margin_sd
        )
        judge.attach(hosted)
        judges.append(judge)
        for s in hosted.values():
            s.owner = lambda v, p=p: None if proc(v) == p else proc(v)
            s.ask_partners = ask
    for v in liars:
        samplers[v].config = PeerSwapConfig(rate_per_round=1.5, txn_timeout_ticks=1e9, lease_ticks=1e9)
        takeover.lie(samplers[v])
    net = PureNet(dict(samplers), seed=seed, max_delay=3.0)
    for v, s in samplers.items():
        net.apply(v, s.start(0.0, net.rng))
    net.run_until(rounds * cfg.round_ticks)
    net.drain()
    if not liars:
        assert_regular_and_consistent(samplers, 3)
    return samplers, judges


@pytest.mark.slow
@pytest.mark.parametrize("sizes", [[20, 20], [20, 20, 20], [10, 30], [10] * 10])
def test_honest_swaps_stay_consistent_and_the_process_bound_costs_few_of_them(sizes: list[int]) -> None:
    """Honest swaps between processes that judge them (and, with three or more, ask each other's
    nodes for their word on commits): views regular and consistent, none refused after anything
    changed, and at most 5% fewer swaps committed than in the same network judged per node only
    (a refused swap is tried again with another partner). Seeds 1-3, 200 rounds, committed against
    unjudged: 2 x 20 -1.8%, 3 x 20 -1.8%, 10 + 30 0.0%, 10 x 10 -1.1% (one line of one deviation
    for all: 10 x 10 -11%)."""
    samplers, judges = _judged_net(sizes, seed=2, rounds=200)
    committed = sum(s.stats.committed for s in samplers.values())
    unjudged, _ = _judged_net(sizes, seed=2, rounds=200, margin_sd=1e9)
    assert committed > 0.95 * sum(s.stats.committed for s in unjudged.values()) and committed > 1000
    assert sum(j.refused_process for j in judges) > 0  # the line was met, and cost that little
    assert sum(s.stats.unconfirmed for s in samplers.values()) == 0


def test_a_member_keeping_one_real_neighbour_holds_no_more_than_its_share_and_a_margin(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``takeover-keep`` in memory: the member's 20 nodes of 40 run whole swaps with A's
    nodes handing over made-up views of its ids but one real neighbour (five of six places, which
    the per-node bound lets through), five times the network's rate. With the process's bound the
    member ends with at most its share and the margin (two places more at most: an adopt may
    differ from what was judged by one id a view): 68 of A's 120 places, seeds 1-3 (72-74 with
    the earlier line of two deviations, seen failing the 0.58 here). Judged per node only (seen
    failing) it ends above that line: 78 / 74 / 82 (0.71-0.75 of A's places before a node's own
    swaps also checked the partner's views whole, ``_claims_whole``)."""
    monkeypatch.setattr(takeover, "_OWN", range(20, 40))
    monkeypatch.setattr(takeover, "_KEEP", True)
    _, judges = _judged_net([20, 20], seed=3, rounds=100, liars=range(20, 40))
    a = judges[0]
    a.recount()
    limit = a.limit(1)
    assert limit is not None and a.held[1] <= limit + 2, (a.held[1], limit)
    assert a.held[1] < 0.58 * a.places, a.held[1]  # its share is 0.51
    _, judges = _judged_net([20, 20], seed=3, rounds=100, margin_sd=1e9, liars=range(20, 40))
    a = judges[0]
    a.recount()
    assert a.held[1] > limit + 2, a.held[1]  # per node only: over the line
