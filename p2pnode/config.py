"""The one typed, validated configuration tree, its presets, and loading from TOML.

The CLI only maps flags onto this tree (docs/design.md, rule 9). Every field is documented here.
"""

from __future__ import annotations

import dataclasses
import difflib
import itertools
import json
import math
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adversary.aia import ITEMS, SELECTIONS, USER_PARTS
from adversary.momentum import ESTIMATORS
from learning.params import MERGES
from p2pcore.churn import CHURN_MODELS, ChurnModel
from p2pnode.data.tables import NAMED_BOXES, TableOptions, parse_bbox, parse_columns

PROTOCOLS = ("base", "samo", "fedavg")
FLOAT32_MAX = 3.4028234663852886e38
ATTACKS = ("cia", "aia", "cia,aia")
SAMPLINGS = ("static", "peerswap", "cyclon", "pers")
MODELS = ("gmf", "prme", "ncf")


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the field and what is allowed."""


Check = tuple[Callable[[Any], bool], str]  #: a test of one value, and what it requires when it fails


@dataclass(frozen=True)
class Flag:
    """How a field appears on the command line. Declared once, next to the field: the CLI is
    generated from it (p2pnode/cli.py) and ``RunConfig.validate`` applies its ``check``."""

    help: str
    name: str = ""  #: the flag (default ``--field-name``)
    group: str = "experiment"  #: the help section it is listed under
    choices: tuple[str, ...] = ()
    metavar: str | None = None
    switch: bool | None = None  #: a bare flag that sets the field to this value (``--share-less``)
    const: str | None = None  #: the value of the flag given without one (``--mia-proxy``)
    #: the commands that have it: "real" (run, launch), "sim" (simulate), "network" (simulate and
    #: launch, which run a whole network); default: all
    only: str = ""
    check: Check | None = None
    #: what the flag is inert without, and the flag that brings it: giving it without is an error
    needs: Check | None = None
    #: a process setting's commands (p2pnode/runners/settings.py: run, launch, simulate, experiment); a
    #: run's fields leave it empty and say where they are offered with ``only``
    commands: tuple[str, ...] = ()

    def offered(self, real: bool, network: bool) -> bool:
        """Whether a command has this flag (``real``: it runs real processes; ``network``: it
        runs the whole network, as simulate and launch do)."""
        if self.only == "network":
            return network or not real
        return self.only != ("sim" if real else "real")

    def flag_name(self, field_name: str) -> str:
        return self.name or "--" + field_name.replace("_", "-")


def opt(default: Any, help: str, **flag: Any) -> Any:
    """A configuration field with its command-line flag."""
    return field(default=default, metadata={"flag": Flag(help, **flag)})


def min_check(n: float) -> Check:
    """A check that a value is at least ``n``."""
    return (lambda v: v >= n, f"must be >= {n:g}")


_min = min_check


_POSITIVE: Check = (lambda v: v > 0, "must be > 0")
_CIA: Check = (lambda c: c.attack.cia, "--attack cia")
_AIA: Check = (lambda c: c.attack.aia, "--attack aia")
_ATTACK: Check = (
    lambda c: c.attack.cia or c.attack.aia or c.attack.mia or bool(c.attack.plugin),
    "--attack cia or aia, --mia, or --attack-plugin",
)
_COLLUDERS: Check = (
    lambda c: (c.attack.cia or c.attack.aia or c.attack.mia) and c.attack.colluders > 0,
    "--attack cia or aia, or --mia, with --colluders F",
)
_DP: Check = (lambda c: c.learning.dp, "--dp-noise or --dp-epsilon")
_SHARE_LESS: Check = (lambda c: c.learning.share_less, "--share-less")
_GMF: Check = (lambda c: c.model == "gmf" and not c.model_plugin, "--model gmf")
_PRME: Check = (lambda c: c.model == "prme", "--model prme")
_NCF: Check = (lambda c: c.model == "ncf", "--model ncf")
_PARD: Check = (lambda c: c.learning.adversarial, "--defence pard or uc-fedrec")
_GMF_OR_PARD: Check = (
    lambda c: c.model == "gmf" or c.learning.adversarial,
    "--model gmf or --defence pard or uc-fedrec",
)
#: the learning settings of PARD alone: off, a run's key is what it was before PARD existed
PARD_ONLY = (
    "defence",
    "pard_lambda_ir",
    "pard_lambda_re",
    "pard_ir_loss",
    "pard_combine",
    "pard_public_sample",
    "pard_estimator_every",
    "pard_warmup",
    "pard_warmup_lr",
    "pard_warmup_lr_eta",
    "public_share",
)
_FEDAVG: Check = (lambda c: c.protocol == "fedavg", "--protocol fedavg")
_SGD: Check = (lambda c: c.model == "ncf" and c.learning.optimizer == "sgd", "--model ncf --optimizer sgd")
_SAMO: Check = (lambda c: c.protocol == "samo", "--protocol samo")
_PEERSWAP: Check = (lambda c: c.sampling == "peerswap" and c.protocol != "fedavg", "--sampling peerswap")
_PERS: Check = (lambda c: c.sampling == "pers", "--sampling pers")
#: FedAvg's clients have the server as their one peer: a sampler or a view size changes nothing
_GOSSIP: Check = (
    lambda c: c.protocol != "fedavg",
    "a gossip protocol (FedAvg clients talk to the server)",
)
_SHARE: Check = (lambda v: 0 <= v <= 1, "must be in [0, 1]")
#: the models are float32: a rate past its largest value is inf in the first step
_LR: Check = (
    lambda v: 0 < v <= FLOAT32_MAX,
    f"must be > 0 and at most {FLOAT32_MAX:.3g} (the models' float32)",
)
#: a flag whose value 0 means "off" given as 0 changes nothing: say so rather than run without it
OFF_AT_ZERO = ("dp_noise", "dp_epsilon")
_SAMPLED: Check = (lambda c: c.learning.evaluation == "sampled", "--eval sampled")
_FILE: Check = (lambda c: c.dataset not in ("ml-100k", "synthetic"), "--dataset FILE")


def parse_cuts(text: str) -> tuple[float, ...]:
    """``"25,45"`` as (25.0, 45.0); ValueError unless ascending numbers."""
    cuts = tuple(float(part) for part in text.split(","))
    if any(b <= a for a, b in itertools.pairwise(cuts)):
        raise ValueError(f"cuts must be ascending, got {text!r}")
    return cuts


def _parses(parse: Callable[[str], Any]) -> Callable[[str], bool]:
    """A check that ``parse`` accepts the value (the empty string: not given)."""

    def ok(value: str) -> bool:
        if not value:
            return True
        try:
            parse(value)
        except ValueError:
            return False
        return True

    return ok


@dataclass(frozen=True)
class LearningConfig:
    """Local model and training (GMF defaults from NCF; docs/design.md, Learning)."""

    factors: int = opt(32, "GMF embedding size", group="learning", check=_min(1), needs=_GMF)
    lr: float = opt(0.001, "Adam learning rate", group="learning", check=_LR)
    batch_size: int = opt(256, "minibatch size of a local update", group="learning", check=_min(1))
    negatives: int = opt(4, "sampled negatives per positive", group="learning", check=_min(1))
    local_epochs: int = opt(1, "epochs over the local data per local update", group="learning", check=_min(1))
    top_k: int = opt(20, "K of HR@K (F1@K for PRME), NDCG@K and Recall@K", group="learning", check=_min(1))
    backend: str = opt(
        "fused",
        "GMF's training code and PARD's estimators: fused (compiled, fastest) or numpy (one numpy "
        "call per operation, as runs before the fused kernels; they round differently in the last bits)",
        group="learning",
        choices=("fused", "numpy"),
        needs=_GMF_OR_PARD,
    )
    test_negatives: int = opt(
        100,
        "items a user never touched that the held-out one is ranked among (NCF); fewer for small catalogues",
        group="learning",
        check=_min(1),
        needs=_SAMPLED,
    )
    evaluation: str = opt(
        "sampled",
        "what the held-out item is ranked among for HR@K, NDCG@K, Recall@K and MRR: its sampled "
        "test negatives (the papers' protocol) or every item the user never touched (full)",
        name="--eval",
        group="learning",
        choices=("sampled", "full"),
    )
    eval_model: str = opt(
        "own",
        "which model a FedAvg client is evaluated on: own (its model after its update) or global "
        "(004's code: the server's average of the round's updates, beside the client's own user "
        "rows and, when it stays home, head; simulated only)",
        group="learning",
        choices=("own", "global"),
        only="sim",
        needs=_FEDAVG,
    )
    share_less: bool = opt(
        False, "keep user embeddings private (CIA paper §III-D)", group="learning", switch=True
    )
    personal_user: bool = opt(
        False,
        "the user row is shared (sent, uploaded: an observer reads it) but every node keeps its own: "
        "merges and the FedAvg global model leave it alone (paper 004's FedNCF)",
        group="learning",
        switch=True,
    )
    local_head: bool = opt(
        False,
        "the model's head (GMF's h and b, NCF's MLP) stays on the node; with --share-less only the "
        "item rows leave it (paper 004's PFedRec baseline)",
        group="learning",
        switch=True,
    )
    defence: str = opt(
        "none",
        "a defence against attribute inference: pard (paper 004: two user rows, the shared one "
        "trained to hide the attributes from estimators fitted on the public users' rows, the "
        "other kept home; the head stays home too) or uc-fedrec (004's UC-FedRec baseline: one "
        "user row, shared, and the adversarial term on it alone)",
        group="learning",
        choices=("none", "pard", "uc-fedrec"),
    )
    pard_lambda_ir: float = opt(
        0.5,
        "PARD: λ_ir, weight of hiding the attributes on the shared side (eq. 38)",
        group="learning",
        check=_min(0),
        needs=_PARD,
    )
    pard_lambda_re: float = opt(
        0.3,
        "PARD: λ_re, weight of keeping them on the home row z^re (eq. 38)",
        group="learning",
        check=_min(0),
        needs=_PARD,
    )
    pard_ir_loss: str = opt(
        "ce",
        "PARD: L_ir's form, ce (eq. 16: the estimators' cross-entropy, maximised) or uniform (their "
        "output pushed toward the uniform distribution)",
        group="learning",
        choices=("ce", "uniform"),
        needs=_PARD,
    )
    pard_combine: str = opt(
        "concat",
        "PARD: how the head reads the two user rows, concat (eq. 35: side by side) or sum (004's "
        "code: z^ir + z^re, where the shared row takes the opposite of what z^re is pulled to)",
        group="learning",
        choices=("concat", "sum"),
        needs=_PARD,
    )
    pard_public_sample: float = opt(
        0.08,
        "PARD: the share of the public rows each estimator step reads, drawn afresh (004's code: 0.08)",
        group="learning",
        check=(lambda v: 0 < v <= 1, "must be in (0, 1]"),
        needs=_PARD,
    )
    pard_estimator_every: int = opt(
        1,
        "PARD: fit the estimators at every k-th local update (Algorithm 1: 1; 004's code: 2)",
        group="learning",
        check=_min(1),
        needs=_PARD,
    )
    pard_warmup: int = opt(
        0,
        "PARD: local updates on the recommendation loss alone before the privacy terms start (004's "
        "code pre-trains FedNCF, then fine-tunes with them)",
        group="learning",
        check=_min(0),
        needs=_PARD,
    )
    pard_warmup_lr: float = opt(
        0.0,
        "PARD: the learning rate of the warm-up updates (0: --lr; 004's code pre-trains FedNCF at "
        "0.5 and fine-tunes at 0.1)",
        group="learning",
        check=_min(0),
        needs=_PARD,
    )
    pard_warmup_lr_eta: float = opt(
        0.0,
        "PARD with --optimizer sgd: η of the warm-up updates (0: --lr-eta; 004's code: 80, then 1)",
        group="learning",
        check=_min(0),
        needs=_PARD,
    )
    public_share: float = opt(
        0.2,
        "PARD: η, the share of users who publish their rows and attributes (drawn from the seed; "
        "with --attack aia they are the attack's public users)",
        group="learning",
        check=(lambda v: 0 < v < 1, "must be in (0, 1)"),
        needs=_PARD,
    )
    upload_noise: float = opt(
        0.0,
        "Laplace noise of this scale on every value a node sends (0: none; 004's APM baseline: "
        "0.017 or 0.033)",
        group="learning",
        check=_min(0),
    )
    share_less_tau: float = opt(
        0.1,
        "Share less: τ of the item regulariser of eq. 2",
        group="learning",
        check=_min(0),
        needs=_SHARE_LESS,
    )
    prme_dim: int = opt(
        60, "PRME embedding size (Feng et al. 2015)", group="learning", check=_min(1), needs=_PRME
    )
    prme_lr: float = opt(0.005, "PRME SGD learning rate", group="learning", check=_POSITIVE, needs=_PRME)
    prme_backend: str = opt(
        "numpy",
        "PRME's training code: numpy (one numpy call per operation) or fused (an epoch per compiled "
        "call; it rounds differently in the last bits, so runs' numbers move within float "
        "precision; DP-SGD keeps numpy)",
        group="learning",
        choices=("numpy", "fused"),
        needs=_PRME,
    )
    ncf_dim: int = opt(64, "NCF embedding size (paper 004: 64)", group="learning", check=_min(1), needs=_NCF)
    ncf_hidden: int = opt(
        32, "NCF hidden layer width (paper 004: 32)", group="learning", check=_min(1), needs=_NCF
    )
    ncf_init_std: float = opt(
        0.01,
        "standard deviation of NCF's initial user and item rows (004's code: torch's nn.Embedding, 1)",
        group="learning",
        check=_POSITIVE,
        needs=_NCF,
    )
    negative_pool: str = opt(
        "untouched",
        "NCF's training negatives: drawn from the items the user never touched (untouched), or from "
        "every item outside its training split (untrained: 004's code, so a user's held-out test "
        "and validation items are now and then trained on as negatives)",
        group="learning",
        choices=("untouched", "untrained"),
        needs=_NCF,
    )
    optimizer: str = opt(
        "adam",
        "NCF's local optimizer: adam (--lr) or sgd (paper 004's code: plain SGD, the head at --lr, "
        "the user rows at --lr / --fraction x --lr-eta, the item rows at --lr x items x --lr-eta; "
        "FedAvg only: the item rate assumes the server's mean over the clients)",
        group="learning",
        choices=("adam", "sgd"),
        needs=_NCF,
    )
    lr_eta: float = opt(
        80.0,
        "--optimizer sgd: η, the factor of the user and item rows' rates (004's code: 80; 1 when "
        "it fine-tunes PARD on ML-100k)",
        group="learning",
        check=_POSITIVE,
        needs=_SGD,
    )
    prme_reg: float = 0.03  #: PRME L2 regularisation
    dp_noise: float = opt(
        0.0, "noise multiplier σ (0: no DP unless --dp-epsilon)", group="dp", metavar="SIGMA", check=_min(0)
    )
    dp_epsilon: float = opt(
        0.0, "target ε per node over the run (σ calibrated)", group="dp", metavar="EPS", check=_min(0)
    )
    dp_clip: float = opt(
        2.0,
        "per-example clipping bound (CIA paper Fig. 5)",
        group="dp",
        metavar="C",
        check=_POSITIVE,
        needs=_DP,
    )
    dp_delta: float = opt(
        1e-6, "δ (CIA paper Fig. 5)", group="dp", check=(lambda v: 0 < v < 1, "must be in (0, 1)"), needs=_DP
    )
    dp_backend: str = opt(
        "numpy",
        "DP-SGD's code: numpy (torch's Gaussian noise, one numpy call per operation) or fused (a "
        "compiled ziggurat's noise and, for GMF, the whole step in one compiled call: "
        "other noise of the same law, so runs' numbers move within their seed spread)",
        group="dp",
        choices=("numpy", "fused"),
        needs=_DP,
    )
    dp_past: int = opt(
        0,
        "selective DP-SGD (paper 003's DP only past τ): a node trains with DP-SGD only once peers took "
        "this many of its models, which leave unprotected until then (0: DP-SGD from the start)",
        group="dp",
        metavar="TAU",
        check=_min(0),
        needs=_DP,
    )

    @property
    def dp(self) -> bool:
        """Whether nodes train with DP-SGD."""
        return self.dp_noise > 0 or self.dp_epsilon > 0

    @property
    def adversarial(self) -> bool:
        """Whether nodes train against attribute estimators (PARD, or its UC-FedRec baseline)."""
        return self.defence in ("pard", "uc-fedrec")


@dataclass(frozen=True)
class WireConfig:
    """How models travel."""

    delta: bool = opt(
        True,
        "always send full models (no row deltas); across processes saves the receivers' copies of "
        "their senders' last models (in one process bases are kept by rows, learning/history.py)",
        name="--no-delta",
        group="wire",
        switch=False,
    )  #: send row deltas against an acknowledged base when smaller
    float16: bool = opt(
        False, "send tensors in half precision (lossy; both sides agree)", group="wire", switch=True
    )
    batch: bool = opt(
        True,
        "post every frame alone: no batches of one node's small frames to one process",
        name="--no-batch",
        group="wire",
        switch=False,
        only="real",
    )
    local_delivery: bool = opt(
        True,
        "post every frame, also between nodes of one process (by default those go to the receiver "
        "in memory, decoded and checked as over HTTP; frames to other processes are posted)",
        name="--no-local-delivery",
        group="wire",
        switch=False,
        only="real",
    )
    delta_peers: int = field(  #: senders whose last model a node keeps as a base (0: from the budget)
        default=0, metadata={"check": (lambda v: v >= 0, "must be >= 0 (0: from the budget)")}
    )
    #: memory per node for delta bases: how many senders' models a receiver keeps (when
    #: delta_peers is 0), and the changed rows a sender's base may save before it closes
    delta_budget_bytes: int = 768 * 1024

    def bases(self, model_bytes: int) -> int:
        """How many senders' last models a node keeps: GMF (216 kB) gets 3, PRME (807 kB) 1.

        Measured at 943 nodes (docs/design.md): 3 PRME bases per node peak at 3.8 GiB, 1 at 2.45 GiB
        with about the same share of deltas; for GMF 3 bases send 6% fewer bytes than 1.
        """
        if self.delta_peers:
            return self.delta_peers
        return max(1, self.delta_budget_bytes // max(model_bytes, 1))


@dataclass(frozen=True)
class SyntheticSection:
    """``--dataset synthetic``: planted communities (users = ``nodes``; see learning/synthetic.py)."""

    items: int = 500  #: number of items
    communities: int = 5  #: number of planted communities
    pool_size: int = 40  #: preferred items per community
    pool_overlap: int = 10  #: items a pool shares with the next community's pool
    per_user: int = 30  #: interactions per user
    in_pool_share: float = 0.8  #: probability that an interaction comes from the user's pool
    #: --attack aia: a planted 2-class attribute, the user's community (mod 2) with this
    #: probability, else drawn uniformly (learning/attributes.py planted)
    attribute_strength: float = 1.0


@dataclass(frozen=True)
class AttackConfig:
    """The adversary (CIA paper §IV): who attacks, with which target, and how."""

    kind: str = opt(
        "",
        "run the Community Inference Attack (cia), attribute inference (aia, paper 004), or both (cia,aia)",
        name="--attack",
        group="attack",
        choices=ATTACKS,
        check=(lambda v: v in ("", *ATTACKS), f"must be one of {', '.join(ATTACKS)} (or empty for none)"),
    )
    target_k: int = opt(50, "community size K", group="attack", metavar="K", check=_min(1), needs=_CIA)
    momentum: float = opt(
        0.99,
        "β of eq. 4",
        group="attack",
        metavar="BETA",
        check=(lambda v: 0 <= v < 1, "must be in [0, 1)"),
        needs=_CIA,
    )
    momentum_estimator: str = opt(
        "debiased",
        "reading of eq. 4 (adversary/momentum.py): v_u starts at 0 with the bias correction "
        "v_u/(1-β^n) (debiased), at the first Θ_u (first), at 0 (zero) or at θ_0 (init)",
        group="attack",
        choices=ESTIMATORS,
        needs=_CIA,
    )
    plugin: str = opt(
        "",
        "a user's own attack, run on the --attackers nodes (FedAvg: the server) on every model they "
        "receive: an entry point of group p2pnode.attacks or an import path module:Class "
        "(docs/plugins.md); its figures are the summary's attack_plugin",
        name="--attack-plugin",
        group="attack",
        metavar="NAME",
    )
    attackers: str = opt(
        "all",
        "gossip: 'all' (every node, own items as target), node ids '3,17', or with a dataset file "
        "the file's own user ids as written in it ('377,12', 'alice,bob'); with --attack aia the ids "
        "that also infer attributes (all: none but the omniscient observer)",
        group="attack",
        needs=_ATTACK,
    )
    target_items: str = opt(
        "",
        "V_target for every attacker: raw item ids '50,172,181'",
        group="attack",
        metavar="IDS",
        needs=_CIA,
    )
    target_genre: str = opt(
        "",
        "V_target for every attacker: an ML-100k genre (Horror), or with a check-in file venue "
        "categories ('Medical Center,Hospital') or the group 'Health and Medicine'",
        group="attack",
        metavar="GENRE",
        needs=_CIA,
    )
    colluders: float = opt(
        0.0,
        "gossip: share of nodes in each colluding group (0: none); with --attack aia the group's "
        "first member pools what the others read of attributes",
        group="attack",
        metavar="F",
        check=_SHARE,
        needs=_ATTACK,
    )
    colluder_groups: int = opt(
        1, "disjoint colluding groups, each one adversary", group="attack", check=_min(1), needs=_COLLUDERS
    )
    refresh_every: int = opt(
        10,
        "Share less, gossip: retrain e_A every N wake-ups",
        name="--cia-refresh",
        group="attack",
        check=_min(1),
        needs=_CIA,
    )  #: (the FedAvg server retrains it every round)
    multicast: str = opt(
        "theta",
        "colluders forward the received Θ_u to their group's read member (theta) or multicast v_u to "
        "every member (v, Algorithm 2 line 14)",
        group="attack",
        choices=("v", "theta"),
        needs=_COLLUDERS,
    )
    fictive_user: bool = opt(
        False,
        "score shared models with a fictive user trained on V_target, as under Share less",
        group="attack",
        switch=True,
        needs=_CIA,
    )
    fictive_backend: str = opt(
        "numpy",
        "the fictive users' code (GMF, Share less or --fictive-user): numpy (a Python loop per "
        "target, scores through numpy's gathers) or fused (every e_A fitted and every model scored "
        "in one compiled call: it rounds otherwise in the last bits, so near-ties may "
        "break the other way)",
        group="attack",
        choices=("numpy", "fused"),
        needs=(
            lambda c: c.attack.cia and c.model == "gmf" and (c.learning.share_less or c.attack.fictive_user),
            "--attack cia on --model gmf with --share-less or --fictive-user",
        ),
    )
    mia: bool = opt(
        False,
        "MPE membership inference on every node (the gossip-learning MIA paper, §2.5)",
        group="attack",
        switch=True,
    )
    mia_proxy: str = opt(
        "",
        "with --attack cia: MIA as a CIA proxy at thresholds ρ (given bare: the paper's 0.2..1; "
        "CIA paper §VIII-C, GMF)",
        group="attack",
        metavar="RHOS",
        const="0.2,0.4,0.6,0.8,1",
    )
    mia_holdout: int = opt(
        0,
        "with --mia: keep each user's N latest training items out of training as non-members",
        group="attack",
        metavar="N",
        check=_min(0),
    )
    mia_reference: float = opt(
        0.0,
        "with --mia (GMF): the share of users whose data the attacker has (its own and public users'): "
        "it trains a reference GMF on them and scores the other users with an RMIA-style calibrated "
        "attack beside MPE (mia.calibrated; Zarifzadeh et al. 2024)",
        group="attack",
        metavar="SHARE",
        check=(lambda v: 0.0 <= v <= 0.9, "must be in [0, 0.9]"),
    )
    canaries: int = opt(
        0,
        "with --mia: N canary interactions per node (items it never touched), each put into its "
        "training set with probability 1/2; the run audits its ε from the MPE scores of them "
        "(Steinke, Nasr & Jagielski 2023: one training run)",
        group="attack",
        metavar="N",
        check=_min(0),
    )

    aia_public: float = opt(
        0.2,
        "share η of users who publish their attributes: the attack trains on them and scores the others "
        "(004: 0.2)",
        group="aia",
        metavar="ETA",
        check=(lambda v: 0 < v < 1, "must be in (0, 1)"),
        needs=_AIA,
    )
    aia_items: str = opt(
        "oracle",
        "I'_u of eq. 7: the user's training positives (oracle, 004's assumption), the top --aia-top-m "
        "items by the observed model's own scores (inferred), or the --aia-top-m item rows that moved "
        "most from the observer's reference: the global model at the FedAvg server, its own model in "
        "gossip (changed)",
        group="aia",
        choices=ITEMS,
        needs=_AIA,
    )
    aia_top_m: int = opt(
        20,
        "inferred or changed I'_u: how many items",
        group="aia",
        metavar="M",
        check=_min(1),
        needs=_AIA,
    )
    aia_user: str = opt(
        "absent",
        "Share less (no user row is shared): eq. 7 without the user part (absent), or with a fictive "
        "user e_A trained on I'_u against the received item rows in its place (fictive, as the CIA's)",
        group="aia",
        choices=USER_PARTS,
        needs=_AIA,
    )
    aia_momentum: float = opt(
        0.0,
        "β of an observer's running mean of each user's features over the models it received (the "
        "CIA's eq. 4, debiased); 0 keeps the latest model's",
        group="aia",
        metavar="BETA",
        check=(lambda v: 0 <= v < 1, "must be in [0, 1)"),
        needs=_AIA,
    )
    aia_select: str = opt(
        "last",
        "the classifier's epoch that is scored: the last of --aia-epochs, the one of least log-loss "
        "on a validation quarter of the public users (validation), or best-test (004's code: the "
        "best epoch on the scored users themselves, optimistic)",
        group="aia",
        choices=SELECTIONS,
        needs=_AIA,
    )
    aia_every: int = opt(
        10,
        "evaluate attribute inference every N rounds and after the last (each evaluation trains a "
        "classifier per attribute and observer)",
        group="aia",
        metavar="N",
        check=_min(1),
        needs=_AIA,
    )
    aia_epochs: int = opt(
        150,
        "training epochs of each attribute's classifier (004: 150)",
        group="aia",
        check=_min(1),
        needs=_AIA,
    )

    @property
    def cia(self) -> bool:
        """Whether the run attacks communities (``--attack cia`` or ``cia,aia``)."""
        return "cia" in self.kind.split(",")

    @property
    def aia(self) -> bool:
        """Whether the run infers attributes (``--attack aia`` or ``cia,aia``)."""
        return "aia" in self.kind.split(",")

    def proxy_thresholds(self) -> tuple[float, ...]:
        """The ρ values of ``mia_proxy``; ConfigError when one is not a positive number."""
        out = []
        for part in self.mia_proxy.split(","):
            if not part.strip():
                continue
            try:
                rho = float(part)
            except ValueError:
                raise ConfigError(f"--mia-proxy {part.strip()!r} is not a number") from None
            if not rho > 0 or rho != rho or rho == float("inf"):
                raise ConfigError(f"--mia-proxy thresholds must be positive and finite, got {part.strip()}")
            out.append(rho)
        return tuple(out)


@dataclass(frozen=True)
class SimConfig:
    """In-memory network knobs (simulator only)."""

    delay_min: float = opt(0.0, "minimum one-way delay in ticks", group="sim", only="sim", check=_min(0))
    delay_max: float = opt(0.0, "maximum one-way delay in ticks", group="sim", only="sim", check=_min(0))
    drop: float = opt(
        0.0,
        "probability that a frame is lost",
        group="sim",
        only="sim",
        check=(lambda v: 0 <= v < 1, "must be in [0, 1)"),
    )
    shared_tables: bool = opt(
        True,
        "FedAvg: every client keeps its own item tables (by default the honest clients share one "
        "copy, learning/workbench.py: the same numbers in a model less a client; a client not "
        "holding it can be asked its utility and norm only, so no checkpoint of it)",
        name="--no-shared-tables",
        group="sim",
        only="sim",
        switch=False,
    )  #: FedAvg clients train in one shared copy of the item tables (learning/workbench.py)
    mmap_threshold_mib: float = opt(
        0.0,
        "glibc: blocks of at least this many MiB are mmapped and given back when freed, from the "
        "run's start on in its process (0: left as it is; the commands set 32 MiB); 1 keeps a "
        "FedAvg run at the POI shapes from growing past what it holds (heap fragmentation), at "
        "up to 2x its time; the same numbers",
        group="sim",
        only="sim",
        check=(lambda v: v == 0 or 0 < v <= 32, "must be 0 or in (0, 32]"),
    )  #: the simulator process's allocator (process.set_mmap_threshold); not in a run's identity
    spill_dir: str = opt(
        "",
        "keep frames of 1 MiB and more on their way, and FedAvg updates a server holds, in an "
        "unlinked file in this folder instead of in memory (page cache the kernel writes out as "
        "memory runs short): a FedAvg round's updates at the POI shapes, all on their way at "
        "once; the same numbers, more time",
        group="sim",
        only="sim",
        metavar="DIR",
    )  #: p2pnode/transport/spill.py; not in a run's identity


_CHURNS: Check = (lambda c: c.churn.model != "off", "--churn exp|weibull")
_WEIBULL: Check = (lambda c: c.churn.model == "weibull", "--churn weibull")


@dataclass(frozen=True)
class ChurnConfig:
    """Nodes going and coming while the network runs (p2pcore/churn.py): every user node in the
    simulator; in ``launch``, whole processes (all but the first, which stays as the seed)."""

    model: str = opt(
        "off",
        "on/off times of each node (launch: process): exponential or Weibull (as measured in deployed P2P "
        "networks), with the means below",
        name="--churn",
        group="churn",
        only="network",
        choices=CHURN_MODELS,
    )
    uptime: float = opt(
        50.0,
        "mean session (online) length in rounds",
        group="churn",
        only="network",
        check=_POSITIVE,
        needs=_CHURNS,
    )
    downtime: float = opt(
        10.0, "mean time offline in rounds", group="churn", only="network", check=_POSITIVE, needs=_CHURNS
    )
    shape: float = opt(
        0.5,
        "Weibull shape k of both (k < 1: heavy-tailed sessions)",
        name="--weibull-shape",
        group="churn",
        only="network",
        check=_POSITIVE,
        needs=_WEIBULL,
    )
    crash: float = opt(
        0.5,
        "share of departures that are crashes (no leave message)",
        name="--crashes",
        group="churn",
        only="network",
        check=_SHARE,
        needs=_CHURNS,
    )
    late: float = opt(
        0.0,
        "share of nodes (launch: processes) absent at first, joining at a uniform time in the first half",
        name="--late-joiners",
        group="churn",
        only="network",
        check=_SHARE,
    )

    def schedule_model(self) -> ChurnModel:
        """The pure churn model of this section."""
        return ChurnModel(self.model, self.uptime, self.downtime, self.shape, self.crash, self.late)

    @property
    def active(self) -> bool:
        return self.model != "off" or self.late > 0


_KNN: Check = (lambda c: c.knn.strategy != "off", "--knn userknn|reuse|expect|gain")
_KNN_TAU: Check = (lambda c: c.knn.strategy != "off" and c.knn.dp == "tau", "--knn with --knn-dp tau")


@dataclass(frozen=True)
class KnnConfig:
    """The peer-to-peer KNN service (paper 003, protocols/knn.py): every node answers rating
    queries from its own explicit ratings and asks its neighbours for theirs. Each node's ratings
    are its training ratings of one fold of a k-fold split of the data set's ratings; its queries
    are its test ratings of that fold, asked in the fold's shuffled order (the central module's
    order, learning/reuseknn.py)."""

    strategy: str = opt(
        "off",
        "run the KNN service, choosing neighbours as UserKNN (most similar), reuse (UserKNN+Reuse, "
        "003 eq. 11), expect or gain (ReuseKNN, eq. 4-6)",
        name="--knn",
        group="knn",
        choices=("off", "userknn", "reuse", "expect", "gain"),
    )
    k: int = opt(10, "neighbours a query asks", name="--knn-k", group="knn", check=_min(1), needs=_KNN)
    dp: str = opt(
        "tau",
        "randomized response (003 eq. 7-8): past τ (each node counts its own DataUsage), always (full), "
        "or never (off)",
        name="--knn-dp",
        group="knn",
        choices=("tau", "full", "off"),
        needs=_KNN,
    )
    tau: float = opt(
        0.0,
        "τ, the DataUsage past which a node answers through randomized response (0: agreed from a "
        "pilot run, the tail of central UserKNN's DataUsage on the run's ratings by 003's code rule)",
        name="--knn-tau",
        group="knn",
        check=_min(0),
        needs=_KNN_TAU,
    )
    candidates: str = opt(
        "full",
        "whom a node may ask: every node (full; probed at the start), the peers its sampler shows "
        "it (view; a few probed at each wake-up), or those and the most similar peers of its most "
        "similar candidates (ranked: a similarity overlay built by gossip)",
        name="--knn-candidates",
        group="knn",
        choices=("full", "view", "ranked"),
        needs=_KNN,
    )
    folds: int = opt(
        5, "folds of the ratings' split", name="--knn-folds", group="knn", check=_min(2), needs=_KNN
    )
    fold: int = opt(0, "the fold whose test ratings are the queries", name="--knn-fold", group="knn",
                    check=_min(0), needs=_KNN)  # fmt: skip
    start: float = opt(
        100.0,
        "ticks before the first query (the probes' time); negative: counted back from the end of the "
        "last round (-300: three rounds before the end; at least one round in)",
        name="--knn-start",
        group="knn",
        needs=_KNN,
    )
    spacing: float = opt(
        0.01,
        "ticks between one query of the fold and the next (with no network delay, each is done "
        "before the next: the central module's order)",
        name="--knn-spacing",
        group="knn",
        check=_POSITIVE,
        needs=_KNN,
    )

    @property
    def active(self) -> bool:
        return self.strategy != "off"


@dataclass(frozen=True)
class RunConfig:
    """One experiment: network, protocol, sampling, data, learning, wire and timing."""

    nodes: int = opt(
        943,
        "network size: nodes = users 0..N-1 of the dataset (a --dataset file: all its users)",
        check=_min(2),
    )
    rounds: int = opt(20, "rounds to run (100 ticks each); run: until stopped unless given", check=_min(1))
    model: str = opt(
        "gmf", "gmf (utility HR@K), prme (F1@K) or ncf (paper 004's FedNCF model, HR@K)", choices=MODELS
    )
    model_plugin: str = opt(
        "",
        "a user's own model instead of --model (utility HR@K): an entry point of group p2pnode.models "
        "or an import path module:Class (docs/plugins.md)",
        name="--model-plugin",
        metavar="NAME",
    )
    protocol: str = opt(
        "base",
        "base (Base Gossip Learning, the gossip MIA paper's Alg. 1), samo (its Alg. 2) or fedavg "
        "(server id = nodes)",
        choices=PROTOCOLS,
    )
    fraction: float = opt(
        1.0,
        "fedavg: share of clients per round",
        check=(lambda v: 0 < v <= 1, "must be in (0, 1]"),
        needs=_FEDAVG,
    )
    sampling: str = opt("peerswap", "peer sampling service", choices=SAMPLINGS, needs=_GOSSIP)
    view_size: int = opt(3, "out-view size P", check=_min(1), needs=_GOSSIP)
    swap_rate: float = opt(
        0.1, "PeerSwap view changes per node per round (p ~ Exp(rate))", check=_min(0), needs=_PEERSWAP
    )
    exploration: float = opt(0.4, "pers: share of sends to the random view", check=_SHARE, needs=_PERS)
    seed: int = opt(0, "seed of everything random", check=_min(0))
    dataset: str = opt(
        "ml-100k",
        "ml-100k, synthetic, or a file: Foursquare TSMC2014, SNAP Gowalla, or CSV/TSV (p2pnode data list)",
        check=(bool, "must be ml-100k, synthetic or a file path"),
    )
    data_dir: str = opt("", "dataset directory (default $P2PNODE_DATA or ~/.cache)")
    min_interactions: int = opt(
        5,
        "file datasets: drop users with fewer distinct items (after --bbox and --min-item-users)",
        check=(lambda v: v >= 2, "must be >= 2 (leave-one-out)"),
    )
    min_item_users: int = opt(
        1,
        "file datasets: drop items (venues) with fewer distinct users, before the users' filter",
        check=_min(1),
        needs=_FILE,
    )
    columns: str = opt(
        "",
        "file datasets: which column holds what, by header name or number from 1, e.g. "
        "user=userId,item=venueId,time=utcTimestamp (roles: user, item, time, category, lat, lon, "
        "rating); "
        "default: told from the header or the format",
        metavar="ROLE=COL,...",
        check=(_parses(parse_columns), "must be ROLE=COLUMN,... naming at least user and item"),
        needs=_FILE,
    )
    sep: str = opt(
        "",
        "file datasets: the column separator, e.g. '::' (MovieLens-1M/10M ratings.dat), ';' or ' '; "
        "default: told from the first line (a tab, '::', ',', ';' or '|', in that order)",
        metavar="SEP",
        check=(lambda v: "\n" not in v and "\r" not in v, "must not hold a line break"),
        needs=_FILE,
    )
    bbox: str = opt(
        "",
        "file datasets: keep check-ins inside LAT_MIN,LON_MIN,LAT_MAX,LON_MAX, or a named box: "
        + ", ".join(NAMED_BOXES),
        metavar="BOX",
        check=(_parses(parse_bbox), "must be LAT_MIN,LON_MIN,LAT_MAX,LON_MAX or a named box (nyc)"),
        needs=_FILE,
    )
    attributes: str = opt(
        "",
        "--attack aia on a file dataset: a CSV of the file's own user ids (first column) and attribute "
        "columns (ml-100k brings gender, age and occupation; synthetic plants one)",
        group="aia",
        metavar="FILE",
        needs=_AIA,
    )
    attribute_bins: int = opt(
        3,
        "--attributes: numeric columns cut into this many quantile groups (a column 'age': at --age-cuts)",
        group="aia",
        check=_min(2),
        needs=_AIA,
    )
    age_cuts: str = opt(
        "25,45",
        "--attack aia: the age groups' boundaries (<25, 25-44, >=45: inferred; 004 does not give them)",
        group="aia",
        metavar="CUTS",
        check=(_parses(parse_cuts), "must be ascending numbers, e.g. 25,45"),
        needs=_AIA,
    )
    samo_buffer: int = opt(64, "SAMO: most models buffered between wake-ups", check=_min(1), needs=_SAMO)
    merge: str = opt(
        "mean",
        "how SAMO's buffer and the FedAvg server aggregate: mean (the papers), or the coordinate-wise "
        "trimmed mean or median (robust to a poisoning member)",
        choices=MERGES,
        needs=(
            lambda c: (
                not c.merge_plugin
                and (c.protocol == "fedavg" or (c.protocol == "samo" and c.sampling != "pers"))
            ),
            "--protocol samo or fedavg, and no --merge-plugin",  # Base GL merges two (every rule is the mean)
        ),
    )
    merge_plugin: str = opt(
        "",
        "a user's own merge rule instead of the mean (or Pers-Gossip's score weighting): an entry "
        "point of group p2pnode.merges or an import path module:Class (docs/plugins.md)",
        name="--merge-plugin",
        metavar="NAME",
        needs=_GOSSIP,
    )
    max_model_distance: float = opt(
        100.0,
        "refuse a received model θ with ‖θ − θ_own‖ > D·‖θ_own‖ (honest models stay below 6; 0: no bound)",
        metavar="D",
        check=_min(0),
    )
    clip_factor: float = opt(
        0.0,
        "ClippedGossip: clip a received model's difference from the own model to C x the median "
        "distance of the last 16 models taken, 4 at most per sender (Base GL, SAMO; 0: off; "
        "run, launch and deploy: 1 unless --preset paper)",
        metavar="C",
        check=_min(0),
        needs=(lambda c: c.protocol != "fedavg", "a gossip protocol (FedAvg has --merge)"),
    )
    norm_band: float = opt(
        0.0,
        "take a received model at most 0.25 x the own model's norm away from it, and with its norm "
        "within (1 ± B) x the own model's (Base GL, SAMO; 0: off): bounds a member that holds half "
        "of a node's in-neighbour places, which the clip's window does not (THREAT_MODEL.md)",
        metavar="B",
        check=(lambda v: 0.0 <= v < 1.0, "must be in [0, 1)"),
        needs=(lambda c: c.protocol != "fedavg", "a gossip protocol (FedAvg has --merge)"),
    )
    steady_pull: float = opt(
        0.0,
        "damp a member's models that keep pulling the own model one way: per member (an id "
        "without identities), an average of the directions of its taken models' differences; "
        "above length L a difference is taken at (1 - length) / (1 - L) (Base GL, SAMO; 0: off; "
        "run, launch and deploy: 0.7 unless --preset paper)",
        metavar="L",
        check=(lambda v: 0.0 <= v < 1.0, "must be in [0, 1)"),
        needs=(lambda c: c.protocol != "fedavg", "a gossip protocol (FedAvg has --merge)"),
    )
    sender_gate: bool = opt(
        True,
        "take gossip models from any member at any rate (default: with static and PeerSwap views "
        "only from in-neighbours, and from each sender about once per own wake-up)",
        name="--no-sender-gate",
        switch=False,
    )
    tick_seconds: float = opt(0.01, "wall seconds per tick", only="real", check=_POSITIVE)
    max_lag_ticks: float = opt(
        10.0,
        "a process whose timers fire more than this many ticks late holds its clock back by the "
        "rest, so its rounds stretch (the run says by how much) instead of its protocols' timeouts "
        "shrinking under load (0: never holds back)",
        only="real",
        check=_min(0),
    )
    eval_every: int = opt(1, "evaluate HR@K every N rounds", check=_min(1))
    stop_at: float = opt(
        0.0,
        "stop the run after the first evaluation whose HR@K (PRME: F1@K) reaches this, the attacks "
        "evaluated there (0: never; 004's Early-stop baseline, set to another defence's utility)",
        only="sim",
        check=(lambda v: 0 <= v <= 1, "must be in [0, 1]"),
    )
    stop_patience: int = opt(
        0,
        "early stopping on a validation item (each user's second-latest, held out and ranked among "
        "--test-negatives of its own): end the run when the nodes' mean validation HR@K + HR@2K "
        "has not risen for this many evaluations; the summary reports the best evaluation and "
        "the attribute inference on its models (0: off; 004's code: 10, 30 when it fine-tunes PARD)",
        only="sim",
        check=_min(0),
    )
    learning: LearningConfig = field(default_factory=LearningConfig)
    wire: WireConfig = field(default_factory=WireConfig)
    sim: SimConfig = field(default_factory=SimConfig)
    churn: ChurnConfig = field(default_factory=ChurnConfig)
    knn: KnnConfig = field(default_factory=KnnConfig)
    synthetic: SyntheticSection = field(default_factory=SyntheticSection)
    attack: AttackConfig = field(default_factory=AttackConfig)

    def validate(self) -> RunConfig:
        """Return self, or raise ConfigError naming the first bad field: each field's own
        check (declared with it), then the rules that tie fields together."""
        self.validate_fields()
        self._validate_rules()
        return self

    def validate_fields(self) -> RunConfig:
        """Each field's own check only (no rule that ties fields together, such as those that
        depend on ``nodes``): what reading a dataset file needs before it sets ``nodes``."""
        check_fields(self)
        return self

    def _validate_rules(self) -> None:
        _check(
            self.view_size < self.nodes,
            "view-size",
            f"must be in [1, nodes), got {self.view_size} with nodes {self.nodes}",
        )
        lc = self.learning
        _check(not (lc.dp_noise and lc.dp_epsilon), "dp-noise", "give --dp-noise or --dp-epsilon, not both")
        _check(
            not (lc.personal_user and lc.share_less),
            "personal-user",
            "has no effect with --share-less (the user row is not shared at all)",
        )
        _check(self.model != "prme" or not lc.local_head, "local-head", "PRME has no head to keep")
        if self.model_plugin:
            _check(self.model == "gmf", "model-plugin", "names the model: give it or --model, not both")
            built_in = [
                ("--attack cia", self.attack.cia),
                ("--attack aia", self.attack.aia),
                ("--mia", self.attack.mia),
                ("--mia-proxy", bool(self.attack.mia_proxy)),
                ("--share-less", lc.share_less),
                ("--personal-user", lc.personal_user),
                ("--local-head", lc.local_head),
                ("DP-SGD", lc.dp),
                (f"--defence {lc.defence}", lc.adversarial),
                ("--upload-noise", lc.upload_noise > 0),
            ]
            given = [flag for flag, on in built_in if on]
            _check(
                not given,
                "model-plugin",
                f"does not combine with {', '.join(given)}: they know the built-in models' tensors "
                "only (a plug-in model runs with every protocol and sampler, --attack-plugin and "
                "--merge-plugin)",
            )
        if lc.local_head:
            _check(
                not self.attack.cia or self.protocol != "fedavg",
                "local-head",
                "the CIA scores models with a head, which --local-head keeps home: a gossip observer "
                "scores with its own, but the FedAvg server holds none",
            )
            _check(
                not (self.attack.aia and self.attack.aia_items == "inferred"),
                "aia-items",
                "inferred scores items with the model's head, which --local-head keeps home: use "
                "--aia-items changed or oracle",
            )
            _check(
                not (self.attack.aia and self.attack.aia_user == "fictive"),
                "aia-user",
                "a fictive user is trained through the model's head, which --local-head keeps home",
            )
        _check(
            not (self.model == "ncf" and lc.optimizer == "sgd" and self.protocol != "fedavg"),
            "optimizer",
            "sgd's item rate (lr x items x eta) assumes FedAvg's mean over the clients: with "
            "--protocol fedavg only (a gossip merge averages two models)",
        )
        if lc.adversarial:
            _check(self.model in ("gmf", "ncf"), "defence", "PARD is built for --model gmf and ncf")
            _check(not lc.share_less, "defence", "PARD shares z^ir: it does not combine with --share-less")
            _check(not lc.dp, "defence", "PARD with DP-SGD is not built")
            _check(
                self.protocol != "fedavg" or not (self.attack.cia or self.attack.mia),
                "defence",
                "the CIA and the membership attack score models with a head, which PARD keeps home: "
                "the FedAvg server holds none (in gossip an observer scores with its own)",
            )
            _check(
                not (self.attack.aia and self.attack.aia_public != lc.public_share),
                "public-share",
                f"the public users publish to the attack too: give --aia-public {lc.public_share} "
                "(or the same η to both)",
            )
            _check(
                not (self.attack.aia and self.attack.aia_items == "inferred"),
                "aia-items",
                "inferred scores items with the model's head, which PARD keeps home: use oracle or changed",
            )
            _check(
                not (self.attack.aia and self.attack.aia_user == "fictive"),
                "aia-user",
                "a fictive user is trained through the model's head, which PARD keeps home",
            )
        _check(
            not (lc.dp and self.model == "ncf"),
            "dp-noise" if lc.dp_noise else "dp-epsilon",
            "DP-SGD is not built for --model ncf (gmf and prme have it)",
        )
        a = self.attack
        _check(
            not a.cia or a.target_k < self.nodes,
            "target-k",
            f"must be in [1, nodes), got {a.target_k} with nodes {self.nodes}",
        )
        _check(
            not (a.target_items and a.target_genre), "target-genre", "give target items or a genre, not both"
        )
        _check(a.mia or not a.mia_holdout, "mia-holdout", "needs --mia (it only feeds the MIA)")
        _check(a.mia or not a.canaries, "canaries", "needs --mia (the audit reads the MPE scores)")
        _check(a.mia or not a.mia_reference, "mia-reference", "needs --mia (it calibrates the MIA)")
        _check(
            not a.mia_reference or self.model == "gmf",
            "mia-reference",
            f"the reference model is a GMF: needs --model gmf, not {self.model}",
        )
        if a.mia_proxy:
            _check(bool(a.proxy_thresholds()), "mia-proxy", "needs at least one threshold")
            _check(a.cia, "mia-proxy", "needs --attack cia (it uses the CIA adversary's state)")
            _check(self.model == "gmf", "mia-proxy", "needs a model that predicts probabilities (gmf)")
        if a.aia:
            _check(
                not (lc.share_less and a.aia_items == "inferred"),
                "aia-items",
                "inferred scores items with the user row, which Share less keeps home: "
                "use --aia-items changed or oracle",
            )
        if a.colluders:
            size = max(2, round(a.colluders * self.nodes))
            _check(self.protocol != "fedavg", "colluders", "apply to gossip protocols only")
            _check(
                size * a.colluder_groups <= self.nodes,
                "colluder-groups",
                f"{a.colluder_groups} groups of {size} colluders ({a.colluders:g} of {self.nodes} nodes) "
                "do not fit the network",
            )
        s = self.sim
        _check(s.delay_min <= s.delay_max, "delay", "need 0 <= delay-min <= delay-max")
        if self.knn.active:
            _check(self.knn.fold < self.knn.folds, "knn-fold", f"must be in [0, {self.knn.folds})")
            _check(self.protocol != "fedavg", "knn", "is a peer-to-peer service: give a gossip protocol")
        if self.churn.active:
            _check(
                self.sampling == "cyclon" and self.protocol != "fedavg",
                "churn" if self.churn.model != "off" else "late-joiners",
                f"needs --sampling cyclon and a gossip protocol (open membership), got --sampling "
                f"{self.sampling} --protocol {self.protocol}",
            )

    def table_options(self) -> TableOptions:
        """How a ``--dataset FILE`` is read and preprocessed (p2pnode/data/tables.py)."""
        return TableOptions(
            columns=tuple(parse_columns(self.columns).items()),
            bbox=parse_bbox(self.bbox) if self.bbox else None,
            sep=self.sep,
            min_interactions=self.min_interactions,
            min_item_users=self.min_item_users,
        )

    def get(self, path: str) -> Any:
        """The value at ``path`` (``nodes``, ``learning.lr``)."""
        return get_path(self, path)

    def replace(self, **changes: Any) -> RunConfig:
        """A copy with top-level or nested (``learning.lr``) fields changed."""
        changed: RunConfig = replace_paths(self, changes)
        return changed

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


#: what the daemon's commands (``run``, ``launch``, ``deploy``) start from, on top of the fields'
#: defaults (THREAT_MODEL.md): a member's models are clipped to the radius the honest ones
#: set (ClippedGossip on top of the sender gate) and kept within reach and norm of the own model
#: (the norm band, against a member in half of a node's in-neighbour places). The lab's commands
#: (``simulate``, ``experiment``, ``p2pnode.simulate``) start from the fields' defaults, the
#: papers' plain merge, so every reproduced number stays where the papers' setting puts it.
SAFE: dict[str, Any] = {"clip_factor": 1.0, "norm_band": 0.05, "steady_pull": 0.7}

#: paper 004's FedNCF as its authors' code trains it on ML-100k (docs/design.md, PARD: "004's
#: training"): FedAvg over every client, the user row each client's own (read by the server), SGD
#: at 0.5 with η 80 in three groups, 5 training negatives, 99 test negatives, N(0, 1) embeddings,
#: R@10, up to 200 rounds (the code's README) with an early stop of patience 10 on a validation item,
#: each client evaluated under the global model as the code evaluates it
FEDNCF_004: dict[str, Any] = {
    "model": "ncf",
    "protocol": "fedavg",
    "fraction": 1.0,
    "rounds": 200,
    "stop_patience": 10,
    "learning.optimizer": "sgd",
    "learning.lr": 0.5,
    "learning.lr_eta": 80.0,
    "learning.negatives": 5,
    "learning.negative_pool": "untrained",
    "learning.test_negatives": 99,
    "learning.top_k": 10,
    "learning.ncf_init_std": 1.0,
    "learning.personal_user": True,
    "learning.eval_model": "global",
}
#: PARD as 004's code runs it on ML-100k: 30 rounds of pre-training at FedNCF's rates without the
#: privacy terms, then fine-tuning with them at lr 0.1 and η 1, the head home, the two user rows
#: summed (z^ir uploaded, each client's own), an early stop of patience 30 over up to 200
#: fine-tuning rounds
PARD_004: dict[str, Any] = {
    "rounds": 230,
    "stop_patience": 30,
    "learning.defence": "pard",
    "learning.local_head": True,
    "learning.pard_combine": "sum",
    "learning.pard_warmup": 30,
    "learning.pard_warmup_lr": 0.5,
    "learning.pard_warmup_lr_eta": 80.0,
    "learning.lr": 0.1,
    "learning.lr_eta": 1.0,
}
PRESETS: dict[str, dict[str, Any]] = {
    # the papers' plain merge, on any command
    "paper": {"clip_factor": 0.0, "norm_band": 0.0, "steady_pull": 0.0},
    "quick": {"nodes": 100, "rounds": 10, "learning.lr": 0.01},
    "safe": SAFE,
    "hostile": SAFE,  # the name of "safe" before it was the daemon's default
    "004": FEDNCF_004,
    "004-pard": {**FEDNCF_004, **PARD_004},
}


#: what every process of one network must agree on: the population, the protocol and
#: its views, the model's shape, what the seed derives (θ_0, the first views), the tick
NETWORK_SETTINGS = (
    "nodes",
    "dataset",
    "min_interactions",
    "min_item_users",
    "bbox",
    "protocol",
    "sampling",
    "view_size",
    "swap_rate",
    "seed",
    "tick_seconds",
    "model",
    "model_plugin",
    "learning.factors",
    "learning.prme_dim",
    "learning.ncf_dim",
    "learning.ncf_hidden",
    "learning.ncf_init_std",
    "learning.share_less",
    "learning.personal_user",
    "learning.local_head",
    "learning.defence",
    # what a merged summary averages: every process must measure alike
    "learning.top_k",
    "learning.test_negatives",
    "learning.evaluation",
    # the KNN service: the same split, plan, τ and rule everywhere (p2pnode/nodes/knn.py)
    "knn.strategy",
    "knn.k",
    "knn.dp",
    "knn.tau",
    "knn.candidates",
    "knn.folds",
    "knn.fold",
    "knn.start",
    "knn.spacing",
)


def network_settings(config: RunConfig) -> dict[str, Any]:
    """The :data:`NETWORK_SETTINGS` of ``config`` as a process's members page states them; a
    dataset file is "a file" (its path is the host's own; its users are ``nodes``)."""
    out = {path: config.get(path) for path in NETWORK_SETTINGS}
    if out["dataset"] not in ("ml-100k", "synthetic"):
        out["dataset"] = "a file"
    return out


def network_differences(mine: Mapping[str, Any], theirs: Mapping[str, Any]) -> list[str]:
    """Each setting of :data:`NETWORK_SETTINGS` a peer states otherwise, as ``name X there, Y
    here`` (a setting the peer does not state is not compared: an older version)."""
    return [
        f"{key} {theirs[key]!r} there, {mine[key]!r} here"
        for key in NETWORK_SETTINGS
        if key in theirs and key in mine and theirs[key] != mine[key]
    ]


def defaults(daemon: bool = False) -> RunConfig:
    """The configuration a command starts from: the fields' defaults, and for the daemon's
    commands :data:`SAFE` on top."""
    return RunConfig().replace(**SAFE) if daemon else RunConfig()


def to_toml(config: RunConfig, comments: bool = True) -> str:
    """``config`` as a ``--config`` file that reads back to the same configuration: top-level
    keys, then one table per section; with ``comments`` each key is preceded by its help (and
    its flag), so the whole default tree reads as documentation (``p2pnode config show``)."""
    top: list[str] = []
    tables: dict[str, list[str]] = {}
    for path, f in config_fields():
        section, _, name = path.rpartition(".")
        lines = tables.setdefault(section, []) if section else top
        flag: Flag | None = f.metadata.get("flag")
        if comments:
            if lines:
                lines.append("")
            about = f"{flag.flag_name(f.name)}: {flag.help}" if flag is not None else "(no flag)"
            lines += [f"# {line}" for line in _wrap(about)]
        lines.append(f"{name} = {_toml_scalar(config.get(path))}")
    out = top
    for section, lines in tables.items():
        out += ["", f"[{section}]", *lines]
    return "\n".join(out) + "\n"


def _wrap(text: str, width: int = 98) -> list[str]:
    words, lines, line = text.split(), [], ""
    for w in words:
        if line and len(line) + 1 + len(w) > width:
            lines.append(line)
            line = w
        else:
            line = f"{line} {w}" if line else w
    return [*lines, line] if line else lines


def _toml_scalar(value: Any) -> str:
    """A configuration value as TOML: strings as basic strings (JSON's escapes are TOML's),
    floats always with a point or an exponent (or inf, nan), booleans lower case."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        text = repr(value)
        return text if any(c in text for c in ".en") else text + ".0"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    raise ConfigError(f"a configuration value of type {type(value).__name__} has no TOML form: {value!r}")


def read_toml(path: Path) -> dict[str, Any]:
    """A ``--config`` file's tables; ConfigError when it is missing or not TOML."""
    try:
        return tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"config file {path} is a directory") from None
    except PermissionError:
        raise ConfigError(f"config file {path} cannot be read (permission denied)") from None
    except UnicodeDecodeError:
        raise ConfigError(f"config file {path} is not text: --config reads TOML") from None
    except tomllib.TOMLDecodeError as exc:
        hint = " (a JSON file? --config reads TOML)" if path.suffix.lower() == ".json" else ""
        raise ConfigError(f"config file {path} is not valid TOML: {exc}{hint}") from None


