"""The interaction log of a dataset: (user, item, timestamp[, rating]) rows with contiguous integer ids."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


class DataError(ValueError):
    """A dataset file or its rows cannot be used."""


@dataclass(frozen=True)
class Interactions:
    """Implicit feedback: user ``users[k]`` interacted with item ``items[k]`` at ``timestamps[k]``.

    Ids are contiguous from 0. ``raw_user_ids[u]`` / ``raw_item_ids[i]`` give the ids of the source
    file, so that reports can speak the dataset's own language. ``ratings[k]`` is the explicit
    rating of row ``k`` where the file has one (MovieLens' 1-5 stars; the models here read every
    row as an interaction, user-based KNN reads the ratings), else None.
    """

    users: IntArray
    items: IntArray
    timestamps: FloatArray
    raw_user_ids: tuple[str, ...]
    raw_item_ids: tuple[str, ...]
    name: str = "custom"
    #: per item, its category (a venue's, from a check-in file), or None when the data has none
    item_categories: tuple[str, ...] | None = None
    ratings: FloatArray | None = None

    @property
    def n_users(self) -> int:
        return len(self.raw_user_ids)

    @property
    def n_items(self) -> int:
        return len(self.raw_item_ids)

    def __len__(self) -> int:
        return int(self.users.shape[0])

    @classmethod
    def from_raw(
        cls,
        raw_users: list[str],
        raw_items: list[str],
        timestamps: list[float],
        name: str = "custom",
        ratings: list[float] | None = None,
    ) -> Interactions:
        """Map raw string ids to contiguous ints (users and items in order of first numeric/lexical id)."""
        if not (len(raw_users) == len(raw_items) == len(timestamps)):
            raise DataError("users, items and timestamps must have the same length")
        if ratings is not None and len(ratings) != len(raw_users):
            raise DataError("ratings must have one value per interaction")
        if not raw_users:
            raise DataError("the dataset has no interactions")
        user_ids = sorted(set(raw_users), key=_id_sort_key)
        item_ids = sorted(set(raw_items), key=_id_sort_key)
        umap = {u: k for k, u in enumerate(user_ids)}
        imap = {i: k for k, i in enumerate(item_ids)}
        users = np.fromiter((umap[u] for u in raw_users), dtype=np.int64, count=len(raw_users))
        items = np.fromiter((imap[i] for i in raw_items), dtype=np.int64, count=len(raw_items))
        ts = np.asarray(timestamps, dtype=np.float64)
        rs = None if ratings is None else np.asarray(ratings, dtype=np.float64)
        return cls(users, items, ts, tuple(user_ids), tuple(item_ids), name, None, rs)

    def subset_users(self, n: int) -> Interactions:
        """The first ``n`` users and every item (item ids are kept so models stay comparable)."""
        if not 1 <= n <= self.n_users:
            raise DataError(f"cannot take {n} users from a dataset of {self.n_users}")
        keep = self.users < n
        return Interactions(
            self.users[keep],
            self.items[keep],
            self.timestamps[keep],
            self.raw_user_ids[:n],
            self.raw_item_ids,
            self.name,
            self.item_categories,
            self.rows_ratings(keep),
        )

    def keep_users(self, keep: IntArray) -> Interactions:
        """Only the users ``keep`` (sorted ids), renumbered from 0 in that order; items unchanged."""
        new_id = np.full(self.n_users, -1, dtype=np.int64)
        new_id[keep] = np.arange(len(keep))
        mask = new_id[self.users] >= 0
        return Interactions(
            new_id[self.users[mask]],
            self.items[mask],
            self.timestamps[mask],
            tuple(self.raw_user_ids[u] for u in keep),
            self.raw_item_ids,
            self.name,
            self.item_categories,
            self.rows_ratings(mask),
        )

    def rows_ratings(self, rows: npt.NDArray[np.bool_] | IntArray) -> FloatArray | None:
        """The ratings of the rows ``rows`` selects (a mask or indices), None without ratings."""
        return None if self.ratings is None else self.ratings[rows]

    def without_absent_users(self) -> Interactions:
        """The users that still have an interaction, renumbered (after items were dropped)."""
        present = np.flatnonzero(np.bincount(self.users, minlength=self.n_users) > 0)
        return self if len(present) == self.n_users else self.keep_users(present)


def _id_sort_key(raw: str) -> tuple[int, int | str]:
    return (0, int(raw)) if raw.isdigit() else (1, raw)
