"""Leave-one-out split: each user's latest interaction is held out and ranked among sampled negatives.

He et al., NCF (2017) §4.1, the protocol the CIA paper (000 §V-C) uses for HR@K.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from learning.interactions import DataError, Interactions

IntArray = npt.NDArray[np.int64]

TEST_NEGATIVES = 100


@dataclass(frozen=True)
class UserData:
    """One node's private data: its training items in time order and its held-out test case."""

    user: int
    n_items: int
    train_items: IntArray
    train_times: npt.NDArray[np.float64]
    test_item: int
    test_negatives: IntArray
    test_time: float = 0.0
    validation_items: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    validation_times: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    validation_negatives: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    nonmember_items: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    #: the ε audit's canaries (:func:`plant_canaries`): items the user never touched, and whether
    #: each was put into ``train_items``; an excluded one is in no other field
    canary_items: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    canary_in: npt.NDArray[np.bool_] = field(default_factory=lambda: np.zeros(0, dtype=bool))

    @property
    def interacted(self) -> npt.NDArray[np.bool_]:
        """Mask of every item this user interacted with (train and test)."""
        mask = np.zeros(self.n_items, dtype=bool)
        mask[self.train_items] = True
        mask[self.test_item] = True
        mask[self.validation_items] = True
        mask[self.nonmember_items] = True
        return mask


def leave_one_out(data: Interactions, seed: int, n_negatives: int = TEST_NEGATIVES) -> list[UserData]:
    """Split every user: latest interaction → test item, the rest → training items.

    Ties in time are broken by item id so the split is deterministic. Test negatives are
    ``n_negatives`` items the user never interacted with, drawn with a generator seeded by
    ``(seed, user)`` so a node can redraw its own without the others.
    """
    order = np.lexsort((data.items, data.timestamps, data.users))
    users = data.users[order]
    items = data.items[order]
    times = data.timestamps[order]
    bounds = np.searchsorted(users, np.arange(data.n_users + 1))
    untouched = fewest_untouched(data)
    if n_negatives > untouched:  # said once, with the bound every user allows
        raise DataError(
            f"a user has only {untouched} items left to draw {n_negatives} test negatives from (a "
            f"small catalogue: give --test-negatives at most {max(1, untouched)})"
        )
    out: list[UserData] = []
    for u in range(data.n_users):
        lo, hi = int(bounds[u]), int(bounds[u + 1])
        seq, seq_t = items[lo:hi], times[lo:hi]
        u_items = np.unique(seq)
        if len(u_items) < 2:
            raise DataError(
                f"user {data.raw_user_ids[u]} has {len(u_items)} distinct item(s); "
                "leave-one-out needs at least 2"
            )
        test_item = int(seq[-1])
        keep = np.flatnonzero(seq != test_item)
        last = _last_occurrences(seq[keep])
        rng = np.random.default_rng([seed, u, 1])
        mask = np.zeros(data.n_items, dtype=bool)
        mask[u_items] = True
        negatives = rng.choice(np.flatnonzero(~mask), size=n_negatives, replace=False)
        out.append(
            UserData(
                user=u,
                n_items=data.n_items,
                train_items=seq[keep][last].astype(np.int64),
                train_times=seq_t[keep][last].astype(np.float64),
                test_item=test_item,
                test_negatives=negatives.astype(np.int64),
                test_time=float(seq_t[-1]),
            )
        )
    return out


def fewest_untouched(data: Interactions) -> int:
    """The fewest items any user of ``data`` never interacted with: how many test negatives
    every user can draw."""
    if data.n_users == 0:
        return data.n_items
    pairs = np.unique(np.stack((data.users, data.items)), axis=1)
    touched = np.bincount(pairs[0], minlength=data.n_users)
    return int(data.n_items - touched.max())


def _last_occurrences(seq: IntArray) -> IntArray:
    """Indices (ascending) of the last occurrence of each distinct value of ``seq``."""
    _, idx_rev = np.unique(seq[::-1], return_index=True)
    return np.sort(len(seq) - 1 - idx_rev)


def hold_out_nonmembers(users: list[UserData], count: int, keep: int = 3) -> list[UserData]:
    """Move each user's ``count`` latest training items out of training, as MIA non-members.

    002 §2.5 attacks a model with members (training data) and non-members from the same
    distribution; leave-one-out leaves one such item per user, which makes the attack's
    balanced accuracy almost a yes/no. These items are real interactions of the user that no
    model ever trains on; at least ``keep`` training items stay (fewer are held out if needed).
    """
    if count < 0:
        raise ValueError("count must be >= 0")
    out = []
    for u in users:
        n = min(count, max(0, len(u.train_items) - keep))
        if n == 0:
            out.append(u)
            continue
        out.append(
            replace(
                u,
                train_items=u.train_items[:-n],
                train_times=u.train_times[:-n],
                nonmember_items=u.train_items[-n:].copy(),
            )
        )
    return out


def hold_out_validation(
    users: list[UserData], seed: int, n_negatives: int = TEST_NEGATIVES
) -> list[UserData]:
    """Move each user's latest training item to a validation item (users with >= 3 training items).

    Pers-Gossip scores received models on it, ranked against ``n_negatives`` items the user never
    interacted with (drawn with ``(seed, user, 3)``). The test item is untouched.
    """
    out = []
    for u in users:
        if len(u.train_items) < 3:
            out.append(u)
            continue
        rng = np.random.default_rng([seed, u.user, 3])
        candidates = np.flatnonzero(~u.interacted)
        negatives = rng.choice(candidates, size=min(n_negatives, len(candidates)), replace=False)
        out.append(
            replace(
                u,
                train_items=u.train_items[:-1],
                train_times=u.train_times[:-1],
                validation_items=u.train_items[-1:].copy(),
                validation_times=u.train_times[-1:].copy(),
                validation_negatives=negatives.astype(np.int64),
            )
        )
    return out


def plant_canaries(users: list[UserData], count: int, seed: int) -> list[UserData]:
    """Give each user ``count`` canaries: items it never touched, none of its test or validation
    negatives, each put into its training items with probability ½ (Steinke, Nasr & Jagielski
    2023, §2). Drawn with a generator seeded by ``(seed, user)``, so one user's canaries change
    only its own data; an included canary is trained on as the user's latest interaction, an
    excluded one is an untouched item like any other (a training negative may draw it, as it
    would in the run without the audit)."""
    if count < 0:
        raise ValueError("count must be >= 0")
    if count == 0:
        return users
    out = []
    for u in users:
        rng = np.random.default_rng([seed, u.user, 0xCA9A])
        taken = u.interacted
        taken[u.test_negatives] = True
        taken[u.validation_negatives] = True
        free = np.flatnonzero(~taken)
        if len(free) < count:
            raise ValueError(f"user {u.user} has only {len(free)} untouched items for {count} canaries")
        items = np.sort(rng.choice(free, size=count, replace=False)).astype(np.int64)
        inside = rng.random(count) < 0.5
        last = float(u.train_times[-1]) if len(u.train_times) else 0.0
        out.append(
            replace(
                u,
                train_items=np.concatenate((u.train_items, items[inside])).astype(np.int64),
                train_times=np.concatenate((u.train_times, np.full(int(inside.sum()), last))),
                canary_items=items,
                canary_in=inside,
            )
        )
    return out
