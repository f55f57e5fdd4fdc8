"""The intake of one frame: parse head, route, node admit, parse body, node vet.

Every frame a hosted node receives (over HTTP, from a batch, in memory in the simulator or from a
node of the same process) goes through :func:`take`, whose steps alternate between parsing
(``p2pnode.wire.codec``, which only parses) and the receiving node's judgement (:class:`Inbox`):

1. **parse head** (``decode_frame``): the envelope, within the frame limit;
2. **route**: the frame names the node and channel it was posted to, and the authenticated
   sender (and the TLS certificate's ids) as its sender;
3. **node admit**: a model newer than the last taken from its sender (no version jump), from a
   sender the node takes models from (the sender gate; a colluders' multicast only from a partner),
   all before one byte of the body is read, so a refused delta never touches the decoder's bases;
4. **parse body** (``decode_body``): every field and tensor against the node's own model;
5. **node vet**: the ids a message names exist, a model or multicast is not too far from the node's.

A model frame the node admitted and then refused (a body that does not parse, a model too far)
costs its sender a token of the sender gate as a taken one does (``Inbox.charge``), so the bound
cannot be probed for free; a delta whose base is gone (``no-base``) does not, since honest
senders meet it and send the model again whole.

A refusal is a ``WireError`` whose reason is one of ``p2pnode.transport.refusals.REASONS``; the
host counts it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from adversary.messages import CollusionMessage
from learning.params import ModelSpec
from p2pnode.wire.codec import Frame, PublicSpec, decode_body, decode_frame
from p2pnode.wire.delta import DeltaDecoder
from p2pnode.wire.schema import (
    INCARNATION_SHIFT,
    KNN_TYPES,
    MAX_VERSION_JUMP,
    MODEL_TYPES,
    Channel,
    MsgType,
    SharedFrame,
    WireError,
)
from peer_sampling.messages import (
    LockRequest,
    ShuffleReply,
    ShuffleRequest,
    SwapAccept,
    SwapAdopt,
    SwapCommit,
)
from protocols.messages import PublicMessage


class Inbox(Protocol):
    """What a receiving node checks a frame against (``NodeRuntime`` is one)."""

    @property
    def node_id(self) -> int: ...

    @property
    def spec(self) -> ModelSpec:
        """Its own model's tensors: every received model must match them."""

    @property
    def decoder(self) -> DeltaDecoder:
        """Its delta bases, per sender."""

    @property
    def collusion_spec(self) -> ModelSpec | None:
        """A colluder's multicast tensors (None: it takes none)."""

    @property
    def last_version(self) -> Mapping[int, int]:
        """Per sender: the newest model version taken."""

    def admit(self, sender: int, collusion: bool = False) -> str | None:
        """Why a model (``collusion``: a colluder's multicast) from ``sender`` must be refused
        before its body is read (not an in-neighbour, too often, not a partner), or None."""

    def vet(self, message: object) -> str | None:
        """Why a decoded message must be refused (a model or multicast too far from the own
        model, a non-finite multicast), or None."""

    @property
    def newest_incarnation(self) -> int | None:
        """The largest incarnation a sender can have now (wall seconds plus skew; None: any)."""

    @property
    def population(self) -> int | None:
        """Node ids are 0..population-1 (None: any id); sampling messages naming others are refused."""

    @property
    def public_spec(self) -> PublicSpec | None:
        """The rows of PARD's D_pub it takes (None: it takes none)."""

    def admit_public(self, sender: int) -> str | None:
        """Why rows of D_pub from ``sender`` must be refused before their body is read, or None."""

    def vet_public(self, sender: int, message: PublicMessage) -> str | None:
        """Why parsed rows of D_pub must be refused (rows of another user than the sender's), or None."""

    def charge(self, sender: int) -> None:
        """A model frame from ``sender`` that was admitted was then refused: it costs a token."""

    def admit_knn(self, sender: int) -> str | None:
        """Why a KNN service message from ``sender`` must be refused before its body is read."""

    def vet_knn(self, sender: int, message: object) -> str | None:
        """Why a parsed KNN service message must be refused (items, ratings, not asked), or None."""


#: refusals after admission that cost the sender nothing: an honest sender meets them
FREE_REFUSALS = frozenset({"no-base"})


def take(
    data: bytes | memoryview | SharedFrame,
    max_bytes: int,
    inbox: Inbox,
    channel: Channel,
    sender: int | None = None,
    certified: set[int] | None = None,
    memo: dict[str, object] | None = None,
) -> tuple[Frame, object]:
    """The frame and message ``inbox``'s node takes from ``data``, posted on ``channel``; raises
    WireError (reason, status) at the first step that refuses it.

    ``sender``: the authenticated sender id (p2pnode.trust.auth); the frame must claim the same.
    ``certified``: the ids the peer's TLS certificate names (p2pnode.trust.tls); the sender must be one.
    ``memo``: shared by the frames of one multicast sent from this process (never from a socket).
    """
    frame = decode_frame(data, max_bytes, memo)
    check_route(frame, inbox.node_id, channel, sender, certified)
    admit(frame, inbox)
    try:
        message = decode_body(frame, inbox.spec, inbox.decoder, inbox.collusion_spec, memo, inbox.public_spec)
        vet(frame, message, inbox)
    except WireError as err:
        if frame.type in MODEL_TYPES and err.reason not in FREE_REFUSALS:
            inbox.charge(frame.sender)
        raise
    return frame, message


