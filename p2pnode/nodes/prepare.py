"""Preparing a run: what every node of it shares, derived once from the configuration.

The dataset (ML-100k, synthetic with planted communities, or a user's file), its leave-one-out
split (NCF's protocol, docs/design.md, Learning), θ_0, and for static, PeerSwap and Pers the initial k-regular
graph (002 §3).
"""

from __future__ import annotations

import dataclasses
import functools
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from learning import gmf, ncf, prme
from learning.interactions import DataError, Interactions
from learning.params import Params
from learning.pard_learner import init_user_re
from learning.split import (
    UserData,
    fewest_untouched,
    hold_out_nonmembers,
    hold_out_validation,
    leave_one_out,
    plant_canaries,
)
from learning.synthetic import Planted, SyntheticConfig, planted_communities
from p2pnode.config import RunConfig
from p2pnode.data.datasets import ML100K, load_ml100k, load_table
from p2pnode.data.tables import TableOptions
from peer_sampling.graph import in_views, random_regular_digraph


@dataclass(frozen=True)
class Prepared:
    """What every node of an experiment shares: its data split, θ_0 and the initial graph."""

    config: RunConfig
    users: list[UserData]
    init: Params
    out_views: dict[int, list[int]]
    in_views: dict[int, list[int]]
    planted: Planted | None = None
    data: Interactions | None = None  #: the interactions (raw ids for attack targets)
    cache: dict[str, Any] = dataclasses.field(default_factory=dict)  #: derived once per run (attack plan)

    @property
    def model_bytes(self) -> int:
        return sum(v.nbytes for v in self.init.values())


def load_data(config: RunConfig) -> tuple[Interactions, Planted | None]:
    """The dataset the config names, and the planted ground truth when it is synthetic."""
    if config.dataset == ML100K:
        return load_ml100k(config.data_dir or None), None
    if config.dataset == "synthetic":
        fields = dataclasses.asdict(config.synthetic)
        fields.pop("attribute_strength")  # the planted attribute's (p2pnode/attacks/attributes.py)
        synth = SyntheticConfig(users=config.nodes, seed=config.seed, **fields)
        return planted_communities(synth)
    if not Path(config.dataset).exists():
        raise DataError(f"--dataset {config.dataset!r} is neither ml-100k, synthetic nor an existing file")
    path = Path(config.dataset)
    stat = path.stat()
    return _load_file(str(path.resolve()), stat.st_mtime_ns, stat.st_size, config.table_options()), None


@functools.lru_cache(maxsize=4)
def _load_file(path: str, mtime_ns: int, size: int, options: TableOptions) -> Interactions:
    """A file dataset, read once per process while the file is unchanged (a world-wide check-in
    file takes seconds; the command line reads it to count its users, then the run reads it)."""
    return load_table(path, options=options)


def prepare(config: RunConfig) -> Prepared:
    """Load the data, split it, draw θ_0 and (static/peerswap) the initial k-regular graph."""
    data, planted = load_data(config)
    if config.nodes > data.n_users:
        raise DataError(f"--nodes {config.nodes} exceeds the {data.n_users} users of {data.name}")
    data = data.subset_users(config.nodes)
    check_ranking(config, data)
    users = leave_one_out(data, config.seed, config.learning.test_negatives)
    if config.attack.mia_holdout:
        users = hold_out_nonmembers(users, config.attack.mia_holdout)
    if config.model_plugin:
        from learning.plugin_model import plugin_init
        from p2pnode import plugins

        init = plugin_init(config.model_plugin, plugins.model(config.model_plugin), data.n_items, config.seed)
    elif config.model == "prme":
        init = prme.init_params(data.n_items, config.learning.prme_dim, config.seed)
    elif config.model == "ncf":
        lc = config.learning
        init = ncf.init_params(data.n_items, lc.ncf_dim, lc.ncf_hidden, config.seed, lc.ncf_init_std)
    else:
        init = gmf.init_params(data.n_items, config.learning.factors, config.seed)
    if config.learning.adversarial:  # z^re beside z^ir (learning/pard_learner.py)
        one_row = config.learning.defence == "uc-fedrec"
        std = config.learning.ncf_init_std if config.model == "ncf" else 0.01
        init = init_user_re(
            init, config.seed, "sum" if one_row else config.learning.pard_combine, one_row, std
        )
    outs: dict[int, list[int]] = {}
    ins: dict[int, list[int]] = {}
    if config.stop_patience:  # the early stop's validation item, ranked as the test item is
        users = hold_out_validation(users, config.seed, config.learning.test_negatives)
    elif config.sampling == "pers":
        users = hold_out_validation(users, config.seed)
    if config.attack.canaries:  # last: no hold-out may take a canary out of training
        try:
            users = plant_canaries(users, config.attack.canaries, config.seed)
        except ValueError as exc:  # more canaries than a user has untouched items
            raise DataError(f"--canaries {config.attack.canaries}: {exc}") from None
    if config.sampling in ("static", "peerswap", "pers") and config.protocol != "fedavg":
        outs = random_regular_digraph(range(config.nodes), config.view_size, random.Random(config.seed))
        ins = in_views(outs)
    return Prepared(config, users, init, outs, ins, planted, data)


def check_ranking(config: RunConfig, data: Interactions) -> None:
    """Refuse, at start and in one line with the settings that would work, an evaluation the
    data cannot back: more test negatives than a user has untouched items, or a K of HR@K that
    is not below the candidates the held-out item is ranked among (every model would hit, and
    the figure would tell nothing). The bounds are computed from the data."""
    lc = config.learning
    untouched = fewest_untouched(data)  # every user's candidates under --eval full: these + its test item
    label = f"{'F1' if config.model == 'prme' else 'HR'}@{lc.top_k}"
    if lc.evaluation == "full":
        if lc.top_k >= untouched + 1:
            raise DataError(
                f"{label} ranks a user's held-out item among as few as {untouched + 1} items here (--eval "
                f"full, {data.n_items} items): every model would hit; give --top-k at most {untouched}"
            )
        return
    if lc.test_negatives > untouched:
        advice = f"--test-negatives at most {max(1, untouched)}"
        if lc.top_k > untouched:
            advice += f" and --top-k at most {max(1, untouched)} (below the {untouched + 1} candidates)"
        raise DataError(
            f"a user of {data.name} has only {untouched} items it never touched to draw "
            f"{lc.test_negatives} test negatives from (a small catalogue): give {advice}"
        )
    if lc.top_k >= lc.test_negatives + 1:
        raise DataError(
            f"{label} ranks the held-out item among {lc.test_negatives + 1} candidates (--test-negatives "
            f"{lc.test_negatives} and itself): every model would hit; give --top-k at most "
            f"{lc.test_negatives}"
            + (f" or --test-negatives up to {untouched}" if untouched > lc.test_negatives else "")
        )


def nodes_of_dataset(cfg: RunConfig) -> RunConfig:
    """A file dataset without a node count: one node per user of the file (after its filter)."""
    if cfg.dataset in ("ml-100k", "synthetic") or not Path(cfg.dataset).is_file():
        return cfg  # a missing file is refused, saying so, when the run prepares its data
    data, _ = load_data(cfg)
    return cfg.replace(nodes=data.n_users)
