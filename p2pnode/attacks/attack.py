"""The run's attack in the shell: the plan from the prepared run, the pure nodes, the scoring.

Placement and scoring are pure (``adversary.plan``, ``adversary.evaluation``); this module feeds
them the run's data: every user's training items, an explicit target resolved from raw item ids
or an ML-100k genre, and the hosted victims' scores for the membership inference.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from adversary.aia import AttributeObserver
from adversary.calibrated import population_likelihood, train_reference
from adversary.cia import CIAObserver, kept_rows
from adversary.evaluation import AttackLab, Reference, Victim
from adversary.mia_observer import MembershipWatch, SharedRows
from adversary.models import OwnHead, attack_model
from adversary.node import AdversaryNode, ForwardingColluder
from adversary.plan import (
    AttackPlan,
    PlanError,
    PlanSettings,
    attacker_ids,
    colluder_groups,
    make_plan,
)
from adversary.plugin import AttackContext, PluginObserver
from learning.interactions import DataError
from learning.learner import BaseLearner
from learning.params import Array, Index
from p2pcore.plugin import PluginError
from p2pnode import plugins
from p2pnode.attacks.attributes import aia_lab_for
from p2pnode.config import ConfigError
from p2pnode.data.datasets import ML100K, load_ml100k_genres
from p2pnode.nodes.node import NodeRuntime
from p2pnode.nodes.prepare import Prepared
from protocols.gossip import GossipNode, GossipProtocol


def plan_for(prep: Prepared) -> AttackPlan | None:
    """The run's attack plan (built once per Prepared: the ground truth costs a little)."""
    if "attack_plan" not in prep.cache:
        prep.cache["attack_plan"] = _plan(prep)
    plan: AttackPlan | None = prep.cache["attack_plan"]
    return plan


def _plan(prep: Prepared) -> AttackPlan | None:
    cfg = prep.config
    a = cfg.attack
    if not a.cia:
        return None
    settings = PlanSettings(
        nodes=cfg.nodes,
        seed=cfg.seed,
        fedavg=cfg.protocol == "fedavg",
        target_k=a.target_k,
        attackers=_node_ids(prep, a.attackers),
        colluders=a.colluders,
        colluder_groups=a.colluder_groups,
        multicast=a.multicast,
    )
    own = [u.train_items for u in prep.users]
    n_items = max(int(v.shape[0]) for v in prep.init.values())  # the item tables
    try:
        return make_plan(settings, own, n_items, explicit_target(prep))
    except PlanError as exc:
        raise ConfigError(str(exc)) from None


def _node_ids(prep: Prepared, attackers: str) -> str:
    """``--attackers`` in node ids. A dataset file names its users by its own ids (``u17``), and
    so does ``--attackers`` with it; ML-100k and synthetic data take node ids (0..N-1)."""
    cfg = prep.config
    if attackers == "all" or prep.data is None or cfg.dataset in ("ml-100k", "synthetic"):
        return attackers
    index = {raw: node for node, raw in enumerate(prep.data.raw_user_ids)}
    wanted = [x.strip() for x in attackers.split(",") if x.strip()]
    unknown = [x for x in wanted if x not in index]
    if unknown:
        raise ConfigError(
            f"--attackers {', '.join(unknown[:5])}: no such user in {cfg.dataset} among the "
            f"{len(index)} users kept (a dataset file's --attackers are its own user ids)"
        )
    return ",".join(str(index[x]) for x in wanted)


def lab_for(prep: Prepared) -> AttackLab:
    """The scorer of this run's adversaries (and of MIA, when asked)."""
    a = prep.config.attack
    lc = prep.config.learning
    delta = lc.dp_delta if lc.dp else 0.0  # audited at the δ the accountant's ε is for
    reference = reference_for(prep) if a.mia and a.mia_reference else None
    return AttackLab(
        plan_for(prep), mia=a.mia, thresholds=a.proxy_thresholds(), audit_delta=delta, reference=reference
    )


