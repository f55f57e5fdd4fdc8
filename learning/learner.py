"""A node's local learner: GMF parameters, Adam, one local update, HR@K evaluation.

Implements the ``protocols.learner.Learner`` interface structurally: the gossip protocols call
``snapshot``, ``merge`` and ``local_update`` and never see torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from learning import gmf
from learning.metrics import hit_at_k
from learning.negatives import sample_negatives
from learning.params import Array, ModelSpec, Params, copy_params, mean_into, spec_of
from learning.split import UserData


@dataclass(frozen=True)
class TrainConfig:
    """Local training hyperparameters (GMF defaults from NCF: Adam, lr 0.001, batch 256, 4 negatives)."""

    factors: int = 32
    lr: float = 0.001
    batch_size: int = 256
    negatives: int = 4
    local_epochs: int = 1
    top_k: int = 20
    sparse_items: bool = True  #: SparseAdam on item rows in the batch (lazy Adam); False: dense Adam


class GMFLearner:
    """One user's GMF model and its trainer; parameters are numpy arrays shared with torch tensors."""

    def __init__(
        self,
        data: UserData,
        init: Mapping[str, Array],
        config: TrainConfig,
        rng: np.random.Generator,
        shared: tuple[str, ...] = gmf.PARAM_NAMES,
    ) -> None:
        self.data = data
        self.config = config
        self.rng = rng
        self.params: Params = copy_params(init)
        self.shared_names = shared
        self.version = 0
        self._tensors = {k: torch.from_numpy(v) for k, v in self.params.items()}
        for t in self._tensors.values():
            t.requires_grad_(True)
        self._opts: list[torch.optim.Optimizer]
        if config.sparse_items:
            dense = [t for k, t in self._tensors.items() if k != gmf.ITEM]
            self._opts = [
                torch.optim.SparseAdam([self._tensors[gmf.ITEM]], lr=config.lr),
                torch.optim.Adam(dense, lr=config.lr),
            ]
        else:
            self._opts = [torch.optim.Adam(list(self._tensors.values()), lr=config.lr)]
        self._excluded = data.interacted
        self._positives = data.train_items
        self._eval_items = np.concatenate(([data.test_item], data.test_negatives)).astype(np.int64)

    @property
    def spec(self) -> ModelSpec:
        """Spec of the shared parameters, used to check every model a peer sends."""
        return spec_of({k: self.params[k] for k in self.shared_names})

    def snapshot(self) -> Params:
        """A copy of the shared parameters, safe to send while this model keeps changing."""
        return copy_params(self.params, self.shared_names)

    def merge(self, models: Sequence[Mapping[str, Array]]) -> None:
        """θ ← mean(θ, *models) over the shared parameters (002 Alg. 1 l.7, Alg. 2 l.4)."""
        if models:
            mean_into({k: self.params[k] for k in self.shared_names}, list(models))
            self.version += 1

    def local_update(self) -> int:
        """Run ``local_epochs`` epochs of BCE with sampled negatives; returns the number of steps."""
        cfg = self.config
        t = self._tensors
        steps = 0
        n_pos = len(self._positives)
        labels_np = np.concatenate((np.ones(n_pos, np.float32), np.zeros(n_pos * cfg.negatives, np.float32)))
        for _ in range(cfg.local_epochs):
            negs = sample_negatives(self.rng, self._excluded, n_pos * cfg.negatives)
            items = np.concatenate((self._positives, negs))
            perm = self.rng.permutation(len(items))
            idx_all = torch.from_numpy(items[perm])
            y_all = torch.from_numpy(labels_np[perm])
            for start in range(0, len(items), cfg.batch_size):
                idx = idx_all[start : start + cfg.batch_size]
                y = y_all[start : start + cfg.batch_size]
                q = torch.nn.functional.embedding(idx, t[gmf.ITEM], sparse=cfg.sparse_items)
                logits = (q * t[gmf.USER]).matmul(t[gmf.H]) + t[gmf.B]
                loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, y)
                for opt in self._opts:
                    opt.zero_grad(set_to_none=True)
                loss.backward()  # type: ignore[no-untyped-call]
                for opt in self._opts:
                    opt.step()
                steps += 1
        self.version += 1
        return steps

    def test_rank(self) -> float:
        """Share of the test negatives scored at least as high as the held-out item (0 is best)."""
        scores = gmf.score(self.params, self.params[gmf.USER][0], self._eval_items)
        return float(np.count_nonzero(scores[1:] >= scores[0])) / (len(scores) - 1)

    def evaluate(self) -> bool:
        """Whether the held-out item is a hit at ``top_k`` among itself and its test negatives."""
        scores = gmf.score(self.params, self.params[gmf.USER][0], self._eval_items)
        return hit_at_k(float(scores[0]), scores[1:], self.config.top_k)
