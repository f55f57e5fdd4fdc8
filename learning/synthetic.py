"""Synthetic interactions with planted communities, and their ground truth.

Users are split into communities; each community has a pool of preferred items. A user draws each
of its interactions from its community's pool with probability ``in_pool_share`` and uniformly from
all items otherwise. Pools of neighbouring communities overlap by ``pool_overlap`` items, so the
communities are more or less separable. Used by tests and to check the attacks against a
known answer. Seeded: the same config gives the same data.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

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


# -- POI-shaped check-ins ------------------------------------------------------------------------

#: Foursquare category names (a few of the TSMC2014 NYC file's), the first ones the most visited;
#: the health ones let ``--target-genre`` be tried as in the CIA paper's Figure 1
POI_CATEGORIES = (
    "Bar",
    "Home (private)",
    "Office",
    "Subway",
    "Gym / Fitness Center",
    "Coffee Shop",
    "Food & Drink Shop",
    "Train Station",
    "Park",
    "Neighborhood",
    "Other Great Outdoors",
    "American Restaurant",
    "Deli / Bodega",
    "Pizza Place",
    "Building",
    "Bus Station",
    "Mexican Restaurant",
    "Italian Restaurant",
    "Chinese Restaurant",
    "Clothing Store",
    "Airport",
    "University",
    "Hotel",
    "Museum",
    "Movie Theater",
    "Salon / Barbershop",
    "Bank",
    "Church",
    "Grocery Store",
    "Drugstore / Pharmacy",
    "Medical Center",
    "Doctor's Office",
    "Hospital",
    "Dentist's Office",
    "Emergency Room",
    "Library",
    "Bookstore",
    "Stadium",
    "Theater",
    "Music Venue",
)


@dataclass(frozen=True)
class POIConfig:
    """Sizes of a point-of-interest check-in log like the CIA paper's Foursquare-NYC and Gowalla-NYC.

    Venues sit in ``neighbourhoods`` (Gaussian clusters around a city centre) and each has one
    category. A user lives in one neighbourhood: a share ``home_share`` of its new venues are
    drawn from there, the rest from the whole city, each by Zipf popularity (exponent ``zipf``).
    A share ``repeat_share`` of check-ins revisits a venue the user already went to. Users' check-in
    counts are log-normal (at least ``min_per_user``); every venue is visited at least once, so
    the catalogue has exactly ``venues`` items. Seeded: the same config gives the same log.
    """

    users: int = 1083
    venues: int = 38333
    checkins: int = 227428
    neighbourhoods: int = 60
    zipf: float = 0.8
    home_share: float = 0.7
    repeat_share: float = 0.45
    min_per_user: int = 20
    spread: float = 1.0  #: log-normal σ of the users' check-in counts
    centre: tuple[float, float] = (40.73, -73.96)  #: latitude, longitude
    radius: float = 0.12  #: degrees: how far neighbourhood centres lie from the city centre
    start: float = 1333411200.0  #: first check-in time (epoch seconds; 2012-04-03 UTC)
    days: float = 320.0  #: span of the log
    tz_minutes: int = -240  #: the TSMC2014 file's timezoneOffset column for every row
    seed: int = 0

    def validate(self) -> POIConfig:
        if self.users < 2 or self.venues < 2:
            raise DataError("poi: need at least 2 users and 2 venues")
        if not 1 <= self.neighbourhoods <= self.venues:
            raise DataError("poi: need 1 <= neighbourhoods <= venues")
        if self.min_per_user < 2:
            raise DataError("poi: min_per_user must be >= 2 (leave-one-out)")
        # every venue has a first visitor, who spends at most half of its check-ins on them
        if self.checkins < max(2 * self.venues + self.users, self.users * self.min_per_user):
            raise DataError(
                f"poi: {self.checkins} check-ins cannot visit {self.venues} venues (at most half of a "
                f"user's check-ins go to first visits: need {2 * self.venues + self.users}) and give "
                f"{self.users} users {self.min_per_user} each"
            )
        for name in ("home_share", "repeat_share"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise DataError(f"poi: {name} must be in [0, 1)")
        if self.zipf < 0 or self.spread < 0 or self.days <= 0:
            raise DataError("poi: zipf, spread and days must be positive")
        return self


#: the shapes of the CIA paper's POI data sets (Table I; Foursquare's count is the public file's)
POI_SHAPES: dict[str, POIConfig] = {
    "foursquare-nyc": POIConfig(),
    "gowalla-nyc": POIConfig(
        users=718, venues=32924, checkins=185932, start=1265760000.0, days=620.0, tz_minutes=0
    ),
}


@dataclass(frozen=True)
class CheckIns:
    """A check-in log: row k is user ``users[k]`` at venue ``venues[k]`` at ``times[k]`` (epoch
    seconds, sorted per user); venue v lies at (``lat[v]``, ``lon[v]``) with category
    ``categories[category[v]]``."""

    users: npt.NDArray[np.int64]
    venues: npt.NDArray[np.int64]
    times: npt.NDArray[np.float64]
    lat: npt.NDArray[np.float64]
    lon: npt.NDArray[np.float64]
    category: npt.NDArray[np.int64]
    categories: tuple[str, ...]
    tz_minutes: int = 0

    def __len__(self) -> int:
        return int(self.users.shape[0])


def poi_checkins(cfg: POIConfig) -> CheckIns:
    """Generate a check-in log of ``cfg``'s shape (see :class:`POIConfig`)."""
    cfg.validate()
    rng = np.random.default_rng([cfg.seed, 0x901])
    n_v, n_u, n_h = cfg.venues, cfg.users, cfg.neighbourhoods
    # venues: a neighbourhood each (some neighbourhoods bigger), a place around its centre
    hood_size = rng.dirichlet(np.full(n_h, 2.0))
    hood = rng.choice(n_h, size=n_v, p=hood_size)
    angle = rng.uniform(0, 2 * np.pi, n_h)
    dist = cfg.radius * np.sqrt(rng.uniform(0, 1, n_h))
    hood_lat = cfg.centre[0] + dist * np.sin(angle)
    hood_lon = cfg.centre[1] + dist * np.cos(angle) / np.cos(np.radians(cfg.centre[0]))
    lat = hood_lat[hood] + rng.normal(0, 0.008, n_v)
    lon = hood_lon[hood] + rng.normal(0, 0.010, n_v)
    lat = np.clip(lat, cfg.centre[0] - 0.2, cfg.centre[0] + 0.18)
    lon = np.clip(lon, cfg.centre[1] - 0.28, cfg.centre[1] + 0.25)
    n_c = len(POI_CATEGORIES)
    cat_p = 1.0 / np.arange(1, n_c + 1) ** 0.9
    category = rng.choice(n_c, size=n_v, p=cat_p / cat_p.sum())
    popularity = 1.0 / rng.permutation(np.arange(1, n_v + 1)) ** cfg.zipf
    # users: a home neighbourhood and a log-normal number of check-ins summing to the total
    home = rng.choice(n_h, size=n_u, p=hood_size)
    counts = _split_counts(rng, cfg)
    first = _cover_venues(rng, n_v, hood, home, counts)
    users: list[npt.NDArray[np.int64]] = []
    venues: list[npt.NDArray[np.int64]] = []
    in_hood = [np.flatnonzero(hood == h) for h in range(n_h)]
    hood_cdf = [np.cumsum(popularity[v]) / popularity[v].sum() for v in in_hood]
    city_cdf = np.cumsum(popularity) / popularity.sum()
    for u in range(n_u):
        h = int(home[u])
        visits = _user_visits(rng, cfg, int(counts[u]), first[u], in_hood[h], hood_cdf[h], city_cdf)
        users.append(np.full(len(visits), u, dtype=np.int64))
        venues.append(visits)
    u_all = np.concatenate(users)
    v_all = np.concatenate(venues)
    times = cfg.start + rng.uniform(0, cfg.days * DAY, len(u_all)).round()
    order = np.lexsort((times, u_all))
    return CheckIns(
        u_all[order],
        v_all[order],
        times[order],
        lat,
        lon,
        category.astype(np.int64),
        POI_CATEGORIES,
        cfg.tz_minutes,
    )


