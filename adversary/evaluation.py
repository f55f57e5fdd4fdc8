"""Scoring the adversaries of a run, round by round (CIA paper §V-C, 002 §2.5, 000 §VIII-C).

Accuracy@R of each evaluated target against its true community, the upper bound of what the
adversary has seen, the MPE membership inference on every hosted victim, and MIA used as a
community detector. Pure: the shell hands in its hosted nodes (anything with a ``node_id``, the
pure ``node`` and ``set_attack_gauges``) and the victims' scores.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from adversary.audit import audit
from adversary.calibrated import rmia_scores
from adversary.cia import CIAObserver
from adversary.community import accuracy, summarize, upper_bound
from adversary.mia import best_threshold_accuracy, item_mpe, mpe_binary, proxy_round
from adversary.mia_observer import View
from adversary.models import attack_model
from adversary.node import AdversaryNode
from adversary.plan import AdversarySpec, AttackPlan
from adversary.roc import LOW_FPRS, Roc, auc, balanced_accuracy, fpr_key, points, roc, tpr_at


class Hosted(Protocol):
    """A node as its host holds it: the pure node, its id, and where its attack gauges go."""

    @property
    def node_id(self) -> int: ...

    @property
    def node(self) -> object: ...

    def set_attack_gauges(self, accuracy: float, bound: float) -> None: ...


@dataclass(frozen=True)
class Victim:
    """What the MPE attack reads of one user's node: its model's scores over the catalogue."""

    model_name: str  #: the ``--model`` it trains (GMF scores are probabilities, PRME distances)
    scores: npt.NDArray[np.float32]  #: its score for every item
    train_items: npt.NDArray[np.int64]  #: the members
    held_out: npt.NDArray[np.int64]  #: non-members it never trained on
    #: the ε audit's canaries of this user (learning/split.py plant_canaries) and which went in
    canaries: npt.NDArray[np.int64] = dataclasses.field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    canary_in: npt.NDArray[np.bool_] = dataclasses.field(default_factory=lambda: np.zeros(0, dtype=bool))
    user: int = -1  #: whose model it is (the calibrated attack leaves out the users it trained on)
    node: int = -1  #: its node id: what a placed observer keys the models it received by


@dataclass(frozen=True)
class Reference:
    """What the calibrated attack (adversary/calibrated.py) holds: Pr(x) for every item from its
    reference model, the users whose data trained it (not scored), and how many population items
    it draws per victim."""

    likelihood: npt.NDArray[np.float64]
    users: frozenset[int]
    #: the reference users' interactions' items, one entry per interaction: population items z
    #: are drawn from them, as RMIA draws z from the population's data
    pool: npt.NDArray[np.int64]
    population: int = 1000  #: z per victim: TPR at 0.1% FPR needs scores finer than 1/100
    seed: int = 0


class AttackLab:
    """Evaluates the hosted adversaries each evaluation round and summarises the run (§V-C);
    with ``mia`` also the MPE membership inference on every hosted node (002 §2.5), and with
    ``mia_proxy`` MIA used by the CIA adversaries as a community detector (000 §VIII-C)."""

    def __init__(
        self,
        plan: AttackPlan | None,
        mia: bool = False,
        thresholds: Sequence[float] = (),
        audit_delta: float = 0.0,
        reference: Reference | None = None,
    ) -> None:
        self.plan = plan
        self.audit_delta = audit_delta  #: the δ the ε audit is made at (the run's DP δ, else 0)
        self.rounds: list[int] = []
        self.accuracies: list[list[float]] = []
        self.bounds: list[list[float]] = []
        self.multicasts = 0
        self.mia = mia
        self.mia_rounds: list[int] = []
        self.mia_per_round: list[list[float]] = []
        self.thresholds = tuple(thresholds) if plan is not None else ()
        self.proxy_acc: list[list[list[float]]] = []  #: [round][ρ][adversary target]
        self.proxy_tp: list[list[int]] = []  #: [round][ρ]
        self.proxy_p: list[list[int]] = []
        self.pooled: list[dict[str, Any]] = []  #: per MIA round: the pooled one-threshold attack
        self._last_roc: Roc | None = None
        self.audits: list[dict[str, Any]] = []  #: per MIA round: the ε audit of the canaries
        self.reference = reference
        self.calibrated: list[dict[str, Any]] = []  #: per MIA round: the calibrated attack, pooled
        self._last_calibrated: Roc | None = None
        #: per placed observer (adversary/mia_observer.py), per MIA round: MPE on what it received
        self.observers: dict[str, list[dict[str, Any]]] = {}
        self._observer_roc: dict[str, Roc] = {}

    @property
    def active(self) -> bool:
        return self.plan is not None

    def evaluate_mia(
        self, round_no: int, victims: Iterable[Victim], views: Sequence[View] = ()
    ) -> dict[str, Any] | None:
        """The MPE attack on every hosted node's current model: its accuracy with the per-victim
        oracle threshold τ̃ (002 eq. 6), and, as the field reports an attack (adversary/roc.py),
        the same scores under one threshold for the whole population: AUC, balanced accuracy and
        TPR at 0.1% and 1% FPR (``pooled``). With ``views``, the same figures for each placed
        observer on the models it received (``observers``)."""
        if not self.mia:
            return None
        victims = list(victims)
        accs = []
        members: list[np.ndarray] = []
        non_members: list[np.ndarray] = []
        canary_scores: list[np.ndarray] = []
        canary_in: list[np.ndarray] = []
        cal_members: list[np.ndarray] = []
        cal_non: list[np.ndarray] = []
        for v in victims:
            probabilistic = attack_model(v.model_name).probabilistic
            m = item_mpe(v.scores, v.train_items, probabilistic)
            n = item_mpe(v.scores, v.held_out, probabilistic)
            accs.append(best_threshold_accuracy(m, n)[1])
            members.append(m)
            non_members.append(n)
            if len(v.canaries):  # a lower M_MPE says "in"
                canary_scores.append(-item_mpe(v.scores, v.canaries, probabilistic))
                canary_in.append(v.canary_in)
            ref = self.reference
            if ref is not None and probabilistic and v.user not in ref.users:
                rng = np.random.default_rng([ref.seed, v.user, round_no, 0x2E1A])
                known = np.zeros(len(v.scores), dtype=bool)
                known[v.train_items] = True
                known[v.held_out] = True
                known[v.canaries] = True
                free = ref.pool[~known[ref.pool]]  # others' interactions with items u did not touch
                z = rng.choice(free, size=min(ref.population, len(free)), replace=False)
                cal_members.append(rmia_scores(v.scores, v.train_items, z, ref.likelihood))
                cal_non.append(rmia_scores(v.scores, v.held_out, z, ref.likelihood))
        self.mia_rounds.append(round_no)
        self.mia_per_round.append(accs)
        out: dict[str, Any] = {"accuracy": float(np.mean(accs)) if accs else 0.0, "nodes": len(accs)}
        pooled = self._pooled(members, non_members)
        if pooled is not None:
            out["pooled"] = pooled
        if self.reference is not None:
            calibrated = self._pooled(cal_members, cal_non, self.calibrated)
            if calibrated is not None:
                out["calibrated"] = calibrated
        if canary_scores:
            scores, inside = np.concatenate(canary_scores), np.concatenate(canary_in)
            found = audit(scores, inside, delta=self.audit_delta).to_dict()
            self.audits.append(found)
            out["audit_epsilon"] = found["epsilon"]
        if views:
            out["observers"] = {view.name: self._observer(view, victims) for view in views}
        return out

    def _observer(self, view: View, victims: Sequence[Victim]) -> dict[str, Any]:
        """MPE on the models one placed observer received: every observed victim's members and
        non-members scored under the sender's latest model it holds, pooled under one threshold;
        its oracle accuracy; the ε audit of the observed victims' canaries."""
        members: list[np.ndarray] = []
        non_members: list[np.ndarray] = []
        accs: list[float] = []
        canary_scores: list[np.ndarray] = []
        canary_in: list[np.ndarray] = []
        for v in victims:
            scores = view.scores.get(v.node)
            if scores is None:
                continue
            probabilistic = attack_model(v.model_name).probabilistic
            m = item_mpe(scores, v.train_items, probabilistic)
            n = item_mpe(scores, v.held_out, probabilistic)
            accs.append(best_threshold_accuracy(m, n)[1])
            members.append(m)
            non_members.append(n)
            if len(v.canaries):
                canary_scores.append(-item_mpe(scores, v.canaries, probabilistic))
                canary_in.append(v.canary_in)
        row: dict[str, Any] = {
            "observed": len(accs),
            "coverage": len(accs) / len(victims) if victims else 0.0,
            "unreadable": view.unreadable,
            "accuracy": float(np.mean(accs)) if accs else 0.0,
        }
        made = _roc_row(members, non_members, -1.0)
        if made is not None:
            row.update(made[0])
            self._observer_roc[view.name] = made[1]
        if canary_scores:
            found = audit(np.concatenate(canary_scores), np.concatenate(canary_in), delta=self.audit_delta)
            row["audit"] = found.to_dict()
        self.observers.setdefault(view.name, []).append(row)
        return row

    def _pooled(
        self,
        members: list[np.ndarray],
        non_members: list[np.ndarray],
        into: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any] | None:
        """One threshold over every victim's examples. MPE (``into`` None): a lower M_MPE says
        member, so the score is −M; the calibrated attack's (``into`` its list): its score as is."""
        calibrated = into is not None
        rows = into if into is not None else self.pooled
        if not members or not any(len(m) for m in members) or not any(len(n) for n in non_members):
            rows.append({})
            return None
        sign = 1.0 if calibrated else -1.0
        made = _roc_row(members, non_members, sign)
        assert made is not None
        row, curve = made
        rows.append(row)
        if calibrated:
            self._last_calibrated = curve
        else:
            self._last_roc = curve
        return row

    def mia_summary(self) -> dict[str, Any] | None:
        if not self.mia:
            return None
        means = [float(np.mean(a)) if a else 0.0 for a in self.mia_per_round]
        out: dict[str, Any] = {
            "rounds": list(self.mia_rounds),
            "accuracy": means,
            "nodes": [len(a) for a in self.mia_per_round],
            "max": max(means, default=0.0),
            "final": means[-1] if means else 0.0,
        }
        for name, per_round, last in (
            ("pooled", self.pooled, self._last_roc),
            ("calibrated", self.calibrated, self._last_calibrated),
        ):
            rows = [r for r in per_round if r]
            if not rows or last is None:
                continue
            keys = [fpr_key(f) for f in LOW_FPRS]
            out[name] = {
                "auc": [r.get("auc") for r in per_round],
                "tpr_at_fpr": {k: [r["tpr_at_fpr"][k] if r else None for r in per_round] for k in keys},
                "max_auc": max(r["auc"] for r in rows),
                "max_tpr_at_fpr": {k: max(r["tpr_at_fpr"][k] for r in rows) for k in keys},
                "resolved": rows[-1]["resolved"],
                "members": rows[-1]["members"],
                "non_members": rows[-1]["non_members"],
                "final_roc": points(last),  # [fpr, tpr] on a log grid, the last round
            }
        if self.audits:  # the last round's models are the run's: its audit is the run's
            out["audit"] = {**self.audits[-1], "by_round": [a["epsilon"] for a in self.audits]}
        if self.observers:
            out["observers"] = {name: self._observer_summary(name, r) for name, r in self.observers.items()}
        return out

    def _observer_summary(self, name: str, per_round: list[dict[str, Any]]) -> dict[str, Any]:
        """A placed observer's run: per MIA round its AUC, TPRs and how many users it had a
        model of; the last round's ROC and ε audit (the models it holds at the end are the run's)."""
        keys = [fpr_key(f) for f in LOW_FPRS]
        scored = [r for r in per_round if "auc" in r]
        last = per_round[-1]
        out: dict[str, Any] = {
            "observed": [r["observed"] for r in per_round],
            "coverage": last["coverage"],
            "unreadable": last["unreadable"],
            "accuracy": [r["accuracy"] for r in per_round],
            "auc": [r.get("auc") for r in per_round],
            "tpr_at_fpr": {k: [r["tpr_at_fpr"][k] if "auc" in r else None for r in per_round] for k in keys},
        }
        if scored:
            out.update(
                final_auc=last.get("auc"),
                max_auc=max(r["auc"] for r in scored),
                max_tpr_at_fpr={k: max(r["tpr_at_fpr"][k] for r in scored) for k in keys},
                resolved=scored[-1]["resolved"],
                members=scored[-1]["members"],
                non_members=scored[-1]["non_members"],
            )
        curve = self._observer_roc.get(name)
        if curve is not None:
            out["final_roc"] = points(curve)
        audits = [r["audit"] for r in per_round if "audit" in r]
        if audits and "audit" in last:
            out["audit"] = {**last["audit"], "by_round": [a["epsilon"] for a in audits]}
        return out

    def evaluate(self, round_no: int, nodes: Iterable[Hosted]) -> dict[str, float] | None:
        """Accuracy@R and the upper bound of every hosted adversary; sets its gauges."""
        if self.plan is None:
            return None
        accs: list[float] = []
        bounds: list[float] = []
        k = self.plan.k
        proxy_acc: list[list[float]] = [[] for _ in self.thresholds]
        proxy_tp = [0 for _ in self.thresholds]
        proxy_p = [0 for _ in self.thresholds]
        for runtime in nodes:
            node = runtime.node
            spec = self.plan.adversaries.get(runtime.node_id)
            if spec is None or not isinstance(node, AdversaryNode) or node.observer is None:
                continue
            mine_a: list[float] = []
            mine_b: list[float] = []
            obs = node.observer
            seen = obs.observed
            for t, c in spec.evaluated:
                mine_a.append(accuracy(obs.predicted_ids(t), c, k))
                mine_b.append(upper_bound(seen, c, k))
            if self.thresholds:
                self._proxy(spec, obs, proxy_acc, proxy_tp, proxy_p)
            if mine_a:
                runtime.set_attack_gauges(float(np.mean(mine_a)), float(np.mean(mine_b)))
            accs.extend(mine_a)
            bounds.extend(mine_b)
        self.rounds.append(round_no)
        self.accuracies.append(accs)
        self.bounds.append(bounds)
        out: dict[str, Any] = {
            "aac": float(np.mean(accs)) if accs else 0.0,
            "upper_bound": float(np.mean(bounds)) if bounds else 0.0,
            "adversaries": len(accs),
        }
        if self.thresholds:
            self.proxy_acc.append(proxy_acc)
            self.proxy_tp.append(proxy_tp)
            self.proxy_p.append(proxy_p)
            out["mia_proxy_aac"] = [float(np.mean(a)) if a else 0.0 for a in proxy_acc]
        return out

    def _proxy(
        self,
        spec: AdversarySpec,
        obs: CIAObserver,
        acc: list[list[float]],
        tp: list[int],
        p: list[int],
    ) -> None:
        """MIA as a CIA proxy for each evaluated target of one adversary (000 Table VIII)."""
        assert self.plan is not None
        k = self.plan.k
        for t, c in spec.evaluated:
            users, rel = obs.relevance_table(t, latest=True)
            if not users:
                for j in range(len(self.thresholds)):
                    acc[j].append(0.0)
                continue
            target = obs.targets[t]
            member = self.plan.table.matrix[np.asarray(users)][:, target] > 0
            r = proxy_round(users, mpe_binary(rel), member, self.thresholds, k, obs.exclude[t])
            for j in range(len(self.thresholds)):
                acc[j].append(accuracy(r.predicted[j], c, k))
                tp[j] += r.true_positives[j]
                p[j] += r.positives[j]

    def summary(self, nodes: Iterable[Hosted]) -> dict[str, Any] | None:
        if self.plan is None:
            return None
        out: dict[str, Any] = summarize(
            self.rounds, self.accuracies, self.bounds, self.plan.k, self.plan.n_users
        ).as_dict()
        out["per_round"] = [list(a) for a in self.accuracies]
        out["per_round_bounds"] = [list(b) for b in self.bounds]
        out["k"] = self.plan.k
        if self.thresholds:
            out["mia_proxy"] = proxy_summary(
                self.thresholds, self.rounds, self.proxy_acc, self.proxy_tp, self.proxy_p
            )
        if self.plan.explicit:
            out["predictions"] = self.predictions(nodes)
        return out

    def predictions(self, nodes: Iterable[Hosted], limit: int = 10) -> list[dict[str, Any]]:
        """The predicted communities with scores, as the paper's Figure 1 lists them."""
        out = []
        ids = self.plan.adversaries if self.plan else {}
        for runtime in nodes:
            node = runtime.node
            spec = ids.get(runtime.node_id)
            if (
                isinstance(node, AdversaryNode)
                and node.observer is not None
                and spec is not None
                and spec.evaluated
            ):
                pred = node.observer.predict(0)
                out.append(
                    {
                        "adversary": runtime.node_id,
                        "community": pred.users,
                        "scores": [round(s, 6) for s in pred.scores],
                    }
                )
                if len(out) >= limit:
                    break
        return out


