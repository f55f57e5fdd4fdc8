"""Membership inference by a placed observer: what the MPE attack reads of the models that reached
it (002 §2.5, Carlini et al. 2022's reporting), sans I/O.

The omniscient MPE attack (``adversary.evaluation.AttackLab.evaluate_mia``) reads every node's
current model: an upper bound. A placed observer (the FedAvg server, a lone ``--attackers`` node, a
colluding group) reads only what it received: for every sender, the model of its latest message,
which it scores over the whole catalogue as it arrives (before the protocol's merge may reuse its
arrays) and keeps as one float32 row per sender (6.7 KB at ML-100k's 1,682 items). A colluding
group's view is the latest row per sender that any member received (the group pools what its
members received, as its CIA and attribute inference do), kept in one store per group and
process (:class:`SharedRows`); over real HTTP a group pools within a process.

What it cannot read it counts: a model without the user row (Share less) or without the head it
scores with (``--local-head``, PARD: the head stays home) gives no M_MPE of the sender's items
under the sender's own model, so it is ``unreadable``; the attack on such models is the calibrated
one or the CIA's fictive user, not this.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from adversary.models import AttackModel
from learning.params import Array


@dataclass
class SharedRows:
    """One colluding group's rows in one process, shared by its members' watches: per sender the
    latest row any member received, and which member (``rank``) holds it. The group's view is
    the same as pooling each member's own latest rows (:func:`views`), at one row per sender
    instead of one per member and sender: bounded by senders × items (a member's own rows grew
    with the senders it met, 94 members × 943 senders at ML-100k; docs/design.md)."""

    rows: dict[int, tuple[float, int, npt.NDArray[np.float32]]] = field(default_factory=dict)

    def offer(self, sender: int, now: float, rank: int, scores: npt.NDArray[np.float32]) -> None:
        """Keep ``scores`` as ``sender``'s row if it is the latest; at the same time, the
        lowest rank's (and a member's own later one), as pooling own rows in rank order did."""
        held = self.rows.get(sender)
        if held is None or now > held[0] or (now == held[0] and rank <= held[1]):
            self.rows[sender] = (now, rank, scores)


@dataclass
class MembershipWatch:
    """One observer's kept scores: sender → (when received, its model's scores of every item).

    With ``pool`` (a colluding group's members in one process) the rows go to the group's
    :class:`SharedRows` under this member's ``rank`` (its node id), and the member keeps and
    checkpoints only the rows it holds there."""

    model: AttackModel
    name: str  #: the observer's name in results: "server", "node 17", "colluders 0"
    rows: dict[int, tuple[float, npt.NDArray[np.float32]]] = field(default_factory=dict)
    unreadable: int = 0  #: models received that lack the user row or the head MPE scores with
    pool: SharedRows | None = None
    rank: int = 0

    def observe(self, sender: int, params: Mapping[str, Array], now: float) -> None:
        """Score a received model over the catalogue and keep it as ``sender``'s latest."""
        if self.model.needs_head or self.model.user_name not in params:
            self.unreadable += 1
            return
        try:
            kept = dict(params)  # no copy of the arrays: scored now, not kept
            user = self.model.user_of(kept)
            scores = self.model.relevance(kept, user, slice(None))
        except KeyError:  # a part of the head is not shared
            self.unreadable += 1
            return
        row = np.asarray(scores, dtype=np.float32).copy()
        if self.pool is not None:
            self.pool.offer(sender, now, self.rank, row)
        else:
            self.rows[sender] = (now, row)

    def held(self) -> dict[int, tuple[float, npt.NDArray[np.float32]]]:
        """The rows this watch holds: its own, or those of the group's it received last."""
        if self.pool is None:
            return self.rows
        return {u: (t, s) for u, (t, r, s) in self.pool.rows.items() if r == self.rank}

    def state(self) -> dict[str, Any]:
        return {
            "rows": {str(u): [t, s.tolist()] for u, (t, s) in self.held().items()},
            "unreadable": self.unreadable,
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        rows = {int(u): (float(t), np.asarray(s, dtype=np.float32)) for u, (t, s) in state["rows"].items()}
        self.unreadable = int(state["unreadable"])
        if self.pool is None:
            self.rows = rows
            return
        for u in [u for u, (_, r, _) in self.pool.rows.items() if r == self.rank]:
            del self.pool.rows[u]  # this member's rows, as its checkpoint has them
        for u, (t, s) in rows.items():
            self.pool.offer(u, t, self.rank, s)


@dataclass(frozen=True)
class View:
    """What one placed observer holds at an evaluation: each sender's latest scores."""

    name: str
    scores: dict[int, npt.NDArray[np.float32]]
    unreadable: int


def views(watches: Iterable[MembershipWatch]) -> list[View]:
    """One view per observer name, pooling the watches that share it (a colluding group's
    members): per sender the latest row any of them received. Ordered by name."""
    latest: dict[str, dict[int, tuple[float, npt.NDArray[np.float32]]]] = {}
    unreadable: dict[str, int] = {}
    pools: set[int] = set()
    for w in watches:
        rows = latest.setdefault(w.name, {})
        unreadable[w.name] = unreadable.get(w.name, 0) + w.unreadable
        if w.pool is not None:  # a group's shared rows, read once
            if id(w.pool) in pools:
                continue
            pools.add(id(w.pool))
            held = {u: (t, s) for u, (t, _, s) in w.pool.rows.items()}
        else:
            held = w.rows
        for sender, (t, s) in held.items():
            if sender not in rows or t > rows[sender][0]:
                rows[sender] = (t, s)
    return [
        View(name, {u: s for u, (_, s) in sorted(rows.items())}, unreadable[name])
        for name, rows in sorted(latest.items())
    ]
