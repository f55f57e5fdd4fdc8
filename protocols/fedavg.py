"""Federated averaging: a server node and client nodes over the same transports (CIA paper §III-B).

Each round (``round_ticks``) the server first averages the client models that came back for the
previous round into the global model, then sends the global model to ``fraction`` of the clients
chosen at random. A client replaces its shared parameters by the global ones (under Share less its
user embedding stays its own), trains, and answers with its model. Updates for an older round
arrive too late and are dropped and counted. The server is a node like any other, so an attack can make
it the adversary of the CIA paper's Algorithm 1.

The mean is folded as the updates come: each one is added to a running sum as soon as every
selected client with a smaller id has answered, in the order :func:`average` adds them, so the
global model is the same to the bit and the server holds one sum instead of a round of updates.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from learning.params import ModelSpec, ParamsView, all_finite, l2_norm, mean_into, robust_into, spec_of
from p2pcore.effects import Effect, NodeId, Send, SetTimer
from peer_sampling.base import PeerSampler
from protocols.gossip import GossipProtocol, TimingConfig
from protocols.learner import Learner
from protocols.messages import FedMessage

ROUND_TIMER = "fl:round"


class ParamStore:
    """The server's model: parameters and a version, no data and no training."""

    def __init__(self, params: Mapping[str, npt.NDArray[np.float32]]) -> None:
        self.params = {k: np.array(v, dtype=np.float32, copy=True) for k, v in params.items()}
        self.version = 0

    def snapshot(self) -> dict[str, npt.NDArray[np.float32]]:
        return {k: v.copy() for k, v in self.params.items()}

    def finite(self) -> bool:
        return all_finite(self.params)

    def recover(self) -> None:
        """The server's inputs are vetted and it does not train: nothing to go back to."""
        raise ValueError("the FedAvg server's model is an average of vetted models; it has no recovery")

    def merge(self, models: Sequence[ParamsView], how: str = "mean") -> None:
        """θ ← mean(θ, *models), as a learner merges (the server itself uses ``load``)."""
        if models:
            if how == "mean":
                mean_into(self.params, list(models))
            else:
                robust_into(self.params, list(models), how)
            self.version += 1

    def local_update(self) -> int:
        return 0

    def norm(self, names: tuple[str, ...]) -> float:
        return l2_norm(self.params, names)

    def state(self) -> dict[str, Any]:
        return {"model": "store", "params": self.snapshot(), "version": self.version}

    def restore(self, state: Mapping[str, Any]) -> None:
        if state["model"] != "store" or set(state["params"]) != set(self.params):
            raise ValueError("checkpoint does not hold a FedAvg server model")
        self.load(state["params"])
        self.version = int(state["version"])

    def load(self, params: ParamsView) -> None:
        for k, arr in self.params.items():
            arr[...] = params[k]
        self.version += 1

    @property
    def spec(self) -> ModelSpec:
        """What every client update must look like."""
        return spec_of(self.params)

    def evaluate(self) -> None:
        """The server holds no data, so it has no HR@K of its own."""
        return None

    def ranking(self) -> None:
        """The server holds no data, so it ranks nothing of its own."""
        return None

    def validation_ranks(self) -> list[int | None]:
        """The server holds no data: no validation item."""
        return []

    def validation_ranks_under(self, shared: Mapping[str, npt.NDArray[np.float32]]) -> list[int | None]:
        return []

    def ranking_under(self, shared: Mapping[str, npt.NDArray[np.float32]]) -> None:
        return None

    def popularity(self, counts: npt.NDArray[np.int64]) -> None:
        """The server holds no data: no held-out item to rank by popularity."""
        return None

    @property
    def candidates(self) -> int:
        """The server holds no data: no held-out item, no candidates."""
        return 0

    def epsilon(self) -> None:
        """The server trains nothing, so it spends no DP budget."""
        return None

    dp_after = 0  #: the server trains nothing: no selective DP-SGD either
    private = False

    def note_delivered(self) -> None:
        """The global model reached a client: the server keeps no data to protect."""

    def unprotected(self) -> int:
        return 0


def average(models: Sequence[ParamsView], how: str = "mean") -> dict[str, npt.NDArray[np.float32]]:
    """The element-wise mean of ``models`` (uniform FedAvg weights), or their coordinate-wise
    trimmed mean or median (``how``, learning.params.robust_into)."""
    out = {k: np.array(v, dtype=np.float32, copy=True) for k, v in models[0].items()}
    if how != "mean":
        robust_into(out, list(models[1:]), how)
        return out
    for m in models[1:]:
        for k, arr in out.items():
            arr += m[k]
    scale = np.float32(1.0 / len(models))
    for arr in out.values():
        arr *= scale
    return out


