"""Builds nodes from a RunConfig: the same construction for the simulator and for real processes."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from adversary.aia import public_users
from learning import gmf, ncf, prme
from learning.attributes import Attributes
from learning.dp import DPConfig
from learning.learner import BaseLearner, GMFLearner, TrainConfig
from learning.ncf_learner import NCFConfig, NCFLearner
from learning.pard import PardConfig, PublicSet, empty_public
from learning.pard_learner import PardLearner, PardTrain
from learning.prme_learner import PRMEConfig, PRMELearner
from learning.sgd_groups import SGDGroups
from learning.workbench import Workbench
from p2pcore.plugin import PluginError
from p2pnode import plugins
from p2pnode.attacks import attack
from p2pnode.attacks.attributes import attributes_for
from p2pnode.clock import Clock
from p2pnode.config import ConfigError, RunConfig
from p2pnode.nodes.node import NodeRuntime
from p2pnode.nodes.prepare import Prepared
from p2pnode.telemetry.metrics import Metrics
from p2pnode.transport.base import Transport
from p2pnode.trust.swapjudge import SWAP_OWNER_SHARE, OwnerOf, SwapJudge, one_member_bound
from p2pnode.wire.codec import PublicSpec
from p2pnode.wire.delta import DeltaDecoder, DeltaEncoder
from peer_sampling.base import PeerSampler, StaticView
from peer_sampling.cyclon import Cyclon, CyclonConfig
from peer_sampling.peerswap import PeerSwap, PeerSwapConfig
from peer_sampling.personalized import Personalized
from peer_sampling.swap_checks import Vet
from protocols.base_gl import BaseGossip
from protocols.fedavg import FedAvgClient, FedAvgServer, ParamStore
from protocols.gossip import GossipNode, GossipProtocol, TimingConfig
from protocols.merging import Merger, PluginMerger, ScoreWeightedMerge, UniformMerge
from protocols.messages import PublicMessage
from protocols.public import PublicBoard
from protocols.robust import ClipRadius, NormBand, SenderGate, SteadyPull
from protocols.samo import Samo


def node_rng(seed: int, node_id: int) -> random.Random:
    return random.Random(f"p2pnode:{seed}:{node_id}")


def make_sampler(prep: Prepared, node_id: int, address: str, seeds: Sequence[tuple[int, str]]) -> PeerSampler:
    cfg = prep.config
    if cfg.protocol == "fedavg":  # a client's only peer is the server
        return StaticView(node_id, [server_id(cfg)], [server_id(cfg)])
    if cfg.sampling == "static":
        return StaticView(node_id, prep.out_views[node_id], prep.in_views[node_id])
    if cfg.sampling in ("peerswap", "pers"):
        ps = PeerSwapConfig(rate_per_round=cfg.swap_rate)
        swap = PeerSwap(node_id, prep.out_views[node_id], prep.in_views[node_id], ps)
        return Personalized(swap, cfg.view_size, cfg.exploration) if cfg.sampling == "pers" else swap
    return Cyclon(node_id, address, seeds, CyclonConfig(capacity=cfg.view_size))


def set_owner(
    node: GossipNode, owner: Callable[[int], Hashable], member: Callable[[int], Hashable] | None = None
) -> None:
    """Tell a node who stands behind each node id, so that one member's ids share one member's
    limits: a PeerSwap sampler's lock share (``peer_sampling.peerswap.LockShare``; alone or under
    Pers-Gossip), the clip's places in its window (``protocols.robust.ClipRadius``) and the
    steady-pull memory (``protocols.robust.SteadyPull``). ``member`` (with identities: the member
    whose credential names an id, None for anyone else) weighs a Cyclon cache's relayed entries
    by who vouched for them (``peer_sampling.cyclon.Cyclon.owner``)."""
    inner = peerswap_of(node)
    if inner is not None:
        inner.owner = owner
    if member is not None and isinstance(node.sampler, Cyclon):
        node.sampler.owner = member
    clip = getattr(node.protocol, "clip", None)
    if isinstance(clip, ClipRadius):
        clip.owner = owner
    pull = getattr(node.protocol, "pull", None)
    if isinstance(pull, SteadyPull):
        pull.owner = owner


def peerswap_of(node: GossipNode) -> PeerSwap | None:
    """A node's PeerSwap sampler (alone or under Pers-Gossip), None for any other sampler."""
    inner = node.sampler.inner if isinstance(node.sampler, Personalized) else node.sampler
    return inner if isinstance(inner, PeerSwap) else None


