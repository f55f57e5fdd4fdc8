"""The KNN service's pure machine (protocols/knn.py): what a neighbour counts and answers, what a
querier takes, and what a flooding querier cannot do."""

from __future__ import annotations

import math

import numpy as np
import pytest

from p2pcore.effects import Dropped, Send, SetTimer
from protocols.knn import KnnService, KnnSettings, Query, epsilon_of
from protocols.knn_messages import KnnAnswer, KnnAsk, KnnProbe, KnnProfile

ITEMS = [1, 4, 7, 9]
RATINGS = [5.0, 3.0, 1.0, 4.0]


def service(node_id: int = 0, plan: list[Query] | None = None, seed: int = 0, **kw: object) -> KnnService:
    settings = KnnSettings(n_items=20, population=50, **kw)  # type: ignore[arg-type]
    return KnnService(node_id, settings, ITEMS, RATINGS, plan or [], np.random.default_rng(seed))


def answers(effects: list[object]) -> list[float | None]:
    return [e.message.rating for e in effects if isinstance(e, Send) and isinstance(e.message, KnnAnswer)]


def test_a_flooding_querier_cannot_push_data_usage_past_what_was_answered() -> None:
    """10,000 asks from one querier, for its 4 items again and again and for items it never
    rated: DataUsage counts each (querier, item) once, a repeat gets the first answer again
    (randomized response is not drawn afresh for the querier to average), unrated items are
    declined; past the allowance even new asks are declined, uncounted."""
    node = service(tau=0.0, dp=True, ask_burst=100.0)
    first: dict[int, float | None] = {}
    for n in range(10_000):
        item = n % 20
        got = answers(node.on_message(7, KnnAsk(n, item), now=0.0))
        assert len(got) == 1
        if item in ITEMS:
            first.setdefault(item, got[0])
            assert got[0] == first[item]
        else:
            assert got[0] is None
    assert node.stats.usage == len(ITEMS) == node.stats.randomized
    assert node.stats.repeated == 10_000 // 20 * len(ITEMS) - len(ITEMS)
    # a second querier: its own four, no more
    for n in range(200):
        node.on_message(8, KnnAsk(n, ITEMS[n % 4]), now=0.0)
    assert node.stats.usage == 2 * len(ITEMS)


def test_the_allowance_declines_a_querier_past_its_burst_and_refills_with_time() -> None:
    node = service(ask_burst=3.0, ask_rate=10.0)
    many = KnnService(0, node.settings, list(range(20)), [3.0] * 20, [], np.random.default_rng(0))
    got = [answers(many.on_message(5, KnnAsk(q, q), now=0.0))[0] for q in range(5)]
    assert got == [3.0, 3.0, 3.0, None, None]
    assert many.stats.usage == 3 and many.stats.declined == 2
    assert answers(many.on_message(5, KnnAsk(9, 9), now=10.0)) == [3.0]  # 10 ticks: one token back
    assert answers(many.on_message(6, KnnAsk(1, 10), now=0.0)) == [3.0]  # another querier's own


def test_a_restart_does_not_refill_a_querier_allowance() -> None:
    """The allowance is in the checkpoint: a querier that spent it cannot have a node restarted
    (or wait out its downtime) for a fresh burst; it refills at the usual rate from the restart."""
    from p2pnode.data.checkpoint import dumps, loads

    settings = KnnSettings(n_items=20, population=50, ask_burst=3.0, ask_rate=10.0)
    node = KnnService(0, settings, list(range(20)), [3.0] * 20, [], np.random.default_rng(0))
    assert [answers(node.on_message(5, KnnAsk(q, q), now=0.0))[0] for q in range(4)] == [3.0] * 3 + [None]
    again = KnnService(0, settings, list(range(20)), [3.0] * 20, [], np.random.default_rng(0))
    again.restore(loads(dumps({"knn": node.state()}))["knn"])
    assert answers(again.on_message(5, KnnAsk(7, 7), now=500.0)) == [None]  # still spent
    assert answers(again.on_message(5, KnnAsk(8, 8), now=510.0)) == [3.0]  # one token in 10 ticks
    assert answers(again.on_message(6, KnnAsk(9, 9), now=510.0)) == [3.0]  # another querier's own