def check_route(
    frame: Frame, node_id: int, channel: Channel, sender: int | None, certified: set[int] | None
) -> None:
    """Step 2: the frame is for this node on this channel, from the sender that authenticated."""
    if frame.dest != node_id:
        raise WireError("wrong-route", f"frame for {frame.dest} posted to {node_id}")
    if frame.channel != channel:
        raise WireError("wrong-route", f"{frame.type.name} posted to the {channel.name} route")
    if sender is not None and frame.sender != sender:
        raise WireError("sender-mismatch", f"{sender} claims to be {frame.sender}", 403)
    if certified is not None and frame.sender not in certified:
        raise WireError("cert-mismatch", f"{frame.sender} is not in the peer's certificate", 403)


def admit(frame: Frame, inbox: Inbox) -> None:
    """Step 3: the node's verdict on a model's or multicast's sender, from the head alone."""
    if frame.type in MODEL_TYPES:
        order = _order(frame, inbox.last_version, inbox.newest_incarnation)
        if order == "old":
            raise WireError("old-model", f"older than the last model taken from {frame.sender}", 409)
        if order == "jump":
            raise WireError("version-jump", f"more than {MAX_VERSION_JUMP} versions ahead of the last", 422)
        reason = inbox.admit(frame.sender)
        if reason is not None:
            raise WireError(
                reason,
                f"no model is taken from {frame.sender}: {reason}",
                429 if reason == "too-often" else 403,
            )
    elif frame.type is MsgType.COLLUDE:
        reason = inbox.admit(frame.sender, collusion=True)  # an honest node: not-colluder
        if reason is not None:
            raise WireError(reason, f"no multicast is taken from {frame.sender}: {reason}", 403)
    elif frame.type is MsgType.PUBLIC:
        reason = inbox.admit_public(frame.sender) if inbox.public_spec is not None else "not-public"
        if reason is not None:
            raise WireError(reason, f"no public rows are taken from {frame.sender}: {reason}", 403)
    elif frame.type in KNN_TYPES:
        reason = inbox.admit_knn(frame.sender)
        if reason is not None:
            raise WireError(reason, f"no KNN message is taken here: {reason}", 403)


def vet(frame: Frame, message: object, inbox: Inbox) -> None:
    """Step 5: the node's verdict on a parsed message."""
    population = inbox.population
    if frame.type in MODEL_TYPES:
        reason = inbox.vet(message)
        if reason is not None:
            raise WireError(reason, f"the model from {frame.sender} is refused: {reason}", 422)
    elif frame.type is MsgType.COLLUDE:
        assert isinstance(message, CollusionMessage)
        if population is not None and message.user >= population:
            raise WireError("unknown-id", f"a multicast names user {message.user} >= {population}", 422)
        reason = inbox.vet(message)
        if reason is not None:
            raise WireError(reason, f"the multicast from {frame.sender} is refused: {reason}", 422)
    elif frame.type is MsgType.PUBLIC:
        assert isinstance(message, PublicMessage)
        if population is not None and any(u >= population for u in message.users):
            raise WireError("unknown-id", f"public rows name a user >= {population}", 422)
        reason = inbox.vet_public(frame.sender, message)
        if reason is not None:
            raise WireError(reason, f"the public rows from {frame.sender} are refused: {reason}", 403)
    elif frame.type in KNN_TYPES:
        reason = inbox.vet_knn(frame.sender, message)
        if reason is not None:
            status = {"not-knn": 403, "schema": 400}.get(reason, 422)
            raise WireError(reason, f"the {frame.type.name} from {frame.sender} is refused: {reason}", status)
    elif population is not None and any(i >= population for i in _named_ids(message)):
        raise WireError("unknown-id", f"{frame.type.name} names a node id >= {population}", 422)


def _named_ids(message: object) -> list[int]:
    """Every node id a peer-sampling message names (transaction initiators, views, entries)."""
    ids: list[int] = []
    txn = getattr(message, "txn", None)
    if txn is not None:
        ids.append(txn[0])  # the initiator; txn[1] is its counter, not an id
    if isinstance(message, SwapAccept | SwapAdopt):
        ids += [*message.out_view, *message.in_view]
    elif isinstance(message, SwapCommit):
        ids += [message.a, message.b]
    elif isinstance(message, LockRequest) and message.about is not None:
        ids.append(message.about)
    elif isinstance(message, ShuffleRequest | ShuffleReply):
        ids += [entry[0] for entry in message.entries]
    return ids


def _order(frame: Frame, last_version: Mapping[int, int], newest_incarnation: int | None) -> str:
    """Per-sender sequence: ``ok``, ``old`` (older than the last model taken from its sender) or
    ``jump`` (from an incarnation that cannot exist yet, or, in the same incarnation, more than
    MAX_VERSION_JUMP ahead of the last: a member cannot pin a sender at version 2⁶⁴ − 1). A later
    incarnation, a restart, is taken whatever its own count."""
    body = frame.body
    version = body.get("ver") if type(body) is dict else None
    if type(version) is not int:
        return "ok"  # the body's schema check refuses it
    if newest_incarnation is not None and version >> INCARNATION_SHIFT > newest_incarnation:
        return "jump"
    last = last_version.get(frame.sender)
    if last is None:
        return "ok"
    if version < last:
        return "old"
    same_life = version >> INCARNATION_SHIFT == last >> INCARNATION_SHIFT
    return "jump" if same_life and version - last > MAX_VERSION_JUMP else "ok"