def _split_counts(rng: np.random.Generator, cfg: POIConfig) -> npt.NDArray[np.int64]:
    """Check-ins per user: log-normal shares of what is left above the minimum, summing exactly."""
    weights = rng.lognormal(0.0, cfg.spread, cfg.users)
    extra = cfg.checkins - cfg.users * cfg.min_per_user
    counts = np.floor(weights / weights.sum() * extra).astype(np.int64)
    counts[np.argsort(-weights)[: extra - int(counts.sum())]] += 1
    out: npt.NDArray[np.int64] = counts + cfg.min_per_user
    return out


def _cover_venues(
    rng: np.random.Generator,
    n_v: int,
    hood: npt.NDArray[np.int64],
    home: npt.NDArray[np.int64],
    counts: npt.NDArray[np.int64],
) -> list[list[int]]:
    """Give every venue one first visitor (someone living in its neighbourhood when there is one,
    each user at most half of its check-ins), so no venue of the catalogue goes unvisited."""
    first: list[list[int]] = [[] for _ in counts]
    room = counts // 2
    for v in rng.permutation(n_v):
        locals_ = np.flatnonzero((home == hood[v]) & (room > 0))
        pool = locals_ if len(locals_) else np.flatnonzero(room > 0)
        u = int(pool[rng.integers(len(pool))])
        first[u].append(int(v))
        room[u] -= 1
    return first