def reference_for(prep: Prepared) -> Reference:
    """The calibrated attack's reference (adversary/calibrated.py): a GMF the attacker trains on
    the users whose data it has, ``--mia-reference`` of them drawn by the run's seed."""
    cfg = prep.config
    n = len(prep.users)
    rng = np.random.default_rng([cfg.seed, 0x2EF])
    chosen = np.sort(rng.choice(n, size=max(1, round(cfg.attack.mia_reference * n)), replace=False))
    items = [prep.users[int(i)].train_items for i in chosen]
    U, V = train_reference(items, prep.users[0].n_items, rng, factors=cfg.learning.factors)
    users = frozenset(prep.users[int(i)].user for i in chosen)
    pool = np.concatenate(items).astype(np.int64)
    return Reference(population_likelihood(U, V), users, pool, seed=cfg.seed)


def victims(nodes: Iterable[NodeRuntime]) -> Iterator[Victim]:
    """The hosted users' models as the MPE attack reads them (the FedAvg server holds no user)."""
    for runtime in nodes:
        learner = runtime.learner
        if isinstance(learner, BaseLearner):
            scores = learner.catalogue_scores()
            d = learner.data
            yield Victim(
                learner.model_name,
                scores,
                d.train_items,
                learner.held_out(),
                d.canary_items,
                d.canary_in,
                user=d.user,
                node=int(runtime.node_id),
            )


def observer_gauges(row: Mapping[str, Any]) -> dict[str, Any]:
    """A placed observer's MIA figures (``AttackLab.evaluate_mia``'s ``observers``) in the shape
    ``NodeRuntime.publish_mia`` takes: its oracle accuracy, the pooled figures, the audit's ε."""
    out: dict[str, Any] = {"accuracy": row["accuracy"], "observed": row["observed"]}
    if "auc" in row:
        out["pooled"] = row
    if "audit" in row:
        out["audit_epsilon"] = row["audit"]["epsilon"]
    return out


def watches(nodes: Iterable[NodeRuntime]) -> Iterator[MembershipWatch]:
    """The hosted placed observers' MPE watches (:func:`mia_names`)."""
    for runtime in nodes:
        watch = getattr(runtime.node, "mia", None)
        if isinstance(watch, MembershipWatch):
            yield watch


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
    if data.item_categories is not None:
        return _category_target(a.target_genre, data.item_categories)
    if prep.config.dataset != ML100K:
        raise ConfigError("target-genre: this dataset has no genres or venue categories")
    try:
        genres = load_ml100k_genres(prep.config.data_dir or None)
    except DataError as exc:
        raise ConfigError(str(exc)) from None
    chosen = [index[i] for i, g in genres.items() if a.target_genre in g and i in index]
    if not chosen:
        known = sorted({g for gs in genres.values() for g in gs})
        raise ConfigError(f"target-genre: no item of genre {a.target_genre!r}; genres: {', '.join(known)}")
    return np.unique(np.array(chosen, dtype=np.int64))


#: ``--target-genre "Health and Medicine"`` on a check-in file: the venue categories whose name
#: holds one of these words. The CIA paper's Figure 1 targets such venues through a categorisation
#: it cites but does not list; this is p2pnode's reading of it for Foursquare's category names.
CATEGORY_GROUPS: dict[str, tuple[str, ...]] = {
    "health and medicine": (
        "medical",
        "hospital",
        "doctor",
        "dentist",
        "emergency room",
        "pharmacy",
        "clinic",
        "physician",
        "health",
        "rehab",
        "chiropractor",
        "optical",
        "eye doctor",
    ),
}


