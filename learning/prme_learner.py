"""A node's PRME learner: transitions of its own sequence, pairwise SGD, F1@K on the held-out item."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from learning import prme
from learning.dp import DPConfig, PrivateStepper, poisson_batch
from learning.learner import BaseLearner
from learning.metrics import f1_at_k
from learning.negatives import sample_negatives
from learning.params import Array
from learning.prme_fused import FusedPRME
from learning.prme_numpy import NumpyPRME
from learning.split import UserData


@dataclass(frozen=True)
class PRMEConfig:
    """PRME hyperparameters (Feng et al. 2015; docs/design.md, PRME)."""

    dim: int = 60
    lr: float = 0.005
    reg: float = 0.03
    batch_size: int = 256
    local_epochs: int = 1
    top_k: int = 20
    share_less_tau: float = 0.0  #: τ of the Share-less item regulariser (eq. 2); 0: off
    dp: DPConfig = field(
        default_factory=DPConfig
    )  #: local DP-SGD (learning/dp.py); off unless σ or a target ε is set
    backend: str = "numpy"  #: "numpy" or "fused" (learning/prme_fused.py; DP-SGD steps stay numpy)


class PRMELearner(BaseLearner):
    """One user's PRME model. Training examples are the transitions (l_c → l) of the user's
    training items in time order, each against one sampled negative with the same time gap."""

    metric = "f1"
    model_name = "prme"

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
        if config.backend not in ("numpy", "fused"):
            raise ValueError(f"unknown PRME training backend {config.backend!r}")
        self._trainer = NumpyPRME(self.params, config.lr, config.reg)
        self._fused = FusedPRME(self.params, config.lr, config.reg) if config.backend == "fused" else None
        items, times = data.train_items, data.train_times
        self._previous = items[:-1]
        self._next = items[1:]
        self._gap = np.asarray(times[1:] - times[:-1], dtype=np.float64)
        self._weights = prme.weights(self._gap)  #: (w_pref, w_seq) of each transition, fixed
        self.last_loss = float("nan")
        if config.dp.enabled:
            self.dp = PrivateStepper(config.dp, len(self._next), config.batch_size, int(rng.integers(2**62)))

    def _scores(
        self, params: Mapping[str, Array], items: npt.NDArray[np.int64], at: float
    ) -> npt.NDArray[np.float32]:
        last_item = int(self.data.train_items[-1])
        gap = at - float(self.data.train_times[-1])
        side = prme.UserSide(self.params[prme.USER_P][0], last_item, gap)
        return prme.score(dict(params), side, items)

    _rows_name = prme.ITEM_P

    def _touch_dense(self) -> None:
        """The user side is about to change (both item tables change by rows)."""
        for name, arr in self.params.items():
            if name not in (prme.ITEM_P, prme.ITEM_S):
                if arr.ndim == 2:
                    self.history.touch_rows(name, np.arange(arr.shape[0], dtype=np.int64))
                else:
                    self.history.touch_all(name)

    def _batches(self) -> list[npt.NDArray[np.int64]]:
        """One epoch's batches: a shuffled partition, or under DP-SGD m Poisson samples."""
        n = len(self._next)
        if self.private:
            assert self.dp is not None
            return [poisson_batch(self.rng, n, self.dp.sample_rate) for _ in range(self.dp.steps_per_epoch)]
        order = self.rng.permutation(n)
        return [
            order[start : start + self.config.batch_size] for start in range(0, n, self.config.batch_size)
        ]

    def local_update(self) -> int:
        """``local_epochs`` passes over the transitions, fresh negatives each pass.

        Under Share less the item rows as they stand before this update are the anchors of eq. 2.
        """
        self._held("a local update")
        cfg = self.config
        n = len(self._next)
        tau = cfg.share_less_tau
        before = (self.params[prme.ITEM_P].copy(), self.params[prme.ITEM_S].copy()) if tau > 0 else None
        self._begin_update()
        dp = self.dp if self.private else None  # selective DP-SGD: off until the switch
        if dp is not None:  # dense noise moves every row
            for name in self.params:
                self.history.touch_all(name)
        if dp is None and self._fused is not None:
            return self._fused_update(before, tau)
        steps = 0
        loss = 0.0
        for _ in range(cfg.local_epochs if n else 0):
            negatives = sample_negatives(self.rng, self._excluded, n)
            for sel in self._batches():
                prev, pos, neg, gap = self._previous[sel], self._next[sel], negatives[sel], self._gap[sel]
                if dp is None:
                    rows = np.concatenate((prev, pos, neg))  # made unique where a base saves them
                    for name in (prme.ITEM_P, prme.ITEM_S):
                        self.history.touch_rows(name, rows)
                    self._touch_dense()
                anchor = (before[0][pos], before[1][pos]) if before is not None else None
                if dp is None:
                    loss += self._trainer.step(prev, pos, neg, gap, anchor, tau)
                elif dp.may_step():
                    loss += self._trainer.dp_step(prev, pos, neg, gap, dp, anchor, tau)
                else:
                    break
                steps += 1
        self.last_loss = loss / max(n * cfg.local_epochs, 1)
        self.version += 1
        return steps

    def _fused_update(self, before: tuple[Array, Array] | None, tau: float) -> int:
        """``local_epochs`` compiled epochs: the same negatives and batches as the numpy path
        draws (the same calls on ``rng``), the rows each epoch may write touched once before it."""
        cfg = self.config
        n = len(self._next)
        assert self._fused is not None
        steps = 0
        loss = 0.0
        finite = True
        for _ in range(cfg.local_epochs if n else 0):
            negatives = sample_negatives(self.rng, self._excluded, n)
            order = self.rng.permutation(n)
            rows = np.concatenate((self._previous, self._next, negatives))
            for name in (prme.ITEM_P, prme.ITEM_S):
                self.history.touch_rows(name, rows)
            self._touch_dense()
            taken, epoch_loss, ok = self._fused.epoch(
                self._previous, self._next, negatives, self._weights, order, cfg.batch_size, before, tau
            )
            steps += taken
            loss += epoch_loss
            finite = finite and ok
        self._update_finite = finite
        self.last_loss = loss / max(n * cfg.local_epochs, 1)
        self.version += 1
        return steps

    def _utility_of(self, hit: bool) -> float:
        """F1@K of the held-out item: 2/(K+1) when it ranks in the top K, else 0."""
        return f1_at_k(hit, self.top_k)
