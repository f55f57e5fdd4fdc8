"""Messages of the gossip protocols."""

from __future__ import annotations

from dataclasses import dataclass

from learning.params import ParamsView


@dataclass(frozen=True, slots=True)
class ModelMessage:
    """A model θ_j sent by a gossip node (002 Alg. 1 line 4, Alg. 2 line 8).

    ``version`` is the sender's model version; ``params`` holds only the shared parameters.
    """

    version: int
    params: ParamsView


@dataclass(frozen=True, slots=True)
class FedMessage:
    """FedAvg traffic: the server's global model for ``round`` (``kind="global"``), or a
    client's model after training on it (``kind="update"``)."""

    kind: str
    round: int
    version: int
    params: ParamsView