def _category_target(wanted: str, categories: Sequence[str]) -> Index:
    """The items whose category is one of ``wanted`` (names separated by commas, any case), or in
    a group of :data:`CATEGORY_GROUPS`."""
    lower = [c.lower() for c in categories]
    known = set(lower)
    chosen: set[int] = set()
    for name in (w.strip().lower() for w in wanted.split(",") if w.strip()):
        words = CATEGORY_GROUPS.get(name)
        if words is not None:
            hits = {i for i, c in enumerate(lower) if any(w in c for w in words)}
        elif name in known:
            hits = {i for i, c in enumerate(lower) if c == name}
        else:
            names = sorted(set(categories), key=lambda c: -lower.count(c.lower()))
            raise ConfigError(
                f"target-genre: no venue category {name!r} in this file; groups: "
                f"{', '.join(CATEGORY_GROUPS)}; its {len(names)} categories, most visited first: "
                f"{', '.join(names[:15])}{', ...' if len(names) > 15 else ''}"
            )
        if not hits:
            raise ConfigError(f"target-genre: no venue of this file falls in the group {name!r}")
        chosen |= hits
    return np.array(sorted(chosen), dtype=np.int64)


def wrap(prep: Prepared, node_id: int, protocol: GossipProtocol, learner: Any) -> GossipNode:
    """The pure node for ``node_id``: honest, or an AdversaryNode running the CIA, attribute
    inference (:func:`aia_roles`), membership inference on what it receives (:func:`mia_names`),
    or several; and on the nodes :func:`plugin_nodes` names, the
    user's own attack (``--attack-plugin``, adversary/plugin.py)."""
    node = _wrap(prep, node_id, protocol, learner)
    cfg = prep.config
    if cfg.attack.plugin and node_id in plugin_nodes(prep):
        name = cfg.attack.plugin
        make = plugins.load("attack", name)
        context = AttackContext(
            node_id=node_id,
            nodes=cfg.nodes,
            n_items=max(int(v.shape[0]) for v in prep.init.values()),
            model=cfg.model,
            protocol=cfg.protocol,
            seed=cfg.seed,
            truth=lambda u: prep.users[u].train_items,
        )
        try:
            made = make(context)
        except Exception as exc:
            raise PluginError(f"attack plugin {name}: making it raised {exc!r}") from exc
        node.attack_plugin = PluginObserver(name, made)
    return node


def plugin_nodes(prep: Prepared) -> frozenset[int]:
    """The nodes that run ``--attack-plugin``: the FedAvg server, or the ``--attackers`` (all:
    every node)."""
    cfg = prep.config
    if "plugin_nodes" not in prep.cache:
        if cfg.protocol == "fedavg":
            ids: frozenset[int] = frozenset({cfg.nodes})  # p2pnode.runners.build.server_id
        else:
            try:
                ids = frozenset(attacker_ids(_node_ids(prep, cfg.attack.attackers), cfg.nodes))
            except PlanError as exc:
                raise ConfigError(str(exc)) from None
        prep.cache["plugin_nodes"] = ids
    out: frozenset[int] = prep.cache["plugin_nodes"]
    return out


def plugin_results(nodes: Iterable[NodeRuntime]) -> dict[str, Any]:
    """Every hosted attack plug-in's ``result()``, by node id (as a string: JSON's keys)."""
    return {
        str(runtime.node_id): runtime.node.attack_plugin.result()
        for runtime in nodes
        if runtime.node.attack_plugin is not None
    }


