"""Synthetic interactions with planted communities, and their ground truth.

Users are split into communities; each community has a pool of preferred items. A user draws each
of its interactions from its community's pool with probability ``in_pool_share`` and uniformly from
all items otherwise. Pools of neighbouring communities overlap by ``pool_overlap`` items, so the
communities are more or less separable. Used by tests and to check the attacks of #4 against a
known answer. Seeded: the same config gives the same data.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from learning.interactions import DataError, Interactions

DAY = 86400.0  #: one interaction per user per day: gaps exceed PRME's τ, no fake sequences


@dataclass(frozen=True)
class SyntheticConfig:
    """Sizes of the planted structure."""

    users: int = 200
    items: int = 500
    communities: int = 5
    pool_size: int = 40  #: preferred items per community
    pool_overlap: int = 10  #: items a pool shares with the next community's pool
    per_user: int = 30  #: interactions per user (distinct items)
    in_pool_share: float = 0.8  #: probability that an interaction comes from the user's pool
    seed: int = 0

    def validate(self) -> SyntheticConfig:
        if self.users < 2 or self.communities < 1 or self.communities > self.users:
            raise DataError("synthetic: need users >= 2 and 1 <= communities <= users")
        if not 0 <= self.pool_overlap < self.pool_size:
            raise DataError("synthetic: need 0 <= pool_overlap < pool_size")
        span = self.communities * (self.pool_size - self.pool_overlap) + self.pool_overlap
        if span > self.items:
            raise DataError(f"synthetic: {self.communities} pools need {span} items, have {self.items}")
        if not 2 <= self.per_user <= self.items - 101:
            raise DataError("synthetic: per_user must be in [2, items - 101] (101 items left to rank)")
        if not 0.0 <= self.in_pool_share <= 1.0:
            raise DataError("synthetic: in_pool_share must be in [0, 1]")
        return self


@dataclass(frozen=True)
class Planted:
    """The ground truth: which users form each community, and each community's item pool."""

    communities: tuple[tuple[int, ...], ...]
    pools: tuple[tuple[int, ...], ...]

    def community_of(self, user: int) -> int:
        for c, members in enumerate(self.communities):
            if user in members:
                return c
        raise KeyError(user)


def planted_communities(cfg: SyntheticConfig) -> tuple[Interactions, Planted]:
    """Generate the interactions and return them with the planted ground truth."""
    cfg.validate()
    rng = np.random.default_rng([cfg.seed, 0x5EED])
    stride = cfg.pool_size - cfg.pool_overlap
    item_perm = rng.permutation(cfg.items)  # so pools are not contiguous ids
    pools = [
        np.sort(item_perm[c * stride : c * stride + cfg.pool_size]).astype(np.int64)
        for c in range(cfg.communities)
    ]
    members = np.array_split(rng.permutation(cfg.users), cfg.communities)
    users: list[str] = []
    items: list[str] = []
    times: list[float] = []
    for c, group in enumerate(members):
        pool = pools[c]
        for u in group:
            chosen = _draw_items(rng, pool, cfg)
            users += [str(u)] * len(chosen)
            items += [str(i) for i in chosen]
            times += [float(t) * DAY for t in range(len(chosen))]
    # every item id appears so that ids stay 0..items-1
    data = Interactions.from_raw(users, items, times, name="synthetic")
    data = _with_all_items(data, cfg.items)
    planted = Planted(
        tuple(tuple(sorted(int(u) for u in g)) for g in members),
        tuple(tuple(int(i) for i in p) for p in pools),
    )
    return data, planted


def _draw_items(
    rng: np.random.Generator, pool: npt.NDArray[np.int64], cfg: SyntheticConfig
) -> npt.NDArray[np.int64]:
    """``per_user`` distinct items, each from the pool with probability ``in_pool_share``."""
    pool_set = set(pool.tolist())
    chosen: list[int] = []
    seen: set[int] = set()
    from_pool = 0
    while len(chosen) < cfg.per_user:
        if rng.random() < cfg.in_pool_share and from_pool < len(pool):
            item = int(rng.choice(pool))
        else:
            item = int(rng.integers(cfg.items))
        if item not in seen:
            seen.add(item)
            chosen.append(item)
            from_pool += item in pool_set
    return np.array(chosen, dtype=np.int64)


def _with_all_items(data: Interactions, n_items: int) -> Interactions:
    """Re-key items so that item ids are exactly 0..n_items-1 (unseen items included)."""
    raw_ids = tuple(str(i) for i in range(n_items))
    items = np.array([int(data.raw_item_ids[i]) for i in data.items], dtype=np.int64)
    return Interactions(data.users, items, data.timestamps, data.raw_user_ids, raw_ids, data.name)
