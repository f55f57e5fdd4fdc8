"""Users' private attributes (gender, age group, occupation, ...): what attribute inference targets.

Paper 004 (PARD, §II-B and Table II) attacks three attributes of MovieLens users: gender (2
classes), age (3 groups) and occupation (21 classes). An :class:`Attributes` holds, per attribute,
a class index for every user of a run (node ids 0..N-1; -1 where the user's value is unknown) and
the classes' names. Pure: readers of files live in ``p2pnode.data.datasets``.

The age groups of 004 are not given. The default cut, under 25 / 25-44 / 45 and over
(:data:`AGE_CUTS`; 234 / 504 / 205 of ML-100k's 943 users), is an inference: on 004's 20/80 split
(scikit-learn's ``train_test_split``, ``random_state=1``) prior sampling scores a micro-F1 of
0.388 in expectation (one draw varies by about 0.02; 0.3945 was one), the nearest found to the
paper's "Random Attack" 0.4026; other cuts are one setting away (``--age-cuts``).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from learning.interactions import DataError

#: age-group boundaries of the default 3-way cut: <25, 25-44, >=45 (an inference; module docstring)
AGE_CUTS: tuple[float, ...] = (25.0, 45.0)

Labels = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Attribute:
    """One attribute: a class index per user (-1: unknown) and the classes' names."""

    name: str
    classes: tuple[str, ...]
    labels: Labels

    def __post_init__(self) -> None:
        known = self.labels[self.labels >= 0]
        if known.size and int(known.max()) >= len(self.classes):
            raise ValueError(f"attribute {self.name}: a label past its {len(self.classes)} classes")

    @property
    def binary(self) -> bool:
        return len(self.classes) == 2


@dataclass(frozen=True)
class Attributes:
    """Every attribute of a run's users, by name, in a fixed order."""

    items: tuple[Attribute, ...]

    def __post_init__(self) -> None:
        sizes = {len(a.labels) for a in self.items}
        if len(sizes) > 1:
            raise ValueError("attributes of different numbers of users")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.items)

    def __getitem__(self, name: str) -> Attribute:
        for a in self.items:
            if a.name == name:
                return a
        raise KeyError(name)

    def first(self, n: int) -> Attributes:
        """The attributes of users 0..n-1 (a run on the first ``n`` users of its data)."""
        return Attributes(tuple(Attribute(a.name, a.classes, a.labels[:n]) for a in self.items))


def categorical(name: str, values: Sequence[str | None], order: Sequence[str] | None = None) -> Attribute:
    """An attribute from one value per user (None: unknown); classes sorted, or in ``order``."""
    seen = sorted({v for v in values if v is not None}) if order is None else list(order)
    index = {c: k for k, c in enumerate(seen)}
    labels = np.array([index[v] if v is not None else -1 for v in values], dtype=np.int64)
    return Attribute(name, tuple(seen), labels)


def binned(name: str, values: Sequence[float | None], cuts: Sequence[float]) -> Attribute:
    """A numeric attribute cut into groups at ``cuts`` (ascending): ``<c0``, ``c0-c1``, ..., ``>=cN``."""
    cuts = [float(c) for c in cuts]
    if not cuts or any(b <= a for a, b in itertools.pairwise(cuts)):
        raise DataError(f"attribute {name}: cuts must be ascending numbers, got {list(cuts)}")
    classes = [f"<{cuts[0]:g}"]
    classes += [f"{a:g}-{b:g}" for a, b in itertools.pairwise(cuts)]
    classes.append(f">={cuts[-1]:g}")
    labels = np.array(
        [-1 if v is None else int(np.searchsorted(cuts, v, side="right")) for v in values], dtype=np.int64
    )
    return Attribute(name, tuple(classes), labels)


def quantile_cuts(values: Sequence[float | None], bins: int) -> tuple[float, ...]:
    """``bins - 1`` cuts at the quantiles of the known values (repeated cuts merged)."""
    known = np.array([v for v in values if v is not None], dtype=np.float64)
    if bins < 2 or known.size == 0:
        raise DataError(f"cannot bin {known.size} values into {bins} groups")
    cuts = np.unique(np.quantile(known, np.linspace(0, 1, bins + 1)[1:-1]))
    return tuple(float(c) for c in cuts)


def from_rows(
    rows: Mapping[str, Mapping[str, str]],
    raw_user_ids: Sequence[str],
    bins: int = 3,
    cuts: Mapping[str, Sequence[float]] | None = None,
    source: str = "attributes",
) -> Attributes:
    """Attributes of ``raw_user_ids`` (a run's users, in node order) from ``rows``: per raw user
    id, its value of each column. A column whose every value is a number is binned (``cuts`` for
    that column, else ``bins`` quantile groups); any other column is categorical. Refused with one
    clear line (DataError): no user of the run in ``rows``, a column with one class only."""
    if not rows:
        raise DataError(f"{source}: no rows")
    columns = list(next(iter(rows.values())).keys())
    if not columns:
        raise DataError(f"{source}: no attribute column beside the user id")
    known = [u for u in raw_user_ids if u in rows]
    if not known:
        sample = ", ".join(list(rows)[:3])
        raise DataError(
            f"{source}: none of the run's users is in it (its ids: {sample}, ...; the run's: "
            f"{', '.join(raw_user_ids[:3])}, ...): the first column must hold the data file's own user ids"
        )
    items = []
    for col in columns:
        raw = [rows[u].get(col) if u in rows else None for u in raw_user_ids]
        values = [v if v not in (None, "") else None for v in raw]
        numbers = _numbers(values)
        if numbers is not None:
            group: Sequence[float] = cuts[col] if cuts and col in cuts else quantile_cuts(numbers, bins)
            attribute = binned(col, numbers, group)
        else:
            attribute = categorical(col, values)
        present = set(attribute.labels[attribute.labels >= 0].tolist())
        if len(present) < 2:
            raise DataError(
                f"{source}: column {col!r} has one class only among the run's users: nothing to infer"
            )
        items.append(attribute)
    return Attributes(tuple(items))


def _numbers(values: Sequence[str | None]) -> list[float | None] | None:
    """The values as numbers, or None when one of them is not a number."""
    out: list[float | None] = []
    for v in values:
        if v is None:
            out.append(None)
            continue
        try:
            out.append(float(v))
        except ValueError:
            return None
    return out if any(v is not None for v in out) else None


def planted(
    community_of: Sequence[int], classes: int, strength: float, seed: int, name: str = "planted"
) -> Attribute:
    """An attribute tied to the planted communities, for tests of the attack: with probability
    ``strength`` a user's class is its community's (community index mod ``classes``), else a class
    drawn uniformly. Strength 0: independent of everything a model learns; 1: a function of it."""
    if classes < 2 or not 0.0 <= strength <= 1.0:
        raise DataError("a planted attribute needs 2+ classes and a strength in [0, 1]")
    rng = np.random.default_rng([seed, 0xA1A])
    tied = rng.random(len(community_of)) < strength
    drawn = rng.integers(0, classes, len(community_of))
    labels = np.where(tied, np.asarray(community_of, dtype=np.int64) % classes, drawn).astype(np.int64)
    return Attribute(name, tuple(f"class {k}" for k in range(classes)), labels)