def _roc_row(
    members: list[np.ndarray], non_members: list[np.ndarray], sign: float
) -> tuple[dict[str, Any], Roc] | None:
    """The one-threshold figures of ``sign`` x the scores (higher = member), or None without a
    member or a non-member."""
    if not any(len(m) for m in members) or not any(len(n) for n in non_members):
        return None
    curve = roc(sign * np.concatenate(members), sign * np.concatenate(non_members))
    lows = [tpr_at(curve, f) for f in LOW_FPRS]
    row = {
        "auc": auc(curve),
        "balanced_accuracy": balanced_accuracy(curve),
        "tpr_at_fpr": {fpr_key(t.fpr): t.tpr for t in lows},
        "resolved": {fpr_key(t.fpr): t.resolved for t in lows},
        "members": curve.members,
        "non_members": curve.non_members,
    }
    return row, curve


def proxy_summary(
    thresholds: Sequence[float],
    rounds: Sequence[int],
    acc: Sequence[Sequence[Sequence[float]]],
    tp: Sequence[Sequence[int]],
    p: Sequence[Sequence[int]],
) -> dict[str, Any]:
    """Table VIII's rows: MIA precision and MIA-as-CIA Max AAC per threshold ρ.

    ``aac[r][j]`` is the mean accuracy at round r for ρ_j; precision is pooled over every
    adversary's predicted (user, item) pairs, at the round where that ρ's AAC peaks.
    """
    aac = [[float(np.mean(a)) if len(a) else 0.0 for a in per_rho] for per_rho in acc]
    best = [max(range(len(rounds)), key=lambda r: aac[r][j]) if rounds else 0 for j in range(len(thresholds))]
    return {
        "thresholds": list(thresholds),
        "max_aac": [aac[best[j]][j] if rounds else 0.0 for j in range(len(thresholds))],
        "round_of_max": [rounds[best[j]] if rounds else 0 for j in range(len(thresholds))],
        "precision": [
            tp[best[j]][j] / p[best[j]][j] if rounds and p[best[j]][j] else 0.0
            for j in range(len(thresholds))
        ],
        "aac": aac,
        "per_round": [[list(a) for a in per_rho] for per_rho in acc],
        "true_positives": [list(x) for x in tp],
        "positives": [list(x) for x in p],
    }
