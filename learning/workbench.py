"""One working copy of the item tables for the FedAvg clients of one simulated process.

A FedAvg client (CIA paper §III-B) replaces its shared parameters by the global model at the start
of every turn, trains, and answers with its model. Between two turns its item tables matter only
for the utility measured at the end of the round (HR@20 or F1@20 on its held-out item) and for the
norm a received model is compared with (``max_model_distance``). In the simulator a client's turn
runs to its end before another client's begins, so the clients can share one copy of the big 2-D
tables: a client takes the workbench when it loads the global model, and the client it takes it
from is first *parked*: it keeps its utility and its norm at its current version, which are all it
will be asked before its next turn. Its optimizer's moments, its user embedding and the small
tensors stay its own.

This is what lets FedAvg run on POI-shaped data here: 718 Gowalla-shaped PRME clients held a
15.8 MB model each, 10.6 GiB together, besides everything else the run holds (bench.fedavg_memory).
The numbers are the same bit for bit: a parked client's utility and norm are computed from the
same values and in the same order as they would be later, and nothing else reads its tables.

A parked client cannot answer anything else about its model (its scores, a snapshot, a merge):
:meth:`Workbench.check` raises. So gossip protocols, adversary clients (whose attack reads the
model) and membership inference (which scores every item) keep their own tables
(p2pnode/runners/build.py decides). A parked client's delta bases are closed (learning/history.py): the
rows another client writes are not recorded in its history. Its next update goes whole, as it
does anyway once loading the global model changed more rows than a delta may carry.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import numpy as np

from learning.params import Array


class Parkable(Protocol):
    """A learner that can give the workbench up (learning/learner.py, BaseLearner)."""

    def park(self) -> None:
        """Keep what will be asked of the model before the next turn; its tables are then lost."""
        ...


class WorkbenchError(RuntimeError):
    """A parked learner was asked for its tables: a bug in what uses the workbench."""


class Workbench:
    """The shared tables, and which learner holds them now."""

    def __init__(self, init: Mapping[str, Array], names: tuple[str, ...]) -> None:
        #: the tables, starting at θ_0 (every learner's model before its first turn)
        self.arrays = {k: np.array(init[k], dtype=init[k].dtype, copy=True) for k in names}
        self.holder: Parkable | None = None

    def take(self, learner: Parkable) -> None:
        """``learner`` starts its turn: the previous holder is parked first."""
        held = self.holder
        if held is learner:
            return
        if held is not None:
            held.park()
        self.holder = learner

    def check(self, learner: Parkable, what: str) -> None:
        """Raise unless ``learner`` holds the workbench (``what``: the operation asked)."""
        if self.holder is not learner:
            raise WorkbenchError(f"{what} of a FedAvg client that does not hold the workbench")
