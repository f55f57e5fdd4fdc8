"""Whole simulated runs side by side: what bench.aia_cost and bench.pard_cost share.

Each configuration runs once, one after the other in this process, and is timed whole (setup
included); the table gives seconds per round and each run's ratio to the first.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from p2pnode.config import RunConfig
from p2pnode.runners.sim import simulate


def seconds_per_round(runs: Mapping[str, RunConfig], rounds: int) -> dict[str, float]:
    """Each run's wall seconds divided by ``rounds``, in the order given."""
    seconds = {}
    for name, config in runs.items():
        t = time.perf_counter()
        simulate(config.validate())
        seconds[name] = (time.perf_counter() - t) / rounds
    return seconds


def print_ratios(title: str, seconds: Mapping[str, float], against: str) -> None:
    """The table: seconds per round and the ratio of each run to ``against``."""
    base = seconds[against]
    print(f"{title} (seconds per round, setup included)")
    for name, s in seconds.items():
        print(f"  {name:20s} {s:7.3f} s/round   x{s / base:.2f} of {against}")
