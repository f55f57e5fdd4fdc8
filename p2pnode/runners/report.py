"""Per-round progress lines and the final summary shared by simulate, run and launch."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from learning.metrics import f1_at_k, item_counts, random_hit_ratio
from p2pcore import roundtrips
from p2pnode.config import RunConfig
from p2pnode.nodes.node import NodeRuntime


@dataclass(frozen=True)
class Metric:
    """The utility a run reports: its JSON key, its label and its value under a random ranking."""

    key: str
    label: str
    #: a random ranking's utility over the sampled candidates; under ``--eval full`` it depends on
    #: each user's catalogue and is measured per round (``<key>_random``, :func:`round_stats`)
    random: float
    #: the JSON keys of the mean NDCG@K and Recall@K beside it (every model: one relevant item
    #: among its candidates, learning/metrics.py); the mean reciprocal rank is ``mrr``
    ndcg_key: str = ""
    recall_key: str = ""
    full: bool = False  #: ranked among every item a user never touched (``--eval full``)
    factor: float = 1.0  #: utility of a hit (F1@K's 2/(K+1) for PRME, 1 for HR@K)
    k: int = 20

    def random_for(self, candidates: int) -> float:
        """A random ranking's utility for a user whose held-out item has ``candidates - 1``
        others to beat."""
        return random_hit_ratio(self.k, candidates - 1) * self.factor


def metric_for(config: RunConfig) -> Metric:
    """HR@K for GMF and NCF, F1@K for PRME (docs/design.md), with K = ``learning.top_k``;
    NDCG@K, Recall@K and MRR beside either."""
    k = config.learning.top_k
    hr = random_hit_ratio(k, config.learning.test_negatives)
    full = config.learning.evaluation == "full"
    key, label, factor = f"hit_ratio_at_{k}", f"HR@{k}", 1.0
    if config.model == "prme":
        key, label, factor = f"f1_at_{k}", f"F1@{k}", f1_at_k(True, k)
    return Metric(key, label, hr * factor, f"ndcg_at_{k}", f"recall_at_{k}", full, factor, k)


def round_stats(
    round_no: int,
    nodes: Iterable[NodeRuntime],
    metric: Metric,
    counts: npt.NDArray[np.int64] | None = None,
    shared: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Evaluate every node and sum its counters; also syncs the protocol counters to metrics.
    With ``counts`` (the training split's item counts, :func:`popularity_counts`), the utility
    of ranking each node's candidates by popularity beside it (``<key>_popularity``). With
    ``shared`` (a FedAvg server's coming global model, ``--eval-model global``) each client is
    ranked under it (learning.learner.BaseLearner.under)."""
    total = ndcg = recall = rr = chance = popular = 0.0
    n = 0
    msgs = nbytes = models = deltas = merges = steps = failures = recoveries = diverged = 0
    swaps = {"committed": 0, "aborted": 0}
    rejected: dict[str, int] = {}
    eps: list[float] = []
    trips: list[dict[str, Any]] = []  #: PeerSwap's round trips, per node
    selective: list[tuple[int, bool, int]] = []  #: (τ, switched, unprotected) under selective DP-SGD
    for node in nodes:
        figures = node.learner.ranking() if shared is None else node.learner.ranking_under(shared)
        spent = node.learner.epsilon()
        if spent is not None:
            eps.append(spent)
            if node.learner.dp_after:
                selective.append((node.learner.dp_after, node.learner.private, node.learner.unprotected()))
        node.record_round(round_no, figures)
        if figures is not None:
            total += figures.utility
            ndcg += figures.ndcg
            recall += figures.recall
            rr += figures.rr
            if metric.full:
                chance += metric.random_for(node.learner.candidates)
            if counts is not None:
                popular += node.learner.popularity(counts) or 0.0
            n += 1
        c = node.counters
        msgs += c.messages_sent
        nbytes += c.bytes_sent
        models += c.models_sent
        deltas += c.delta_models_sent
        failures += c.send_failures
        for k, v in c.rejected.items():
            rejected[k] = rejected.get(k, 0) + v
        stats = node.node.protocol.stats
        merges += stats.merges
        steps += stats.local_steps
        recoveries += stats.recoveries
        diverged += stats.recoveries > 0
        changes = node.node.sampler.view_changes()
        if changes is not None:
            swaps["committed"] += changes["committed"]
            swaps["aborted"] += changes["aborted"]
            for why in ("partner_busy", "neighbour_busy", "timeout"):
                swaps[f"aborted_{why}"] = swaps.get(f"aborted_{why}", 0) + changes[f"aborted_{why}"]
        latency = node.node.sampler.latency()
        if latency is not None and latency.samples:
            trips.append(latency.to_dict())
    out: dict[str, Any] = {
        "round": round_no,
        "nodes": n,
        metric.key: total / max(n, 1),
        metric.ndcg_key: ndcg / max(n, 1),
        metric.recall_key: recall / max(n, 1),
        "mrr": rr / max(n, 1),
        "messages": msgs,
        "model_messages": models,
        "delta_messages": deltas,
        "bytes": nbytes,
        "merges": merges,
        "local_steps": steps,
        "recoveries": {"events": recoveries, "nodes": diverged},
        "send_failures": failures,
        "rejected": rejected,
        "view_swaps": swaps,
    }
    if metric.full:
        out[f"{metric.key}_random"] = chance / max(n, 1)
    if counts is not None:
        out[f"{metric.key}_popularity"] = popular / max(n, 1)
    swap_rtt = roundtrips.merge(trips)
    if swap_rtt is not None:  # how long PeerSwap's requests took to be answered, in ticks
        out["swap_rtt"] = swap_rtt
    if eps:
        out["dp_epsilon"] = {"mean": sum(eps) / len(eps), "max": max(eps), "min": min(eps)}
    if selective:
        out["dp_selective"] = selective_stats(selective)
    return out


