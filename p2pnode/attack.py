"""Who attacks whom in a run: adversary placement, targets, ground truth, per-round evaluation.

Settings (CIA paper §IV-A, evaluation as §V-C):

- FedAvg (Algorithm 1): the server is the adversary. With no explicit target it plays every
  target at once: V_target = each user's training items, that user excluded from C and Ĉ.
- Gossip, single adversaries (Algorithm 2): ``attackers = "all"`` makes every node an adversary
  with its own training items as V_target (itself excluded); or a list of node ids.
- Gossip, colluders: ``colluder_groups`` disjoint groups of ``colluders × N`` randomly placed
  nodes; each group is one adversary with one V_target (the first member's training items, or the
  explicit target), all members excluded. The group's accuracy is read from its first member's
  observer, which folds in everything the group saw. With ``multicast = "v"`` every member keeps
  its own v_u and multicasts it to all the others (Algorithm 2 line 14 as written); with
  ``multicast = "theta"`` the others are forwarders that send the received Θ_u to the first member
  only and keep no attack state: the read observer then folds exactly what a multicast to every
  member would have given it, at a fraction of the memory and traffic.

An explicit target (``target_items`` or ``target_genre``) replaces the per-adversary one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from adversary.cia import CIAObserver, kept_rows
from adversary.community import Index, UserItems, accuracy, summarize, true_community, upper_bound
from adversary.mia import mpe_binary, proxy_round, victim_accuracy
from adversary.models import attack_model
from adversary.node import AdversaryNode, ForwardingColluder
from learning.interactions import DataError
from learning.learner import BaseLearner
from learning.params import Array
from p2pnode.config import ConfigError
from p2pnode.datasets import ML100K, load_ml100k_genres
from protocols.gossip import GossipNode, GossipProtocol

if TYPE_CHECKING:  # build imports this module
    from p2pnode.build import Prepared
    from p2pnode.node import NodeRuntime


@dataclass
class AdversarySpec:
    """One adversarial node: its targets, who is excluded per target, its colluding partners,
    and which of its targets are scored (with their true community C)."""

    node_id: int
    targets: list[Index]
    exclude: list[set[int]]
    partners: tuple[int, ...] = ()  #: colluders whose multicasts it takes
    evaluated: list[tuple[int, Index]] = field(default_factory=list)
    send_to: tuple[int, ...] | None = None  #: where its observations go (None: every partner)
    forwarder: bool = False  #: forwards Θ_u to ``send_to`` and keeps no observer


@dataclass
class AttackPlan:
    adversaries: dict[int, AdversarySpec]
    k: int
    n_users: int
    explicit: bool
    table: UserItems  #: every user's training items (ground truth, MIA precision)


def plan_for(prep: Prepared) -> AttackPlan | None:
    """The run's attack plan (built once per Prepared: the ground truth costs a little)."""
    if "attack_plan" not in prep.cache:
        prep.cache["attack_plan"] = make_plan(prep)
    plan: AttackPlan | None = prep.cache["attack_plan"]
    return plan


def explicit_target(prep: Prepared) -> Index | None:
    """V_target from ``target_items`` (raw item ids) or ``target_genre`` (ML-100k), if given."""
    a = prep.config.attack
    if not (a.target_items or a.target_genre):
        return None
    data = prep.data
    if data is None:
        raise ConfigError("attack: explicit targets need the dataset's item ids")
    index = {raw: i for i, raw in enumerate(data.raw_item_ids)}
    if a.target_items:
        raw = [x.strip() for x in a.target_items.split(",") if x.strip()]
        missing = [x for x in raw if x not in index]
        if missing:
            raise ConfigError(f"target-items: unknown item ids {', '.join(missing[:5])}")
        return np.unique(np.array([index[x] for x in raw], dtype=np.int64))
    if prep.config.dataset != ML100K:
        raise ConfigError("target-genre: genres exist for ml-100k only")
    try:
        genres = load_ml100k_genres(prep.config.data_dir or None)
    except DataError as exc:
        raise ConfigError(str(exc)) from None
    chosen = [index[i] for i, g in genres.items() if a.target_genre in g and i in index]
    if not chosen:
        known = sorted({g for gs in genres.values() for g in gs})
        raise ConfigError(f"target-genre: no item of genre {a.target_genre!r}; genres: {', '.join(known)}")
    return np.unique(np.array(chosen, dtype=np.int64))


def make_plan(prep: Prepared) -> AttackPlan | None:
    cfg = prep.config
    a = cfg.attack
    if a.kind != "cia":
        return None
    n = cfg.nodes
    own = [u.train_items for u in prep.users]
    n_items = max(int(v.shape[0]) for v in prep.init.values())  # the item tables
    fixed = explicit_target(prep)

    table = UserItems(own, n_items)

    def truth(target: Index, exclude: set[int]) -> Index:
        return true_community(target, table, n_items, a.target_k, sorted(exclude))

    specs: dict[int, AdversarySpec] = {}
    if cfg.protocol == "fedavg":
        sid = n  # the server
        if fixed is not None:
            specs[sid] = AdversarySpec(sid, [fixed], [set()], evaluated=[(0, truth(fixed, set()))])
        else:
            excl = [{u} for u in range(n)]
            ev = [(u, truth(own[u], {u})) for u in range(n)]
            specs[sid] = AdversarySpec(sid, list(own), excl, evaluated=ev)
    elif a.colluders:
        size = max(2, round(a.colluders * n))
        perm = np.random.default_rng([cfg.seed, 0xC011]).permutation(n)
        for g in range(a.colluder_groups):
            group = [int(x) for x in perm[g * size : (g + 1) * size]]
            target = fixed if fixed is not None else own[group[0]]
            members = set(group)
            c = truth(target, members)
            forward = a.multicast == "theta"
            reader = group[0]
            for rank, m in enumerate(group):
                if rank == 0:
                    send = () if forward else None
                    specs[m] = AdversarySpec(m, [target], [members], tuple(group), [(0, c)], send)
                elif forward:
                    specs[m] = AdversarySpec(m, [target], [members], (), [], (reader,), forwarder=True)
                else:
                    specs[m] = AdversarySpec(m, [target], [members], tuple(group), [])
    else:
        if a.attackers == "all":
            ids = list(range(n))
        else:
            try:
                ids = sorted({int(x) for x in a.attackers.split(",") if x.strip()})
            except ValueError:
                raise ConfigError(f"attackers: {a.attackers!r} is not 'all' or a list of node ids") from None
            if not ids or min(ids) < 0 or max(ids) >= n:
                raise ConfigError(f"attackers: node ids must be in [0, {n})")
        for u in ids:
            target = fixed if fixed is not None else own[u]
            specs[u] = AdversarySpec(u, [target], [{u}], evaluated=[(0, truth(target, {u}))])
    return AttackPlan(specs, a.target_k, n, fixed is not None, table)