def _user_visits(
    rng: np.random.Generator,
    cfg: POIConfig,
    count: int,
    own: list[int],
    hood_venues: npt.NDArray[np.int64],
    hood_cdf: npt.NDArray[np.float64],
    city_cdf: npt.NDArray[np.float64],
) -> npt.NDArray[np.int64]:
    """One user's ``count`` check-ins: its covering visits, then new venues near home or in the
    city by popularity, or revisits of a venue among the earlier ones."""
    out = np.empty(count, dtype=np.int64)
    out[: len(own)] = own
    rest = count - len(own)
    near = rng.random(rest) < cfg.home_share
    new = np.where(
        near,
        hood_venues[np.minimum(np.searchsorted(hood_cdf, rng.random(rest)), len(hood_venues) - 1)],
        np.minimum(np.searchsorted(city_cdf, rng.random(rest)), len(city_cdf) - 1),
    )
    again = rng.random(rest) < cfg.repeat_share
    pick = rng.random(rest)
    for k in range(rest):
        at = len(own) + k
        out[at] = out[int(pick[k] * at)] if again[k] and at else new[k]
    return out


#: other cities for :func:`elsewhere` (latitude, longitude): far outside any New York box
_OTHER_CITIES = ((51.51, -0.13), (37.77, -122.42), (59.33, 18.07), (30.27, -97.74), (48.86, 2.35))


