"""Messages of the gossip protocols."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

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


@dataclass(frozen=True, slots=True)
class PublicMessage:
    """Rows of D_pub, the public users' data that PARD's estimators train on (paper 004 Alg. 1
    line 23): per user, the privacy-irrelevant features ``[z^ir, mean item row]`` (2d values),
    z^re (d values) and the class of each attribute. A node that opted in to publish sends its
    own row; the FedAvg server sends the rows it holds to the clients it selects
    (learning/pard.py, docs/design.md PARD)."""

    users: tuple[int, ...]
    features: npt.NDArray[np.float32]  #: (n, 2d)
    user_re: npt.NDArray[np.float32]  #: (n, d)
    labels: npt.NDArray[np.int64]  #: (n, attributes)
