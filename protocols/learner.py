"""What a protocol needs from a local model: snapshot, merge, local update. No torch here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from learning.params import ParamsView


class Learner(Protocol):
    """A node's trainable model, as the gossip protocols see it."""

    version: int

    @property
    def params(self) -> Mapping[str, npt.NDArray[np.float32]]:
        """The current parameters, read only (what a received model is compared with)."""
        ...

    def snapshot(self) -> dict[str, npt.NDArray[np.float32]]:
        """A copy of the parameters the protocol shares."""
        ...

    def merge(self, models: Sequence[ParamsView], how: str = "mean") -> None:
        """Replace the shared parameters by the mean of the own ones and ``models`` (``how``:
        mean, or the coordinate-wise trimmed mean or median, learning.params.robust_into)."""
        ...

    def local_update(self) -> int:
        """Train on local data; return the number of optimizer steps."""
        ...

    def finite(self) -> bool:
        """Whether every parameter is a finite number."""
        ...

    def recover(self) -> None:
        """Go back to the last good (finite) model, with a fresh optimizer."""
        ...

    def load(self, params: ParamsView) -> None:
        """Replace the shared parameters by ``params`` (a FedAvg client taking the global model)."""
        ...

    def norm(self, names: tuple[str, ...]) -> float:
        """‖θ‖ over the tensors ``names`` as one vector (learning.params.l2_norm)."""
        ...
