"""User-based KNN with neighbourhood reuse and differential privacy (paper 003, ReuseKNN).

A rating query (user u, item i) is answered from the ratings for i of u's k neighbours, chosen
among the users who rated i (eq. 1-2), and every use of a neighbour's rating counts in that
neighbour's DataUsage (eq. 15). The strategies differ in how the k are chosen:

- ``userknn``: the k most similar (eq. 2);
- ``reuse``: UserKNN+Reuse (eq. 11): the neighbours of u's earlier queries who rated i first (the
  most similar k of them), topped up with the most similar new ones;
- ``expect`` and ``gain``: ReuseKNN (eq. 4), by rank(similarity) + rank(reusability), with
  reusability Expect (eq. 5: the summed popularity |U_i| / |U| of the candidate's items) or Gain
  (eq. 6: |I_u ∩ I_c| / |I_u|, over u's whole training set, as the authors' code computes it).

With DP (eq. 7-8), a neighbour whose DataUsage exceeds τ answers through randomized response: its
real rating with probability 3/4, else a rating drawn uniformly from the rating scale (continuous,
as the authors' code draws it); ε = ln 3 per use. τ = 0 protects everyone (UserKNN_DP^full),
τ = ∞ no one.

Details fixed by the authors' code (``pmuellner/ReuseKNN``, ``algorithms/knn_neighborhood.pyx``):
cosine similarity over co-rated items on the raw ratings (min support 1; Surprise's); the ranking
of eq. 4 is 0.5 · rank(sim) + 0.5 · rank(reusability) with ``rankdata(method="max")`` over all users;
candidates are shuffled before a stable sort, so ties fall at random; a neighbour with similarity
≤ 0 is neither used nor counted; DataUsage counts before the DP test (``usage > τ`` after this use);
a query no neighbour can answer (its item unrated in training, or only by dissimilar users) is
answered with the training mean. Everything here is pure: numpy and a seeded generator.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

STRATEGIES = ("userknn", "reuse", "expect", "gain")
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Ratings:
    """Explicit ratings: ``users[k]`` rated ``items[k]`` with ``values[k]`` (ids from 0)."""

    users: IntArray
    items: IntArray
    values: FloatArray
    n_users: int
    n_items: int
    scale: tuple[float, float]  #: the rating scale (lowest, highest), e.g. (1, 5)

    @classmethod
    def of(
        cls, users: IntArray, items: IntArray, ratings: npt.ArrayLike, n_users: int, n_items: int
    ) -> Ratings:
        """Ratings of a data set's rows, the scale from the lowest to the highest rating given."""
        values = np.asarray(ratings, dtype=np.float64)
        scale = (float(values.min()), float(values.max()))
        return cls(users.astype(np.int64), items.astype(np.int64), values, n_users, n_items, scale)

    def subset(self, rows: IntArray) -> Ratings:
        return Ratings(
            self.users[rows], self.items[rows], self.values[rows], self.n_users, self.n_items, self.scale
        )

    def __len__(self) -> int:
        return int(self.users.shape[0])


def folds(n_rows: int, k: int, seed: int) -> list[tuple[IntArray, IntArray]]:
    """``k``-fold cross-validation over the rows, shuffled with ``seed``: (train rows, test rows)
    per fold; a fold's test rows keep the shuffled order, which is the order its queries come in
    (the authors' Surprise ``KFold`` also answers a fold's test set in its shuffled order)."""
    order = np.random.default_rng(seed).permutation(n_rows)
    parts = np.array_split(order, k)
    return [(np.concatenate([p for j, p in enumerate(parts) if j != f]), parts[f]) for f in range(k)]