def selective_stats(nodes: Sequence[tuple[int, bool, int]]) -> dict[str, Any]:
    """Selective DP-SGD over ``(τ, switched, unprotected)`` per node: τ, the share of nodes that
    train under DP-SGD, and how many of a node's models peers took before its DP-SGD began (no ε
    covers those; ``dp_epsilon`` counts only the steps since the switch)."""
    unprotected = [u for _, _, u in nodes]
    return {
        "past": max(t for t, _, _ in nodes),
        "nodes": len(nodes),
        "switched": sum(1 for _, on, _ in nodes if on) / len(nodes),
        "unprotected": {"mean": sum(unprotected) / len(nodes), "max": max(unprotected)},
    }


def node_rows(
    nodes: Iterable[NodeRuntime], metric: Metric, raw_users: Sequence[str] | None, server: int | None
) -> list[dict[str, Any]]:
    """One row per hosted node at the end of a run, for tables of nodes (``per_node`` in the
    summary; ``p2pnode.simulate(...).nodes`` as a DataFrame): its utility at the last
    evaluation, its traffic and refusals, its merges and local steps, the times its model went
    non-finite and went back to its last good state (``recoveries``), its ε under DP-SGD, the
    rows of D_pub it holds under PARD (``public_rows``) and,
    for an evaluated adversary, its CIA accuracy and upper bound (CIA paper §V-C)."""
    rows = []
    for node in nodes:
        c = node.counters
        stats = node.node.protocol.stats
        nid = node.node_id
        row: dict[str, Any] = {
            "node": nid,
            "user": raw_users[nid] if raw_users is not None and nid < len(raw_users) else None,
            "role": "server" if nid == server else "user",
            "adversary": node.node.observed_users() is not None,
            metric.key: node.last_hit,
            "messages_sent": c.messages_sent,
            "bytes_sent": c.bytes_sent,
            "models_sent": c.models_sent,
            "models_received": c.models_received,
            "bytes_received": c.bytes_received,
            "send_failures": c.send_failures,
            "refused": sum(c.rejected.values()),
            "merges": stats.merges,
            "local_steps": stats.local_steps,
            "recoveries": stats.recoveries,
        }
        spent = node.learner.epsilon()
        if spent is not None:
            row["dp_epsilon"] = spent
            if node.learner.dp_after:  # selective DP-SGD: models taken before the switch
                row["dp_unprotected"] = node.learner.unprotected()
        board = node.node.board
        if board is not None:  # PARD: the rows of D_pub this node holds (protocols/public.py)
            row["public_rows"] = len(board.rows)
        if node.last_attack is not None:
            row["cia_accuracy"], row["cia_upper_bound"] = node.last_attack
        knn = node.node.knn
        if knn is not None:  # the KNN service (protocols/knn.py): its own counts
            row.update(
                knn_usage=knn.stats.usage,
                knn_real=knn.stats.real,
                knn_randomized=knn.stats.randomized,
                knn_epsilon=knn.epsilon,
                knn_queries=len(knn.done),
            )
        rows.append(row)
    return rows


