"""Churn: when each node is online, drawn once from a seed.

Each churning node alternates between sessions (online) and absences (offline), as in the
measurement studies of deployed P2P networks, which model a peer as an alternating renewal
process with heavy-tailed on-times (Stutzbach and Rejaie 2006, session lengths fit a Weibull with
shape about 0.34 to 0.59; Yao et al. 2006). Times are in rounds. ``exp`` draws both from
exponentials with the given means, ``weibull`` from Weibulls with the given means and one shape.

A run starts in the steady state: each node's process is run from far before round 0, so a node
is online at the start with probability ``uptime / (uptime + downtime)``, in the middle of a
session of the right residual length. ``late`` adds late joiners: that share of the churning
nodes is absent at round 0 and joins at a uniform time in the first half of the run (with
``model = "off"`` these are the only events). A departure is a crash (no word to the peers) with
probability ``crash``, otherwise a leave (the node tells its peers).

The schedule is pure data: the simulator applies it on its virtual clock, ``launch`` to real
processes on the wall clock (one event per process).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

CHURN_MODELS = ("off", "exp", "weibull")
EVENTS = ("join", "leave", "crash")
_WARMUP_CYCLES = 20  #: mean on/off cycles run before round 0 to reach the steady state


@dataclass(frozen=True)
class ChurnModel:
    """On/off time distributions (means in rounds), the share of crashes and of late joiners."""

    model: str = "off"
    uptime: float = 50.0
    downtime: float = 10.0
    shape: float = 0.5
    crash: float = 0.5
    late: float = 0.0

    def __post_init__(self) -> None:
        if self.model not in CHURN_MODELS:
            raise ValueError(f"churn model must be one of {', '.join(CHURN_MODELS)}, got {self.model!r}")
        if not (self.uptime > 0 and self.downtime > 0 and self.shape > 0):
            raise ValueError("uptime, downtime and shape must be > 0")
        if not (0 <= self.crash <= 1 and 0 <= self.late <= 1):
            raise ValueError("crash and late must be in [0, 1]")

    @property
    def active(self) -> bool:
        """Whether any node ever changes state."""
        return self.model != "off" or self.late > 0

    @property
    def availability(self) -> float:
        """The long-run share of time a churning node is online."""
        return 1.0 if self.model == "off" else self.uptime / (self.uptime + self.downtime)

    def draw(self, mean: float, rng: random.Random) -> float:
        """One on- or off-time with the given mean."""
        if self.model == "weibull":
            return rng.weibullvariate(mean / math.gamma(1 + 1 / self.shape), self.shape)
        return rng.expovariate(1 / mean)


@dataclass(frozen=True, order=True)
class ChurnEvent:
    """Node ``node`` joins, leaves or crashes at time ``at`` (rounds since the start)."""

    at: float
    node: int
    kind: str


@dataclass(frozen=True)
class Schedule:
    """Who is absent at round 0 and every later event in time order (ties: by node id)."""

    absent: frozenset[int]
    events: tuple[ChurnEvent, ...]

    def live_at(self, t: float, nodes: Sequence[int]) -> set[int]:
        """The nodes online at time ``t`` (after every event at ``t`` or before)."""
        live = set(nodes) - self.absent
        for e in self.events:
            if e.at > t:
                break
            if e.kind == "join":
                live.add(e.node)
            else:
                live.discard(e.node)
        return live


def schedule(model: ChurnModel, nodes: Sequence[int], rounds: float, rng: random.Random) -> Schedule:
    """Draw the schedule of ``nodes`` (the churning ones) over ``rounds`` rounds.

    Draws are made node by node in the given order, so the same seed and nodes give the same
    schedule whatever else the run does.
    """
    absent: set[int] = set()
    events: list[ChurnEvent] = []
    for node in nodes:
        late = model.late > 0 and rng.random() < model.late
        online, t = _start(model, rng)
        if late:  # absent from the start until a uniform time in the first half of the run
            online, t = False, rng.uniform(0, rounds / 2)
        if not online:
            absent.add(node)
        while t < rounds:
            if online:
                kind = "crash" if rng.random() < model.crash else "leave"
                events.append(ChurnEvent(t, node, kind))
            else:
                events.append(ChurnEvent(t, node, "join"))
            online = not online
            if model.model == "off":
                break  # a late joiner stays once it came
            t += model.draw(model.uptime if online else model.downtime, rng)
    events.sort()
    return Schedule(frozenset(absent), tuple(events))


def _start(model: ChurnModel, rng: random.Random) -> tuple[bool, float]:
    """Whether a node is online at round 0, and when it next changes state (steady state:
    its alternating process is run from about ``_WARMUP_CYCLES`` mean cycles before 0)."""
    if model.model == "off":
        return True, math.inf
    t = -_WARMUP_CYCLES * (model.uptime + model.downtime)
    online = True
    while True:
        t += model.draw(model.uptime if online else model.downtime, rng)
        if t > 0:
            return online, t
        online = not online