def load_toml(path: Path, base: RunConfig | None = None) -> RunConfig:
    """Read a TOML file with top-level keys and [learning], [wire], [sim] tables (a process's
    [process] and [limits] tables are p2pnode/runners/settings.py's)."""
    return from_mapping(read_toml(path), base or RunConfig(), source=str(path))


def from_mapping(raw: dict[str, Any], base: RunConfig, source: str = "config") -> RunConfig:
    return base.replace(**changes_from_mapping(raw, base, source)).validate()


#: the tables of a ``--config`` file that hold a process's settings, not a run's (p2pnode/runners/settings.py)
SETTINGS_TABLES = ("process", "limits")


def changes_from_mapping(raw: Mapping[str, Any], base: Any, source: str = "config") -> dict[str, Any]:
    """The changes a nested mapping (a TOML file's tables, a JSON config) makes to ``base`` (a
    ``RunConfig``, or a process's ``ProcessConfig``), as dotted keys with values of the fields'
    types; an unknown key or a wrong type is refused, naming it (and the nearest known key). A
    run's configuration skips the process's tables (:data:`SETTINGS_TABLES`)."""
    changes: dict[str, Any] = {}
    sections = {f.name: f for f in dataclasses.fields(base)}
    for key, value in raw.items():
        k = key.replace("-", "_")
        if isinstance(base, RunConfig) and k in SETTINGS_TABLES:
            continue
        if k not in sections:
            raise ConfigError(f"{source}: unknown key {key!r}{_nearest(k, sections)}")
        sub = getattr(base, k)
        if dataclasses.is_dataclass(sub):
            if not isinstance(value, Mapping):
                raise ConfigError(f"{source}: [{key}] must be a table")
            names = {f.name: f for f in dataclasses.fields(sub)}
            for sk, sv in value.items():
                sk2 = sk.replace("-", "_")
                if sk2 not in names:
                    raise ConfigError(f"{source}: unknown key {key}.{sk}{_nearest(sk2, names, k + '.')}")
                changes[f"{k}.{sk2}"] = _coerce(sv, getattr(sub, sk2), f"{key}.{sk}", source)
                _check_key(names[sk2], changes[f"{k}.{sk2}"], f"{key}.{sk}", source)
        else:
            changes[k] = _coerce(value, sub, key, source)
            _check_key(sections[k], changes[k], key, source)
    return changes