@dataclass
class Neighbourhoods:
    """What the queries of one fold read of its training ratings."""

    ratings: FloatArray  #: (users, items), 0 where unrated
    rated: npt.NDArray[np.bool_]
    sim: FloatArray  #: cosine over co-rated items, 1 on the diagonal
    co: FloatArray  #: |I_u ∩ I_v|
    expect: FloatArray  #: eq. 5 per user
    gain: FloatArray  #: eq. 6, (target, candidate)
    raters: list[IntArray]  #: per item, the users who rated it (ascending)
    mean: float  #: the training ratings' mean (the answer no neighbour gives)
    scale: tuple[float, float]

    @classmethod
    def fit(cls, train: Ratings) -> Neighbourhoods:
        n_u, n_i = train.n_users, train.n_items
        r = np.zeros((n_u, n_i))
        r[train.users, train.items] = train.values
        m = np.zeros((n_u, n_i), bool)
        m[train.users, train.items] = True
        mf = m.astype(np.float64)
        co = mf @ mf.T
        prods = r @ r.T
        sq = (r * r) @ mf.T  # sq[u, v] = Σ over co-rated items of r_ui²
        with np.errstate(invalid="ignore", divide="ignore"):
            sim = np.where(co >= 1, prods / np.sqrt(sq * sq.T), 0.0)
        np.fill_diagonal(sim, 1.0)
        # eq. 5 as exact integer sums divided once: Σ_i |U_i| over a user's items is the same number
        # however it is summed, so equal Expects tie exactly (a float sum of |U_i| / |U| split
        # 7-14 ties a fold on ML-100k by its summation order), and a node that adds the counts of
        # the profiles it holds (protocols/knn.py) gets the same ranks
        expect = (mf @ mf.sum(axis=0)) / n_u
        count = mf.sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            gain = np.where(count[:, None] > 0, co / count[:, None], 0.0)
        order = np.argsort(train.items, kind="stable")
        items, users = train.items[order], train.users[order]
        bounds = np.searchsorted(items, np.arange(n_i + 1))
        raters = [np.sort(users[bounds[i] : bounds[i + 1]]) for i in range(n_i)]
        return cls(r, m, sim, co, expect, gain, raters, float(train.values.mean()), train.scale)

    def ranking(self, strategy: str) -> FloatArray:
        """The neighbour-choice score of every (target, candidate): 0.5 · rank(sim) + 0.5 ·
        rank(reusability) per target (eq. 4; UserKNN and UserKNN+Reuse: rank(sim))."""
        simrank = rank_max(self.sim)
        if strategy in ("userknn", "reuse"):
            return simrank
        if strategy == "expect":
            other = np.broadcast_to(rank_max(self.expect), simrank.shape)
        elif strategy == "gain":
            other = rank_max(self.gain)
        else:
            raise ValueError(f"unknown strategy {strategy!r} (one of {', '.join(STRATEGIES)})")
        out: FloatArray = 0.5 * simrank + 0.5 * np.asarray(other, dtype=np.float64)
        return out


def rank_max(values: FloatArray) -> FloatArray:
    """Ranks from 1 with ties given their highest rank (``scipy.stats.rankdata(method="max")``,
    the authors' ranking), along the last axis: a value's rank is how many values are ≤ it."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 1:
        ranks: FloatArray = np.searchsorted(np.sort(values), values, side="right").astype(np.float64)
        return ranks
    return np.stack([rank_max(row) for row in values.reshape(-1, values.shape[-1])]).reshape(values.shape)


@dataclass
class QueryRun:
    """One strategy at one k over one fold's queries, as they came."""

    estimates: FloatArray  #: per query
    data_usage: FloatArray  #: per user: queries it was a neighbour for (eq. 15)
    privacy_risk: FloatArray  #: per user: uses of its real rating (eq. 17 without a cap: = usage w/o DP)
    dp_uses: FloatArray  #: per user: uses through randomized response
    #: per target user, Neighbors@q and CoRatings@q after each of its first ``q_max`` queries
    neighbours_at_q: dict[int, list[int]] = field(default_factory=dict)
    coratings_at_q: dict[int, list[float]] = field(default_factory=dict)