def set_siblings(nodes: Mapping[int, GossipNode]) -> None:
    """Let the PeerSwap samplers of the nodes one process hosts check each swap against each other
    (``PeerSwap.siblings``, THREAT_MODEL.md): a node adopts handed views, or moves an edge to a hosted
    node, only when the hosted nodes the swap relabels took part in it."""
    samplers = {i: s for i, n in nodes.items() if (s := peerswap_of(n)) is not None}
    for sampler in samplers.values():
        sampler.siblings = samplers.get
        sampler.sibling_ids = samplers.keys


def swap_vet(owner_of: OwnerOf, share: float = SWAP_OWNER_SHARE) -> Vet:
    """The per-node bound alone (``p2pnode.trust.swapjudge.one_member_bound``) as a ``PeerSwap.vet``:
    one member (``owner_of``: the member whose credential names an id, None for the process's own
    nodes and ids no credential seen names) may hold at most ``share`` of the places a swap hands a
    node, at least one. An honest view is all one member's with probability s^2P for a member
    holding a share s of the ids."""

    def vet(far: int, out_view: Sequence[int], in_view: Sequence[int], *, settled: bool = False) -> bool:
        return None not in one_member_bound(owner_of, [*out_view, *in_view], share)

    return vet


def set_vet(nodes: Mapping[int, GossipNode], judge: SwapJudge) -> None:
    """Let ``judge`` judge the views a swap would hand each PeerSwap node of a process
    (``PeerSwap.vet``, THREAT_MODEL.md); their proposals then carry their own views, and a commit that
    moves an edge to another member's node waits for that node's word (``PeerSwap.ask_partners``)."""
    samplers = {i: s for i, n in nodes.items() if (s := peerswap_of(n)) is not None}
    judge.attach(samplers)
    for sampler in samplers.values():
        sampler.ask_partners = True


def server_id(config: RunConfig) -> int:
    """The FedAvg server's node id: one past the last user."""
    return config.nodes


def make_server(prep: Prepared, clock: Clock, transport: Transport, metrics: Metrics) -> NodeRuntime:
    """The FedAvg server node: the shared parameters of θ_0, every user as a client."""
    cfg = prep.config
    sid = server_id(cfg)
    store = ParamStore({k: prep.init[k] for k in shared_names(cfg, prep.init)})
    clients = list(range(cfg.nodes))
    sampler = StaticView(sid, clients, clients)
    protocol = FedAvgServer(sid, store, sampler, TimingConfig(), clients, cfg.fraction, cfg.merge)
    protocol.max_distance = cfg.max_model_distance
    runtime = NodeRuntime(
        attack.wrap(prep, sid, protocol, store),
        store,
        clock,
        transport,
        metrics,
        node_rng(cfg.seed, sid),
        DeltaEncoder(cfg.wire.delta, cfg.wire.float16),
        DeltaDecoder(cfg.wire.delta, cfg.wire.bases(prep.model_bytes)),
    )
    runtime.population = population(cfg)
    board = public_board(prep, sid, None)
    if board is not None:
        runtime.node.board = board
        runtime.public_spec = public_spec(prep)
    return runtime


def shared_names(config: RunConfig, init: Mapping[str, Any] | None = None) -> tuple[str, ...]:
    """The parameters that leave the node: all of them, or Share less's subset; under PARD z^ir
    and the item rows (004 Alg. 1 line 20: z^re and the head stay home); of a model plug-in its
    ``shared`` names, or all of its θ_0 ``init``."""
    if config.learning.adversarial:
        return (gmf.USER, gmf.ITEM)
    if config.model_plugin:
        from learning.plugin_model import plugin_shared

        if init is None:
            raise ValueError("a model plug-in's shared tensors are known from its θ_0")
        return plugin_shared(config.model_plugin, plugins.model(config.model_plugin), init)
    if config.model == "prme":
        return prme.SHARE_LESS_NAMES if config.learning.share_less else prme.PARAM_NAMES
    if config.model == "ncf":
        names = ncf.SHARE_LESS_NAMES if config.learning.share_less else ncf.PARAM_NAMES
    else:
        names = gmf.SHARE_LESS_NAMES if config.learning.share_less else gmf.PARAM_NAMES
    if config.learning.local_head:  # the embeddings alone leave the node (004's PFedRec)
        names = tuple(n for n in names if n in (gmf.USER, gmf.ITEM))
    return names