def test_past_tau_a_node_answers_through_randomized_response_and_counts_epsilon() -> None:
    """τ = 2: the first two answers are real (ε = ∞ after them, eq. 26), later ones randomized;
    the real rating comes back three times in four, within a binomial bound (seeded)."""
    node = KnnService(0, KnnSettings(n_items=1, population=10_000, tau=2.0, dp=True), [0], [2.0], [],
                      np.random.default_rng(11))  # fmt: skip
    assert node.epsilon == 0.0
    out = [answers(node.on_message(q, KnnAsk(q, 0), now=0.0))[0] for q in range(1, 2)]
    assert out == [2.0] and math.isinf(node.epsilon)
    n = 4000
    out = [answers(node.on_message(q, KnnAsk(q, 0), now=0.0))[0] for q in range(2, 2 + n)]
    assert node.stats.real == 2 and node.stats.randomized == n - 1 and node.stats.usage == n + 1
    real = np.isclose(np.array(out[1:], dtype=float), 2.0)
    assert abs(real.mean() - 0.75) < 4 * math.sqrt(0.75 * 0.25 / real.size)
    noise = np.array(out[1:], dtype=float)[~real]
    assert noise.min() >= 1.0 and noise.max() <= 5.0
    assert node.epsilon == pytest.approx(math.log(3 + 4 * 2 / (n - 1))) == epsilon_of(n + 1, 2)


def test_probes_are_answered_with_the_cosine_over_co_rated_items_and_limited_per_querier() -> None:
    node = service(reprobe_ticks=1000.0)
    probe = KnnProbe((1, 2, 9), (4.0, 2.0, 2.0))
    out = node.on_message(3, probe, now=0.0)
    assert len(out) == 1 and isinstance(out[0], Send)
    profile = out[0].message
    assert isinstance(profile, KnnProfile)
    want = (4 * 5 + 2 * 4) / math.sqrt((16 + 4) * (25 + 16))
    assert profile.sim == want and profile.co == 2 and profile.items == tuple(ITEMS)
    assert node.on_message(3, probe, now=1.0) == out  # the same profile: the same answer
    other = KnnProbe((1,), (1.0,))
    assert node.on_message(3, other, now=2.0) == [Dropped("too-often")]  # a new one, too soon
    assert node.on_message(3, other, now=1001.0)[0] != out[0]
    assert node.stats.probes_answered == 2


def test_vet_refuses_what_is_out_of_range_or_not_asked_for() -> None:
    plan = [Query(1.0, 4, 3.0)]
    node = service(plan=plan, candidates="full", k=2, hold_ticks=0.0)  # ask with the profiles it has
    assert node.vet(1, KnnProbe((3, 2), (1.0, 1.0))) == "schema"  # not ascending
    assert node.vet(1, KnnProbe((3, 20), (1.0, 1.0))) == "schema"  # past the catalogue
    assert node.vet(1, KnnProbe((3,), (1.0, 2.0))) == "schema"  # one rating per item
    assert node.vet(1, KnnProbe((3,), (7.0,))) == "schema"  # outside the scale
    assert node.vet(1, KnnProbe((3,), (math.nan,))) == "schema"
    assert node.vet(1, KnnProbe((0, 19), (1.0, 5.0))) is None
    assert node.vet(1, KnnAsk(1, 20)) == "schema"
    assert node.vet(1, KnnProfile(0.5, 1, (3,))) == "not-asked"  # never probed
    assert node.vet(1, KnnAnswer(1, 4, 3.0)) == "not-asked"  # no such query
    start = node.start(0.0)  # 49 others, 32 probes on their way at once
    assert [e.to for e in start if isinstance(e, Send) and isinstance(e.message, KnnProbe)] == list(
        range(1, 33)
    )
    assert node.vet(1, KnnProfile(1.5, 1, (3,))) == "schema"
    assert node.vet(1, KnnProfile(0.5, 2, (3,))) == "schema"  # co past its items
    for peer, sim in ((1, 0.9), (2, 0.5), (3, -0.2)):
        assert node.vet(peer, KnnProfile(sim, 1, (4,))) is None
        more = node.on_message(peer, KnnProfile(sim, 1, (4,)), 0.0)
        assert [e.to for e in more if isinstance(e, Send)] == [32 + peer]  # the window moves on
    asks = [e for e in node.on_timer("knn:query", 1.0) if isinstance(e, Send)]
    assert sorted(e.to for e in asks) == [1, 2] and all(e.message == KnnAsk(1, 4) for e in asks)
    assert node.vet(3, KnnAnswer(1, 4, 2.0)) == "not-asked"  # asked the two most similar
    assert node.vet(1, KnnAnswer(1, 5, 2.0)) == "not-asked"  # another item
    assert node.vet(1, KnnAnswer(1, 4, 9.0)) == "schema"
    node.on_message(1, KnnAnswer(1, 4, 4.0), 1.0)
    # a second answer to an ask (it may have been asked twice): dropped as late, not refused
    assert node.vet(1, KnnAnswer(1, 4, 4.0)) is None
    assert node.on_message(1, KnnAnswer(1, 4, 1.0), 1.0) == [] and node.stats.late == 1
    assert node.pending[1].answers == {1: 4.0}
    out = node.on_message(2, KnnAnswer(1, 4, 2.0), 1.0)
    assert out == [SetTimer("knn:t1", math.inf)]
    assert node.done == [(0, 4, (0.9 * 4 + 0.5 * 2) / 1.4, 3.0, 2)]


