"""A worked example of p2pnode's plug-ins (docs/plugins.md): an attack, a merge rule and a model,
in a module of your own. Put it where Python finds it (the working directory, PYTHONPATH, or an
installed package with entry points) and name it on the command line:

    p2pnode simulate --nodes 100 --rounds 20 --attack-plugin myplugins:ChangedRows
    p2pnode launch --nodes 100 --rounds 20 --merge-plugin myplugins:CloserWeighs
    p2pnode simulate --nodes 100 --rounds 20 --model-plugin myplugins:BiasedMF
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


class ChangedRows:
    """An attack: guess a sender's items as the item rows that changed most between two models
    received from it, and score the guess against the lab's ground truth (precision@m).

    Under GMF a user's local update moves the embedding rows of the items it trains on, so the
    rows that moved most since the sender's previous model hint at its items; every merge in
    between blurs the signal (its peers' rows move too).
    """

    def __init__(self, context: Any, m: int = 10) -> None:
        self.context = context
        self.m = m
        self.last: dict[int, np.ndarray] = {}  #: the item table last received from each sender
        self.hits = 0
        self.guesses = 0

    def observe(self, sender: int, params: Mapping[str, np.ndarray], now: float) -> None:
        table = params.get("item")  # GMF's item embeddings (PRME: "item_p"; docs/plugins.md)
        if table is None or sender >= self.context.nodes:
            return
        before = self.last.get(sender)
        self.last[sender] = table.copy()  # the arrays are read only and reused after the call
        if before is None:
            return
        moved = np.linalg.norm(table - before, axis=1)
        guess = np.argsort(-moved, kind="stable")[: self.m]
        truth = self.context.truth(sender)
        self.hits += int(np.isin(guess, truth).sum())
        self.guesses += len(guess)

    def result(self) -> Mapping[str, Any]:
        precision = self.hits / self.guesses if self.guesses else None
        return {"senders": len(self.last), "guesses": self.guesses, "precision": precision}

    def state(self) -> Any:  # optional: survive a real process's restart (JSON)
        return {"hits": self.hits, "guesses": self.guesses}

    def restore(self, state: Mapping[str, Any]) -> None:
        self.hits, self.guesses = int(state["hits"]), int(state["guesses"])


class CloserWeighs:
    """A merge rule: weigh each received model by how close it is to the node's own,
    w = 1 / (1 + ‖θ_j − θ_i‖ / ‖θ_i‖), the own model by 1 (Base GL's mean weighs both 1)."""

    def __init__(self, learner: Any) -> None:
        self.learner = learner

    def merge(self, received: Sequence[tuple[int, Mapping[str, np.ndarray]]]) -> dict[int, float]:
        own = self.learner.params
        weights = []
        for _, params in received:
            names = [k for k in params if k in own]
            gap = np.sqrt(sum(float(np.sum((params[k] - own[k]) ** 2)) for k in names))
            size = np.sqrt(sum(float(np.sum(own[k] ** 2)) for k in names)) or 1.0
            weights.append(1.0 / (1.0 + gap / size))
        self.learner.merge_weighted([p for _, p in received], weights, 1.0)
        return {sender: w for (sender, _), w in zip(received, weights, strict=True)}


class BiasedMF:
    """A model: matrix factorisation with item biases, s(i) = u · v_i + b_i, trained by plain SGD
    on the binary cross-entropy of the node's examples (GMF without its output layer)."""

    shared = ("user", "item", "bias")  # every tensor leaves the node (the default, said here)

    def __init__(self, dim: int = 16, lr: float = 0.03, batch: int = 64) -> None:
        self.dim, self.lr, self.batch = dim, lr, batch

    def init(self, n_items: int, seed: int) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(seed)  # every node starts from the same θ_0
        return {
            "user": rng.normal(0, 0.1, (1, self.dim)).astype(np.float32),
            "item": rng.normal(0, 0.1, (n_items, self.dim)).astype(np.float32),
            "bias": np.zeros(n_items, np.float32),
        }

    def scores(self, params: Mapping[str, np.ndarray], items: np.ndarray) -> np.ndarray:
        return params["item"][items] @ params["user"][0] + params["bias"][items]

    def update(
        self, params: Mapping[str, np.ndarray], items: np.ndarray, labels: np.ndarray, rng: Any
    ) -> int:
        user, item, bias = params["user"], params["item"], params["bias"]
        steps = 0
        for start in range(0, len(items), self.batch):
            idx, y = items[start : start + self.batch], labels[start : start + self.batch]
            logits = item[idx] @ user[0] + bias[idx]
            g = 1.0 / (1.0 + np.exp(-logits)) - y  # dBCE/dlogit of each example (the batch sums them)
            g_user = g @ item[idx]
            np.add.at(item, idx, (-self.lr * g[:, None] * user[0]).astype(np.float32))  # in place
            np.add.at(bias, idx, (-self.lr * g).astype(np.float32))
            user[0] -= (self.lr * g_user).astype(np.float32)
            steps += 1
        return steps