def dp_config(config: RunConfig) -> DPConfig:
    """Each node's DP-SGD settings. A target ε must last the run: the horizon is the local updates
    a node expects, one per round in gossip (002 Alg. 1 trains on each receipt, one per round on
    average; Alg. 2 on each wake-up) and rounds × fraction for a FedAvg client."""
    lc = config.learning
    if not lc.dp:
        return DPConfig()
    if lc.dp_epsilon:  # σ is calibrated: earlier runs' calibrations are on disk
        from p2pnode.data import sigma_store

        sigma_store.install()
    horizon = config.rounds
    if config.protocol == "fedavg":
        horizon = max(1, math.ceil(config.rounds * config.fraction))
    return DPConfig(
        noise_multiplier=lc.dp_noise or None,
        target_epsilon=lc.dp_epsilon or None,
        clip=lc.dp_clip,
        delta=lc.dp_delta,
        horizon_updates=horizon,
        backend=lc.dp_backend,
    )


def make_learner(prep: Prepared, node_id: int) -> BaseLearner:
    """The node's model and trainer (GMF, PRME or NCF) on its own data; with ``personal_user``
    its user row is sent but never merged (learning.learner.BaseLearner.personal); with ``--eval
    full`` it ranks its held-out item among every item it never touched."""
    learner = _learner(prep, node_id)
    if prep.config.learning.personal_user:
        learner.personal = frozenset({prme.USER_P if prep.config.model == "prme" else gmf.USER})
    if prep.config.learning.dp_past:  # selective DP-SGD (learning.learner.BaseLearner.dp_after)
        learner.dp_after = prep.config.learning.dp_past
    if prep.config.learning.upload_noise > 0:  # 004's APM baseline
        learner.upload_noise = (prep.config.learning.upload_noise, prep.config.seed * 1_000_003 + node_id)
    if prep.config.learning.evaluation == "full":
        learner.rank_all_items()
    return learner


def _learner(prep: Prepared, node_id: int) -> BaseLearner:
    cfg = prep.config
    lc = cfg.learning
    rng = np.random.default_rng([cfg.seed, node_id, 2])
    if lc.adversarial:
        return _pard_learner(prep, node_id, rng)
    if cfg.model_plugin:
        from learning.plugin_model import PluginLearner

        plugin = plugins.model(cfg.model_plugin)
        shared = shared_names(cfg, prep.init)
        return PluginLearner(
            cfg.model_plugin, plugin, prep.users[node_id], prep.init, shared, rng, lc.top_k, lc.negatives
        )
    tau = lc.share_less_tau if lc.share_less else 0.0
    dp = dp_config(cfg)
    if cfg.model == "prme":
        pc = PRMEConfig(
            lc.prme_dim, lc.prme_lr, lc.prme_reg, lc.batch_size, lc.local_epochs, lc.top_k, tau, dp,
            lc.prme_backend,
        )  # fmt: skip
        return PRMELearner(prep.users[node_id], prep.init, pc, rng, shared_names(cfg))
    if cfg.model == "ncf":
        nc = NCFConfig(
            lc.ncf_dim, lc.ncf_hidden, lc.lr, lc.batch_size, lc.negatives, lc.local_epochs, lc.top_k, tau,
            sgd_groups(prep),
        )  # fmt: skip
        learner = NCFLearner(prep.users[node_id], prep.init, nc, rng, shared_names(cfg))
        if lc.negative_pool == "untrained":
            learner.negatives_outside_training()
        return learner
    train = TrainConfig(
        lc.factors,
        lc.lr,
        lc.batch_size,
        lc.negatives,
        lc.local_epochs,
        lc.top_k,
        share_less_tau=tau,
        backend=lc.backend,
        dp=dp,
    )
    return GMFLearner(prep.users[node_id], prep.init, train, rng, shared_names(cfg))