def test_an_unanswered_ask_is_sent_once_more_then_left_out() -> None:
    """A refused or lost ask (or answer) is asked again at the first timeout, of the silent
    neighbours only; one still silent at the second is left out of the estimate."""
    node = service(plan=[Query(1.0, 4, 3.0)], k=2, timeout_ticks=50.0, hold_ticks=0.0)
    node.start(0.0)
    for peer, sim in ((1, 0.9), (2, 0.5)):
        node.on_message(peer, KnnProfile(sim, 1, (4,)), 0.0)
    effects = node.on_timer("knn:query", 1.0)
    assert SetTimer("knn:t1", 51.0) in effects
    node.on_message(2, KnnAnswer(1, 4, 2.0), 5.0)
    again = node.on_timer("knn:t1", 51.0)
    assert again == [SetTimer("knn:t1", 101.0), Send(1, KnnAsk(1, 4))] and node.stats.asked_again == 1
    assert node.pending and not node.done
    node.on_timer("knn:t1", 101.0)
    assert node.done == [(0, 4, 2.0, 3.0, 1)] and node.stats.timeouts == 1 and not node.pending


def test_an_answer_to_the_second_ask_completes_the_query_and_is_not_counted_twice() -> None:
    """The neighbour answered the first ask but its answer was lost: the second ask gets the
    first answer again from its cache (uncounted), and the querier's estimate takes it."""
    querier = service(plan=[Query(1.0, 4, 3.0)], k=1, timeout_ticks=50.0, hold_ticks=0.0)
    neighbour = service(node_id=1)
    querier.start(0.0)
    querier.on_message(1, KnnProfile(0.9, 1, (4,)), 0.0)
    ask = next(e for e in querier.on_timer("knn:query", 1.0) if isinstance(e, Send))
    first = answers(neighbour.on_message(0, ask.message, 2.0))  # its answer is lost
    resent = next(e for e in querier.on_timer("knn:t1", 51.0) if isinstance(e, Send))
    second = answers(neighbour.on_message(0, resent.message, 52.0))
    assert first == second == [3.0] and neighbour.stats.usage == 1 and neighbour.stats.repeated == 1
    querier.on_message(1, KnnAnswer(1, 4, 3.0), 53.0)
    assert querier.done == [(0, 4, 3.0, 3.0, 1)] and querier.stats.timeouts == 0


def test_a_checkpoint_keeps_what_a_restart_must_not_forget() -> None:
    """Through the checkpoint's own bytes (p2pnode/data/checkpoint.py): a node past τ that restarts
    keeps its DataUsage (it would answer real ratings again otherwise), answers a repeated ask
    from its cache, and draws the randomized responses it would have drawn."""
    from p2pnode.data.checkpoint import dumps, loads

    settings = KnnSettings(n_items=20, population=50, tau=1.0, dp=True)
    node = KnnService(0, settings, ITEMS, RATINGS, [Query(1.0, 4, 3.0)], np.random.default_rng(1),
                      np.random.default_rng(2))  # fmt: skip
    for q, item in enumerate(ITEMS[:3]):
        node.on_message(q + 1, KnnAsk(q, item), now=0.0)
    node.on_message(9, KnnProbe((4,), (2.0,)), now=0.0)
    saved = loads(dumps({"knn": node.state()}))["knn"]
    again = KnnService(0, settings, ITEMS, RATINGS, [Query(1.0, 4, 3.0)], np.random.default_rng(7),
                       np.random.default_rng(8))  # fmt: skip
    again.restore(saved)
    assert again.stats == node.stats and again.stats.usage == 3 and again.stats.randomized == 2
    assert answers(again.on_message(2, KnnAsk(5, ITEMS[1]), now=1.0)) == [node.answered[(2, ITEMS[1])]]
    a = answers(node.on_message(4, KnnAsk(6, ITEMS[3]), now=1.0))
    b = answers(again.on_message(4, KnnAsk(6, ITEMS[3]), now=1.0))
    assert a == b and again.epsilon == node.epsilon < math.inf
    probe = KnnProbe((4,), (2.0,))  # the same profile again: answered alike, not counted again
    assert again.on_message(9, probe, now=2.0) == node.on_message(9, probe, now=2.0)
    assert again.stats.probes_answered == node.stats.probes_answered == 1
    with pytest.raises(ValueError, match="does not parse"):
        again.restore({**saved, "stats": "x"})
    assert again.stats.usage == 4  # a refused checkpoint changed nothing