def _check_key(f: dataclasses.Field[Any], value: Any, key: str, source: str) -> None:
    """A file's or a mapping's value against its field's own check, named as the file wrote it
    (``c.toml: rounds must be >= 1, got -3``), not as the flag it did not use."""
    flag: Flag | None = f.metadata.get("flag")
    check: Check | None = flag.check if flag else f.metadata.get("check")
    if flag is not None and flag.choices and check is None:
        check = (lambda v: v in flag.choices, f"must be one of {', '.join(flag.choices)}")
    if check is not None and not check[0](value):
        raise ConfigError(f"{source}: {key} {check[1]}, got {value!r}")


def nested(dotted: Mapping[str, Any]) -> dict[str, Any]:
    """``{"learning.lr": 0.1, "nodes": 5}`` as ``{"learning": {"lr": 0.1}, "nodes": 5}``."""
    out: dict[str, Any] = {}
    for key, value in dotted.items():
        section, dot, name = key.partition(".")
        if dot:
            table = out.setdefault(section, {})
            if not isinstance(table, dict):
                raise ConfigError(f"{section} is not a section: {key} names no field")
            table[name] = value
        else:
            out[key] = value
    return out


def _nearest(name: str, known: Iterable[str], prefix: str = "") -> str:
    """ " (did you mean X?)" for the closest known name, or nothing."""
    close = difflib.get_close_matches(name, list(known), n=1)
    return f" (did you mean {prefix}{close[0]}?)" if close else ""