def _pard_learner(prep: Prepared, node_id: int, rng: np.random.Generator) -> PardLearner:
    """A PARD node: its backbone, its own attributes (it knows them; the estimators train on
    them) and the settings of eq. 38."""
    cfg = prep.config
    lc = cfg.learning
    attrs = pard_attributes(prep)
    labels = np.array([a.labels[node_id] for a in attrs.items], dtype=np.int64)
    classes = tuple(len(a.classes) for a in attrs.items)
    warm = bool(lc.pard_warmup_lr or lc.pard_warmup_lr_eta)
    train = PardTrain(
        cfg.model, lc.lr, lc.batch_size, lc.negatives, lc.local_epochs, lc.top_k,
        sgd=sgd_groups(prep),
        warmup_lr=lc.pard_warmup_lr,
        warmup_sgd=sgd_groups(prep, lc.pard_warmup_lr, lc.pard_warmup_lr_eta) if warm else None,
    )  # fmt: skip
    pard = PardConfig(
        lc.pard_lambda_ir,
        lc.pard_lambda_re,
        ir_loss=lc.pard_ir_loss,
        public_sample=lc.pard_public_sample,
        every=lc.pard_estimator_every,
        warmup=lc.pard_warmup,
        one_row=lc.defence == "uc-fedrec",
        fused=lc.backend == "fused",
    )
    if pard.one_row:  # UC-FedRec: the adversarial term on the shared user row alone
        pard = replace(pard, lambda_re=0.0)
    seed = cfg.seed * 1_000_003 + node_id  # the node's estimators' initial weights
    shared = shared_names(cfg)
    learner = PardLearner(prep.users[node_id], prep.init, train, pard, labels, classes, rng, shared, seed)
    if cfg.model == "ncf" and lc.negative_pool == "untrained":
        learner.negatives_outside_training()
    return learner


def sgd_groups(prep: Prepared, lr: float = 0.0, eta: float = 0.0) -> SGDGroups | None:
    """NCF's SGD rates under ``--optimizer sgd`` (004's code, learning/sgd_groups.py) at ``lr``
    and ``eta`` (0: the run's), None under Adam."""
    cfg = prep.config
    lc = cfg.learning
    if cfg.model != "ncf" or lc.optimizer != "sgd":
        return None
    n_items = prep.users[0].n_items if prep.users else 1
    fraction = cfg.fraction if cfg.protocol == "fedavg" else 1.0
    return SGDGroups.of(lr or lc.lr, eta or lc.lr_eta, n_items, fraction)


def pard_attributes(prep: Prepared) -> Attributes:
    """The attributes PARD hides: every user's must be known (an unknown one has no class to
    train the estimators on)."""
    attrs = attributes_for(prep)
    for a in attrs.items:
        missing = int(np.count_nonzero(a.labels < 0))
        if missing:
            raise ConfigError(
                f"--defence pard: {missing} users have no {a.name}; PARD needs every user's attributes"
            )
    return attrs


def public_board(prep: Prepared, node_id: int, learner: object | None) -> PublicBoard | None:
    """A node's part in D_pub under PARD (protocols/public.py), None otherwise: the FedAvg
    server relays, its clients take rows from it alone, a gossip node takes first-hand rows."""
    cfg = prep.config
    if not cfg.learning.adversarial:
        return None
    drawn = public_users(cfg.nodes, cfg.learning.public_share, cfg.seed)
    publishers = frozenset(int(u) for u in np.flatnonzero(drawn))
    fedavg = cfg.protocol == "fedavg"
    if not isinstance(learner, PardLearner):  # the FedAvg server
        return PublicBoard(node_id, publishers, None, is_server=True)
    pard = learner

    def own_row() -> PublicMessage:
        rec = pard.record()
        return PublicMessage((node_id,), rec.features, rec.user_re, rec.labels)

    def on_rows(rows: PublicMessage) -> None:
        pard.public = (
            PublicSet(rows.features, rows.user_re, rows.labels)
            if rows.users
            else empty_public(pard.dim, len(pard.labels))
        )

    server = server_id(cfg) if fedavg else None
    return PublicBoard(node_id, publishers, own_row, server=server, on_rows=on_rows)


def public_spec(prep: Prepared) -> PublicSpec | None:
    """The rows of D_pub a node takes under PARD (None: none)."""
    cfg = prep.config
    if not cfg.learning.adversarial:
        return None
    attrs = pard_attributes(prep)
    dim = int(prep.init[gmf.USER].shape[1])
    count = int(public_users(cfg.nodes, cfg.learning.public_share, cfg.seed).sum())
    return PublicSpec(dim, tuple(len(a.classes) for a in attrs.items), count)


def workbench_for(prep: Prepared) -> Workbench | None:
    """The one copy of the item tables that a simulated FedAvg run's honest clients share
    (learning/workbench.py), or None where every node keeps its own: gossip, membership
    inference (it scores every item of every model), and models of no item table."""
    names = workbench_names(prep.config)
    return Workbench(prep.init, names) if names else None