def test_with_every_node_a_candidate_queries_wait_for_the_profiles_on_their_way() -> None:
    """Another process may not be up when the probes go out: the queries wait (at most
    ``hold_ticks``) until every probe is answered, so the neighbours are chosen among everyone."""
    node = KnnService(0, KnnSettings(n_items=20, population=3, hold_ticks=50.0), ITEMS, RATINGS,
                      [Query(10.0, 4, 3.0)], np.random.default_rng(0))  # fmt: skip
    node.start(0.0)
    node.on_message(1, KnnProfile(0.5, 1, (4,)), 0.0)
    assert node.on_timer("knn:query", 10.0) == [SetTimer("knn:query", 15.0)] and not node.done
    node.on_message(2, KnnProfile(0.9, 1, (4,)), 12.0)
    asks = [e.to for e in node.on_timer("knn:query", 15.0) if isinstance(e, Send)]
    assert asks == [2, 1]  # both known: the most similar first
    late = KnnService(0, KnnSettings(n_items=20, population=3, hold_ticks=50.0), ITEMS, RATINGS,
                      [Query(10.0, 4, 3.0)], np.random.default_rng(0))  # fmt: skip
    late.start(0.0)
    late.on_message(1, KnnProfile(0.5, 1, (4,)), 0.0)
    asks = [e.to for e in late.on_timer("knn:query", 60.0) if isinstance(e, Send)]
    assert asks == [1]  # past the hold: it asks among those it knows


def test_ranked_candidates_follow_the_suggestions_of_the_most_similar_only() -> None:
    """Ranked candidates: a profile answer names the answering node's most similar peers; the
    querier probes those it does not know, but only from a candidate among its k most similar,
    at most ``probes_per_wake`` a suggestion and never past ``max_profiles``."""
    node = service(candidates="ranked", k=2, probes_per_wake=3, probe_window=0, max_profiles=8)
    for peer, sim in ((1, 0.9), (2, 0.8), (3, 0.1)):
        node.on_message(peer, KnnProfile(sim, 1, (4,)), 0.0)
    assert node.nearest(2) == (1, 2) and node.nearest(5) == (1, 2, 3)
    answer = node.profile_for(KnnProbe((4,), (3.0,)))
    assert answer.near == tuple(node.nearest(node.settings.near))
    node.on_message(4, KnnProfile(0.05, 1, (4,), (10, 11)), 0.0)  # not among the 2 most similar
    assert node.waiting == []
    node.on_message(5, KnnProfile(0.95, 1, (4,), (1, 0, 12, 12, 13, 14, 15, 99)), 0.0)
    assert node.waiting == [12, 13, 14]  # known, itself and repeats skipped; 3 a suggestion
    node.on_message(6, KnnProfile(0.99, 1, (4,), (20, 21, 22)), 0.0)
    assert node.waiting == [12, 13, 14]  # 6 held and 3 waiting: max_profiles 8 leaves no room
    plain = service(candidates="view")
    assert plain.profile_for(KnnProbe((4,), (3.0,))).near == ()


def test_slow_answers_stretch_the_timeout_and_a_second_profile_is_late_not_refused() -> None:
    """A loaded machine's neighbours answer late: the re-send waits for what the answers took
    (at most 4x the configured timeout), and a probe sent once more whose two answers both
    come is counted late, its second profile dropped, not refused as unasked."""
    node = service(candidates="full", probe_window=2, timeout_ticks=100.0)
    assert node.timeout() == 100.0
    node.start(0.0)  # probes 1 and 2
    node.on_message(1, KnnProfile(0.5, 1, (4,)), 150.0)  # answered after 150 ticks
    assert 100.0 < node.timeout() <= 400.0
    stale = node.on_wake(10_000.0, [])  # probe 2 (and 3, sent after 1 answered) never answered
    assert {e.to for e in stale if isinstance(e, Send)} >= {2}
    assert node.vet(2, KnnProfile(0.4, 1, (4,))) is None
    node.on_message(2, KnnProfile(0.4, 1, (4,)), 10_001.0)  # the first answer: taken, not timed
    assert node.vet(2, KnnProfile(0.4, 1, (4,))) is None  # the second: late
    assert node.on_message(2, KnnProfile(0.4, 1, (4,)), 10_002.0) == [] and node.stats.late == 1
    assert node.vet(2, KnnProfile(0.4, 1, (4,))) == "not-asked"  # a third: nobody asked
    for _ in range(50):
        node.round_trips.add(10_000.0)
    assert node.timeout() == 400.0
