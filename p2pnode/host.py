"""A host: the 1..M nodes of one process, behind one receive point (the single decode/dispatch).

The HTTP server and the in-memory network both hand frames to ``Host.receive``; it decodes the
envelope once, checks the route, and gives the frame to the addressed node.
"""

from __future__ import annotations

import logging

from p2pnode.metrics import Metrics
from p2pnode.node import NodeRuntime
from p2pnode.transport.base import Outcome, Payload
from p2pnode.wire.codec import decode_frame
from p2pnode.wire.schema import Channel, WireError

log = logging.getLogger("p2pnode.host")


def body_limit(model_bytes: int) -> int:
    """Largest frame a node accepts: a full float32 model plus room for the envelope."""
    return int(model_bytes * 1.25) + 64 * 1024


class Host:
    """The nodes hosted by one process."""

    def __init__(self, metrics: Metrics, max_frame_bytes: int) -> None:
        self.metrics = metrics
        self.max_frame_bytes = max_frame_bytes
        self.nodes: dict[int, NodeRuntime] = {}
        self.rejected_unknown = 0

    def add(self, runtime: NodeRuntime) -> None:
        self.nodes[runtime.node_id] = runtime

    def refuse(self, dest: int, reason: str) -> None:
        """Count a request refused before decoding (authentication) against its addressee."""
        node = self.nodes.get(dest)
        if node is not None:
            node.reject(reason)
        else:
            self.metrics.rejected.labels("none", reason).inc()

    def receive(
        self,
        dest: int,
        channel: Channel,
        data: Payload,
        sender: int | None = None,
        certified: set[int] | None = None,
    ) -> Outcome:
        """Decode, route and deliver one frame addressed to hosted node ``dest``.

        ``sender``: the authenticated sender id (p2pnode.auth); the frame must claim the same.
        ``certified``: the ids the peer's TLS certificate names (p2pnode.tls); the sender must be one.
        """
        node = self.nodes.get(dest)
        if node is None:
            self.rejected_unknown += 1
            self.metrics.rejected.labels("none", "unknown-node").inc()
            return Outcome(404, "unknown-node")
        try:
            frame = decode_frame(data, self.max_frame_bytes)
            if frame.dest != dest:
                raise WireError("wrong-route", f"frame for {frame.dest} posted to {dest}")
            if frame.channel != channel:
                raise WireError("wrong-route", f"{frame.type.name} posted to the {channel.name} route")
        except WireError as err:
            node.reject(err.reason)
            log.info("node %s refused a frame: %s", dest, err)
            return Outcome(err.status, err.reason)
        if sender is not None and frame.sender != sender:
            node.reject("sender-mismatch")
            log.info("node %s refused a frame from %s claiming to be %s", dest, sender, frame.sender)
            return Outcome(403, "sender-mismatch")
        if certified is not None and frame.sender not in certified:
            node.reject("cert-mismatch")
            log.info("node %s refused a frame from %s: not in the peer's certificate", dest, frame.sender)
            return Outcome(403, "cert-mismatch")
        return node.deliver(frame, len(data))