class FedAvgServer(GossipProtocol):
    """The server: rounds on a timer, client selection, aggregation."""

    name = "fedavg-server"

    def __init__(
        self,
        node_id: NodeId,
        store: ParamStore,
        sampler: PeerSampler,
        timing: TimingConfig,
        clients: Sequence[NodeId],
        fraction: float,
        how: str = "mean",
    ) -> None:
        super().__init__(node_id, store, sampler, timing)
        self.how = how  #: mean, trimmed or median (``--merge``)
        if not 0 < fraction <= 1:
            raise ValueError("fraction must be in (0, 1]")
        self.store = store
        self.clients = sorted(clients)
        self.fraction = fraction
        self.round = 0
        #: updates taken but not yet added to the sum: under the mean, those that came before a
        #: selected client with a smaller id answered; under ``trimmed`` and ``median``, all
        self.pending: dict[NodeId, ParamsView] = {}
        self.selected: set[NodeId] = set()
        self.late = 0
        self.repeated = 0  #: second updates of a round from one client, refused
        self.aggregated_rounds = 0
        self._order: list[NodeId] = []  #: the round's selected clients by id
        self._next = 0  #: the first of them not yet added to the sum
        self._answered: set[NodeId] = set()
        self._sum: dict[str, npt.NDArray[np.float32]] | None = None
        self._summed = 0

    def start(self, now: float, rng: random.Random) -> list[Effect]:
        return [SetTimer(ROUND_TIMER, now)]

    def state(self) -> dict[str, Any]:
        out = super().state()
        out.update(
            round=self.round, aggregated_rounds=self.aggregated_rounds, late=self.late, repeated=self.repeated
        )
        return out

    def restore(self, state: dict[str, Any]) -> None:
        """Updates pending at the checkpoint are lost; the next round starts from the saved model."""
        super().restore(state)
        self.round = int(state["round"])
        self.aggregated_rounds = int(state["aggregated_rounds"])
        self.late = int(state["late"])
        self.repeated = int(state.get("repeated", 0))  # checkpoints from before it was counted

    def wake(self, now: float, rng: random.Random) -> list[Effect]:
        return []

    def on_timer(self, key: str, now: float, rng: random.Random) -> list[Effect]:
        if key != ROUND_TIMER:
            return []
        if self.how != "mean" and self.pending:
            self.store.load(average([self.pending[c] for c in sorted(self.pending)], self.how))
            self.stats.merges += 1
            self.aggregated_rounds += 1
        elif self.how == "mean":
            for c in sorted(self.pending):  # those behind a client that never answered
                self._add(self.pending[c])
            if self._sum is not None:
                scale = np.float32(1.0 / self._summed)
                for arr in self._sum.values():
                    arr *= scale
                self.store.load(self._sum)
                self.stats.merges += 1
                self.aggregated_rounds += 1
        self.pending = {}
        self._sum, self._summed = None, 0
        self.round += 1
        k = max(1, math.ceil(self.fraction * len(self.clients)))
        self.selected = set(rng.sample(self.clients, k))
        self._order, self._next, self._answered = sorted(self.selected), 0, set()
        message = FedMessage("global", self.round, self.store.version, self.store.snapshot())
        self.stats.models_sent += k
        sends: list[Effect] = [Send(c, message) for c in sorted(self.selected)]
        return [SetTimer(ROUND_TIMER, now + self.timing.round_ticks), *sends]

    def on_model(self, sender: NodeId, message: object, now: float, rng: random.Random) -> list[Effect]:
        if not isinstance(message, FedMessage) or message.kind != "update":
            return []
        if message.round != self.round or sender not in self.selected:
            self.late += 1
            return []
        if sender in self._answered:  # one update a client a round: the first is taken
            self.repeated += 1
            return []
        self._answered.add(sender)
        self.stats.models_received += 1
        self.pending[sender] = message.params
        if self.how == "mean":
            order = self._order
            while self._next < len(order) and order[self._next] in self.pending:
                self._add(self.pending.pop(order[self._next]))
                self._next += 1
        return []

    def upcoming(self) -> dict[str, npt.NDArray[np.float32]] | None:
        """The global model the round's updates so far will make at the next round's start
        (their mean, or ``how``'s robust mean), without taking it; None before any update."""
        if self.how != "mean":
            if not self.pending:
                return None
            return average([self.pending[c] for c in sorted(self.pending)], self.how)
        if self._sum is None and not self.pending:
            return None
        total = {k: v.copy() for k, v in self._sum.items()} if self._sum is not None else None
        n = self._summed
        for c in sorted(self.pending):
            params = self.pending[c]
            if total is None:
                total = {k: np.array(v, dtype=np.float32, copy=True) for k, v in params.items()}
            else:
                for k, arr in total.items():
                    arr += params[k]
            n += 1
        assert total is not None
        scale = np.float32(1.0 / n)
        for arr in total.values():
            arr *= scale
        return total

    def holds(self, sender: NodeId) -> bool:
        """Whether an update from ``sender`` taken now would be kept past its arrival (the
        simulator's spill keeps such updates in a file, p2pnode/transport/spill.py): under the
        mean only one that comes before a selected client with a smaller id has answered."""
        if self.how != "mean":
            return True
        return self._next >= len(self._order) or self._order[self._next] != sender

    def _add(self, params: ParamsView) -> None:
        """The running sum of :func:`average`: a copy of the first update, then each next one
        added in place, tensor by tensor."""
        if self._sum is None:
            self._sum = {k: np.array(v, dtype=np.float32, copy=True) for k, v in params.items()}
        else:
            for k, arr in self._sum.items():
                arr += params[k]
        self._summed += 1


class FedAvgClient(GossipProtocol):
    """A client: take the global model, train, answer the server."""

    name = "fedavg-client"

    def __init__(self, node_id: NodeId, learner: Learner, sampler: PeerSampler, timing: TimingConfig) -> None:
        super().__init__(node_id, learner, sampler, timing)

    def start(self, now: float, rng: random.Random) -> list[Effect]:
        return []

    def wake(self, now: float, rng: random.Random) -> list[Effect]:
        return []

    def on_model(self, sender: NodeId, message: object, now: float, rng: random.Random) -> list[Effect]:
        if not isinstance(message, FedMessage) or message.kind != "global":
            return []
        self.stats.models_received += 1
        self.learner.load(message.params)
        self.stats.merges += 1
        effects = self.train()
        update = FedMessage("update", message.round, self.learner.version, self.learner.snapshot())
        self.stats.models_sent += 1
        return [*effects, Send(sender, update)]