def answer(
    nb: Neighbourhoods,
    strategy: str,
    k: int,
    queries: Sequence[tuple[int, int]] | tuple[IntArray, IntArray],
    tau: float,
    dp: bool,
    rng: np.random.Generator,
    q_max: int = 100,
    ranking: FloatArray | None = None,
    streams: Callable[[int, str], np.random.Generator] | None = None,
) -> QueryRun:
    """Answer ``queries`` (target users, items) in order with ``strategy`` and ``k`` neighbours;
    with ``dp``, a neighbour used more than ``tau`` times answers through randomized response.

    ``streams``: each user's own generators (``streams(u, role)``), as each node of the
    peer-to-peer service holds them (protocols/knn.py): a query's ties fall by its target's
    ``"ask"`` draws, a protected answer by its neighbour's ``"answer"`` draws
    (:func:`randomized_response`). Two per user, so that a node's choice of neighbours depends on
    its own queries alone, not on when it answered others'. None: every draw from ``rng``, in
    the order of the queries (the experiment's way)."""
    users, items = (np.asarray(q, dtype=np.int64) for q in _columns(queries))
    rank = nb.ranking(strategy) if ranking is None else ranking
    n_users = nb.sim.shape[0]
    usage = np.zeros(n_users)
    risk = np.zeros(n_users)
    dp_uses = np.zeros(n_users)
    used = np.zeros((n_users, n_users), bool)  #: used[u, c]: c is in u's neighbourhood N_u
    size = np.zeros(n_users, np.int64)
    overlap = np.zeros(n_users)  #: Σ |I_u ∩ I_n| over u's neighbourhood
    asked = np.zeros(n_users, np.int64)
    at_q: dict[int, list[int]] = {}
    co_q: dict[int, list[float]] = {}
    low, high = nb.scale
    reuse = strategy == "reuse"
    estimates = np.empty(len(users))
    for q, (u, i) in enumerate(zip(users.tolist(), items.tolist(), strict=True)):
        cand = nb.raters[i] if 0 <= i < len(nb.raters) else np.zeros(0, np.int64)
        cand = cand[cand != u]
        if cand.size == 0:
            estimates[q] = nb.mean
            continue
        draws = (rng if streams is None else streams(u, "ask")).random(cand.size)
        top, new = pick(order(cand, rank[u], draws), reuse, k, used[u], nb.sim[u])
        size[u] += new.size
        overlap[u] += nb.co[u, new].sum()
        if asked[u] < q_max:
            asked[u] += 1
            at_q.setdefault(u, []).append(int(size[u]))
            co_q.setdefault(u, []).append(float(overlap[u] / size[u]) if size[u] else 0.0)
        s = nb.sim[u, top]
        top, s = top[s > 0], s[s > 0]
        if top.size == 0:
            estimates[q] = nb.mean
            continue
        usage[top] += 1
        r = nb.ratings[top, i]
        if dp and streams is not None:
            protected = usage[top] > tau
            r = np.array(
                [
                    randomized_response(float(v), streams(int(c), "answer"), low, high) if p else float(v)
                    for c, v, p in zip(top.tolist(), r.tolist(), protected.tolist(), strict=True)
                ]
            )
            dp_uses[top[protected]] += 1
            risk[top[~protected]] += 1
        elif dp:
            protected = usage[top] > tau
            truthful = rng.random(top.size) >= 0.5
            second = rng.random(top.size) >= 0.5
            noise = rng.uniform(low, high, top.size)
            r = np.where(protected & ~truthful & ~second, noise, r)
            dp_uses[top[protected]] += 1
            risk[top[~protected]] += 1
        else:
            risk[top] += 1
        estimates[q] = estimate(s, r)
    return QueryRun(estimates, usage, risk, dp_uses, at_q, co_q)


# -- the steps a query takes, shared with the peer-to-peer service (protocols/knn.py) -------------


