"""What happens after a round and at the end of a run, for the simulator and real processes alike.

After every ``eval_every``-th round (and the last): HR@K (or F1@K) and the counters of every
hosted node, the adversaries' accuracy (CIA paper §V-C) and, when asked, the membership inference
(002 §2.5); at the end, the summary with its per-round history. :class:`RoundRunner` is the one
round loop of both drivers; they differ only in how a round passes (the virtual clock runs to its
end, or a process waits for wall time).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from adversary.mia_observer import views
from adversary.node import AdversaryNode
from learning.early_stop import EarlyStop, validation_figure
from p2pnode.attacks.attack import lab_for, observer_gauges, plugin_results, victims, watches
from p2pnode.attacks.attributes import aia_lab_for, shared_models
from p2pnode.config import RunConfig
from p2pnode.nodes.node import NodeRuntime
from p2pnode.nodes.prepare import Prepared
from p2pnode.runners.report import (
    epsilon_by_node,
    metric_for,
    node_rows,
    popularity_counts,
    progress_line,
    round_stats,
)
from p2pnode.telemetry.exposure import ExposureLedger


class RoundLog:
    """The run's evaluations, round by round, and its final summary."""

    def __init__(
        self,
        config: RunConfig,
        prep: Prepared,
        nodes: Mapping[int, NodeRuntime],
        progress: Callable[[str], None] | None = None,
        wall_time: bool = False,
        extra: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self.config = config
        self.prep = prep
        self.nodes = nodes
        self.metric = metric_for(config)
        n_items = prep.users[0].n_items if prep.users else 0
        #: the training split's item counts: the popularity baseline beside each evaluation
        self.counts = popularity_counts(prep.users, n_items)
        self.lab = lab_for(prep)
        self.aia = aia_lab_for(prep)  #: the attribute inference (--attack aia), None without
        #: the dataset's own user ids (``u17``), by node id, for outputs that name users
        self.raw_users: tuple[str, ...] | None = tuple(prep.data.raw_user_ids) if prep.data else None
        self.progress = progress
        #: the rounds the run has (None: a daemon until stopped; the round runner sets it)
        self.total: int | None = config.rounds
        self._first: tuple[int, float] | None = None  #: the first evaluation's round and time
        self.wall_time = wall_time  #: stamp each evaluation with the wall clock (real runs)
        self.extra = extra  #: the driver's own figures for each evaluation (the simulator's churn)
        self.history: list[dict[str, Any]] = []
        self.last: dict[str, Any] = {}  #: this run's latest evaluation
        self.stopped: int | None = None  #: the round the early stop (``stop_at``) ended the run at
        #: the early stop on a validation item (``stop_patience``), its best evaluation and what
        #: attribute inference read then (scored at the end: learning/early_stop.py)
        self.early = EarlyStop(config.stop_patience) if config.stop_patience else None
        self.best: dict[str, Any] | None = None
        self._best_features: dict[str, dict[int, Any]] = {}

    def due(self, round_no: int) -> bool:
        """Whether round ``round_no`` is evaluated."""
        return round_no % self.config.eval_every == 0 or round_no == self.config.rounds

    def evaluate(self, round_no: int, seconds: float) -> dict[str, Any]:
        """Evaluate every hosted node and adversary after round ``round_no``; record and report it."""
        nodes = self.nodes.values()
        shared = self.global_model()
        stats = round_stats(round_no, nodes, self.metric, self.counts, shared)
        target = self.config.stop_at
        if target and stats.get(self.metric.key, 0.0) >= target and round_no < (self.config.rounds or 0):
            self.stopped = round_no  # the run's last round: the attacks are evaluated on it
            stats["stopped"] = True
        best = self._early_stop(round_no, stats, shared)
        cia = self.lab.evaluate(round_no, nodes)
        if cia is not None:
            stats["cia"] = cia
        mia = self.lab.evaluate_mia(round_no, victims(nodes), views(watches(nodes)))
        if mia is not None:
            stats["mia"] = mia
            first_node = next(iter(self.nodes.values()), None)
            if first_node is not None:  # one registry a process: any node publishes it
                first_node.publish_mia("omniscient", mia)
                for name, row in mia.get("observers", {}).items():
                    first_node.publish_mia(name, observer_gauges(row))
        if self.aia is not None and (
            round_no % self.config.attack.aia_every == 0
            or round_no == self.config.rounds
            or self.stopped == round_no
        ):
            stats["aia"] = self.evaluate_aia(round_no)
        if self.extra is not None:
            stats.update(self.extra())
        ledger = self.ledger
        first = next(iter(self.nodes.values()), None)
        if ledger is not None and first is not None:  # one registry a process: any node publishes it
            first.publish_exposure(ledger.summary(self.config.nodes))
        stats["seconds"] = seconds
        if self.wall_time:
            stats["time"] = time.time()  # lines rounds up with outside events (faults, logs)
        self.history.append(stats)
        self.last = stats
        if best:
            self.best = stats
        if self.progress is not None:
            self.progress(progress_line(stats, self.metric, self.total, seconds, self._first))
        if self._first is None:
            self._first = (round_no, seconds)
        return stats

    def global_model(self) -> Mapping[str, Any] | None:
        """Under ``--eval-model global``: the FedAvg server's coming global model (the mean of
        the round's updates), which every client is evaluated under; None otherwise."""
        if self.config.learning.eval_model != "global":
            return None
        server = self.nodes.get(self.config.nodes)  # p2pnode.runners.build.server_id
        upcoming = getattr(server.node.protocol, "upcoming", None) if server is not None else None
        return None if upcoming is None else upcoming()

    def _early_stop(
        self, round_no: int, stats: dict[str, Any], shared: Mapping[str, Any] | None = None
    ) -> bool:
        """Read the validation items (``stop_patience``): True when this evaluation is the best
        so far (what attribute inference reads now is kept for the summary); the run stops once
        ``patience`` evaluations stayed below it. Under PARD's warm-up (004's code pre-trains
        first, then fine-tunes with an early stop of its own) the warm-up's rounds are not
        candidates."""
        early = self.early
        if early is None:
            return False
        k = self.config.learning.top_k
        learners = [r.learner for r in self.nodes.values()]
        ranks = (
            m.validation_ranks() if shared is None else m.validation_ranks_under(shared) for m in learners
        )
        hit_k, hit_2k, n = validation_figure(ranks, k)
        stats["validation"] = {f"hit_ratio_at_{k}": hit_k, f"hit_ratio_at_{2 * k}": hit_2k, "nodes": n}
        lc = self.config.learning
        if lc.adversarial and round_no <= lc.pard_warmup:
            return False
        best = early.observe(round_no, hit_k + hit_2k)
        if best and self.aia is not None:
            self._best_features = self._aia_features()
        if early.done and round_no < (self.config.rounds or 0):
            self.stopped = round_no
            stats["stopped"] = True
        return best

    def _aia_features(self) -> dict[str, dict[int, Any]]:
        """What every observer of attribute inference holds now: the omniscient observer's
        features of every shared model, each hosted observing node's (copies)."""
        assert self.aia is not None
        out = {"omniscient": self.aia.features_of(shared_models(self.nodes.values(), self.config.nodes))}
        for runtime in self.nodes.values():
            node = runtime.node
            if isinstance(node, AdversaryNode) and node.aia is not None and node.aia.keep:
                name = node.aia.name or f"node {runtime.node_id}"
                out[name] = {u: np.array(f, copy=True) for u, f in node.aia.features.items()}
        return out

    @property
    def ledger(self) -> ExposureLedger | None:
        """Who merged whose models in this process (p2pnode/telemetry/exposure.py; None under FedAvg)."""
        first = next(iter(self.nodes.values()), None)
        return None if first is None else first.ledger

    def node_rows(self) -> list[dict[str, Any]]:
        """One row per hosted node (``report.node_rows``): the summary's ``per_node``, and the
        rows of a real process's ``/status``."""
        server = (
            self.config.nodes if self.config.protocol == "fedavg" else None
        )  # p2pnode.runners.build.server_id
        return node_rows(self.nodes.values(), self.metric, self.raw_users, server)

    def evaluate_aia(self, round_no: int) -> dict[str, Any]:
        """Attribute inference by the omniscient observer (every node's shared model: an upper
        bound) and by every hosted observing node (the FedAvg server, ``--attackers``), from what
        it has received."""
        assert self.aia is not None
        out = {
            "omniscient": self.aia.evaluate(round_no, shared_models(self.nodes.values(), self.config.nodes))
        }
        first = next(iter(self.nodes.values()), None)
        if first is not None:  # one registry a process: any node publishes it
            first.publish_aia("omniscient", out["omniscient"])
        for runtime in self.nodes.values():
            node = runtime.node
            if isinstance(node, AdversaryNode) and node.aia is not None and node.aia.keep:
                name = node.aia.name or f"node {runtime.node_id}"
                out[name] = self.aia.score(name, round_no, node.aia.features)
                runtime.publish_aia(name, out[name])
        return out

    def result(self, round_no: int, seconds: float, **fields: Any) -> dict[str, Any]:
        """The run's summary: the latest evaluation, ``fields``, the history, the attacks'."""
        stats = self.last or round_stats(round_no, self.nodes.values(), self.metric, self.counts)
        if self.early is not None and self.best is not None:  # the best evaluation is the run's
            stats = self.best
        result = dict(stats)
        result.update(fields)
        if self.early is not None:
            result["early_stop"] = {**self.early.to_dict(), "stopped": self.stopped, "last_round": round_no}
        result.update(seconds=seconds, history=self.history, config=self.config.to_dict())
        result["per_node"] = self.node_rows()
        if self.config.learning.dp:
            result["dp_epsilon_by_node"] = epsilon_by_node(self.nodes.values())
        if self.lab.active:
            result["cia"] = self.lab.summary(self.nodes.values())
            raw = self.raw_users
            if raw is not None:
                for p in result["cia"].get("predictions", []):
                    a = p["adversary"]  # the dataset's own ids next to node ids (FedAvg's server is none)
                    p["adversary_user"] = raw[a] if a < len(raw) else None
                    p["community_users"] = [raw[u] for u in p["community"]]
        mia = self.lab.mia_summary()
        if mia is not None:
            result["mia"] = mia
        if self.aia is not None:
            if self.early is not None and self.early.best_round is not None:
                for name, features in self._best_features.items():
                    self.aia.score_chosen(name, self.early.best_round, features)
                self._best_features = {}
            result["aia"] = self.aia.summary()
        ledger = self.ledger
        if ledger is not None:
            result["exposure"] = ledger.summary(self.config.nodes)
            if fields.get("mode") == "real":  # a launch sums its processes' (p2plab/merge.py)
                result["exposure_by_sender"] = ledger.vectors()
            else:  # one process saw every merge: each node's own figures
                exposure = ledger.exposure()
                for row in result["per_node"]:
                    node = int(row["node"])
                    if node < self.config.nodes:
                        row["merged_by_others"] = int(ledger.usage[node])
                        if exposure is not None:
                            row["exposure"] = int(exposure[node])
        if self.config.knn.active:
            result["knn"] = self.knn_result()
        if self.config.attack.plugin:
            result["attack_plugin"] = {
                "name": self.config.attack.plugin,
                "observers": plugin_results(self.nodes.values()),
            }
        return result

    def knn_result(self) -> dict[str, Any]:
        """The KNN service's figures from the hosted nodes' counts as they stand now (a real
        process reads them again after its linger, when answers to its last asks have come)."""
        from p2pnode.nodes.knn import knn_plan, knn_summary

        services = [r.node.knn for r in self.nodes.values() if r.node.knn is not None]
        return knn_summary(services, knn_plan(self.prep))


class RoundRunner:
    """The round loop of the simulator and of a real process, without the waiting (sans-I/O).

    The driver asks which round ends next (:meth:`next_round`), lets its clock run to that
    round's end (the virtual clock jumps there; a real process waits for wall time or a stop),
    then says so (:meth:`end_round`): the runner counts it, evaluates it when due (``RoundLog``)
    and calls the driver's per-round hooks (checkpoints, progress files) in order. The summary
    comes from :meth:`result`. A resumed process starts at the round it reached; ``rounds`` None:
    until the driver stops (a daemon).
    """

    def __init__(
        self,
        log: RoundLog,
        rounds: int | None,
        start: int = 0,
        hooks: tuple[Callable[[int], None], ...] = (),
    ) -> None:
        self.log = log
        self.rounds = rounds
        log.total = rounds
        self.round = start
        self.hooks = hooks

    def next_round(self) -> int | None:
        """The round whose end the driver waits for next; None when the run is over."""
        if self.log.stopped is not None:
            return None
        return self.round + 1 if self.rounds is None or self.round < self.rounds else None

    def end_round(self, round_no: int, seconds: float) -> None:
        """Round ``round_no`` ended, ``seconds`` after the run began."""
        if round_no != self.round + 1:
            raise ValueError(f"round {round_no} ended after round {self.round}")
        self.round = round_no
        if self.log.due(round_no):
            self.log.evaluate(round_no, seconds)
        for hook in self.hooks:
            hook(round_no)

    def result(self, seconds: float, **fields: Any) -> dict[str, Any]:
        """The run's summary after the rounds that ran (all of them, or up to a stop)."""
        return self.log.result(self.round, seconds, rounds=self.round, **fields)