def wrap(prep: Prepared, node_id: int, protocol: GossipProtocol, learner: Any) -> GossipNode:
    """The pure node for ``node_id``: honest, or an AdversaryNode running the CIA."""
    plan = plan_for(prep)
    spec = plan.adversaries.get(node_id) if plan is not None else None
    if spec is None:
        return GossipNode(protocol)
    cfg = prep.config
    model = attack_model(cfg.model)
    if spec.forwarder:
        return ForwardingColluder(protocol, model, kept_rows(spec.targets), spec.send_to or ())
    fictive = cfg.learning.share_less or cfg.attack.fictive_user  # Share less models have no user
    observer = CIAObserver(
        model,
        spec.targets,
        k=cfg.attack.target_k,
        momentum=cfg.attack.momentum,
        exclude=spec.exclude,
        fictive_user=fictive,
        keep_last=bool(cfg.attack.mia_proxy),
        estimator=cfg.attack.momentum_estimator,
        initial=prep.init if cfg.attack.momentum_estimator == "init" else None,
    )

    def reference() -> Mapping[str, Array]:
        params: Mapping[str, Array] = learner.params if hasattr(learner, "params") else learner.snapshot()
        return params

    return AdversaryNode(
        protocol,
        observer,
        spec.partners,
        reference if fictive else None,
        cfg.attack.refresh_every,
        seed=cfg.seed,
        multicast=cfg.attack.multicast,
        send_to=spec.send_to,
    )


class AttackLab:
    """Evaluates the hosted adversaries each evaluation round and summarises the run (§V-C);
    with ``mia`` also the MPE membership inference on every hosted node (002 §2.5), and with
    ``mia_proxy`` MIA used by the CIA adversaries as a community detector (000 §VIII-C)."""

    def __init__(self, prep: Prepared) -> None:
        self.plan = plan_for(prep)
        self.rounds: list[int] = []
        self.accuracies: list[list[float]] = []
        self.bounds: list[list[float]] = []
        self.multicasts = 0
        self.mia = prep.config.attack.mia
        self.mia_rounds: list[int] = []
        self.mia_per_round: list[list[float]] = []
        self.thresholds = prep.config.attack.proxy_thresholds() if self.plan is not None else ()
        self.proxy_acc: list[list[list[float]]] = []  #: [round][ρ][adversary target]
        self.proxy_tp: list[list[int]] = []  #: [round][ρ]
        self.proxy_p: list[list[int]] = []

    @property
    def active(self) -> bool:
        return self.plan is not None

    def evaluate_mia(self, round_no: int, nodes: Iterable[NodeRuntime]) -> dict[str, float] | None:
        """The MPE attack's accuracy on every hosted node's current model (002 eq. 6, per-victim τ̃)."""
        if not self.mia:
            return None
        accs = []
        for runtime in nodes:
            learner = runtime.learner
            if not isinstance(learner, BaseLearner):
                continue  # the FedAvg server holds no user data
            probabilistic = attack_model(learner.model_name).probabilistic
            scores = learner.catalogue_scores()
            accs.append(victim_accuracy(scores, learner.data.train_items, learner.held_out(), probabilistic))
        self.mia_rounds.append(round_no)
        self.mia_per_round.append(accs)
        return {"accuracy": float(np.mean(accs)) if accs else 0.0, "nodes": len(accs)}

    def mia_summary(self) -> dict[str, Any] | None:
        if not self.mia:
            return None
        means = [float(np.mean(a)) if a else 0.0 for a in self.mia_per_round]
        return {
            "rounds": list(self.mia_rounds),
            "accuracy": means,
            "nodes": [len(a) for a in self.mia_per_round],
            "max": max(means, default=0.0),
            "final": means[-1] if means else 0.0,
        }

    def evaluate(self, round_no: int, nodes: Iterable[NodeRuntime]) -> dict[str, float] | None:
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
            if spec is None or not isinstance(node, AdversaryNode):
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

    def summary(self, nodes: Iterable[NodeRuntime]) -> dict[str, Any] | None:
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

    def predictions(self, nodes: Iterable[NodeRuntime], limit: int = 10) -> list[dict[str, Any]]:
        """The predicted communities with scores, as the paper's Figure 1 lists them."""
        out = []
        ids = self.plan.adversaries if self.plan else {}
        for runtime in nodes:
            node = runtime.node
            spec = ids.get(runtime.node_id)
            if isinstance(node, AdversaryNode) and spec is not None and spec.evaluated:
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