def _wrap(prep: Prepared, node_id: int, protocol: GossipProtocol, learner: Any) -> GossipNode:
    plan = plan_for(prep)
    spec = plan.adversaries.get(node_id) if plan is not None else None
    cfg = prep.config

    def reference() -> Mapping[str, Array]:
        params: Mapping[str, Array] = learner.params if hasattr(learner, "params") else learner.snapshot()
        return params

    role = aia_roles(prep).get(node_id)
    aia = None
    if role is not None:
        lab = aia_lab_for(prep)
        assert lab is not None
        aia = AttributeObserver(
            lab.feature_of,
            momentum=cfg.attack.aia_momentum,
            reference=reference if lab.items == "changed" else None,
            keep=role.keep,
            name=role.name,
        )
    aia_partners = role.partners if role is not None else ()
    aia_send_to = role.send_to if role is not None else ()
    mia_name = mia_names(prep).get(node_id)
    mia = None
    if mia_name is not None:
        mia = MembershipWatch(attack_model(cfg.model), mia_name, rank=node_id)
        if list(mia_names(prep).values()).count(mia_name) > 1:  # a colluding group: one store
            pools: dict[str, SharedRows] = prep.cache.setdefault("mia_pools", {})
            mia.pool = pools.setdefault(mia_name, SharedRows())
    if spec is None:
        if aia is None and mia is None:
            return GossipNode(protocol)
        return AdversaryNode(
            protocol, None, aia=aia, aia_partners=aia_partners, aia_send_to=aia_send_to, mia=mia
        )
    model = attack_model(cfg.model)
    model.fused = cfg.attack.fictive_backend == "fused"  # read by GMF's fictive user alone
    if cfg.learning.adversarial or cfg.learning.local_head:  # the head stays home: score with one's own
        model = OwnHead(model)
    if spec.forwarder:
        return ForwardingColluder(
            protocol, model, kept_rows(spec.targets), spec.send_to or (), aia=aia, mia=mia
        )
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
    return AdversaryNode(
        protocol,
        observer,
        spec.partners,
        reference if observer.needs_reference else None,
        cfg.attack.refresh_every,
        seed=cfg.seed,
        multicast=cfg.attack.multicast,
        send_to=spec.send_to,
        aia=aia,
        aia_partners=aia_partners,
        aia_send_to=aia_send_to,
        mia=mia,
    )


@dataclass(frozen=True)
class AiaRole:
    """A node's part in attribute inference (paper 004 §II-B, placed as the CIA's adversaries)."""

    keep: bool  #: it keeps features and is scored (an observer, or a colluding group's read member)
    name: str = ""  #: the observer's name in results ("server", "node 17", "colluders 0")
    partners: tuple[int, ...] = ()  #: a read member: the colluders whose features it pools
    send_to: tuple[int, ...] = ()  #: a colluder: the read member its features go to


def aia_roles(prep: Prepared) -> dict[int, AiaRole]:
    """Who infers attributes from what they receive (``--attack aia``): the placed observers of
    :func:`observer_roles`. The omniscient observer, which every ``--attack aia`` run has, is
    their upper bound."""
    return observer_roles(prep) if prep.config.attack.aia else {}


def mia_names(prep: Prepared) -> dict[int, str]:
    """Who runs the MPE attack on what they receive (``--mia``), by the name their figures go
    under: the placed observers of :func:`observer_roles`; every member of a colluding group
    under the group's name (the scorer pools them). Beside the omniscient observer."""
    if not prep.config.attack.mia:
        return {}
    roles = observer_roles(prep)
    names = {u: r.name for u, r in roles.items() if r.keep}
    for u, r in roles.items():
        if not r.keep:
            names[u] = names[r.send_to[0]]
    return names


def observer_roles(prep: Prepared) -> dict[int, AiaRole]:
    """The placed observers of the attacks that read what a node receives: the FedAvg server (004's
    adversary); in gossip each ``--attackers`` node alone, or with ``--colluders`` each group,
    whose members send what they receive to the group's first member (the CIA's read member),
    which pools it (named ``colluders G`` by group: the read member changes with the seed).
    With ``--attackers all`` (the default) and no colluders: nobody."""
    cfg = prep.config
    if "observer_roles" not in prep.cache:
        a = cfg.attack
        roles: dict[int, AiaRole] = {}
        if cfg.protocol == "fedavg":
            roles[cfg.nodes] = AiaRole(True, "server")  # p2pnode.runners.build.server_id
        elif a.colluders:
            groups = colluder_groups(cfg.nodes, cfg.seed, a.colluders, a.colluder_groups)
            for g, (reader, *others) in enumerate(groups):
                roles[reader] = AiaRole(True, f"colluders {g}", partners=tuple(others))
                roles.update({m: AiaRole(False, send_to=(reader,)) for m in others})
        elif a.attackers != "all":
            try:
                ids = attacker_ids(_node_ids(prep, a.attackers), cfg.nodes)
            except PlanError as exc:
                raise ConfigError(str(exc)) from None
            roles = {u: AiaRole(True, f"node {u}") for u in ids}
        prep.cache["observer_roles"] = roles
    out: dict[int, AiaRole] = prep.cache["observer_roles"]
    return out
