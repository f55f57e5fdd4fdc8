"""Prometheus metrics: one registry per process, every hosted node labelled ``node``."""

from __future__ import annotations

from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge


class Metrics:
    """The metric families of one process; their names are an interface (dashboards read them)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.models_sent = Counter("p2pnode_models_sent_total", "Models sent to peers", ["node"], registry=r)
        self.models_received = Counter(
            "p2pnode_models_received_total", "Models accepted from peers", ["node"], registry=r
        )
        self.delta_sent = Counter(
            "p2pnode_delta_models_sent_total", "Models sent as row deltas", ["node"], registry=r
        )
        self.bytes_sent = Counter(
            "p2pnode_bytes_sent_total", "Frame bytes sent (all message types)", ["node"], registry=r
        )
        self.bytes_received = Counter(
            "p2pnode_bytes_received_total", "Frame bytes accepted", ["node"], registry=r
        )
        self.messages_sent = Counter(
            "p2pnode_messages_sent_total",
            "Frames sent, by channel",
            ["node", "channel"],
            registry=r,
        )
        self.merges = Counter("p2pnode_merges_total", "Model aggregations", ["node"], registry=r)
        self.local_steps = Counter("p2pnode_local_steps_total", "Local optimizer steps", ["node"], registry=r)
        self.rejected = Counter(
            "p2pnode_rejected_messages_total",
            "Messages refused, by reason",
            ["node", "reason"],
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
            "PeerSwap transactions this node initiated, by outcome",
            ["node", "outcome"],
            registry=r,
        )
        self.round = Gauge("p2pnode_round", "Current round", ["node"], registry=r)
        self.view_size = Gauge("p2pnode_view_size", "Out-view size", ["node"], registry=r)
        self.hit_ratio = Gauge(
            "p2pnode_hit_ratio",
            "HR@K of the node's model on its held-out item (0 or 1)",
            ["node"],
            registry=r,
        )
        self.dp_epsilon = Gauge(
            "p2pnode_dp_epsilon",
            "DP-SGD epsilon this node has spent (Opacus RDP accountant, at the run's delta)",
            ["node"],
            registry=r,
        )
        self.cia_accuracy = Gauge(
            "p2pnode_cia_accuracy",
            "CIA Accuracy@R of this adversary at the last evaluation: |Ĉ ∩ C| / K",
            ["node"],
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
        self.model_version = Gauge("p2pnode_model_version", "Local model version", ["node"], registry=r)


@dataclass
class NodeCounters:
    """Plain counters a node keeps for reports (cheap to read, no registry walk)."""

    messages_sent: int = 0
    bytes_sent: int = 0
    models_sent: int = 0
    delta_models_sent: int = 0
    bytes_received: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    send_failures: int = 0
    multicasts_sent: int = 0