def epsilon_by_node(nodes: Iterable[NodeRuntime]) -> dict[str, float]:
    """Each DP-SGD node's ε so far (empty without DP-SGD), for the final summary."""
    out = {}
    for node in nodes:
        spent = node.learner.epsilon()
        if spent is not None:
            out[str(node.node_id)] = spent
    return out


def progress_line(
    stats: dict[str, Any],
    metric: Metric,
    total_rounds: int | None,
    seconds: float,
    since: tuple[int, float] | None = None,
) -> str:
    """One round's line. ``total_rounds`` None: a daemon run until stopped (no total, no time
    left); ``since``: the first evaluated round and its time, from which the pace is read."""
    value = stats[metric.key]
    of = f"/{total_rounds}" if total_rounds is not None else ""
    return (
        f"round {stats['round']:>4}{of}  {metric.label} {value:.3f}  "
        f"models {stats['model_messages']:>7} ({stats['delta_messages']} delta)  "
        f"MB {stats['bytes'] / 1e6:9.1f}  merges {stats['merges']:>7}  {seconds:7.1f}s"
        + time_left(stats["round"], total_rounds, seconds, since)
        + (
            f"  CIA AAC {stats['cia']['aac']:.3f} (bound {stats['cia']['upper_bound']:.3f})"
            if "cia" in stats
            else ""
        )
        + (f"  MIA acc {stats['mia']['accuracy']:.3f}" if "mia" in stats else "")
        + (_churn_text(stats["churn"]) if "churn" in stats else "")
    )


def time_left(
    round_no: int, total_rounds: int | None, seconds: float, since: tuple[int, float] | None = None
) -> str:
    """The time the remaining rounds will take at the pace since the first evaluated round
    (``since``: its round and time; the first round carries the start-up, which the rest do
    not, so no estimate is made from it alone); none after the last round or without a total."""
    if total_rounds is None or round_no <= 0 or round_no >= total_rounds:
        return ""
    if since is None:  # the pace of every round so far
        return f" (~{seconds / round_no * (total_rounds - round_no):.0f}s left)"
    first_round, first_seconds = since
    if round_no <= first_round:
        return ""
    pace = (seconds - first_seconds) / (round_no - first_round)
    return f" (~{pace * (total_rounds - round_no):.0f}s left)"


def _churn_text(churn: dict[str, int]) -> str:
    joined, left, crashed = churn["joins"], churn["leaves"], churn["crashes"]
    return f"  live {churn['live']} ({joined} joined, {left} left, {crashed} crashed)"


def summary(stats: dict[str, Any], metric: Metric) -> str:
    value = stats[metric.key]
    per_msg = stats["bytes"] / max(stats["messages"], 1)
    chance = stats.get(f"{metric.key}_random", metric.random)
    where = " over the full catalogue" if metric.full else ""
    return (
        f"done: {stats['nodes']} nodes, {stats['round']} rounds{_defence_text(stats)}, "
        f"{metric.label} {value:.3f} "
        f"(random {chance:.3f}{_popularity_text(stats, metric)}{where}){_ranking_text(stats, metric)}, "
        f"{stats['messages']} messages ({stats['model_messages']} models, "
        f"{stats['delta_messages']} as deltas), {stats['bytes'] / 1e6:.1f} MB, "
        f"{per_msg / 1e3:.1f} kB/message"
        + (
            f", DP-SGD ε mean {stats['dp_epsilon']['mean']:.2f} max {stats['dp_epsilon']['max']:.2f}"
            if "dp_epsilon" in stats
            else ""
        )
        + (_selective_text(stats["dp_selective"]) if isinstance(stats.get("dp_selective"), dict) else "")
        + (_early_text(stats["early_stop"], metric) if isinstance(stats.get("early_stop"), dict) else "")
        + _trouble_line(stats)
        + (cia_line(stats["cia"]) if isinstance(stats.get("cia"), dict) and "max_aac" in stats["cia"] else "")
        + (mia_line(stats["mia"]) if isinstance(stats.get("mia"), dict) and "max" in stats["mia"] else "")
        + (aia_lines(stats["aia"]) if isinstance(stats.get("aia"), dict) else "")
        + (_plugin_line(stats["attack_plugin"]) if isinstance(stats.get("attack_plugin"), dict) else "")
        + (knn_line(stats["knn"]) if isinstance(stats.get("knn"), dict) else "")
        + (f"\n{stats['self_check']['line']}" if isinstance(stats.get("self_check"), dict) else "")
    )


