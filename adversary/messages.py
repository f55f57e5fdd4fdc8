"""Messages between colluding adversaries (CIA paper Algorithm 2, line 14)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class CollusionMessage:
    """``Multicast(A_colluders, u, v_u)``: an observed user and the sender's v_u for it, restricted
    to the rows the colluding group's target needs."""

    user: int
    params: Mapping[str, npt.NDArray[np.float32]]
