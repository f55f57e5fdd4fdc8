"""The KNN service of a run (``--knn``): each node's ratings, queries and settings from the run's
data, built the same way in the simulator and in real processes, and the run's figures from the
nodes' own counts (paper 003's Table 2 metrics, learning/reuseknn.py).

The split is the central module's: ``learning.reuseknn.folds`` over the data set's rating rows
with the run's seed; a node's ratings are its training rows of fold ``--knn-fold``, its queries
its test rows, asked in the fold's shuffled order, query j at ``start + j · spacing`` ticks. τ and
the fallback answer are agreed beforehand like the run's other settings: τ from a pilot run of
central UserKNN on the same training ratings (003's code rule, ``tau_from_usage``) unless given,
the fallback the training ratings' mean. Each node's generator is
``learning.reuseknn.user_stream(seed, node, role)``, one to break its queries' ties and one for
its randomized responses, as the central module's per-user streams are.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from learning import reuseknn as rk
from p2pnode.config import ConfigError, RunConfig
from p2pnode.nodes.prepare import Prepared
from protocols.gossip import TimingConfig
from protocols.knn import KnnService, KnnSettings, Query

ROUND_TICKS = TimingConfig().round_ticks


@dataclass(frozen=True)
class KnnPlan:
    """What every node of a KNN run derives alike from the run's data."""

    ratings: rk.Ratings  #: the data set's ratings (node ids = users)
    train: rk.IntArray  #: rows of the fold's training ratings
    test: rk.IntArray  #: rows of its queries, in the order they are asked
    tau: float  #: τ, given or from the pilot: who counts as vulnerable (003 eq. 16)
    cut: float  #: randomized response past this usage: τ (--knn-dp tau), 0 (full) or ∞ (off)
    fallback: float  #: the training ratings' mean: a query no neighbour answers

    @property
    def queries(self) -> int:
        return int(self.test.size)

    @property
    def most_queries(self) -> int:
        """The most queries one node asks."""
        counts = np.bincount(self.ratings.users[self.test], minlength=1)
        return int(counts.max())


def ratings_of(prep: Prepared) -> rk.Ratings:
    """The run's explicit ratings (ConfigError for a data set without them)."""
    data = prep.data
    if data is None or data.ratings is None:
        raise ConfigError(
            f"--knn: {prep.config.dataset} has no ratings (the KNN service predicts explicit ratings: "
            "ml-100k, or a file with a rating column)"
        )
    return rk.Ratings.of(data.users, data.items, data.ratings, data.n_users, data.n_items)


def knn_plan(prep: Prepared) -> KnnPlan:
    """The run's :class:`KnnPlan`, derived once per process (kept in ``prep.cache``)."""
    held = prep.cache.get("knn")
    if isinstance(held, KnnPlan):
        return held
    cfg = prep.config
    ratings = ratings_of(prep)
    train, test = rk.folds(len(ratings), cfg.knn.folds, cfg.seed)[cfg.knn.fold]
    fallback = float(ratings.values[train].mean())
    tau = pilot_tau(cfg, ratings, train, test)
    cut = {"off": math.inf, "full": 0.0}.get(cfg.knn.dp, tau)
    plan = KnnPlan(ratings, train, test, tau, cut, fallback)
    prep.cache["knn"] = plan
    return plan


def pilot_tau(cfg: RunConfig, ratings: rk.Ratings, train: rk.IntArray, test: rk.IntArray) -> float:
    """τ: given, or from a pilot run of central UserKNN on the fold (003 §5.5, the code's rule)."""
    if cfg.knn.tau > 0:
        return cfg.knn.tau
    nb = rk.Neighbourhoods.fit(ratings.subset(train))
    queries = (ratings.users[test], ratings.items[test])
    pilot = rk.answer(nb, "userknn", cfg.knn.k, queries, math.inf, False, np.random.default_rng(cfg.seed))
    return rk.tau_from_usage(pilot.data_usage)


def make_knn(prep: Prepared, node_id: int) -> KnnService:
    """Node ``node_id``'s part in the run's KNN service."""
    cfg = prep.config
    plan = knn_plan(prep)
    r = plan.ratings
    mine = plan.train[r.users[plan.train] == node_id]
    order = np.flatnonzero(r.users[plan.test] == node_id)
    start = (
        cfg.knn.start if cfg.knn.start >= 0 else max(ROUND_TICKS, cfg.rounds * ROUND_TICKS + cfg.knn.start)
    )
    queries = [
        Query(
            start + float(j) * cfg.knn.spacing,
            int(r.items[plan.test[j]]),
            float(r.values[plan.test[j]]),
        )
        for j in order.tolist()
    ]
    settings = KnnSettings(
        n_items=r.n_items,
        population=cfg.nodes,
        strategy=cfg.knn.strategy,
        k=cfg.knn.k,
        tau=plan.cut,
        dp=cfg.knn.dp != "off",
        scale=r.scale,
        candidates=cfg.knn.candidates,
        fallback=plan.fallback,
        # a querier asks a neighbour once a query at most: an allowance of as many asks as the
        # plan's busiest querier has queries declines no honest ask, however close the queries
        ask_burst=float(max(100, plan.most_queries)),
    )
    return KnnService(
        node_id,
        settings,
        r.items[mine].tolist(),
        r.values[mine].tolist(),
        queries,
        rk.user_stream(cfg.seed, node_id, "ask"),
        rk.user_stream(cfg.seed, node_id, "answer"),
    )


