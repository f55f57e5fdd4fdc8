"""A node's NCF learner (paper 004's FedNCF model, learning/ncf.py): BCE on sampled negatives,
Adam (SparseAdam on the item rows of each batch), HR@K on the held-out item, as GMF's learner.

By default NCF trains as GMF does (Adam, ``--lr``); ``--optimizer sgd`` trains it as 004's code
does, plain SGD with three learning rates (learning/sgd_groups.py). DP-SGD is not built for NCF
(the config refuses it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from learning import ncf
from learning.gmf_fused import epoch_examples
from learning.gmf_numpy import (
    AdamMoments,
    _adam,
    _share_less_grad,
    _sparse_adam,
    _sum_rows,
    moments_state,
    reset_moments,
    restore_moments,
)
from learning.learner import BaseLearner
from learning.params import Array
from learning.sgd_groups import SGDGroups
from learning.split import UserData


@dataclass(frozen=True)
class NCFConfig:
    """NCF's local training settings (004: d = 64, one hidden layer of 32)."""

    dim: int = 64
    hidden: int = 32
    lr: float = 0.001
    batch_size: int = 256
    negatives: int = 4
    local_epochs: int = 1
    top_k: int = 20
    share_less_tau: float = 0.0  #: τ of the Share-less item regulariser (000 eq. 2); 0: off
    sgd: SGDGroups | None = None  #: plain SGD at these rates (004's code) instead of Adam at ``lr``


class NCFLearner(BaseLearner):
    """One user's NCF model and its numpy Adam trainer."""

    model_name = "ncf"

    def __init__(
        self,
        data: UserData,
        init: Mapping[str, Array],
        config: NCFConfig,
        rng: np.random.Generator,
        shared: tuple[str, ...] = ncf.PARAM_NAMES,
    ) -> None:
        super().__init__(data, init, shared, rng, config.top_k)
        self.config = config
        self.moments = {k: AdamMoments(np.zeros_like(v), np.zeros_like(v)) for k, v in self.params.items()}
        self._positives = data.train_items

    def _scores(
        self, params: Mapping[str, Array], items: npt.NDArray[np.int64], at: float
    ) -> npt.NDArray[np.float32]:
        return ncf.score(dict(params), self.params[ncf.USER][0], items)

    def examples(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """One epoch's examples: every positive and ``negatives`` fresh negatives each, shuffled."""
        return epoch_examples(
            self.rng, self._positives, self._neg_excluded, self._neg_free, self.config.negatives
        )

    def local_update(self) -> int:
        """``local_epochs`` epochs of mean BCE, one Adam step a batch; under Share less (τ > 0) the
        item rows as they stand before the update anchor the user's own items (000 eq. 2)."""
        self._held("a local update")
        cfg = self.config
        tau = cfg.share_less_tau
        before = self.params[ncf.ITEM].copy() if tau > 0 else None
        self._begin_update()
        steps = 0
        for _ in range(cfg.local_epochs):
            items, labels = self.examples()
            for start in range(0, len(items), cfg.batch_size):
                idx, y = items[start : start + cfg.batch_size], labels[start : start + cfg.batch_size]
                self.history.touch_rows(ncf.ITEM, idx)
                self._touch_dense()
                self._step(idx, y, before[idx] if before is not None else None, tau)
                steps += 1
        self.version += 1
        return steps

    def _step(
        self, idx: npt.NDArray[np.int64], y: npt.NDArray[np.float32], anchor: Array | None, tau: float
    ) -> None:
        p = self.params
        grads, g_rows = ncf.gradients(p, p[ncf.USER][0], idx, y)  # taken before anything moves
        if anchor is not None and tau > 0:
            g_rows = g_rows + _share_less_grad(p[ncf.ITEM][idx], anchor, y, tau)
        rows, summed = _sum_rows(idx, g_rows)
        if self.config.sgd is not None:
            self.config.sgd.step(p, grads, rows, summed)
            return
        for name, grad in grads.items():
            _adam(p[name], grad, self.moments[name], self.config.lr)
        _sparse_adam(p[ncf.ITEM], rows, summed, self.moments[ncf.ITEM], self.config.lr)

    def _optimizer_state(self) -> dict[str, Any]:
        return moments_state(self.moments)

    def _reset_optimizer(self) -> None:
        reset_moments(self.moments)

    def _restore_optimizer(self, state: Mapping[str, Any]) -> None:
        restore_moments(self.moments, state)
