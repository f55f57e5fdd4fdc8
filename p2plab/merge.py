"""Merging the summaries of a network's processes into one (launch, deploy collect).

Every ``p2pnode run`` process writes the ``result.json`` of the nodes it hosts; the network's
figures are the node-weighted means of utility and the pooled adversary accuracies, per round
that every process evaluated (CIA paper §V-C: AAC is a mean over the adversaries).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from adversary.community import summarize
from adversary.evaluation import proxy_summary
from p2pcore import roundtrips


def aggregate(results: Sequence[dict[str, Any]], key: str) -> dict[str, Any]:
    """Merge per-process summaries into one network summary (HR weighted by node count)."""
    nodes = sum(r["nodes"] for r in results)
    total: dict[str, Any] = {
        "nodes": nodes,
        "round": min(r["round"] for r in results),
        "rounds": min(r["rounds"] for r in results),
        key: sum(r[key] * r["nodes"] for r in results) / max(nodes, 1),
        **_weighted_ranking(results, key, nodes),
        "late_rounds": max(r.get("late_rounds", 0) for r in results),
        **_pace(results),
        "local_frames": sum(r.get("local_frames", 0) for r in results),
        "batched_frames": sum(r.get("batched_frames", 0) for r in results),
        "batches": sum(r.get("batches", 0) for r in results),
    }
    for k in (
        "messages",
        "model_messages",
        "delta_messages",
        "bytes",
        "merges",
        "local_steps",
        "send_failures",
    ):
        total[k] = sum(r[k] for r in results)
    rejected: dict[str, int] = {}
    for r in results:
        for k, v in r["rejected"].items():
            rejected[k] = rejected.get(k, 0) + v
    total["rejected"] = rejected
    total["recoveries"] = {
        k: sum(r.get("recoveries", {}).get(k, 0) for r in results) for k in ("events", "nodes")
    }
    total["view_swaps"] = {
        k: sum(r.get("view_swaps", {}).get(k, 0) for r in results)
        for k in sorted({k for r in results for k in r.get("view_swaps", {})} | {"committed", "aborted"})
    }
    swap_rtt = roundtrips.merge(r.get("swap_rtt") for r in results)
    if swap_rtt is not None:
        total["swap_rtt"] = swap_rtt
    total["history"] = _merge_histories(results, key)
    if any("per_node" in r for r in results):
        total["per_node"] = sorted((row for r in results for row in r.get("per_node", [])), key=_node_of)
    cia = merge_attack([r["cia"] for r in results if r.get("cia")], nodes)
    if cia is not None:
        total["cia"] = cia
    aia = merge_aia([r.get("aia") for r in results])
    if aia is not None:
        total["aia"] = aia
    plugged = [r["attack_plugin"] for r in results if r.get("attack_plugin")]
    if plugged:  # each process ran the user's attack on its own adversary nodes
        observers = {node: figures for part in plugged for node, figures in part["observers"].items()}
        total["attack_plugin"] = {
            "name": plugged[0]["name"],
            "observers": dict(sorted(observers.items(), key=lambda kv: int(kv[0]))),
        }
    vectors = [r["exposure_by_sender"] for r in results if r.get("exposure_by_sender")]
    if vectors and len(vectors) == len(results):  # every process counted its nodes' merges
        from p2pnode.telemetry.exposure import exposure_summary

        usage = np.sum([v["usage"] for v in vectors], axis=0)
        kept = all("exposure" in v for v in vectors)  # receivers differ by process: their sum is distinct
        exposure = np.sum([v["exposure"] for v in vectors], axis=0) if kept else None
        total["exposure"] = exposure_summary(usage[:nodes], None if exposure is None else exposure[:nodes])
    if any(r.get("knn") for r in results):  # the KNN service: its processes' counts added up
        from p2pnode.nodes.knn import merge_knn

        knn = merge_knn([r["knn"] for r in results if r.get("knn")])
        if knn is not None:
            total["knn"] = knn
    mia = merge_mia([r["mia"] for r in results if r.get("mia")])
    if mia is not None:
        total["mia"] = mia
    eps = [r for r in results if "dp_epsilon" in r]
    if eps:
        by_node: dict[str, float] = {}
        for r in eps:
            by_node.update(r.get("dp_epsilon_by_node", {}))
        total["dp_epsilon"] = {
            "mean": sum(r["dp_epsilon"]["mean"] * r["nodes"] for r in eps)
            / max(sum(r["nodes"] for r in eps), 1),
            "max": max(r["dp_epsilon"]["max"] for r in eps),
            "min": min(r["dp_epsilon"]["min"] for r in eps),
        }
        total["dp_epsilon_by_node"] = by_node
    sel = [r["dp_selective"] for r in results if isinstance(r.get("dp_selective"), dict)]
    if sel:  # selective DP-SGD (p2pnode.runners.report.selective_stats): weighted by each process's nodes
        n = sum(s["nodes"] for s in sel)
        total["dp_selective"] = {
            "past": max(s["past"] for s in sel),
            "nodes": n,
            "switched": sum(s["switched"] * s["nodes"] for s in sel) / n,
            "unprotected": {
                "mean": sum(s["unprotected"]["mean"] * s["nodes"] for s in sel) / n,
                "max": max(s["unprotected"]["max"] for s in sel),
            },
        }
    return total


def _weighted_ranking(rows: Sequence[dict[str, Any]], key: str, nodes: int) -> dict[str, float]:
    """The node-weighted NDCG@K, Recall@K, MRR and popularity baseline beside utility ``key``
    (and, under ``--eval full``, a random ranking's utility), each when every row has it (a
    process of an older version has none: the merged summary then has none either)."""
    k = key.rsplit("_", 1)[-1]
    out = {}
    for name in (f"ndcg_at_{k}", f"recall_at_{k}", "mrr", f"{key}_random", f"{key}_popularity"):
        if rows and all(name in r for r in rows):
            out[name] = sum(r[name] * r["nodes"] for r in rows) / max(nodes, 1)
    return out


def _node_of(row: dict[str, Any]) -> int:
    return int(row["node"])


def merge_attack(parts: Sequence[dict[str, Any]], n_users: int) -> dict[str, Any] | None:
    """One CIA summary from the processes' summaries: per-adversary accuracies of the rounds that
    every process evaluated are pooled, then Max AAC and the rest are taken as in one process."""
    if not parts:
        return None
    by_round = [
        dict(zip(p["rounds"], zip(p["per_round"], p["per_round_bounds"], strict=True), strict=True))
        for p in parts
    ]
    common = sorted(set.intersection(*(set(b) for b in by_round)))
    accs = [[a for b in by_round for a in b[r][0]] for r in common]
    bounds = [[x for b in by_round for x in b[r][1]] for r in common]
    k = int(parts[0]["k"])
    out: dict[str, Any] = summarize(common, accs, bounds, k, n_users).as_dict()
    out["k"] = k
    if "mia_proxy" in parts[0]:
        out["mia_proxy"] = _merge_proxy(parts, common)
    preds = [p for part in parts for p in part.get("predictions", [])]
    if preds:
        out["predictions"] = preds
    return out


def _merge_proxy(parts: Sequence[dict[str, Any]], common: Sequence[int]) -> dict[str, Any]:
    """Table VIII pooled over processes: accuracies and (true) positives of the common rounds."""
    thresholds = parts[0]["mia_proxy"]["thresholds"]
    n = len(thresholds)
    index = [{r: i for i, r in enumerate(p["rounds"])} for p in parts]
    acc = [
        [
            [a for p, ix in zip(parts, index, strict=True) for a in p["mia_proxy"]["per_round"][ix[r]][j]]
            for j in range(n)
        ]
        for r in common
    ]
    tp = [
        [
            sum(p["mia_proxy"]["true_positives"][ix[r]][j] for p, ix in zip(parts, index, strict=True))
            for j in range(n)
        ]
        for r in common
    ]
    pos = [
        [
            sum(p["mia_proxy"]["positives"][ix[r]][j] for p, ix in zip(parts, index, strict=True))
            for j in range(n)
        ]
        for r in common
    ]
    return proxy_summary(thresholds, common, acc, tp, pos)


def merge_aia(parts: Sequence[dict[str, Any] | None]) -> dict[str, Any] | None:
    """One attribute inference summary from the processes' (paper 004; ``None``: a process
    without it). An observing node (the FedAvg server, an ``--attackers`` node, a colluding
    group's read member) is hosted by one process: its summary is taken as it is. Each process's
    omniscient observer read only the models of the nodes it hosts: with several processes each is
    kept apart, as ``omniscient (process K)``, since scores trained on different users do not pool."""
    present = [(k, p) for k, p in enumerate(parts) if p]
    if not present:
        return None
    out: dict[str, Any] = {}
    for k, part in present:
        for observer, summary in part.items():
            if observer == "omniscient" and len(parts) > 1:
                out[f"omniscient (process {k})"] = summary
            else:
                out[observer] = summary
    return out


def merge_mia(parts: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """One MIA summary from the processes': per-round accuracies weighted by hosted nodes.

    The pooled one-threshold figures (``pooled``: AUC, TPR at low FPR) are left out: a ROC curve
    over the whole network needs every process's scores, which a summary does not carry, and no
    weighting of the processes' curves gives it. A launch reports them per process only.

    A placed observer's figures (``observers``: the FedAvg server, an ``--attackers`` node) come
    from the one process that hosts it, whole; a colluding group whose members sit in several
    processes pools within each, so its name, found in more than one process, is left out."""
    if not parts:
        return None
    by_round = [
        dict(zip(p["rounds"], zip(p["accuracy"], p["nodes"], strict=True), strict=True)) for p in parts
    ]
    common = sorted(set.intersection(*(set(b) for b in by_round)))
    nodes = [sum(b[r][1] for b in by_round) for r in common]
    acc = [sum(b[r][0] * b[r][1] for b in by_round) / max(n, 1) for r, n in zip(common, nodes, strict=True)]
    out: dict[str, Any] = {
        "rounds": common,
        "accuracy": acc,
        "nodes": nodes,
        "max": max(acc, default=0.0),
        "final": acc[-1] if acc else 0.0,
    }
    named = [name for p in parts for name in (p.get("observers") or {})]
    whole = {
        name: o for p in parts for name, o in (p.get("observers") or {}).items() if named.count(name) == 1
    }
    if whole:
        out["observers"] = whole
    return out


def _pace(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The slowest process's pace (``NodeProcess.pace``): the network's rounds took as long as
    its slowest process's; none where no process reported one."""
    paces = [r["pace"] for r in results if isinstance(r.get("pace"), dict)]
    if not paces:
        return {}
    keys = ("stretch", "held_s", "holds", "worst_lag_s")
    return {"pace": {k: max(p.get(k, 0) for p in paces) for k in keys}}


def _merge_histories(results: Sequence[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    """Per-round network figures from the processes' histories (rounds all processes reached)."""
    by_round: list[dict[int, dict[str, Any]]] = [
        {h["round"]: h for h in r.get("history", [])} for r in results
    ]
    common = sorted(set.intersection(*(set(b) for b in by_round))) if by_round else []
    merged = []
    for rnd in common:
        rows = [b[rnd] for b in by_round]
        nodes = sum(h["nodes"] for h in rows)
        merged.append(
            {
                "round": rnd,
                "nodes": nodes,
                key: sum(h[key] * h["nodes"] for h in rows) / max(nodes, 1),
                **_weighted_ranking(rows, key, nodes),
                "messages": sum(h["messages"] for h in rows),
                "bytes": sum(h["bytes"] for h in rows),
            }
        )
        if any(isinstance(h.get("aia"), dict) for h in rows):  # attribute inference evaluated then
            merged[-1]["aia"] = merge_aia([h.get("aia") for h in rows])
        if all("time" in h for h in rows):
            merged[-1]["time"] = max(h["time"] for h in rows)  # when the last process got there
        if all(isinstance(h.get("rejected"), dict) for h in rows):  # refusals so far, by reason
            rejected: dict[str, int] = {}
            for h in rows:
                for why, n in h["rejected"].items():
                    rejected[why] = rejected.get(why, 0) + int(n)
            merged[-1]["rejected"] = rejected
    return merged
