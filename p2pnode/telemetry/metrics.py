"""Prometheus metrics: one registry per process, every hosted node labelled ``node``.

Counters that move on every message (frames and bytes sent and taken, models, the view size and
model version) are plain ints on each node (:class:`NodeCounters`) that a collector reads when
``/metrics`` is scraped: a prometheus_client child's ``inc`` takes a lock and costs microseconds,
which a simulated round of 4,000 messages pays 30,000 times. The rest are ordinary
prometheus_client metrics, set where they change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector


class Metrics:
    """The metric families of one process; their names are an interface (dashboards read them)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.merges = Counter("p2pnode_merges_total", "Model aggregations", ["node"], registry=r)
        self.local_steps = Counter("p2pnode_local_steps_total", "Local optimizer steps", ["node"], registry=r)
        self.rejected = Counter(
            "p2pnode_rejected_messages_total",
            "Messages refused, by reason",
            ["node", "reason"],
            registry=r,
        )
        self.bounded = Counter(
            "p2pnode_models_bounded_total",
            "Taken models the robust merge moved: how=clipped (their difference cut to the clip's "
            "radius or the norm band's reach), how=banded (their norm moved into the norm band), "
            "how=damped (their difference damped: their member keeps pulling one way)",
            ["node", "how"],
            registry=r,
        )
        self.recoveries = Counter(
            "p2pnode_model_recoveries_total",
            "Times a node's model went non-finite and went back to its last good model",
            ["node"],
            registry=r,
        )
        self.checkpoint_failures = Counter(
            "p2pnode_checkpoint_failures_total",
            "Checkpoint saves that failed (a full disk); the previous checkpoints are kept",
            registry=r,
        )
        self.peers_left = Counter(
            "p2pnode_peers_left_total",
            "Leave messages taken: peers that said they leave the network (Cyclon)",
            ["node"],
            registry=r,
        )
        self.live_nodes = Gauge(
            "p2pnode_live_nodes", "Nodes online now (the simulator under churn)", registry=r
        )
        self.churn_events = Counter(
            "p2pnode_churn_events_total",
            "Nodes that joined, left (telling peers) or crashed (the simulator under churn)",
            ["event"],
            registry=r,
        )
        self.refused_connections = Counter(
            "p2pnode_refused_connections_total",
            "Connections closed as they were accepted: their remote address held its cap",
            registry=r,
        )
        self.send_failures = Counter(
            "p2pnode_send_failures_total",
            "Frames not delivered, by reason",
            ["node", "reason"],
            registry=r,
        )
        self.view_changes = Counter(
            "p2pnode_view_swaps_total",
            "PeerSwap transactions this node initiated, by outcome; unconfirmed: swaps handed to it "
            "that nodes of its own process took no part in, refused; vetoed: swaps refused for the "
            "views they would hand it (one other member's ids in too many places)",
            ["node", "outcome"],
            registry=r,
        )
        self.round = Gauge("p2pnode_round", "Current round", ["node"], registry=r)
        self.hit_ratio = Gauge(
            "p2pnode_hit_ratio",
            "HR@K of the node's model on its held-out item (0 or 1)",
            ["node"],
            registry=r,
        )
        self.ndcg = Gauge(
            "p2pnode_ndcg", "NDCG@K of the node's model on its held-out item", ["node"], registry=r
        )
        self.recall = Gauge(
            "p2pnode_recall",
            "Recall@K of the node's model on its held-out item (one relevant item: HR@K's value)",
            ["node"],
            registry=r,
        )
        self.reciprocal_rank = Gauge(
            "p2pnode_reciprocal_rank",
            "1 / rank of the node's held-out item among its candidates (the mean over nodes is the MRR)",
            ["node"],
            registry=r,
        )
        self.dp_epsilon = Gauge(
            "p2pnode_dp_epsilon",
            "DP-SGD epsilon this node has spent (Opacus RDP accountant, at the run's delta)",
            ["node"],
            registry=r,
        )
        self.dp_unprotected = Gauge(
            "p2pnode_dp_unprotected",
            "selective DP-SGD (--dp-past): models of this node peers took before its DP-SGD began",
            ["node"],
            registry=r,
        )
        self.cia_accuracy = Gauge(
            "p2pnode_cia_accuracy",
            "CIA Accuracy@R of this adversary at the last evaluation: |Ĉ ∩ C| / K",
            ["node"],
            registry=r,
        )
        self.mia = Gauge(
            "p2pnode_mia",
            "Membership inference (--mia, MPE) at the last evaluation, over this process's nodes: "
            "oracle_accuracy (per-victim threshold, 002 eq. 6), auc, balanced_accuracy and "
            "tpr_at_fpr_1e-03 / _1e-02 (one threshold for all), audit_epsilon (--canaries: the ε lower "
            "bound at 95%); observer: omniscient (every hosted node's model), or a placed one (the "
            "FedAvg server, a node, a colluding group: on the models it received; observed: how many "
            "users it holds a model of)",
            ["observer", "figure"],
            registry=r,
        )
        self.aia_score = Gauge(
            "p2pnode_aia_score",
            "Attribute inference (--attack aia) at the last evaluation: the AUC of a two-class attribute, "
            "the micro-F1 of others; observer: a hosted observing node, or omniscient (this process's nodes)",
            ["observer", "attribute"],
            registry=r,
        )
        self.aia_baseline = Gauge(
            "p2pnode_aia_majority_baseline",
            "The same split's majority-class score, beside p2pnode_aia_score",
            ["observer", "attribute"],
            registry=r,
        )
        self.aia_observed = Gauge(
            "p2pnode_aia_observed_users",
            "Users whose models the attribute inference observer holds features of",
            ["observer"],
            registry=r,
        )
        self.exposure = Gauge(
            "p2pnode_exposure",
            "Gossip exposure as this process's nodes saw it (p2pnode/telemetry/exposure.py): tau (003's rule "
            "over the merges by sender), above_tau (share of nodes merged more than tau times), "
            "privacy_risk (mean min(tau, merges)), usage_max",
            ["figure"],
            registry=r,
        )
        self.knn = Gauge(
            "p2pnode_knn",
            "This node's part in the KNN service (--knn, protocols/knn.py), read at scrape time: "
            "data_usage (asks it answered with a rating, 003 eq. 15), real and randomized (of them "
            "answered with the real rating, through randomized response past tau), epsilon (003 "
            "eq. 26: +Inf while every answer was real), queries (its own queries done)",
            ["node", "figure"],
            registry=r,
        )
        self.cia_upper_bound = Gauge(
            "p2pnode_cia_upper_bound",
            "Share of the true community C whose models this adversary has observed",
            ["node"],
            registry=r,
        )
        self.cia_observed = Gauge(
            "p2pnode_cia_observed_users",
            "Users whose models this adversary has observed",
            ["node"],
            registry=r,
        )
        #: the per-message counters, kept by each node as plain ints and read at scrape time
        self.nodes: dict[str, NodeReadings] = {}
        r.register(_NodeCollector(self.nodes))
        #: the process's caches and tables, by name, read at scrape time (:meth:`watch_caches`)
        self.caches: list[Callable[[], Mapping[str, int]]] = []
        r.register(_CacheCollector(self.caches))

    def watch(self, label: str, readings: NodeReadings) -> None:
        """Export ``readings`` (a hosted node's counters) under ``node=label``."""
        self.nodes[label] = readings

    def watch_caches(self, sizes: Callable[[], Mapping[str, int]]) -> None:
        """Export ``sizes()`` (cache name -> entries) as ``p2pnode_cache_entries{cache}``."""
        self.caches.append(sizes)


