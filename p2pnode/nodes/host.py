"""A host: the 1..M nodes of one process, behind one receive point.

The HTTP server and the in-memory network both hand frames to ``Host.receive``; it picks the
addressed node, runs the frame through the node's intake (``p2pnode.nodes.intake.take``: parse head,
route, node admit, parse body, node vet), counts a refusal (``p2pnode.transport.refusals``, the one place
every refusal of the process is counted) or gives the message to the node.
"""

from __future__ import annotations

import dataclasses
import logging

from p2pnode.nodes.intake import take
from p2pnode.nodes.node import NodeRuntime
from p2pnode.telemetry.exposure import ExposureLedger
from p2pnode.telemetry.metrics import Metrics
from p2pnode.transport.base import Memo, Outcome, Payload
from p2pnode.transport.refusals import Refusals
from p2pnode.transport.spill import Spill
from p2pnode.wire.schema import Channel, SharedFrame, WireError
from protocols.messages import FedMessage, ModelMessage

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
        self.refusals = Refusals(metrics)
        #: False while a process learns its peers' addresses: its nodes could not answer yet, so a
        #: frame is refused 503 "starting" (the sender tries again) rather than handled half-started
        self.accepting = True
        #: where the FedAvg updates a hosted server holds until they can go into its sum wait, on
        #: disk (the simulator's ``--spill-dir``, p2pnode/transport/spill.py); None: in memory
        self.spill: Spill | None = None
        #: the merges by sender its nodes made (p2pnode/telemetry/exposure.py); set before nodes are added
        self.ledger: ExposureLedger | None = None

    def add(self, runtime: NodeRuntime) -> None:
        self.nodes[runtime.node_id] = runtime
        runtime.count_refusal = self.refusals.for_node(runtime)
        runtime.ledger = self.ledger

    def refuse(self, dest: int, reason: str) -> None:
        """Count a request refused before its frame is parsed (authentication, admission) against
        its addressee (none where ``dest`` is not hosted, or -1: a batch)."""
        self.refusals.count(self.nodes.get(dest), reason)

    def receive(
        self,
        dest: int,
        channel: Channel,
        data: Payload | SharedFrame,
        sender: int | None = None,
        certified: set[int] | None = None,
        local: bool = False,
        memo: Memo | None = None,
    ) -> Outcome:
        """Decode, route and deliver one frame addressed to hosted node ``dest``.

        ``sender``: the authenticated sender id (p2pnode.trust.auth); the frame must claim the same.
        ``certified``: the ids the peer's TLS certificate names (p2pnode.trust.tls); the sender must be one.
        ``local``: the frame comes from a node of this process (the simulator's network, local
        delivery): the receiver then keeps the sender's own delta base instead of a second copy.
        ``memo``: shared by the frames of one multicast sent in this process (p2pnode.nodes.intake.take).
        """
        node = self.nodes.get(dest)
        if node is None:
            self.refusals.count(None, "unknown-node")
            return Outcome(404, "unknown-node")
        if node.stopped:
            return Outcome(503, "stopping")
        try:
            frame, message = take(data, self.max_frame_bytes, node, channel, sender, certified, memo)
        except WireError as err:
            self.refusals.count(node, err.reason)
            log.info("node %s refused a frame: %s", dest, err)
            return Outcome(err.status, err.reason)
        if local and isinstance(message, ModelMessage | FedMessage):
            self._share_base(node, frame.sender, message.version)
        if self.spill is not None and isinstance(message, FedMessage) and message.kind == "update":
            holds = getattr(getattr(node.node, "protocol", None), "holds", None)
            if holds is None or holds(frame.sender):  # an update added to the sum at once is not kept
                message = dataclasses.replace(message, params=self.spill.keep_params(message.params))
        return node.accept(frame.sender, message, len(data))

    def _share_base(self, node: NodeRuntime, sender: int, version: int) -> None:
        """The receiver's delta base of ``sender`` is the sender's own base of that version."""
        source = self.nodes.get(sender)
        if source is not None:
            base = source.encoder.shared(version)
            if base is not None:
                node.decoder.share(sender, version, base)
