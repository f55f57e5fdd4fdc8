"""What the experiment tests share: a tiny size, and the simulator standing in for real processes."""

from __future__ import annotations

from typing import Any

from p2pnode.config import RunConfig
from p2pnode.runners.sim import simulate

TINY = {"nodes": 24, "rounds": 2, "attack": {"target_k": 3}}


def simulator_as_real(config: RunConfig, progress: Any = None) -> dict[str, Any]:
    return simulate(config)