@dataclass
class NodeCounters:
    """Plain counters a node keeps for reports and ``/metrics`` (cheap to bump and to read)."""

    messages_sent: int = 0
    bytes_sent: int = 0
    models_sent: int = 0
    delta_models_sent: int = 0
    bytes_received: int = 0
    models_received: int = 0
    gossip_sent: int = 0  #: frames sent on the gossip channel (models)
    sampling_sent: int = 0  #: frames sent on the peer-sampling channel
    knn_sent: int = 0  #: frames sent on the KNN service's channel
    collude_sent: int = 0  #: frames sent on the colluders' channel
    rejected: dict[str, int] = field(default_factory=dict)
    send_failures: int = 0
    multicasts_sent: int = 0


@dataclass(frozen=True)
class NodeReadings:
    """What the collector reads from one node at scrape time."""

    counters: NodeCounters
    view_size: Callable[[], int]
    model_version: Callable[[], int]


_COUNTERS: tuple[tuple[str, str, str], ...] = (
    ("p2pnode_models_sent_total", "Models sent to peers", "models_sent"),
    ("p2pnode_models_received_total", "Models accepted from peers", "models_received"),
    ("p2pnode_delta_models_sent_total", "Models sent as row deltas", "delta_models_sent"),
    ("p2pnode_bytes_sent_total", "Frame bytes sent (all message types)", "bytes_sent"),
    ("p2pnode_bytes_received_total", "Frame bytes accepted", "bytes_received"),
)
_CHANNELS = (
    ("gossip", "gossip_sent"),
    ("sampling", "sampling_sent"),
    ("collude", "collude_sent"),
    ("knn", "knn_sent"),
)


class _CacheCollector(Collector):
    """``p2pnode_cache_entries``: the entries of every table the process keeps about its peers
    (nonces, credentials, rate buckets, per-address state), so that a soak can see one grow."""

    def __init__(self, sources: list[Callable[[], Mapping[str, int]]]) -> None:
        self.sources = sources

    def collect(self) -> Iterator[Metric]:
        if not self.sources:
            return
        family = GaugeMetricFamily(
            "p2pnode_cache_entries", "Entries of the process's caches and per-peer tables", labels=["cache"]
        )
        for sizes in self.sources:
            for name, n in sizes().items():
                family.add_metric([name], n)
        yield family

    def describe(self) -> Iterator[Metric]:
        return iter(())


class _NodeCollector(Collector):
    """The per-message families, read from every watched node's :class:`NodeCounters`."""

    def __init__(self, nodes: dict[str, NodeReadings]) -> None:
        self.nodes = nodes

    def collect(self) -> Iterator[Metric]:
        nodes = list(self.nodes.items())
        for name, help_text, attr in _COUNTERS:
            family = CounterMetricFamily(name.removesuffix("_total"), help_text, labels=["node"])
            for label, r in nodes:
                family.add_metric([label], getattr(r.counters, attr))
            yield family
        sent = CounterMetricFamily(
            "p2pnode_messages_sent", "Frames sent, by channel", labels=["node", "channel"]
        )
        for label, r in nodes:
            for channel, attr in _CHANNELS:
                sent.add_metric([label, channel], getattr(r.counters, attr))
        yield sent
        view = GaugeMetricFamily("p2pnode_view_size", "Out-view size", labels=["node"])
        version = GaugeMetricFamily("p2pnode_model_version", "Local model version", labels=["node"])
        for label, r in nodes:
            view.add_metric([label], r.view_size())
            version.add_metric([label], r.model_version())
        yield view
        yield version

    def describe(self) -> Iterator[Metric]:
        return iter(())