def order(cand: IntArray, rank_row: FloatArray, draws: FloatArray) -> IntArray:
    """The candidates best-ranked first (eq. 4's score, or rank(sim)), ties by ``draws``."""
    ordered: IntArray = cand[np.lexsort((draws, -rank_row[cand]))]
    return ordered


def pick(
    ordered: IntArray, reuse: bool, k: int, used_row: npt.NDArray[np.bool_], sim_row: FloatArray
) -> tuple[IntArray, IntArray]:
    """The k neighbours of a query from its ``ordered`` candidates, and those of them new to the
    target's neighbourhood ``used_row`` (marked in it). UserKNN+Reuse (eq. 11) first takes the
    neighbours of earlier queries among the candidates, tops them up with the best-ranked new
    ones, and answers with the k most similar of the pool; every other strategy takes the k
    best-ranked. Neighbours with similarity ≤ 0 are among them; the caller leaves them out."""
    if reuse:
        already = int(np.count_nonzero(used_row[ordered]))
        new = ordered[~used_row[ordered]][: max(k - already, 0)]
        used_row[new] = True
        pool = ordered[used_row[ordered]]
        top: IntArray = pool[np.argsort(-sim_row[pool], kind="stable")[:k]]
        return top, new
    top = ordered[:k]
    new = top[~used_row[top]]
    used_row[new] = True
    return top, new


def estimate(sims: FloatArray, ratings: FloatArray) -> float:
    """eq. 1: the similarity-weighted mean of the neighbours' ratings (similarities all > 0)."""
    return float(np.dot(sims, ratings) / sims.sum())


def randomized_response(rating: float, rng: np.random.Generator, low: float, high: float) -> float:
    """eq. 7-8: the true rating with probability ½, else a fair coin between the true rating and
    a uniform draw from the scale [low, high] (ε = ln 3 per answer); three draws whichever way."""
    truthful = rng.random() >= 0.5
    second = rng.random() >= 0.5
    noise = float(rng.uniform(low, high))
    return rating if truthful or second else noise


STREAM_ROLES = ("ask", "answer")


def user_stream(seed: int, user: int, role: str) -> np.random.Generator:
    """User ``user``'s own generator for ``role`` (``ask``: its queries' tie-breaks; ``answer``:
    its randomized responses) in a run seeded ``seed``: what a node of the peer-to-peer service
    draws from (p2pnode/nodes/knn.py), and ``answer``'s ``streams`` to give the same draws."""
    return np.random.default_rng([seed, user, 0x6B6E6E, STREAM_ROLES.index(role)])


def _columns(queries: Sequence[tuple[int, int]] | tuple[IntArray, IntArray]) -> tuple[IntArray, IntArray]:
    if isinstance(queries, tuple) and len(queries) == 2 and isinstance(queries[0], np.ndarray):
        return queries[0], queries[1]
    pairs = np.asarray(queries, dtype=np.int64).reshape(-1, 2)
    return pairs[:, 0], pairs[:, 1]


# -- the metrics of Table 2 ---------------------------------------------------------------------


def mae(estimates: FloatArray, truth: FloatArray) -> float:
    """MAE@k over all queries (eq. 14, pooled as the authors' code pools it)."""
    return float(np.mean(np.abs(truth - estimates)))


def vulnerable_share(usage: FloatArray, tau: float) -> float:
    """|V| / |U|: users used more than τ times (eq. 16). (The authors' code counts ≥ τ; with a
    fractional τ from the density the two agree.)"""
    return float(np.mean(usage > tau))


def privacy_risk(usage: FloatArray, tau: float) -> FloatArray:
    """PrivacyRisk@k(u) = min(τ, DataUsage@k(u)) (eq. 17)."""
    return np.minimum(tau, usage)


def epsilon(usage: FloatArray, risk: FloatArray) -> FloatArray:
    """Each user's ε (eq. 26): ln(3 + 4 · risk / (usage − risk)); ln 3 when every use went
    through randomized response, ∞ when none did (its real ratings were used), 0 for a user never
    used (nothing of it was released)."""
    out = np.full(usage.shape, math.inf)
    never = usage == 0
    protected = usage > risk
    with np.errstate(divide="ignore", invalid="ignore"):
        out[protected] = np.log(3 + 4 * risk[protected] / (usage[protected] - risk[protected]))
    out[never] = 0.0
    return out