def elsewhere(log: CheckIns, share: float, seed: int = 0) -> CheckIns:
    """``log`` with check-ins in other cities added, as in a world-wide file such as SNAP's Gowalla:
    new users and venues, and trips of the log's own users. ``share``: the added rows' share of the
    result. Cutting the result to the original city gives ``log`` back (same users, venues, rows)."""
    if not 0.0 <= share < 1.0:
        raise DataError("elsewhere: share must be in [0, 1)")
    rng = np.random.default_rng([seed, 0xE15E])
    n_add = round(len(log) * share / (1.0 - share))
    n_u, n_v = int(log.users.max()) + 1, len(log.lat)
    extra_v = max(1, n_add // 4)
    city = rng.integers(len(_OTHER_CITIES), size=extra_v)
    centres = np.array(_OTHER_CITIES)[city]
    lat = centres[:, 0] + rng.normal(0, 0.05, extra_v)
    lon = centres[:, 1] + rng.normal(0, 0.05, extra_v)
    travellers = rng.random(n_add) < 0.2  # a fifth of the added rows are the log's users on a trip
    users = np.where(
        travellers, rng.integers(n_u, size=n_add), n_u + rng.integers(max(1, n_add // 40), size=n_add)
    )
    venues = n_v + rng.integers(extra_v, size=n_add)
    times = log.times.min() + rng.uniform(0, float(log.times.max() - log.times.min()) + 1, n_add).round()
    u_all = np.concatenate((log.users, users))
    v_all = np.concatenate((log.venues, venues))
    t_all = np.concatenate((log.times, times))
    order = np.lexsort((t_all, u_all))
    return CheckIns(
        u_all[order],
        v_all[order],
        t_all[order],
        np.concatenate((log.lat, lat)),
        np.concatenate((log.lon, lon)),
        np.concatenate((log.category, rng.integers(len(log.categories), size=extra_v))),
        log.categories,
        log.tz_minutes,
    )


_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _hex_id(kind: int, index: int) -> str:
    """A Foursquare-like 24-hex-digit id, the same for the same (kind, index)."""
    return f"{((index + 1) * 0x9E3779B97F4A7C15F39CC061 + kind * 0x632BE59BD9B4E019) % (1 << 96):024x}"


def tsmc_time(t: float) -> str:
    """Epoch seconds in the TSMC2014 file's form: ``Tue Apr 03 18:00:09 +0000 2012``."""
    d = _EPOCH + timedelta(seconds=int(t))
    return f"{_DAYS[d.weekday()]} {_MONTHS[d.month - 1]} {d.day:02d} {d:%H:%M:%S} +0000 {d.year}"


def iso_time(t: float) -> str:
    """Epoch seconds as SNAP's Gowalla file writes them: ``2010-10-19T23:55:27Z``."""
    return f"{_EPOCH + timedelta(seconds=int(t)):%Y-%m-%dT%H:%M:%SZ}"


def tsmc_lines(log: CheckIns) -> Iterator[str]:
    """The log as the TSMC2014 NYC file (dataset_TSMC2014_NYC.txt): tab-separated, no header;
    userId, venueId, venueCategoryId, venueCategory, latitude, longitude, timezoneOffset,
    utcTimestamp. User ids from 1, Foursquare-like hexadecimal venue and category ids."""
    for u, v, t in zip(log.users.tolist(), log.venues.tolist(), log.times.tolist(), strict=True):
        c = int(log.category[v])
        yield (
            f"{u + 1}\t{_hex_id(1, v)}\t{_hex_id(2, c)}\t{log.categories[c]}\t"
            f"{log.lat[v]:.9f}\t{log.lon[v]:.9f}\t{log.tz_minutes}\t{tsmc_time(t)}\n"
        )


def snap_lines(log: CheckIns) -> Iterator[str]:
    """The log as SNAP's loc-gowalla_totalCheckins.txt: tab-separated, no header; user, check-in
    time (ISO 8601, UTC), latitude, longitude, location id."""
    for u, v, t in zip(log.users.tolist(), log.venues.tolist(), log.times.tolist(), strict=True):
        yield f"{u}\t{iso_time(t)}\t{log.lat[v]:.7f}\t{log.lon[v]:.7f}\t{v + 9000}\n"


def csv_lines(log: CheckIns) -> Iterator[str]:
    """The log as a plain CSV with a header: user, venue, timestamp (epoch seconds), category."""
    yield "user,venue,timestamp,category\n"
    for u, v, t in zip(log.users.tolist(), log.venues.tolist(), log.times.tolist(), strict=True):
        yield f"{u},{v},{int(t)},{log.categories[int(log.category[v])]}\n"


POI_FORMATS = {"tsmc2014": tsmc_lines, "snap": snap_lines, "csv": csv_lines}
