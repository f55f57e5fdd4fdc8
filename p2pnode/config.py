"""The one typed, validated configuration tree, its presets, and loading from TOML.

The CLI only maps flags onto this tree (docs/design.md, rule 9). Every field is documented here.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adversary.momentum import ESTIMATORS

PROTOCOLS = ("base", "samo", "fedavg")
SAMPLINGS = ("static", "peerswap", "cyclon", "pers")
MODELS = ("gmf", "prme")


class ConfigError(ValueError):
    """A configuration value is invalid; the message names the field and what is allowed."""


@dataclass(frozen=True)
class LearningConfig:
    """Local model and training (GMF defaults from NCF; docs/design.md, Learning)."""

    factors: int = 32  #: embedding size
    lr: float = 0.001  #: Adam learning rate
    batch_size: int = 256  #: minibatch size
    negatives: int = 4  #: sampled negatives per positive
    local_epochs: int = 1  #: epochs over the local data per local update
    top_k: int = 20  #: K of HR@K
    share_less: bool = False  #: keep the user embedding private (CIA paper §III-D)
    share_less_tau: float = 0.1  #: τ of the item regulariser of eq. 2 (used with share_less)
    prme_dim: int = 60  #: PRME embedding size (Feng et al. 2015)
    prme_lr: float = 0.005  #: PRME SGD learning rate
    prme_reg: float = 0.03  #: PRME L2 regularisation
    dp_noise: float = 0.0  #: DP-SGD noise multiplier σ (0: no DP unless dp_epsilon is set)
    dp_epsilon: float = 0.0  #: DP-SGD target ε per node over the run (0: none; σ calibrated from it)
    dp_clip: float = 2.0  #: DP-SGD per-example clipping bound C (CIA paper Fig. 5)
    dp_delta: float = 1e-6  #: DP-SGD δ (CIA paper Fig. 5)

    @property
    def dp(self) -> bool:
        """Whether nodes train with DP-SGD."""
        return self.dp_noise > 0 or self.dp_epsilon > 0


@dataclass(frozen=True)
class WireConfig:
    """How models travel."""

    delta: bool = True  #: send row deltas against an acknowledged base when smaller
    float16: bool = False  #: send float tensors in half precision (lossy, both sides agree)
    delta_peers: int = 0  #: senders whose last model a node keeps as a base (0: from the budget)
    delta_budget_bytes: int = 768 * 1024  #: memory per node for those bases when delta_peers is 0

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


@dataclass(frozen=True)
class AttackConfig:
    """The adversary (CIA paper §IV): who attacks, with which target, and how."""

    kind: str = ""  #: "" (no attack) | "cia"
    target_k: int = 50  #: K, the size of the community to find
    momentum: float = 0.99  #: β of eq. 4
    momentum_estimator: str = "debiased"  #: eq. 4: debiased | first | zero | init (adversary/momentum.py)
    attackers: str = "all"  #: gossip: "all" (every node, its own items as target) or node ids "3,17"
    target_items: str = ""  #: raw item ids "50,172,181" as V_target for every attacker
    target_genre: str = ""  #: an ML-100k genre ("Horror") as V_target for every attacker
    colluders: float = 0.0  #: gossip: share of nodes in each colluding group (0: none)
    colluder_groups: int = 1  #: how many disjoint colluding groups (each one adversary)
    refresh_every: int = 10  #: Share less, gossip: retrain e_A every this many wake-ups (server: each round)
    multicast: str = "theta"  #: colluders forward Θ_u to the read member | "v": v_u to all (Alg. 2)
    fictive_user: bool = False  #: score shared models with e_A (as under Share less), not their own
    mia: bool = False  #: MPE membership inference on every hosted node's model (002 §2.5)
    mia_proxy: str = ""  #: thresholds ρ "0.2,0.4": MIA as a CIA proxy (000 §VIII-C, GMF only)
    mia_holdout: int = 0  #: latest training items per user kept out of training as MIA non-members

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

    delay_min: float = 0.0  #: minimum one-way delay, ticks
    delay_max: float = 0.0  #: maximum one-way delay, ticks
    drop: float = 0.0  #: probability that a frame is lost


@dataclass(frozen=True)
class RunConfig:
    """One experiment: network, protocol, sampling, data, learning, wire and timing."""

    nodes: int = 943  #: number of nodes (one per user, the first N users of the dataset)
    rounds: int = 20  #: rounds to run (a round is 100 ticks)
    model: str = "gmf"  #: gmf (utility HR@K) | prme (utility F1@K)
    protocol: str = "base"  #: base | samo (002 Algorithms 1 and 2) | fedavg (server id = nodes)
    fraction: float = 1.0  #: fedavg: share of clients the server selects each round
    sampling: str = "peerswap"  #: static | peerswap | cyclon
    view_size: int = 3  #: out-view size P
    swap_rate: float = 0.1  #: PeerSwap view changes per node per round (p ~ Exp(rate))
    exploration: float = 0.4  #: pers: probability of sending to the random view instead
    seed: int = 0  #: seed of everything random
    dataset: str = "ml-100k"  #: ml-100k | synthetic | PATH of a user,item[,timestamp] file
    data_dir: str = ""  #: where datasets live ("" = default cache directory)
    min_interactions: int = 5  #: PATH datasets: drop users with fewer distinct items
    samo_buffer: int = 64  #: SAMO: most models buffered between wake-ups
    tick_seconds: float = 0.01  #: real runs: wall-clock seconds per tick
    eval_every: int = 1  #: evaluate HR@K every this many rounds
    learning: LearningConfig = field(default_factory=LearningConfig)
    wire: WireConfig = field(default_factory=WireConfig)
    sim: SimConfig = field(default_factory=SimConfig)
    synthetic: SyntheticSection = field(default_factory=SyntheticSection)
    attack: AttackConfig = field(default_factory=AttackConfig)

    def validate(self) -> RunConfig:
        """Return self, or raise ConfigError naming the first bad field."""
        _check(self.nodes >= 2, "nodes", "must be at least 2")
        _check(self.rounds >= 1, "rounds", "must be at least 1")
        _check(self.model in MODELS, "model", f"must be one of {', '.join(MODELS)}")
        _check(self.learning.prme_dim >= 1 and self.learning.prme_lr > 0, "prme", "dim/lr must be > 0")
        _check(self.protocol in PROTOCOLS, "protocol", f"must be one of {', '.join(PROTOCOLS)}")
        _check(self.sampling in SAMPLINGS, "sampling", f"must be one of {', '.join(SAMPLINGS)}")
        _check(1 <= self.view_size < self.nodes, "view-size", "must be in [1, nodes)")
        _check(self.swap_rate >= 0, "swap-rate", "must be >= 0")
        _check(0 <= self.exploration <= 1, "exploration", "must be in [0, 1]")
        _check(self.samo_buffer >= 1, "samo-buffer", "must be >= 1")
        _check(0 < self.fraction <= 1, "fraction", "must be in (0, 1]")
        _check(self.tick_seconds > 0, "tick-seconds", "must be > 0")
        _check(self.eval_every >= 1, "eval-every", "must be >= 1")
        _check(self.min_interactions >= 2, "min-interactions", "must be >= 2 (leave-one-out)")
        _check(bool(self.dataset), "dataset", "must be ml-100k, synthetic or a file path")
        lc = self.learning
        _check(lc.factors >= 1, "factors", "must be >= 1")
        _check(lc.lr > 0, "lr", "must be > 0")
        _check(lc.batch_size >= 1, "batch-size", "must be >= 1")
        _check(lc.negatives >= 1, "negatives", "must be >= 1")
        _check(lc.local_epochs >= 1, "local-epochs", "must be >= 1")
        _check(lc.top_k >= 1, "top-k", "must be >= 1")
        _check(lc.share_less_tau >= 0, "share-less-tau", "must be >= 0")
        _check(lc.dp_noise >= 0 and lc.dp_epsilon >= 0, "dp-noise/dp-epsilon", "must be >= 0")
        _check(not (lc.dp_noise and lc.dp_epsilon), "dp-noise", "give --dp-noise or --dp-epsilon, not both")
        _check(lc.dp_clip > 0, "dp-clip", "must be > 0")
        _check(0 < lc.dp_delta < 1, "dp-delta", "must be in (0, 1)")
        _check(self.wire.delta_peers >= 0, "delta-peers", "must be >= 0 (0: from the budget)")
        a = self.attack
        _check(a.kind in ("", "cia"), "attack", "must be cia (or empty for none)")
        _check(
            a.target_k >= 1 and (not a.kind or a.target_k < self.nodes), "target-k", "must be in [1, nodes)"
        )
        _check(0 <= a.momentum < 1, "momentum", "must be in [0, 1)")
        _check(0 <= a.colluders <= 1, "colluders", "must be in [0, 1]")
        _check(a.colluder_groups >= 1, "colluder-groups", "must be >= 1")
        _check(a.refresh_every >= 1, "cia-refresh", "must be >= 1")
        _check(a.multicast in ("v", "theta"), "multicast", "must be v (Algorithm 2) or theta")
        _check(
            a.momentum_estimator in ESTIMATORS,
            "momentum-estimator",
            f"must be one of {', '.join(ESTIMATORS)}, got {a.momentum_estimator!r}",
        )
        _check(
            not (a.target_items and a.target_genre), "target-genre", "give target items or a genre, not both"
        )
        _check(a.mia_holdout >= 0, "mia-holdout", "must be >= 0")
        _check(a.mia or not a.mia_holdout, "mia-holdout", "needs --mia (it only feeds the MIA)")
        if a.mia_proxy:
            _check(bool(a.proxy_thresholds()), "mia-proxy", "needs at least one threshold")
            _check(a.kind == "cia", "mia-proxy", "needs --attack cia (it uses the CIA adversary's state)")
            _check(self.model == "gmf", "mia-proxy", "needs a model that predicts probabilities (gmf)")
        if a.colluders:
            size = max(2, round(a.colluders * self.nodes))
            _check(self.protocol != "fedavg", "colluders", "apply to gossip protocols only")
            _check(size * a.colluder_groups <= self.nodes, "colluder-groups", "groups do not fit the network")
        s = self.sim
        _check(0 <= s.drop < 1, "drop", "must be in [0, 1)")
        _check(0 <= s.delay_min <= s.delay_max, "delay", "need 0 <= delay-min <= delay-max")
        return self

    def replace(self, **changes: Any) -> RunConfig:
        """A copy with top-level or nested (``learning.lr``) fields changed."""
        top: dict[str, Any] = {}
        nested: dict[str, dict[str, Any]] = {}
        for key, value in changes.items():
            if "." in key:
                section, name = key.split(".", 1)
                nested.setdefault(section, {})[name] = value
            else:
                top[key] = value
        for section, values in nested.items():
            top[section] = dataclasses.replace(getattr(self, section), **values)
        return dataclasses.replace(self, **top)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


PRESETS: dict[str, dict[str, Any]] = {
    "paper": {},
    "quick": {"nodes": 100, "rounds": 10, "learning.lr": 0.01},
}


def load_toml(path: Path, base: RunConfig | None = None) -> RunConfig:
    """Read a TOML file with top-level keys and [learning], [wire], [sim] tables."""
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path}: {exc}") from None
    return from_mapping(raw, base or RunConfig(), source=str(path))


def from_mapping(raw: dict[str, Any], base: RunConfig, source: str = "config") -> RunConfig:
    changes: dict[str, Any] = {}
    sections = {f.name: f for f in dataclasses.fields(RunConfig)}
    for key, value in raw.items():
        k = key.replace("-", "_")
        if k not in sections:
            raise ConfigError(f"{source}: unknown key {key!r}")
        sub = getattr(base, k)
        if dataclasses.is_dataclass(sub):
            if not isinstance(value, dict):
                raise ConfigError(f"{source}: [{key}] must be a table")
            names = {f.name: f for f in dataclasses.fields(sub)}
            for sk, sv in value.items():
                sk2 = sk.replace("-", "_")
                if sk2 not in names:
                    raise ConfigError(f"{source}: unknown key {key}.{sk}")
                changes[f"{k}.{sk2}"] = _coerce(sv, getattr(sub, sk2), f"{key}.{sk}", source)
        else:
            changes[k] = _coerce(value, sub, key, source)
    return base.replace(**changes).validate()


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
        return float(value)
    if isinstance(default, str) and not isinstance(value, str):
        raise ConfigError(f"{source}: {name} must be a string")
    return value


def _check(ok: bool, name: str, what: str) -> None:
    if not ok:
        raise ConfigError(f"--{name} {what}")
