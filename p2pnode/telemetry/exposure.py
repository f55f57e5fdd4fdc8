"""Exposure in gossip learning (paper 003's DataUsage carried over to model gossip).

003 measures a user's privacy risk by how often its ratings answer others' queries (DataUsage).
In gossip learning a node's model is what others use: its DataUsage here is how many times other
nodes merged a model it sent them, its Exposure how many distinct nodes did (an observer among
them saw it; the CIA's upper bound counts the users an adversary heard from, CIA paper §V-C).
Counted where the merge happens (the ``Merged`` effect a gossip protocol returns), by the
receiving process: a process sees only its own nodes' merges, a launch sums its processes'.
FedAvg is left out: every update goes to the one server, so every client's exposure is 1.

τ and the share of nodes above it follow 003 §5.5 and its authors' code (learning/reuseknn.py,
``tau_from_usage``): the start of the tail of the usage distribution; PrivacyRisk is min(τ, usage).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

#: above this many nodes the distinct receivers are not kept (an N x N bitmap of bools): usage only
MAX_EXPOSURE_NODES = 5_000  #: 25 MB at most


class ExposureLedger:
    """The merges by sender that one process's nodes made."""

    def __init__(self, population: int) -> None:
        self.population = population
        self.usage = np.zeros(population, np.int64)
        self._seen: npt.NDArray[np.bool_] | None = (
            np.zeros((population, population), bool) if population <= MAX_EXPOSURE_NODES else None
        )

    def record(self, receiver: int, senders: Iterable[int]) -> None:
        for s in senders:
            if 0 <= s < self.population and s != receiver:
                self.usage[s] += 1
                if self._seen is not None and 0 <= receiver < self.population:
                    self._seen[s, receiver] = True

    def exposure(self) -> npt.NDArray[np.int64] | None:
        """Per node, the distinct nodes of this process that merged its models (None: not kept)."""
        return None if self._seen is None else self._seen.sum(axis=1).astype(np.int64)

    def vectors(self) -> dict[str, list[int]]:
        """What a process's result carries for a launch to sum (p2plab/merge.py)."""
        out = {"usage": self.usage.tolist()}
        exposure = self.exposure()
        if exposure is not None:
            out["exposure"] = exposure.tolist()
        return out

    def summary(self, nodes: int) -> dict[str, Any]:
        return exposure_summary(self.usage[:nodes], None if (e := self.exposure()) is None else e[:nodes])


def exposure_summary(
    usage: Sequence[int] | npt.NDArray[np.int64], exposure: Sequence[int] | npt.NDArray[np.int64] | None
) -> dict[str, Any]:
    """Mean, median and max of DataUsage (and Exposure), τ by 003's rule, the share above τ and
    the mean PrivacyRisk min(τ, usage), over the users ``usage`` counts."""
    from learning.reuseknn import tau_from_usage

    u = np.asarray(usage, dtype=np.float64)
    out: dict[str, Any] = {"usage": _spread(u)}
    if exposure is not None:
        out["exposure"] = _spread(np.asarray(exposure, dtype=np.float64))
    if u.size and u.max() > 0:
        tau = tau_from_usage(u)
        out.update(tau=tau, above_tau=float(np.mean(u > tau)), privacy_risk=float(np.minimum(tau, u).mean()))
    return out


def _spread(values: npt.NDArray[np.float64]) -> dict[str, float]:
    if not values.size:
        return {"mean": 0.0, "median": 0.0, "max": 0.0}
    return {"mean": float(values.mean()), "median": float(np.median(values)), "max": float(values.max())}