def knn_summary(services: Iterable[KnnService], plan: KnnPlan) -> dict[str, Any]:
    """The figures of the hosted nodes from their own counts (003 Table 2): MAE over the
    queries done, DataUsage and the share of nodes past τ, PrivacyRisk, ε, Neighbors@q and
    CoRatings@q. ``counts`` holds what they are made of, which a launch adds up over its
    processes (:func:`merge_knn`)."""
    services = sorted(services, key=lambda s: s.node_id)
    # each query's estimate at its place in the fold's order (NaN: not hosted here, or not done),
    # so that the MAE sums in the central module's order
    estimates = np.full(plan.queries, np.nan)
    asker = plan.ratings.users[plan.test]
    for s in services:
        mine = np.flatnonzero(asker == s.node_id)
        for place, _item, estimate, _truth, _n in s.done:
            estimates[mine[place]] = estimate
    done = ~np.isnan(estimates)
    truth = plan.ratings.values[plan.test]
    first = services[0].settings if services else None
    counts: dict[str, Any] = {
        "strategy": None if first is None else first.strategy,
        "k": None if first is None else first.k,
        "tau": plan.tau,
        "queries": plan.queries,
        "done": int(done.sum()),
        "abs_error": float(np.abs(truth[done] - estimates[done]).sum()),
        "pending": sum(len(s.pending) for s in services),
        "timeouts": sum(s.stats.timeouts for s in services),
        "asked_again": sum(s.stats.asked_again for s in services),
        "late": sum(s.stats.late for s in services),
        "declined": sum(s.stats.declined for s in services),
        "repeated": sum(s.stats.repeated for s in services),
        "usage": {str(s.node_id): s.stats.usage for s in services},
        "real": {str(s.node_id): s.stats.real for s in services},
        "at_q": _sum_at([s.at_q for s in services]),
        "co_q": _sum_at([s.co_q for s in services]),
    }
    mae = rk.mae(estimates[done], truth[done]) if done.any() else None
    return {**knn_figures(counts, mae), "counts": counts}


_PASSED = (
    *("strategy", "k", "tau", "queries", "done", "pending"),
    *("timeouts", "asked_again", "late", "declined", "repeated"),
)


def knn_figures(counts: Mapping[str, Any], mae: float | None = None) -> dict[str, Any]:
    """The figures of :func:`knn_summary` from its ``counts`` (``mae``: the MAE summed in the
    queries' order; else the summed errors over the queries done)."""
    usage = np.array(list(counts["usage"].values()), dtype=np.float64)
    real = np.array(list(counts["real"].values()), dtype=np.float64)
    tau = float(counts["tau"])
    eps = rk.epsilon(usage, real)
    finite = eps[np.isfinite(eps) & (usage > 0)]
    done = int(counts["done"])
    if mae is None and done:
        mae = counts["abs_error"] / done
    return {
        **{key: counts.get(key, 0) for key in _PASSED},  # (0: a count older files lack)
        "mae": mae,
        "data_usage": {
            "mean": float(usage.mean()),
            "median": float(np.median(usage)),
            "max": float(usage.max()),
        },
        "vulnerable": rk.vulnerable_share(usage, tau),
        "privacy_risk": float(real.mean()),  #: uses of a real rating a node, as the lab's Table 6
        "epsilon_median": float(np.median(finite)) if finite.size else None,
        "unprotected": int(np.sum(np.isinf(eps))),
        "neighbours_at_q": _mean_at(counts["at_q"]),
        "coratings_at_q": _mean_at(counts["co_q"]),
    }


def merge_knn(parts: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """A launch's KNN figures from its processes' ``knn`` summaries (None: no KNN service)."""
    counts = [p["counts"] for p in parts if p and "counts" in p]
    if not counts:
        return None
    total: dict[str, Any] = {key: counts[0][key] for key in ("strategy", "k", "tau", "queries")}
    for key in ("done", "abs_error", "pending", "timeouts", "asked_again", "late", "declined", "repeated"):
        total[key] = sum(c.get(key, 0) for c in counts)
    for key in ("usage", "real"):
        total[key] = {node: n for c in counts for node, n in c[key].items()}
    for key in ("at_q", "co_q"):
        longest = max(len(c[key][0]) for c in counts)
        total[key] = [
            [sum(c[key][j][q] for c in counts if q < len(c[key][j])) for q in range(longest)]
            for j in range(2)
        ]
    return {**knn_figures(total), "counts": total}


def _sum_at(per_node: Sequence[Sequence[float]]) -> list[list[float]]:
    """Per q, the sum over the nodes that asked a q-th query and their count."""
    longest = max((len(v) for v in per_node), default=0)
    sums = [float(sum(v[q] for v in per_node if len(v) > q)) for q in range(longest)]
    count = [float(sum(1 for v in per_node if len(v) > q)) for q in range(longest)]
    return [sums, count]


def _mean_at(sums: Sequence[Sequence[float]]) -> list[float]:
    return [s / n for s, n in zip(sums[0], sums[1], strict=True) if n]