def defences(config: dict[str, Any]) -> list[str]:
    """The privacy defences a run's configuration (``RunConfig.to_dict``) turns on, by name."""
    lc = config.get("learning", {})
    on = []
    if lc.get("defence") == "pard":
        on.append(f"PARD (λ_ir {lc.get('pard_lambda_ir')}, λ_re {lc.get('pard_lambda_re')})")
    elif lc.get("defence") == "uc-fedrec":
        on.append("UC-FedRec")
    if lc.get("share_less"):
        on.append("Share less")
    if lc.get("local_head"):
        on.append("the head kept home")
    if lc.get("personal_user"):
        on.append("the user row kept")
    if lc.get("dp_epsilon"):
        on.append(f"DP-SGD (target ε {lc['dp_epsilon']:g}, C {lc.get('dp_clip')})")
    elif lc.get("dp_noise"):
        on.append(f"DP-SGD (σ {lc['dp_noise']:g}, C {lc.get('dp_clip')})")
    if lc.get("upload_noise"):
        on.append(f"upload noise {lc['upload_noise']:g}")
    return on


def _defence_text(stats: dict[str, Any]) -> str:
    """`` under PARD (...)``: a run with a defence says so where its figures begin."""
    config = stats.get("config")
    on = defences(config) if isinstance(config, dict) else []
    return f" under {' + '.join(on)}" if on else ""


def _selective_text(sel: dict[str, Any]) -> str:
    return (
        f" since the switch (selective, past {sel['past']} models taken: {sel['switched']:.0%} of nodes "
        f"switched; before it {sel['unprotected']['mean']:.1f} models a node left unprotected, at most "
        f"{sel['unprotected']['max']})"
    )


def knn_line(knn: dict[str, Any]) -> str:
    """The KNN service's figures (protocols/knn.py, p2pnode/nodes/knn.py): its MAE over the queries
    done, the nodes used more than τ times, and what randomized response cost them."""
    mae = "no query done" if knn.get("mae") is None else f"MAE {knn['mae']:.4f}"
    eps = knn.get("epsilon_median")
    unfinished = knn["queries"] - knn["done"]
    return (
        f"\nKNN {knn['strategy']} (k {knn['k']}): {mae} over {knn['done']} of {knn['queries']} queries"
        + (f" ({unfinished} not done by the last round)" if unfinished else "")
        + f"; {100 * knn['vulnerable']:.1f}% of nodes used more than τ = {knn['tau']:.1f} times, "
        f"DataUsage median {knn['data_usage']['median']:.0f} max {knn['data_usage']['max']:.0f}, "
        f"{knn['privacy_risk']:.1f} real answers a node"
        + (f", median ε {eps:.2f}" if eps is not None else "")
        + (f", {knn['timeouts']} asks unanswered" if knn.get("timeouts") else "")
    )


def _plugin_line(plugin: dict[str, Any]) -> str:
    """Where the user's attack ran and what it was shown (its own figures are in the summary's
    ``attack_plugin.observers``, by node)."""
    observers = plugin.get("observers", {})
    seen = sum(int(o.get("observed", 0)) for o in observers.values() if isinstance(o, dict))
    return (
        f"\nattack plugin {plugin.get('name')}: {len(observers)} observer(s), {seen} models observed "
        "(their figures: the summary's attack_plugin)"
    )


def _early_text(early: dict[str, Any], metric: Metric) -> str:
    """The early stop on the validation item: which evaluation the figures are, and why."""
    best = early.get("best_round")
    if best is None:
        return ", early stop: no evaluation to choose"
    ended = f"stopped after round {early['stopped']}" if early.get("stopped") else "ran every round"
    return (
        f"\n      figures of round {best}, the best validation HR@{metric.k} + HR@{2 * metric.k} "
        f"({early['validation']:.3f}; patience {early['patience']}, {ended})"
    )


