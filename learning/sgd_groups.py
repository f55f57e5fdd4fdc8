"""Plain SGD with three learning rates, as paper 004's code trains FedNCF (``trainer.py``, the
``torch.optim.SGD`` of three parameter groups; the factor is PFedRec's).

- the head (NCF's MLP) steps at ``lr``;
- the user rows (z^ir and z^re under PARD) at ``lr / fraction · η``, ``fraction`` the share of
  clients FedAvg selects a round;
- the item rows at ``lr · n_items · η``.

The item rate is large (0.5 · 1682 · 80 = 67,280 on ML-100k) because FedAvg's server averages
whole item tables over every selected client, and a client moves only the rows of its own items:
the mean divides each client's step by the number of clients. What an item row moves in a
round is then about ``lr · n_items · η / clients`` times the batch-mean gradient summed over the
clients that touched it. No momentum, no weight decay (the code's defaults). The gradients are
those of the batch's mean binary cross-entropy, as the learners compute them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from learning.params import Array

ITEM = "item"
USER_ROWS = ("user", "user_re")


@dataclass(frozen=True)
class SGDGroups:
    """The three rates of one phase of training."""

    head: float
    user: float
    item: float

    @classmethod
    def of(cls, lr: float, eta: float, n_items: int, fraction: float) -> SGDGroups:
        """004's code's rates from its ``lr_client``, ``lr_eta``, item count and
        ``clients_sample_ratio``."""
        if lr <= 0 or eta <= 0 or n_items <= 0 or not 0 < fraction <= 1:
            raise ValueError("SGD's rates need lr > 0, eta > 0, items > 0 and a fraction in (0, 1]")
        return cls(head=lr, user=lr / fraction * eta, item=lr * n_items * eta)

    def rate(self, name: str) -> float:
        """The learning rate of the tensor ``name``."""
        if name == ITEM:
            return self.item
        return self.user if name in USER_ROWS else self.head

    def step(
        self,
        params: dict[str, Array],
        grads: Mapping[str, Array],
        rows: npt.NDArray[np.int64],
        summed: Array,
    ) -> None:
        """θ ← θ − rate · g for every dense tensor of ``grads``, and for the item rows ``rows``
        (distinct ids) with their summed gradients ``summed``."""
        for name, g in grads.items():
            params[name] -= np.float32(self.rate(name)) * g
        if len(rows):
            params[ITEM][rows] -= np.float32(self.item) * summed
