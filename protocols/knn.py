"""The peer-to-peer KNN service: paper 003 (ReuseKNN) run by its users, each node holding its own
ratings and counting its own DataUsage.

003 runs centrally: a server holds every rating, picks each query's k neighbours and reads their
ratings (§4). Here each node is a user and plays both parts:

- **querier** (§4.1-4.2): it shows its profile to candidate neighbours (:class:`KnnProbe`); each
  answers with the cosine similarity over the items both rated, their number, and the ids of the
  items it rated (:class:`KnnProfile`). For a query on item i it ranks the candidates who rated
  i as the central module does (``learning.reuseknn.order``/``pick``: rank(similarity), plus
  rank(reusability) for Expect and Gain), asks the chosen k with similarity > 0 for their rating
  (:class:`KnnAsk`) and predicts the similarity-weighted mean of the answers (eq. 1).
  Reusability comes from what it knows locally: Gain (eq. 6) from the co-rated counts of the
  profiles; Expect (eq. 5) from item popularity counted over the profiles it holds, its own
  included, which is the data set's popularity when it holds everyone's and an estimate from a
  sample when its candidates come from peer sampling.
- **neighbour** (§4.3): it answers a rating ask, counts the use (DataUsage, eq. 15) and, once
  past τ, answers through randomized response (eq. 7-8, ε = ln 3 a use) with no trusted party
  deciding for it. Its ε so far (eq. 10/26) is on its ``/metrics``.

Where it differs from the central version, by construction: a querier shows its own ratings to
the candidates it probes (the similarity needs both sides' ratings, and the candidate's are what
DataUsage protects); a candidate shows the ids of the items it rated; a query no neighbour can
answer gets the run's agreed fallback (the central module's training mean, given in config like
τ) or else the querier's own mean rating; an ask not answered within the timeout is sent once more
(a refused or lost ask or answer), and one still not answered then is left out of
the prediction.

What a member can do to a node (THREAT_MODEL.md, KNN): every ask it answers counts once, so a
flood cannot push its DataUsage past the answers it gave; the same (querier, item) asked again
gets the first answer again, uncounted (no fresh randomized-response draw to average); answers
to one querier are limited by a token allowance; a new profile from the same querier is answered
at most once per ``reprobe_ticks``, which bounds, but does not close, the similarity answers'
leak (a crafted profile's cosine says something of the ratings it meets).

With every user as a candidate and the queries asked one after another, the run's
neighbourhoods, DataUsage and estimates are the central module's with per-user generators
(``learning.reuseknn.answer(streams=...)``), bit for bit (tests/sim/test_knn_service.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from learning import reuseknn as rk
from p2pcore.effects import Dropped, Effect, NodeId, Send, SetTimer
from p2pcore.roundtrips import RoundTrips
from protocols.knn_messages import KnnAnswer, KnnAsk, KnnProbe, KnnProfile

QUERY_TIMER = "knn:query"
HOLD_STEP = 5.0  #: ticks between two looks for missing profiles before a query
#: answers slower than the timeout stretch it (and the probes' re-send) to at most this many times
STRETCH_CAP = 4.0
TIMEOUT_PREFIX = "knn:t"


@dataclass(frozen=True)
class KnnSettings:
    """One node's KNN service (the run's ``[knn]`` settings, p2pnode.config.KnnConfig)."""

    n_items: int
    population: int
    strategy: str = "userknn"  #: userknn, reuse, expect or gain (learning.reuseknn.STRATEGIES)
    k: int = 10
    tau: float = math.inf  #: randomized response past this DataUsage (with ``dp``)
    dp: bool = False
    scale: tuple[float, float] = (1.0, 5.0)
    #: full: every node is probed at the start; view: the sampler's peers; ranked: those and the
    #: most similar peers of its most similar candidates (a similarity overlay, as Vicinity builds)
    candidates: str = "full"
    near: int = 8  #: ranked: the most similar peers a profile answer names
    probes_per_wake: int = 5  #: view: new candidates probed at each wake-up
    probe_window: int = 32  #: probes on their way at once (the rest wait for answers)
    max_profiles: int = 2000  #: view: the most profiles held
    fallback: float | None = None  #: a query no neighbour answers (None: the node's own mean)
    timeout_ticks: float = 100.0  #: an ask unanswered this long is sent once more, then left out
    hold_ticks: float = 500.0  #: full: how long a query waits for profiles still on their way
    ask_rate: float = 10.0  #: answers a round to one querier (token allowance)
    ask_burst: float = 100.0  #: answers to one querier before the rate applies
    reprobe_ticks: float = 1000.0  #: one new profile from a querier answered per this long
    round_ticks: float = 100.0
    q_max: int = 100  #: Neighbors@q and CoRatings@q for the first q_max queries


@dataclass(frozen=True)
class Query:
    """One of the node's own queries: asked at virtual time ``at``; ``truth`` is its held-out
    rating, kept for the MAE and never sent."""

    at: float
    item: int
    truth: float


@dataclass
class _Pending:
    place: int  #: the query's place in the plan
    item: int
    truth: float
    top: npt.NDArray[np.int64]  #: the neighbours asked, in rank order
    sims: npt.NDArray[np.float64]
    answers: dict[int, float | None] = field(default_factory=dict)
    asked_again: bool = False  #: its silent neighbours were asked once more
    sent: float = 0.0  #: when the asks went (their answers' round trips are measured)


@dataclass
class KnnStats:
    """What a node counts (its ``/metrics`` and its summary row)."""

    usage: int = 0  #: asks answered with a rating (DataUsage, eq. 15)
    real: int = 0  #: of them answered with the real rating (PrivacyRisk's count, eq. 17)
    randomized: int = 0  #: of them through randomized response
    repeated: int = 0  #: asks answered again from the first answer (not counted in usage)
    declined: int = 0  #: asks for an item it did not rate, or past the querier's allowance
    probes_answered: int = 0
    timeouts: int = 0  #: its own asks that went unanswered
    asked_again: int = 0  #: its own asks sent once more after the first timeout
    #: answers and profiles that came after the query they answer ended, or twice (an ask or a
    #: probe this node sent once more): dropped, not refused (the peer did as asked, late)
    late: int = 0


def epsilon_of(usage: int, real: int) -> float:
    """A node's ε (003 eq. 26): ln(3 + 4 · real / randomized) once some answer went through
    randomized response, ∞ while every answer was real, 0 before any."""
    if usage == 0:
        return 0.0
    randomized = usage - real
    return math.inf if randomized == 0 else math.log(3 + 4 * real / randomized)


class KnnService:
    """One node's part in the KNN service: its ratings, its queries and its neighbours' answers."""

    def __init__(
        self,
        node_id: NodeId,
        settings: KnnSettings,
        items: Sequence[int],
        ratings: Sequence[float],
        plan: Sequence[Query],
        rng: np.random.Generator,
        answer_rng: np.random.Generator | None = None,
    ) -> None:
        if settings.strategy not in rk.STRATEGIES:
            raise ValueError(f"unknown KNN strategy {settings.strategy!r}")
        order = np.argsort(np.asarray(items, dtype=np.int64), kind="stable")
        self.node_id = node_id
        self.settings = settings
        self.items = np.asarray(items, dtype=np.int64)[order]
        self.ratings = np.asarray(ratings, dtype=np.float64)[order]
        self.plan = list(plan)
        self.rng = rng  #: its queries' tie-breaks
        #: its randomized responses: apart, so that whom it asks never depends on when it answered
        self.answer_rng = answer_rng if answer_rng is not None else rng
        self.stats = KnnStats()
        n = settings.population
        # -- as a querier: what it knows of each candidate (its own entry included) --
        self.known = np.zeros(n, bool)
        self.sim = np.zeros(n)
        self.co = np.zeros(n)
        #: every known (item, node) pair sorted by item, then node (int16 where ids fit: 4 bytes a
        #: pair, 0.3 GB for 943 nodes that each know all 943 profiles); profiles learned since it
        #: was last sorted wait in ``_fresh``
        self._index: tuple[npt.NDArray[np.signedinteger[Any]], npt.NDArray[np.signedinteger[Any]]] = (
            np.zeros(0, self._id_type()),
            np.zeros(0, self._id_type()),
        )
        self._fresh: dict[int, npt.NDArray[np.int64]] = {}
        self.probed: dict[int, float] = {}  #: probes sent and not answered yet, and when
        self.waiting: list[int] = []  #: candidates to probe once the window has room
        self.used = np.zeros(n, bool)  #: its neighbourhood N_u (UserKNN+Reuse, Neighbors@q)
        self.size = 0
        self.overlap = 0.0
        self.at_q: list[int] = []
        self.co_q: list[float] = []
        self.next = 0  #: the next query of the plan
        self.pending: dict[int, _Pending] = {}
        #: (its place in the plan, item, estimate, truth, neighbours that answered), as each ends:
        #: a query whose neighbours answer sooner may end before one asked earlier
        self.done: list[tuple[int, int, float, float, int]] = []
        self._query_ids = 0
        self._rank: npt.NDArray[np.float64] | None = None
        #: how long its asks and probes took to be answered, in ticks (first sends only)
        self.round_trips = RoundTrips()
        self._reprobed: set[int] = set()  #: probed once more: a second profile may come
        if 0 <= node_id < n:
            self._learn(node_id, 1.0, float(self.items.size), self.items)
        # -- as a neighbour --
        self.answered: dict[tuple[int, int], float] = {}  #: (querier, item) → its first answer
        self.tokens: dict[int, tuple[float, float]] = {}  #: querier → (tokens, when)
        self.profiles: dict[int, tuple[int, float]] = {}  #: querier → (its profile's hash, when)

    # -- the node's life ----------------------------------------------------------------------------

    def start(self, now: float) -> list[Effect]:
        """Full candidates: probe every other node, ``probe_window`` at a time. Then the first
        query's timer."""
        if self.settings.candidates == "full":
            self.waiting = [p for p in range(self.settings.population) if p != self.node_id]
        return self._pump(now) + self._next_timer()

    def on_wake(self, now: float, peers: Iterable[NodeId]) -> list[Effect]:
        """Probes not answered within the timeout are sent again (a peer's process may not have
        been up yet); view candidates: a few of the sampler's peers it holds no profile of."""
        s = self.settings
        stale = [p for p, sent in self.probed.items() if now - sent > self.timeout()]
        out = self._probe(stale, now) if stale else []
        if s.candidates in ("view", "ranked") and self.profiles_held < s.max_profiles:
            self.waiting += self._unknown(peers)[: s.probes_per_wake]
        return out + self._pump(now)

    def timeout(self) -> float:
        """How long an ask or a probe waits for its answer before it is sent once more: the
        configured ticks, or, where answers take longer (a loaded machine: a busy neighbour
        answers late rather than its query being counted lost), two of the time within which
        nearly every answer came (``RoundTrips.bound``), at most :data:`STRETCH_CAP` times the
        configured ticks."""
        base = self.settings.timeout_ticks
        return max(base, min(STRETCH_CAP * base, 2 * self.round_trips.bound()))

    def _unknown(self, peers: Iterable[NodeId]) -> list[int]:
        """The peers of ``peers`` (once each, in order) of this network, not itself, that it holds
        no profile of and has neither probed nor queued: candidates to probe."""
        s = self.settings
        queued = set(self.waiting)
        return [
            p for p in dict.fromkeys(peers)
            if 0 <= p < s.population and p != self.node_id and not self.known[p]
            and p not in self.probed and p not in queued
        ]  # fmt: skip

    def on_timer(self, key: str, now: float) -> list[Effect]:
        if key == QUERY_TIMER:
            s = self.settings
            first = self.plan[self.next].at if self.next < len(self.plan) else now
            if s.candidates == "full" and (self.waiting or self.probed) and now < first + s.hold_ticks:
                # every node a candidate: the queries wait for the profiles still on their way
                # (another process not up yet), at most ``hold_ticks``
                return [SetTimer(QUERY_TIMER, now + HOLD_STEP)]
            out: list[Effect] = []
            while self.next < len(self.plan) and self.plan[self.next].at <= now:
                out += self._ask(self.plan[self.next], now)
                self.next += 1
            return out + self._next_timer()
        if key.startswith(TIMEOUT_PREFIX):
            qid = int(key[len(TIMEOUT_PREFIX) :])
            pending = self.pending.get(qid)
            if pending is None:
                return []
            silent = [int(c) for c in pending.top.tolist() if c not in pending.answers]
            if not pending.asked_again:
                # an ask or its answer refused (busy) or lost: asked once more; a neighbour
                # that did answer gives its first answer again, uncounted (_on_ask)
                pending.asked_again = True
                self.stats.asked_again += len(silent)
                deadline = now + self.timeout()
                return [SetTimer(key, deadline), *(Send(c, KnnAsk(qid, pending.item)) for c in silent)]
            self.stats.timeouts += len(silent)
            self._finish(qid)
        return []

    def on_message(self, sender: NodeId, message: object, now: float) -> list[Effect]:
        if isinstance(message, KnnProbe):
            return self._on_probe(sender, message, now)
        if isinstance(message, KnnProfile):
            sent = self.probed.pop(sender, None)
            if sent is None and sender in self._reprobed and self.known[sender]:
                self._reprobed.discard(sender)  # the second answer to a probe sent once more
                self.stats.late += 1
                return []
            # sent twice: which of the two this answers is unknown, so it is not timed (and the
            # other answer may still come: late); ``vet`` refused a profile nobody asked for
            if sent is not None and sender not in self._reprobed:
                self.round_trips.add(now - sent)
            self._learn(sender, message.sim, float(message.co), np.asarray(message.items, dtype=np.int64))
            if message.near and self.settings.candidates == "ranked":
                self._suggested(message.sim, message.near)
            return self._pump(now)
        if isinstance(message, KnnAsk):
            return self._on_ask(sender, message, now)
        if isinstance(message, KnnAnswer):
            pending = self.pending.get(message.query)
            if pending is None or sender in pending.answers:  # late, or asked twice (``vet``)
                self.stats.late += 1
                return []
            if not pending.asked_again:
                self.round_trips.add(now - pending.sent)
            pending.answers[sender] = message.rating
            if len(pending.answers) == len(pending.top):
                self._finish(message.query)
                return [SetTimer(f"{TIMEOUT_PREFIX}{message.query}", math.inf)]
        return []

    def vet(self, sender: NodeId, message: object) -> str | None:
        """Why a parsed KNN message must be refused before the node takes it (None: take it):
        items outside the catalogue or out of order, ratings outside the scale, a profile or an
        answer the node did not ask for."""
        s = self.settings
        if isinstance(message, KnnProbe):
            if not (_ascending_in(message.items, s.n_items) and len(message.ratings) == len(message.items)):
                return "schema"
            r = np.asarray(message.ratings, dtype=np.float64)
            fits = bool(np.isfinite(r).all()) and bool((r >= s.scale[0]).all() and (r <= s.scale[1]).all())
            return None if fits else "schema"
        if isinstance(message, KnnProfile):
            if sender not in self.probed:  # a probe sent once more may be answered twice: late
                return None if sender in self._reprobed and self.known[sender] else "not-asked"
            fits = _ascending_in(message.items, s.n_items) and 0 <= message.co <= len(message.items)
            return None if fits and -1.0 - 1e-9 <= message.sim <= 1.0 + 1e-9 else "schema"
        if isinstance(message, KnnAsk):
            return None if 0 <= message.item < s.n_items else "schema"
        if isinstance(message, KnnAnswer):
            if not 0 < message.query <= self._query_ids:
                return "not-asked"  # no query of this node's had that id
            pending = self.pending.get(message.query)
            if pending is None:  # its query ended (answered, or left out after two asks): late
                return None if message.rating is None or _in_scale(message.rating, s.scale) else "schema"
            if pending.item != message.item or sender not in pending.top.tolist():
                return "not-asked"
            return None if message.rating is None or _in_scale(message.rating, s.scale) else "schema"
        return "schema"

    # -- as a neighbour -------------------------------------------------------------------------

    def _on_probe(self, sender: NodeId, probe: KnnProbe, now: float) -> list[Effect]:
        key = hash((probe.items, probe.ratings))
        held = self.profiles.get(sender)
        if held is not None and held[0] != key and now - held[1] < self.settings.reprobe_ticks:
            return [Dropped("too-often")]
        if held is None or held[0] != key:
            self.profiles[sender] = (key, now)
            self.stats.probes_answered += 1
        return [Send(sender, self.profile_for(probe))]  # the same profile again: the same answer

    def profile_for(self, probe: KnnProbe) -> KnnProfile:
        """The cosine similarity of the probe's profile and this node's over the items both rated
        (min support 1; computed as the central module does, so equal for ratings on a grid of
        halves, whose sums are exact), their count, and the ids of this node's items."""
        theirs = np.asarray(probe.items, dtype=np.int64)
        common, a, b = np.intersect1d(theirs, self.items, assume_unique=True, return_indices=True)
        sim = 0.0
        if common.size:
            ru = np.asarray(probe.ratings, dtype=np.float64)[a]
            rc = self.ratings[b]
            den = float(np.dot(ru, ru)) * float(np.dot(rc, rc))
            sim = float(np.dot(ru, rc)) / math.sqrt(den) if den > 0 else 0.0
        near = self.nearest(self.settings.near) if self.settings.candidates == "ranked" else ()
        return KnnProfile(sim, int(common.size), tuple(self.items.tolist()), near)

    def nearest(self, n: int) -> tuple[int, ...]:
        """Ranked candidates: the ``n`` candidates most similar to this node among those it holds
        a profile of (similarity > 0, ties by id), what a profile answer suggests to the prober."""
        held = np.flatnonzero(self.known & (self.sim > 0))
        held = held[held != self.node_id]
        if held.size == 0 or n <= 0:
            return ()
        top = held[np.argsort(-self.sim[held], kind="stable")[:n]]
        return tuple(int(p) for p in top.tolist())

    def _suggested(self, sim: float, near: Sequence[int]) -> None:
        """Ranked candidates: a candidate among the k most similar this node holds names its own
        most similar peers; those it holds no profile of are probed next (a similar peer's similar
        peers are likely similar: Vicinity's, and Pers-Gossip's, rule), ``probes_per_wake`` of a
        suggestion at most and never past ``max_profiles``. A less similar candidate's
        suggestions are not followed, so a member's lie leads a node only as far as its own
        claimed similarity places it."""
        s = self.settings
        held = np.flatnonzero(self.known)
        others = self.sim[held[held != self.node_id]]
        kth = others.size - s.k  # the k-th most similar held (the sender among them)
        if sim <= 0 or (kth >= 0 and sim < np.partition(others, kth)[kth]):
            return
        room = s.max_profiles - self.profiles_held - len(self.probed) - len(self.waiting)
        self.waiting += self._unknown(near)[: max(0, min(room, s.probes_per_wake))]

    def _on_ask(self, sender: NodeId, ask: KnnAsk, now: float) -> list[Effect]:
        first = self.answered.get((sender, ask.item))
        if first is not None:
            self.stats.repeated += 1
            return [Send(sender, KnnAnswer(ask.query, ask.item, first))]
        where = int(np.searchsorted(self.items, ask.item))
        rated = where < self.items.size and int(self.items[where]) == ask.item
        if not rated or not self._spend(sender, now):
            self.stats.declined += 1
            return [Send(sender, KnnAnswer(ask.query, ask.item, None))]
        s = self.stats
        s.usage += 1
        rating = float(self.ratings[where])
        if self.settings.dp and s.usage > self.settings.tau:
            rating = rk.randomized_response(rating, self.answer_rng, *self.settings.scale)
            s.randomized += 1
        else:
            s.real += 1
        self.answered[(sender, ask.item)] = rating
        return [Send(sender, KnnAnswer(ask.query, ask.item, rating))]

    def _spend(self, querier: NodeId, now: float) -> bool:
        s = self.settings
        tokens, then = self.tokens.get(querier, (s.ask_burst, now))
        if math.isnan(then):  # restored from a checkpoint: no refill for the time it was down
            then = now
        tokens = min(s.ask_burst, tokens + max(now - then, 0.0) * s.ask_rate / s.round_ticks)
        if tokens < 1.0:
            self.tokens[querier] = (tokens, now)
            return False
        self.tokens[querier] = (tokens - 1.0, now)
        return True

    # -- checkpoints (p2pnode/data/checkpoint.py) ------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """What a restart must not forget: as a neighbour its counts (a node that forgot its
        DataUsage would answer real ratings again), the answers it gave and whose profiles it
        answered, its generators; as a querier where it is in its plan and what it has asked.
        Asks on their way are not resumed: the saved state ends their queries with the
        fallback, counted as timeouts (the running node is not changed). Profiles are probed
        again after the restart (a same profile costs nothing)."""
        s = self.stats
        lost = [(p.place, p.item, self.fallback, p.truth, 0) for p in self.pending.values()]
        timeouts = s.timeouts + sum(len(p.top) - len(p.answers) for p in self.pending.values())
        return {
            "stats": [
                *(s.usage, s.real, s.randomized, s.repeated, s.declined, s.probes_answered),
                *(timeouts, s.asked_again),
            ],
            "answered": [[q, i, r] for (q, i), r in self.answered.items()],
            "profiles": [[q, h, t] for q, (h, t) in self.profiles.items()],
            "next": self.next,
            "done": [list(d) for d in (*self.done, *lost)],
            "used": np.flatnonzero(self.used).tolist(),
            "size": self.size,
            "overlap": self.overlap,
            "at_q": list(self.at_q),
            "co_q": list(self.co_q),
            "rng": [_generator_state(self.rng), _generator_state(self.answer_rng)],
            "tokens": [[q, t] for q, (t, _) in self.tokens.items()],  # a restart does not refill them
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        """Take back a :meth:`state` (ValueError, changing nothing, for one that does not fit)."""
        try:
            stats = KnnStats(*(int(v) for v in state["stats"]))
            answered = {(int(q), int(i)): float(r) for q, i, r in state["answered"]}
            profiles = {int(q): (int(h), float(t)) for q, h, t in state["profiles"]}
            done = [(int(p), int(i), float(e), float(t), int(n)) for p, i, e, t, n in state["done"]]
            used = [int(u) for u in state["used"]]
            nxt, size, overlap = int(state["next"]), int(state["size"]), float(state["overlap"])
            at_q, co_q = [int(v) for v in state["at_q"]], [float(v) for v in state["co_q"]]
            ask, answer = (_generator_from(g) for g in state["rng"])
            tokens = {int(q): (float(t), math.nan) for q, t in state.get("tokens", [])}
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"the KNN service's checkpoint does not parse: {exc}") from None
        if not 0 <= nxt <= len(self.plan) or any(not 0 <= u < self.settings.population for u in used):
            raise ValueError("the KNN service's checkpoint is of another plan or network")
        self.stats, self.answered, self.profiles, self.done = stats, answered, profiles, done
        self.tokens = tokens
        self.used[:] = False
        self.used[used] = True
        self.next, self.size, self.overlap, self.at_q, self.co_q = nxt, size, overlap, at_q, co_q
        self.rng = ask
        self.answer_rng = answer if answer is not None else ask

    @property
    def epsilon(self) -> float:
        return epsilon_of(self.stats.usage, self.stats.real)

    # -- as a querier ---------------------------------------------------------------------------

    def _pump(self, now: float) -> list[Effect]:
        """Probe waiting candidates while fewer than ``probe_window`` probes are on their way (a
        network of N nodes holds N · window probes in flight at most, not N²)."""
        room = self.settings.probe_window - len(self.probed)
        if room <= 0 or not self.waiting:
            return []
        batch, self.waiting = self.waiting[:room], self.waiting[room:]
        return self._probe(batch, now)

    def _probe(self, peers: Iterable[NodeId], now: float) -> list[Effect]:
        probe = KnnProbe(tuple(self.items.tolist()), tuple(self.ratings.tolist()))
        out: list[Effect] = []
        for p in peers:
            if p != self.node_id:
                if p in self.probed:
                    self._reprobed.add(p)
                self.probed[p] = now
                out.append(Send(p, probe))
        return out

    def _learn(self, node: int, sim: float, co: float, items: npt.NDArray[np.int64]) -> None:
        self.known[node] = True
        self.sim[node] = sim
        self.co[node] = co
        self._fresh[node] = items
        self._rank = None

    @property
    def profiles_held(self) -> int:
        """Other nodes' profiles it holds."""
        return int(np.count_nonzero(self.known)) - int(self.known[self.node_id])

    def _id_type(self) -> type[np.signedinteger[Any]]:
        s = self.settings
        return np.int16 if max(s.n_items, s.population) <= np.iinfo(np.int16).max else np.int32

    def index(self) -> tuple[npt.NDArray[np.signedinteger[Any]], npt.NDArray[np.signedinteger[Any]]]:
        """Every known (item, node) pair, sorted by item and then node."""
        if self._fresh:
            items, owners = self._index
            keep = ~np.isin(owners, list(self._fresh))  # a renewed profile replaces the old one
            nodes = list(self._fresh)
            kind = self._id_type()
            new_items = np.concatenate([self._fresh[n] for n in nodes]).astype(kind)
            new_owners = np.repeat(np.asarray(nodes, dtype=kind), [self._fresh[n].size for n in nodes])
            items = np.concatenate([items[keep], new_items])
            owners = np.concatenate([owners[keep], new_owners])
            order = np.lexsort((owners, items))
            self._index = (items[order], owners[order])
            self._fresh = {}
        return self._index

    def _next_timer(self) -> list[Effect]:
        if self.next >= len(self.plan):
            return []
        return [SetTimer(QUERY_TIMER, self.plan[self.next].at)]

    def ranking(self) -> npt.NDArray[np.float64]:
        """Every known node's neighbour-choice score (eq. 4; rank(sim) for UserKNN and Reuse),
        ranked among the nodes it knows, itself included, as the central module ranks among all."""
        if self._rank is not None:
            return self._rank
        ids = np.flatnonzero(self.known)
        n = self.settings.population
        simrank = np.zeros(n)
        simrank[ids] = rk.rank_max(self.sim[ids])
        strategy = self.settings.strategy
        if strategy in ("userknn", "reuse"):
            self._rank = simrank
            return simrank
        other = np.zeros(n)
        if strategy == "expect":  # Σ over a node's items of how many known nodes rated each: integers
            items, owners = self.index()
            counts = np.bincount(items, minlength=self.settings.n_items).astype(np.float64)
            expect = np.bincount(owners, weights=counts[items], minlength=n).astype(np.float64)
            other[ids] = rk.rank_max(expect[ids])
        else:
            own = float(self.items.size)
            gain = self.co[ids] / own if own > 0 else np.zeros(ids.size)
            other[ids] = rk.rank_max(gain)
        self._rank = 0.5 * simrank + 0.5 * other
        return self._rank

    def _ask(self, query: Query, now: float) -> list[Effect]:
        i = query.item
        items, owners = self.index()
        lo, hi = np.searchsorted(items, [i, i + 1])
        cand = owners[lo:hi].astype(np.int64)
        cand = cand[cand != self.node_id]
        if cand.size == 0:
            self.done.append((self.next, i, self.fallback, query.truth, 0))
            return []
        ordered = rk.order(cand, self.ranking(), self.rng.random(cand.size))
        top, new = rk.pick(ordered, self.settings.strategy == "reuse", self.settings.k, self.used, self.sim)
        self.size += int(new.size)
        self.overlap += float(self.co[new].sum())
        if len(self.at_q) < self.settings.q_max:
            self.at_q.append(self.size)
            self.co_q.append(self.overlap / self.size if self.size else 0.0)
        sims = self.sim[top]
        top, sims = top[sims > 0], sims[sims > 0]
        if top.size == 0:
            self.done.append((self.next, i, self.fallback, query.truth, 0))
            return []
        self._query_ids += 1
        qid = self._query_ids
        self.pending[qid] = _Pending(self.next, i, query.truth, top, sims, sent=now)
        deadline = now + self.timeout()
        return [SetTimer(f"{TIMEOUT_PREFIX}{qid}", deadline), *(Send(int(c), KnnAsk(qid, i)) for c in top)]

    def _finish(self, qid: int) -> None:
        p = self.pending.pop(qid)
        keep = [j for j, c in enumerate(p.top.tolist()) if p.answers.get(c) is not None]
        if not keep:
            self.done.append((p.place, p.item, self.fallback, p.truth, 0))
            return
        ratings = np.array([p.answers[int(p.top[j])] for j in keep], dtype=np.float64)
        self.done.append((p.place, p.item, rk.estimate(p.sims[keep], ratings), p.truth, len(keep)))

    @property
    def fallback(self) -> float:
        if self.settings.fallback is not None:
            return self.settings.fallback
        return float(self.ratings.mean()) if self.ratings.size else float(np.mean(self.settings.scale))


def _generator_state(rng: np.random.Generator) -> list[Any]:
    """A PCG64 generator's state with its 128-bit numbers as decimal strings (msgpack holds 64)."""
    st = rng.bit_generator.state
    return [
        st["bit_generator"],
        str(st["state"]["state"]),
        str(st["state"]["inc"]),
        st["has_uint32"],
        st["uinteger"],
    ]


def _generator_from(saved: Sequence[Any]) -> np.random.Generator:
    name, state, inc, has, word = saved
    if name != "PCG64":
        raise ValueError(f"a {name} generator where PCG64 was saved")
    bits = np.random.PCG64()
    bits.state = {"bit_generator": name, "state": {"state": int(state), "inc": int(inc)},
                  "has_uint32": int(has), "uinteger": int(word)}  # fmt: skip
    return np.random.Generator(bits)


def _ascending_in(items: tuple[int, ...], n_items: int) -> bool:
    if not items:
        return True
    arr = np.asarray(items, dtype=np.int64)
    return bool(arr[0] >= 0 and arr[-1] < n_items and (np.diff(arr) > 0).all())


def _in_scale(value: float, scale: tuple[float, float]) -> bool:
    return math.isfinite(value) and scale[0] <= value <= scale[1]
