"""What the protocol tests' stand-in learners share: a table of parameters that stays finite."""

from __future__ import annotations

import numpy as np

from learning.params import l2_norm


class FakeLearnerBase:
    """Snapshot, finiteness and recovery for a learner whose ``params`` a test sets; the test's
    subclass gives ``merge`` and ``local_update`` (and ``load`` where it needs one)."""

    params: dict[str, np.ndarray]
    version: int

    def snapshot(self) -> dict[str, np.ndarray]:
        return {k: v.copy() for k, v in self.params.items()}

    def finite(self) -> bool:
        return all(bool(np.isfinite(v).all()) for v in self.params.values())

    def recover(self) -> None:
        raise AssertionError("a test learner never goes non-finite")

    def load(self, params) -> None:  # type: ignore[no-untyped-def]
        for k in self.params:
            self.params[k][...] = params[k]

    def norm(self, names: tuple[str, ...]) -> float:
        return l2_norm(self.params, names)
