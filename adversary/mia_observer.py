"""Membership inference by a placed observer: what the MPE attack reads of the models that reached
it (002 §2.5, Carlini et al. 2022's reporting), sans I/O.

The omniscient MPE attack (``adversary.evaluation.AttackLab.evaluate_mia``) reads every node's
current model: an upper bound. A placed observer (the FedAvg server, a lone ``--attackers`` node, a
colluding group) reads only what it received: for every sender, the model of its latest message,
which it scores over the whole catalogue as it arrives (before the protocol's merge may reuse its
arrays) and keeps as one float32 row per sender (6.7 KB at ML-100k's 1,682 items). A colluding
group's view is the union of its members' rows, the latest per sender (the group pools what its
members received, as its CIA and attribute inference do); over real HTTP a group pools within a
process.

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
class MembershipWatch:
    """One observer's kept scores: sender → (when received, its model's scores of every item)."""

    model: AttackModel
    name: str  #: the observer's name in results: "server", "node 17", "colluders 0"
    rows: dict[int, tuple[float, npt.NDArray[np.float32]]] = field(default_factory=dict)
    unreadable: int = 0  #: models received that lack the user row or the head MPE scores with

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
        self.rows[sender] = (now, np.asarray(scores, dtype=np.float32).copy())

    def state(self) -> dict[str, Any]:
        return {
            "rows": {str(u): [t, s.tolist()] for u, (t, s) in self.rows.items()},
            "unreadable": self.unreadable,
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        rows = state["rows"].items()
        self.rows = {int(u): (float(t), np.asarray(s, dtype=np.float32)) for u, (t, s) in rows}
        self.unreadable = int(state["unreadable"])


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
    for w in watches:
        rows = latest.setdefault(w.name, {})
        unreadable[w.name] = unreadable.get(w.name, 0) + w.unreadable
        for sender, (t, s) in w.rows.items():
            if sender not in rows or t > rows[sender][0]:
                rows[sender] = (t, s)
    return [
        View(name, {u: s for u, (_, s) in sorted(rows.items())}, unreadable[name])
        for name, rows in sorted(latest.items())
    ]