def tau_from_usage(usage: FloatArray, how: str = "code", bins: int = 25, bandwidth: float = 50.0) -> float:
    """τ: where the tail of UserKNN's DataUsage distribution starts, the maximum of a kernel
    density's second derivative (003 §5.5).

    ``code`` (the default) is the authors' computation: a Gaussian kernel density (bandwidth 50)
    over the 25 histogram bin *counts*, evaluated on 1,000 points from 0 to the largest usage; it
    lands near 92-104 on every data set of the paper. ``prose`` reads §5.5 as written: the density
    of the usage values themselves (Scott's bandwidth), the same second-derivative rule."""
    from sklearn.neighbors import KernelDensity

    usage = np.asarray(usage, dtype=np.float64)
    counts, edges = np.histogram(usage, bins=bins)
    grid = np.linspace(0, float(np.max(edges)), 1000)
    if how == "code":
        samples, width = counts.reshape(-1, 1).astype(np.float64), bandwidth
    elif how == "prose":
        samples = usage.reshape(-1, 1)
        width = max(1.06 * float(usage.std()) * len(usage) ** (-1 / 5), 1e-9)
    else:
        raise ValueError(f"unknown τ rule {how!r} (code or prose)")
    density = np.exp(
        KernelDensity(bandwidth=width, kernel="gaussian").fit(samples).score_samples(grid[:, None])
    )
    return float(grid[int(np.argmax(np.gradient(np.gradient(density))))])


def top_items(users: IntArray, items: IntArray, estimates: FloatArray, n: int = 10) -> dict[int, IntArray]:
    """Each user's top-n queried items by estimate (003 §5.2.4, R_top)."""
    out: dict[int, IntArray] = {}
    order = np.lexsort((-estimates, users))
    users_s, items_s = users[order], items[order]
    bounds = np.flatnonzero(np.diff(users_s)) + 1
    for part_u, part_i in zip(np.split(users_s, bounds), np.split(items_s, bounds), strict=True):
        if part_u.size:
            out[int(part_u[0])] = part_i[:n]
    return out


def pp_corr(top: dict[int, IntArray], popularity: FloatArray) -> float:
    """PP-Corr@k (eq. 18): Pearson correlation of ItemFreq+ (occurrences in top sets) and ItemPop."""
    freq = np.zeros(popularity.shape)
    for chosen in top.values():
        np.add.at(freq, chosen, 1)
    if freq.std() == 0 or popularity.std() == 0:
        return float("nan")
    return float(np.corrcoef(freq, popularity)[0, 1])


def coverage(top: dict[int, IntArray], n_items: int) -> float:
    """Coverage@k (eq. 19): the share of items in at least one user's top set."""
    if not top:
        return 0.0
    return float(np.unique(np.concatenate(list(top.values()))).size / n_items)


def ndcg_at(
    users: IntArray, items: IntArray, truth: FloatArray, estimates: FloatArray, threshold: float, n: int = 10
) -> float:
    """nDCG@n over each user's queried items ranked by estimate, relevant where the true rating is
    at least ``threshold`` (the training mean), normalised as the authors' code does: by the DCG
    of a list of n relevant items (Appendix B)."""
    order = np.lexsort((-estimates, users))
    u_s, rel = users[order], (truth[order] >= threshold).astype(np.float64)
    bounds = np.flatnonzero(np.diff(u_s)) + 1
    scores = []
    for part in np.split(rel, bounds):
        top = part[:n]
        discounts = 1.0 / np.log2(np.arange(2, top.size + 2))
        scores.append(float(np.dot(top, discounts) / discounts.sum()))
    return float(np.mean(scores)) if scores else 0.0
