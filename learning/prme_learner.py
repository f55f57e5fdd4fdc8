"""A node's PRME learner: transitions of its own sequence, pairwise SGD, F1@K on the held-out item."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from learning import prme
from learning.learner import BaseLearner
from learning.metrics import f1_at_k
from learning.negatives import sample_negatives
from learning.params import Array
from learning.prme_numpy import NumpyPRME
from learning.split import UserData


@dataclass(frozen=True)
class PRMEConfig:
    """PRME hyperparameters (Feng et al. 2015; DESIGN §4)."""

    dim: int = 60
    lr: float = 0.005
    reg: float = 0.03
    batch_size: int = 256
    local_epochs: int = 1
    top_k: int = 20


class PRMELearner(BaseLearner):
    """One user's PRME model. Training examples are the transitions (l_c → l) of the user's
    training items in time order, each against one sampled negative with the same time gap."""

    metric = "f1"

    def __init__(
        self,
        data: UserData,
        init: Mapping[str, Array],
        config: PRMEConfig,
        rng: np.random.Generator,
        shared: tuple[str, ...] = prme.PARAM_NAMES,
    ) -> None:
        super().__init__(data, init, shared, rng, config.top_k)
        self.config = config
        self._trainer = NumpyPRME(self.params, config.lr, config.reg)
        items, times = data.train_items, data.train_times
        self._previous = items[:-1]
        self._next = items[1:]
        self._gap = np.asarray(times[1:] - times[:-1], dtype=np.float64)
        self.last_loss = float("nan")

    def _scores(
        self, params: Mapping[str, Array], items: npt.NDArray[np.int64], at: float
    ) -> npt.NDArray[np.float32]:
        last_item = int(self.data.train_items[-1])
        gap = at - float(self.data.train_times[-1])
        side = prme.UserSide(self.params[prme.USER_P][0], last_item, gap)
        return prme.score(dict(params), side, items)

    def local_update(self) -> int:
        """``local_epochs`` passes over the transitions, fresh negatives each pass."""
        cfg = self.config
        n = len(self._next)
        steps = 0
        loss = 0.0
        for _ in range(cfg.local_epochs if n else 0):
            negatives = sample_negatives(self.rng, self._excluded, n)
            order = self.rng.permutation(n)
            for start in range(0, n, cfg.batch_size):
                sel = order[start : start + cfg.batch_size]
                loss += self._trainer.step(
                    self._previous[sel], self._next[sel], negatives[sel], self._gap[sel]
                )
                steps += 1
        self.last_loss = loss / max(n * cfg.local_epochs, 1)
        self.version += 1
        return steps

    def evaluate(self) -> float:
        """F1@K of the held-out item: 2/(K+1) when it ranks in the top K, else 0."""
        return f1_at_k(self.hit(), self.top_k)