def _popularity_text(stats: dict[str, Any], metric: Metric) -> str:
    """The popularity baseline beside the random one, saying so when the model ranks worse."""
    popular = stats.get(f"{metric.key}_popularity")
    if not isinstance(popular, float):
        return ""
    worse = ": the model ranks worse than popularity" if stats[metric.key] < popular else ""
    return f", popularity {popular:.3f}{worse}"


def popularity_counts(users: Iterable[Any], n_items: int) -> npt.NDArray[np.int64]:
    """Every item's count in the training split of ``users`` (learning.split.UserData): the
    popularity baseline's scores. It is the lab's baseline, not a node's: no node of a
    decentralised run knows these counts."""
    return item_counts([u.train_items for u in users], n_items)


def _ranking_text(stats: dict[str, Any], metric: Metric) -> str:
    """NDCG@K and MRR beside the utility, when the summary has them (Recall@K is HR@K's value
    with one held-out item, so it is not repeated here)."""
    if metric.ndcg_key not in stats or "mrr" not in stats:
        return ""
    return f", NDCG@{metric.k} {stats[metric.ndcg_key]:.3f}, MRR {stats['mrr']:.3f}"


def _trouble_line(stats: dict[str, Any]) -> str:
    """What did not go through, when anything did not: failed sends, refused messages by
    reason, aborted view swaps (empty for a run where everything arrived)."""
    parts = []
    if stats.get("send_failures"):
        parts.append(f"{stats['send_failures']} failed sends")
    rejected = stats.get("rejected") or {}
    if rejected:
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(rejected.items(), key=lambda kv: -kv[1]))
        parts.append(f"{sum(rejected.values())} messages refused ({reasons})")
    swaps = stats.get("view_swaps") or {}
    if swaps.get("aborted"):
        tried = swaps["aborted"] + swaps.get("committed", 0)
        parts.append(f"{swaps['aborted']} of {tried} view swaps aborted")
    recovered = stats.get("recoveries") or {}
    if recovered.get("events"):
        parts.append(
            f"{recovered['events']} non-finite models recovered at {recovered['nodes']} nodes "
            "(a learning rate too high for the data, or poisoned merges)"
        )
    churn = stats.get("churn")
    if isinstance(churn, dict) and "live" in churn:
        parts.append(f"{churn['live']} nodes online at the end")
    return ("\n      " + "; ".join(parts)) if parts else ""


def cia_line(cia: dict[str, Any]) -> str:
    """The attack's headline figures (CIA paper §V-C), in percent as the paper prints them."""
    line = (
        f"\nCIA: Max AAC {100 * cia['max_aac']:.1f}% at round {cia['round_of_max']} "
        f"(best 10% {100 * cia['best10_aac']:.1f}%, upper bound {100 * cia['upper_bound']:.1f}%, "
        f"random {100 * cia['random_bound']:.1f}%) over {cia['adversaries']} adversaries"
    )
    if cia["upper_bound"] <= cia["random_bound"]:
        line += (
            "\n     (the adversaries heard from too few users: even a perfect attacker, who could name "
            "only users it received models from, stays at the upper bound, below random guessing; "
            "run more rounds, or let adversaries collude: --colluders)"
        )
    proxy = cia.get("mia_proxy")
    if proxy:
        cells = ", ".join(
            f"ρ={rho:g}: precision {100 * prec:.0f}% Max AAC {100 * aac:.1f}%"
            for rho, prec, aac in zip(proxy["thresholds"], proxy["precision"], proxy["max_aac"], strict=True)
        )
        line += f"\nMIA as CIA proxy: {cells}"
    return line + _predictions_lines(cia.get("predictions") or [])


def _predictions_lines(predictions: list[dict[str, Any]], adversaries: int = 3, users: int = 8) -> str:
    """The first adversaries' predicted communities with scores (an explicit --target-items or
    --target-genre), by the dataset's own user ids where it has them; ``--json`` has them all."""
    if not predictions:
        return ""
    lines = ["\npredicted communities (highest scores first; --json has every member):"]
    for p in predictions[:adversaries]:
        names = p.get("community_users") or p["community"]
        who = f"adversary {p['adversary']}" + (
            f" (user {p['adversary_user']})" if p.get("adversary_user") is not None else ""
        )
        cells = ", ".join(f"{u} {s:.3f}" for u, s in zip(names[:users], p["scores"][:users], strict=False))
        cells = cells or "nobody yet (no model received)"
        more = f", ... ({len(names)} in all)" if len(names) > users else ""
        lines.append(f"  {who}: {cells}{more}")
    if len(predictions) > adversaries:
        lines.append(f"  ... and {len(predictions) - adversaries} more adversaries")
    return "\n".join(lines)


