"""Every reason a process gives for refusing a request, in one table, and the one place that counts them.

A refused POST is answered with its status and the reason in ``X-P2P-Reason``; a refused frame
(or a refusal the node makes after taking a message, SAMO's full buffer) is counted once, by
:meth:`Refusals.count`, in the node's ``rejected`` counters (its ``/status`` row and the run's
summary) and in ``p2pnode_rejected_messages_total{node, reason}`` (``node="none"`` where no
hosted node was addressed). ``THREAT_MODEL.md`` prints :data:`REASONS` as its refusal table, and
a unit test keeps the two and every reason the code gives the same.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from p2pnode.telemetry.metrics import Metrics
from p2pnode.transport.base import UNREACHABLE


@dataclass(frozen=True, slots=True)
class Reason:
    """One refusal reason: its HTTP status, the step that gives it, and what it means."""

    status: int
    step: str
    meaning: str
    #: counted in the node's refusals and the metric (False: answered only, as GET pages are)
    counted: bool = True


_R = Reason

#: every refusal reason, in the order a request meets the step that gives it
REASONS: dict[str, Reason] = {
    # HTTP parsing (aiohttp, before any route or key: p2pnode.transport.peer_bytes)
    "malformed-http": _R(
        400,
        "HTTP parsing",
        "bytes that do not parse as an HTTP request (a Content-Length past 2^63 or below zero, a "
        "header line past 8,190 bytes, too many headers, not HTTP at all); logged at most once a "
        "minute per kind, with a count",
    ),
    # the route (p2pnode.transport.http)
    "no-route": _R(404, "route", "a POST to a path that is not a node's channel", counted=False),
    "bad-challenge": _R(
        400, "route", "a members page asked with a challenge that is not 32 hex digits", False
    ),
    # authentication (p2pnode.trust.auth, p2pnode.trust.identity), from the headers before the body is read
    "no-auth": _R(401, "authentication", "no authentication headers where the cluster has a key"),
    "wrong-cluster": _R(403, "authentication", "signed for another cluster"),
    "unknown-key": _R(401, "authentication", "signed with a key id this process does not hold"),
    "bad-auth": _R(401, "authentication", "authentication headers that do not parse"),
    "bad-mac": _R(401, "authentication", "a MAC that does not verify: a stranger without the key"),
    "unknown-sender": _R(403, "authentication", "a sender id that does not belong to the network"),
    "no-identity": _R(401, "authentication", "no credential where the cluster has identities"),
    "bad-credential": _R(
        401,
        "authentication",
        "a credential that does not parse, is for another cluster, or no trusted authority signed",
    ),
    "revoked": _R(403, "authentication", "a credential on the revocation list"),
    "not-holder": _R(403, "authentication", "a member speaking for a node id its credential does not hold"),
    "bad-signature": _R(
        401, "authentication", "a request signature that does not verify against the credential"
    ),
    "stale": _R(409, "authentication", "a timestamp outside the replay window or the allowed clock skew"),
    "replay": _R(409, "authentication", "a nonce seen before: a replayed request"),
    # admission (p2pnode.transport.admission), before the body is read
    "rate-limited": _R(429, "admission", "one sender posts faster than its rate allows"),
    "starting": _R(
        503, "admission", "the process has not started its nodes yet (the first second of a launch)"
    ),
    "busy": _R(503, "admission", "the process is overloaded: its slots are full or its loop runs late"),
    "too-large": _R(413, "admission", "a body past the largest frame (a full model plus its envelope)"),
    "slow-body": _R(408, "admission", "a body that did not arrive within the body timeout"),
    "truncated": _R(
        400, "admission", "a body that ends early: the sender went away, or a msgpack value is cut"
    ),
    "bad-digest": _R(401, "admission", "a body that does not match the digest its headers sign"),
    "bad-batch": _R(400, "admission", "a /v1/batch body that is not an array of frames"),
    # the host (p2pnode.nodes.host)
    "unknown-node": _R(404, "host", "a frame for a node id this process does not host"),
    "stopping": _R(503, "host", "a frame for a node that is stopping", counted=False),
    # the envelope (p2pnode.wire.codec.decode_frame)
    "malformed": _R(400, "envelope", "not msgpack, or not a frame's envelope"),
    "version": _R(400, "envelope", "another wire version"),
    "unknown-type": _R(400, "envelope", "a message type this node does not know"),
    # the route and sender of a parsed head (p2pnode.nodes.host)
    "wrong-route": _R(400, "route", "a frame posted to another node, or on another channel, than it names"),
    "sender-mismatch": _R(403, "route", "a frame that claims another sender than the authenticated one"),
    "cert-mismatch": _R(403, "route", "a sender the peer's TLS certificate does not name"),
    # the node's admission of a sender (p2pnode.nodes.node, protocols.robust), before the body is read
    "old-model": _R(409, "node", "a model older than the last one taken from its sender"),
    "version-jump": _R(
        422, "node", "a model dated ahead: from an incarnation that cannot exist yet, or far ahead"
    ),
    "not-neighbour": _R(403, "node", "a model from a node that is not an in-neighbour (the sender gate)"),
    "too-often": _R(429, "node", "models from one sender faster than an honest node sends (the sender gate)"),
    "not-colluder": _R(403, "node", "a colluders' multicast sent to an honest node"),
    "not-partner": _R(403, "node", "a colluders' multicast from a node that is not a partner"),
    "not-public": _R(
        403,
        "node",
        "rows of PARD's public set from a node that did not opt in to publish (or, to a FedAvg "
        "client, not from its server), or to a node that runs no PARD",
    ),
    "not-knn": _R(403, "node", "a KNN service message to a node that runs no KNN service"),
    # the body (p2pnode.wire.codec, delta, tensors)
    "schema": _R(400, "body", "a body without the fields its type needs, or with others"),
    "dtype": _R(400, "body", "a tensor of a dtype the model does not have"),
    "shape": _R(400, "body", "a tensor of another shape than the model's, or bad delta rows"),
    "no-base": _R(
        409, "body", "a delta against a model the receiver no longer keeps: the sender sends it whole next"
    ),
    # the node's vetting of a parsed message (p2pnode.nodes.node, protocols.gossip, adversary.node)
    "unknown-id": _R(422, "vet", "a message naming a node id past the population"),
    "too-far": _R(422, "vet", "a model too far from the receiver's own (the distance bound)"),
    "not-own-row": _R(403, "vet", "a public node's rows of PARD's public set that name another user"),
    "non-finite": _R(422, "vet", "a colluders' multicast with NaN or infinite values"),
    "not-asked": _R(
        422,
        "vet",
        "a KNN profile or answer the node did not ask for (a late or second answer to an ask it "
        "did send is dropped and counted as the KNN figures' late, not refused)",
    ),
    # taken, then dropped by the node's protocol
    "buffer-full": _R(
        200, "protocol", "SAMO's buffer of models for the next merge is full: the model is dropped"
    ),
}


class Counted(Protocol):
    """A hosted node as the count sees it: its label and its own refusal counters."""

    @property
    def node_id(self) -> int: ...

    @property
    def rejected(self) -> dict[str, int]: ...


class Refusals:
    """Counts every refusal of one process: per node, and in ``p2pnode_rejected_messages_total``."""

    def __init__(self, metrics: Metrics) -> None:
        self._metric = metrics.rejected

    def count(self, node: Counted | None, reason: str) -> None:
        """One refusal of a request addressed to ``node`` (None: to no hosted node)."""
        if node is None:
            self._metric.labels("none", reason).inc()
            return
        node.rejected[reason] = node.rejected.get(reason, 0) + 1
        self._metric.labels(str(node.node_id), reason).inc()

    def for_node(self, node: Counted) -> Callable[[str], None]:
        """The count of ``node``'s own refusals (a message its protocol drops after taking it)."""
        return lambda reason: self.count(node, reason)


def markdown_table() -> str:
    """The refusal table of THREAT_MODEL.md."""
    lines = ["| reason | status | step | what happened |", "|---|---|---|---|"]
    for name, reason in REASONS.items():
        status = "200 (taken, then dropped)" if reason.status == 200 else str(reason.status)
        note = "" if reason.counted else " (answered, not counted)"
        lines.append(f"| `{name}` | {status} | {reason.step} | {reason.meaning}{note} |")
    return "\n".join(lines) + "\n"


def failure_label(status: int, reason: str) -> str:
    """The ``reason`` label of ``p2pnode_send_failures_total`` for a send that failed with
    ``status`` and ``reason``: a reason of :data:`REASONS` as it is; for a peer that never
    answered (status 0) the local error's type, which this process names; anything else a peer
    answered (a reason it made up, a bare status) is ``other``, so a peer cannot add labels."""
    if status == UNREACHABLE:
        return reason or "unreachable"
    return reason if reason in REASONS else "other"