def _coerce(value: Any, default: Any, name: str, source: str) -> Any:
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{source}: {name} must be true or false")
        return value
    if isinstance(default, int):
        if type(value) is not int:
            raise ConfigError(f"{source}: {name} must be an integer")
        return value
    if isinstance(default, float):
        if type(value) not in (int, float):
            raise ConfigError(f"{source}: {name} must be a number")
        if not math.isfinite(value):  # TOML reads inf and nan: no setting means either
            raise ConfigError(f"{source}: {name} must be a finite number, got {value}")
        return float(value)
    if isinstance(default, str) and not isinstance(value, str):
        raise ConfigError(f"{source}: {name} must be a string")
    return value


def config_fields(root: type = RunConfig) -> Iterator[tuple[str, dataclasses.Field[Any]]]:
    """Every leaf field of ``root`` (``RunConfig``) with its dotted path, in declaration order."""
    for f in dataclasses.fields(root):
        sub = f.default_factory if f.default_factory is not dataclasses.MISSING else None
        if sub is not None and dataclasses.is_dataclass(sub):
            for g in dataclasses.fields(sub):
                yield f"{f.name}.{g.name}", g
        else:
            yield f.name, f


def get_path(tree: Any, path: str) -> Any:
    """The value at dotted ``path`` of a configuration tree."""
    value: Any = tree
    for part in path.split("."):
        value = getattr(value, part)
    return value