def aia_lines(aia: dict[str, Any]) -> str:
    """Attribute inference (paper 004): per observer and attribute, the best round's score beside
    the majority-class and prior-sampling baselines of the same split."""
    lines = []
    for observer, summary in aia.items():
        best = summary.get("best", {}) if isinstance(summary, dict) else {}
        if not best:
            continue
        optimistic = (
            " (epoch chosen on the scored users: optimistic)" if summary.get("select") == "best-test" else ""
        )
        parts = []
        for name, score in best.items():
            metric = "AUC" if "auc" in score else "micro-F1"
            key = "auc" if "auc" in score else "micro_f1"
            majority, prior = score["majority"].get(key, float("nan")), score["prior"].get(key, float("nan"))
            parts.append(
                f"{name} {metric} {score[key]:.3f} at round {score['round']} "
                f"(majority {majority:.3f}, prior {prior:.3f})"
            )
        last = summary["last"]
        lines.append(
            f"\nAIA ({observer}, I'_u {summary['items']}{optimistic}; observed {last['observed']} users, "
            f"{last['public_observed']} public): " + "; ".join(parts)
        )
    return "".join(lines)


def mia_line(mia: dict[str, Any]) -> str:
    """The MPE attack's accuracy (002 eq. 6, 0.5 is guessing) and, where the run has them, the
    same scores under one threshold for everyone: AUC and TPR at 0.1% / 1% FPR, saying when too
    few non-members back an FPR (adversary/roc.py)."""
    line = (
        f"\nMIA (MPE, oracle threshold): accuracy {100 * mia['final']:.1f}% at the end, "
        f"max {100 * mia['max']:.1f}% (guessing 50%)"
    )
    pooled = mia.get("pooled")
    if isinstance(pooled, dict) and pooled.get("auc"):
        final = [a for a in pooled["auc"] if a is not None][-1]
        tprs = pooled["tpr_at_fpr"]
        lows = [(k, v[-1]) for k, v in tprs.items() if v and v[-1] is not None]
        at = " / ".join(f"{100 * t:.2f}%" for _k, t in lows)
        fprs = " / ".join(f"{100 * float(k):g}%" for k, _t in lows)
        unresolved = [f"{100 * float(k):g}%" for k, ok in pooled["resolved"].items() if not ok]
        line += (
            f"\nMIA (MPE, one threshold for all): AUC {final:.3f} (guessing 0.5); TPR {at} at {fprs} FPR"
            + (
                f" ({', '.join(unresolved)} FPR unresolved: {pooled['non_members']} non-members)"
                if unresolved
                else ""
            )
        )
    found = mia.get("audit")
    if isinstance(found, dict):
        line += (
            f"\nε audit (one run, {found['canaries']} canaries, {found['included']} trained on): "
            f"ε ≥ {found['epsilon']:.2f} at {100 * (1 - found['beta']):.0f}% confidence, "
            f"δ {found['delta']:g} ({found['correct']} of {found['guesses']} guesses right)"
        )
    observers = mia.get("observers")
    if isinstance(observers, dict) and observers:
        line += "\nMIA by placed observers (MPE on the models they received, one threshold): " + "; ".join(
            observer_part(name, o) for name, o in list(observers.items())[:4]
        )
        if len(observers) > 4:
            line += f"; {len(observers) - 4} more in --json"
    return line


def observer_part(name: str, o: dict[str, Any]) -> str:
    """One placed observer's figures for the summary line."""
    users = o["observed"][-1] if o["observed"] else 0
    if o.get("final_auc") is None:
        unreadable = o["unreadable"]
        lacked = f"{unreadable} models lacked the user row or head"
        return f"{name}: nothing it could score ({users} users; {lacked})"
    tpr = o["tpr_at_fpr"]["1e-02"][-1]
    part = f"{name}: AUC {o['final_auc']:.3f}, TPR {100 * tpr:.2f}% at 1% FPR, {users} users"
    found = o.get("audit")
    if isinstance(found, dict):
        part += f", ε ≥ {found['epsilon']:.2f}"
    return part