def workbench_names(cfg: RunConfig) -> tuple[str, ...]:
    """The tables :func:`workbench_for` shares (none: every node keeps its own, as where nodes
    are checkpointed to come back after churn)."""
    if not cfg.sim.shared_tables or cfg.churn.active or cfg.model_plugin:
        return ()
    if cfg.protocol != "fedavg" or cfg.attack.mia or cfg.attack.mia_proxy:
        return ()
    tables = (prme.ITEM_P, prme.ITEM_S) if cfg.model == "prme" else (gmf.ITEM,)
    return tuple(k for k in tables if k in shared_names(cfg))


def population(cfg: RunConfig) -> int:
    """How many node ids the network has: its users, and the FedAvg server after them."""
    return cfg.nodes + (1 if cfg.protocol == "fedavg" else 0)


def make_merger(prep: Prepared, learner: BaseLearner) -> Merger:
    """How the node folds received models into its own: the user's ``--merge-plugin`` (made
    from the learner, docs/plugins.md), Pers-Gossip's score weighting, or the mean."""
    cfg = prep.config
    if cfg.merge_plugin:
        make = plugins.load("merge", cfg.merge_plugin)
        try:
            merger = make(learner)
        except Exception as exc:
            raise PluginError(f"merge plugin {cfg.merge_plugin}: making it raised {exc!r}") from exc
        if not callable(getattr(merger, "merge", None)):
            raise PluginError(f"merge plugin {cfg.merge_plugin}: its object has no merge() (docs/plugins.md)")
        return PluginMerger(cfg.merge_plugin, merger)
    if cfg.sampling == "pers":
        return ScoreWeightedMerge(learner)
    return UniformMerge(learner, cfg.merge)


def make_node(
    prep: Prepared,
    node_id: int,
    clock: Clock,
    transport: Transport,
    metrics: Metrics,
    address: str = "",
    seeds: Sequence[tuple[int, str]] = (),
    on_learned: Callable[[int, str, bool], None] | None = None,
    workbench: Workbench | None = None,
) -> NodeRuntime:
    """One node runtime, ready to ``start``. ``workbench``: the FedAvg clients' shared tables
    (:func:`workbench_for`; the simulator's), which an honest client trains in."""
    cfg = prep.config
    learner = make_learner(prep, node_id)
    sampler = make_sampler(prep, node_id, address or f"{node_id}@sim", seeds)
    timing = TimingConfig()
    merger = make_merger(prep, learner)
    protocol: GossipProtocol
    if cfg.protocol == "samo":
        protocol = Samo(node_id, learner, sampler, timing, cfg.samo_buffer, merger)
    elif cfg.protocol == "fedavg":
        protocol = FedAvgClient(node_id, learner, sampler, timing)
    else:
        protocol = BaseGossip(node_id, learner, sampler, timing, merger)
    protocol.max_distance = cfg.max_model_distance
    if cfg.clip_factor > 0:
        protocol.clip = ClipRadius(cfg.clip_factor)
    if cfg.norm_band > 0:
        protocol.band = NormBand(cfg.norm_band)
    if cfg.steady_pull > 0:
        protocol.pull = SteadyPull(cfg.steady_pull)
    if cfg.sender_gate and cfg.protocol != "fedavg":
        protocol.gate = sender_gate(protocol, timing)
    wire = cfg.wire
    node = attack.wrap(prep, node_id, protocol, learner)
    if cfg.knn.active:
        from p2pnode.nodes.knn import make_knn

        node.knn = make_knn(prep, node_id)
    runtime = NodeRuntime(
        node,
        learner,
        clock,
        transport,
        metrics,
        node_rng(cfg.seed, node_id),
        DeltaEncoder(wire.delta, wire.float16, history=learner.history, budget=wire.delta_budget_bytes),
        DeltaDecoder(wire.delta, wire.bases(prep.model_bytes)),
        on_learned,
    )
    runtime.population = population(cfg)
    board = public_board(prep, node_id, learner)
    if board is not None:
        node.board = board
        runtime.public_spec = public_spec(prep)
    if workbench is not None and type(node) is GossipNode:  # an adversary client reads its model
        learner.use_workbench(workbench)
    return runtime


def sender_gate(protocol: GossipProtocol, timing: TimingConfig) -> SenderGate:
    """The gate of a gossip node (protocols.robust): in-neighbours only where the sampler knows
    them, and from each sender at most about one model per the shortest wake-up period an honest
    node draws (the mean less four standard deviations)."""
    sampler = protocol.sampler
    interval = timing.mean_ticks - 4 * timing.std_ticks
    return SenderGate(sampler.expects if sampler.tracks_senders else None, interval)