def replace_paths(tree: Any, changes: Mapping[str, Any]) -> Any:
    """A copy of a configuration tree with top-level or nested (``learning.lr``) fields changed."""
    top: dict[str, Any] = {}
    sections: dict[str, dict[str, Any]] = {}
    for key, value in changes.items():
        if "." in key:
            section, name = key.split(".", 1)
            sections.setdefault(section, {})[name] = value
        else:
            top[key] = value
    for section, values in sections.items():
        top[section] = dataclasses.replace(getattr(tree, section), **values)
    return dataclasses.replace(tree, **top)


def check_fields(tree: Any) -> None:
    """Each field's own check (declared with its flag), or ConfigError naming the first bad one."""
    for path, f in config_fields(type(tree)):
        value = get_path(tree, path)
        flag: Flag | None = f.metadata.get("flag")
        name = flag.flag_name(f.name)[2:] if flag else f.name.replace("_", "-")
        check: Check | None = flag.check if flag else f.metadata.get("check")
        if flag is not None and flag.choices and check is None:
            _check(value in flag.choices, name, f"must be one of {', '.join(flag.choices)}, got {value!r}")
        elif check is not None:
            _check(check[0](value), name, f"{check[1]}, got {value!r}")


def _check(ok: bool, name: str, what: str) -> None:
    if not ok:
        raise ConfigError(f"--{name} {what}")
