"""Frame encoding and parsing for every ``/v1/`` message.

A frame is one msgpack map ``{"v": WIRE_VERSION, "t": MsgType, "src": id, "dst": id, "b": body}``.
Parsing comes in two calls, so that a receiver can judge a sender between them before a body is
read (``p2pnode.nodes.host.take``): ``decode_frame`` checks the envelope, ``decode_body`` turns the body
into the pure packages' message dataclasses, checking every field (and, for models, every tensor
against the local model). Neither decides whether a node takes a message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np

from adversary.messages import CollusionMessage
from learning.params import ModelSpec, TensorSpec
from p2pnode.wire.delta import DeltaDecoder, EncodedModel
from p2pnode.wire.schema import (
    KNN_TYPES,
    MAX_ADDRESS_LEN,
    MAX_CYCLON_ENTRIES,
    MAX_NEAR,
    MAX_NODE_ID,
    MAX_PROFILE_ITEMS,
    MAX_VIEW_IDS,
    MODEL_TYPES,
    WIRE_VERSION,
    Channel,
    MsgType,
    SharedFrame,
    WireError,
)
from p2pnode.wire.tensors import pack_tensor, unpack_tensors
from peer_sampling.messages import (
    CHECK_ADOPTED,
    CHECK_PENDING,
    CHECK_REFUSED,
    CyclonEntry,
    Leave,
    LockReply,
    LockRequest,
    ShuffleReply,
    ShuffleRequest,
    SwapAccept,
    SwapAdopt,
    SwapCheck,
    SwapChecked,
    SwapCommit,
    SwapPropose,
    Txn,
    Unlock,
)
from protocols.knn_messages import KnnAnswer, KnnAsk, KnnProbe, KnnProfile
from protocols.messages import FedMessage, ModelMessage, PublicMessage

_ENVELOPE_KEYS = {"v", "t", "src", "dst", "b"}
_TYPES: dict[object, MsgType] = {int(t): t for t in MsgType}


@dataclass(frozen=True, slots=True)
class Frame:
    """A decoded envelope whose body has not been interpreted yet."""

    type: MsgType
    sender: int
    dest: int
    body: Any

    @property
    def channel(self) -> Channel:
        if self.type is MsgType.COLLUDE:
            return Channel.COLLUDE
        if self.type in KNN_TYPES:
            return Channel.KNN
        return Channel.GOSSIP if self.type in MODEL_TYPES or self.type is MsgType.PUBLIC else Channel.SAMPLING


def encode_model_frame(
    sender: int,
    dest: int,
    model: EncodedModel,
    msg_type: MsgType = MsgType.MODEL,
    fed_round: int | None = None,
) -> memoryview:
    """The frame for a model message (full or delta body); FedAvg frames add ``rnd``.

    Packed into a buffer sized up front and returned as a view of it, so the tensor bytes are
    copied exactly once.
    """
    body = model.body if fed_round is None else {**model.body, "rnd": fed_round}
    frame = {
        "v": WIRE_VERSION,
        "t": int(msg_type),
        "src": sender,
        "dst": dest,
        "b": body,
    }
    packer = msgpack.Packer(buf_size=model.nbytes + 4096, autoreset=False, use_bin_type=True)
    packer.pack(frame)
    return memoryview(packer.getbuffer())


def encode_model_body(model: EncodedModel, fed_round: int | None = None) -> memoryview:
    """The packed body of :func:`encode_model_frame`'s frame, byte for byte: behind
    :func:`frame_head` it makes that frame (a FedAvg server packs its global model once a round
    for all the clients it sends it to, p2pnode/nodes/node.py)."""
    body = model.body if fed_round is None else {**model.body, "rnd": fed_round}
    packer = msgpack.Packer(buf_size=model.nbytes + 4096, autoreset=False, use_bin_type=True)
    packer.pack(body)
    return memoryview(packer.getbuffer())


def encode_sampling_frame(sender: int, dest: int, message: object) -> bytes:
    """The frame for a peer-sampling message (or a KNN service's, protocols/knn_messages.py)."""
    for msg_type, (cls, enc, _dec) in (*_SAMPLING.items(), *_KNN.items()):
        if type(message) is cls:
            return _pack(msg_type, sender, dest, enc(message))
    raise TypeError(f"no wire type for {type(message).__name__}")


def _pack(msg_type: MsgType, sender: int, dest: int, body: Any) -> bytes:
    frame = {"v": WIRE_VERSION, "t": int(msg_type), "src": sender, "dst": dest, "b": body}
    return bytes(msgpack.packb(frame, use_bin_type=True))


def decode_frame(
    data: bytes | memoryview | SharedFrame, max_bytes: int, memo: dict[str, object] | None = None
) -> Frame:
    """Parse and check the envelope. Raises WireError with the reason to count.

    A :class:`SharedFrame` (a multicast within this process, never from a socket) comes with its
    multicast's ``memo``: its body is unpacked once for all of the multicast's frames."""
    if len(data) > max_bytes:
        raise WireError("too-large", f"{len(data)} bytes > limit {max_bytes}", 413)
    if isinstance(data, SharedFrame):
        obj = _shared_envelope(data, max_bytes, memo)
    else:
        obj = _unpack(data, max_bytes)
    if type(obj) is not dict or len(obj) != 5 or obj.keys() != _ENVELOPE_KEYS:
        raise WireError("malformed", "a frame is a map with keys v, t, src, dst, b")
    if obj["v"] != WIRE_VERSION or type(obj["v"]) is not int:
        raise WireError("version", f"wire version {obj['v']!r}, this node speaks {WIRE_VERSION}")
    t = obj["t"]
    msg_type = _TYPES.get(t) if type(t) is int else None
    if msg_type is None:
        raise WireError("unknown-type", f"message type {t!r}")
    sender, dest = _node_id(obj["src"], "src"), _node_id(obj["dst"], "dst")
    return Frame(msg_type, sender, dest, obj["b"])


def _unpack(data: bytes | memoryview, max_bytes: int) -> Any:
    """One msgpack value of ``data``, under the frame's limits. Raises WireError."""
    try:
        return msgpack.unpackb(
            data,
            raw=False,
            strict_map_key=True,
            max_bin_len=max_bytes,
            max_str_len=4096,
            max_array_len=max(MAX_VIEW_IDS, 16),
            max_map_len=256,
            max_ext_len=0,
        )
    except ValueError as exc:
        if "incomplete" in str(exc):
            raise WireError("truncated", "the body ends inside a msgpack value") from None
        raise WireError("malformed", f"not msgpack: {exc}") from None
    except Exception as exc:  # msgpack raises several unrelated types on garbage
        raise WireError("malformed", f"not msgpack: {type(exc).__name__}") from None


def _shared_envelope(data: SharedFrame, max_bytes: int, memo: dict[str, object] | None) -> Any:
    """The envelope of one frame of an in-process multicast: its head parsed on its own (a map of
    5 whose fifth key, "b", is the last thing in it), its body unpacked by the first of the
    multicast's receivers and kept in ``memo`` for the others. Each receiver gets the body's
    top-level map as its own (decode_model takes ``rnd`` out of it); the tensors' bytes are
    shared and read-only."""
    if memo is None:
        raise WireError("malformed", "a shared frame comes with its multicast's memo")
    head = msgpack.Unpacker(raw=False, max_buffer_size=max(len(data.head), 1), max_bin_len=0, max_ext_len=0)
    try:
        head.feed(data.head)
        if head.read_map_header() != 5:
            raise ValueError("not a map of 5")
        obj: dict[Any, Any] = {}
        for _ in range(4):
            key = head.unpack()
            obj[key] = head.unpack()
        last = head.unpack()
    except Exception:  # msgpack raises several unrelated types on garbage
        raise WireError("malformed", "the head of a shared frame is not an envelope") from None
    if last != "b" or head.tell() != len(data.head):
        raise WireError("malformed", "the head of a shared frame ends with the key b")
    seen = memo.get("body")
    if not (isinstance(seen, tuple) and seen[0] is data.body):
        seen = (data.body, _unpack(data.body, max_bytes))
        memo["body"] = seen
    body = seen[1]
    obj["b"] = dict(body) if type(body) is dict else body
    return obj


def decode_body(
    frame: Frame,
    spec: ModelSpec,
    decoder: DeltaDecoder,
    collusion_spec: ModelSpec | None,
    memo: dict[str, object] | None = None,
    public_spec: PublicSpec | None = None,
) -> object:
    """Turn a frame's body into its message: a model against ``spec`` (full, or a delta against
    ``decoder``'s base of its sender), a colluders' multicast against ``collusion_spec``, or a
    peer-sampling message. Raises WireError; it parses, and decides nothing about the sender.

    ``memo``: shared by the frames of one multicast sent from this process (p2pnode.nodes.node): the
    first partner's decode of their common body is kept there for the others. Never from a socket.
    """
    if frame.type in MODEL_TYPES:
        return decode_model(frame, spec, decoder)
    if frame.type is MsgType.COLLUDE:
        return _decode_multicast(frame, collusion_spec, memo)
    if frame.type is MsgType.PUBLIC:
        return decode_public(frame, public_spec)
    if frame.type in KNN_TYPES:
        return decode_knn(frame)
    return decode_sampling(frame)


def decode_model(frame: Frame, spec: ModelSpec, decoder: DeltaDecoder) -> ModelMessage | FedMessage:
    """Check a model body against the local model and rebuild it (full or delta)."""
    if frame.type == MsgType.MODEL:
        version, params = decoder.decode(frame.sender, frame.body, spec)
        return ModelMessage(version, params)
    body = frame.body
    if type(body) is not dict:
        raise WireError("schema", "model body must be a map")
    fed_round = body.pop("rnd", None)
    if type(fed_round) is not int or fed_round < 0:
        raise WireError("schema", "a FedAvg model carries rnd, a non-negative int")
    version, params = decoder.decode(frame.sender, body, spec)
    kind = "global" if frame.type == MsgType.FED_GLOBAL else "update"
    return FedMessage(kind, fed_round, version, params)


def encode_collusion_frame(sender: int, dest: int, message: CollusionMessage) -> bytes:
    """A colluder's multicast: the observed user and its momentum model v_u (kept rows only)."""
    return frame_with_body(MsgType.COLLUDE, sender, dest, pack_collusion_body(message))


def pack_collusion_body(message: CollusionMessage) -> bytes:
    """The packed body of a multicast, the same for every partner: pack it once per multicast
    (Algorithm 2 sends one v_u to every partner; a 20% group has 188 of them)."""
    body = {"u": message.user, "p": {k: pack_tensor(v) for k, v in message.params.items()}}
    return bytes(msgpack.packb(body, use_bin_type=True))


def frame_with_body(msg_type: MsgType, sender: int, dest: int, body: bytes | memoryview) -> bytes:
    """The frame ``_pack`` would make around an already packed body, byte for byte (a msgpack
    map is its header followed by its keys and values, each packed on its own)."""
    return b"".join((frame_head(msg_type, sender, dest), body))  # the body is copied once


def frame_head(msg_type: MsgType, sender: int, dest: int) -> bytes:
    """A frame's bytes up to its body: the map header, the keys v, t, src, dst with their values,
    and the key b (:class:`SharedFrame`'s ``head``)."""
    keys = ["v", WIRE_VERSION, "t", int(msg_type), "src", sender, "dst", dest, "b"]
    head = bytes(msgpack.packb(keys, use_bin_type=True))
    # 0x85: a map of 5 entries in place of the array header (0x99)
    return b"\x85" + head[1:]


def decode_collusion(frame: Frame, spec: ModelSpec | None) -> CollusionMessage:
    """Check a multicast against the receiving colluder's kept-parameter spec."""
    if spec is None:
        raise WireError("not-colluder", "this node takes no colluder multicasts", 403)
    body = frame.body
    if type(body) is not dict or body.keys() != {"u", "p"}:
        raise WireError("schema", "a multicast body is a map with keys u, p")
    user = _node_id(body["u"], "u")
    params = body["p"]
    if type(params) is not dict or params.keys() != spec.keys():
        raise WireError("schema", f"a multicast carries {sorted(spec)}")
    return CollusionMessage(user, unpack_tensors(params, spec))


def _decode_multicast(
    frame: Frame, spec: ModelSpec | None, memo: dict[str, object] | None
) -> CollusionMessage:
    """``decode_collusion``, or the same multicast's body as another partner of this process
    decoded it (``memo``, shared by the frames of one multicast: the same body gives the same
    message), taken where its tensors match this receiver's spec (their names, shapes and
    dtypes; else decoded again). Each partner reads and checks its own envelope first."""
    if memo is not None and spec is not None:
        seen = memo.get("collusion")
        if isinstance(seen, CollusionMessage) and _fits(seen.params, spec):
            return seen
    message = decode_collusion(frame, spec)
    if memo is not None:
        memo["collusion"] = message
    return message


def _fits(params: Mapping[str, Any], spec: ModelSpec) -> bool:
    if params.keys() != spec.keys():
        return False
    for name, arr in params.items():
        want = spec[name]
        if arr.shape != want.shape or arr.dtype != want.np_dtype:
            return False
    return True


@dataclass(frozen=True, slots=True)
class PublicSpec:
    """What rows of D_pub a node takes (PARD, protocols.messages.PublicMessage)."""

    dim: int  #: d: features have 2d values a row, z^re d
    classes: tuple[int, ...]  #: each attribute's number of classes
    max_rows: int  #: the public users there are: no message holds more rows


def encode_public_frame(sender: int, dest: int, message: PublicMessage) -> bytes:
    """Rows of D_pub: the users, their features, z^re and labels (int32 on the wire)."""
    body = {
        "u": list(message.users),
        "f": pack_tensor(np.ascontiguousarray(message.features, np.float32)),
        "r": pack_tensor(np.ascontiguousarray(message.user_re, np.float32)),
        "y": pack_tensor(np.ascontiguousarray(message.labels, np.int32)),
    }
    return _pack(MsgType.PUBLIC, sender, dest, body)


def decode_public(frame: Frame, spec: PublicSpec | None) -> PublicMessage:
    """Check rows of D_pub: at most ``max_rows`` distinct users, tensors of the node's shapes in
    float32 (no float16: these are not models), finite, and every label within its attribute's
    classes."""
    if spec is None:
        raise WireError("not-public", "this node takes no public rows (it does not run PARD)", 403)
    body = frame.body
    if type(body) is not dict or body.keys() != {"u", "f", "r", "y"}:
        raise WireError("schema", "a public body is a map with keys u, f, r, y")
    users = _ids(body["u"])
    n = len(users)
    if not 0 < n <= spec.max_rows or len(set(users)) != n:
        raise WireError("schema", f"a public body holds 1 to {spec.max_rows} distinct users, not {n}")
    want = {
        "f": TensorSpec("float32", (n, 2 * spec.dim)),
        "r": TensorSpec("float32", (n, spec.dim)),
        "y": TensorSpec("int32", (n, len(spec.classes))),
    }
    t = unpack_tensors({k: body[k] for k in want}, want, allow_float16=False)
    labels = np.asarray(t["y"], dtype=np.int64)
    if ((labels < 0) | (labels >= np.asarray(spec.classes, dtype=np.int64))).any():
        raise WireError("schema", "a public row's label is outside its attribute's classes")
    return PublicMessage(users, t["f"], t["r"], labels)


def decode_sampling(frame: Frame) -> object:
    """Turn a peer-sampling body into its message dataclass."""
    return _decode_by(frame, _SAMPLING, "a peer-sampling message")


def _decode_by(frame: Frame, table: Mapping[MsgType, tuple[type, _Enc, _Dec]], what: str) -> object:
    entry = table.get(frame.type)
    if entry is None:
        raise WireError("unknown-type", f"{frame.type.name} is not {what}")
    body = frame.body
    if not isinstance(body, dict):
        raise WireError("schema", f"{frame.type.name}: body must be a map")
    return entry[2](body)


def decode_knn(frame: Frame) -> object:
    """Turn a KNN service body into its message dataclass (protocols/knn_messages.py); the
    receiving node checks items and ratings against its catalogue and scale (KnnService.vet)."""
    return _decode_by(frame, _KNN, "a KNN message")


# -- field checks --------------------------------------------------------------------------------


def _node_id(v: object, what: str) -> int:
    if type(v) is not int or not 0 <= v < MAX_NODE_ID:
        raise WireError("schema", f"{what} must be a node id (int in [0, 2^40))")
    return v


def _field(body: dict[str, Any], keys: set[str], name: str) -> None:
    if set(body) != keys:
        raise WireError("schema", f"{name}: fields {sorted(body)} where {sorted(keys)} expected")


def _txn(v: object) -> Txn:
    if not isinstance(v, list) or len(v) != 2:
        raise WireError("schema", "txn must be [initiator, counter]")
    return (_node_id(v[0], "txn"), _node_id(v[1], "txn"))


def _ids(v: object) -> tuple[int, ...]:
    if not isinstance(v, list) or len(v) > MAX_VIEW_IDS:
        raise WireError("schema", "a view is a list of at most 4096 node ids")
    return tuple(_node_id(x, "view") for x in v)


def _entries(v: object) -> tuple[CyclonEntry, ...]:
    if not isinstance(v, list) or len(v) > MAX_CYCLON_ENTRIES:
        raise WireError("schema", "cyclon entries: a list of at most 256")
    out: list[CyclonEntry] = []
    for e in v:
        if not (isinstance(e, list) and len(e) == 3 and isinstance(e[1], str)):
            raise WireError("schema", "a cyclon entry is [id, address, age]")
        if len(e[1]) > MAX_ADDRESS_LEN or type(e[2]) is not int or not 0 <= e[2] < 2**31:
            raise WireError("schema", "cyclon entry address too long or age out of range")
        out.append((_node_id(e[0], "entry"), e[1], e[2]))
    return tuple(out)


def _bool(v: object) -> bool:
    if type(v) is not bool:
        raise WireError("schema", "expected a boolean")
    return v


def _dec_txn_only(cls: Callable[[Txn], object], name: str) -> Callable[[dict[str, Any]], object]:
    def dec(b: dict[str, Any]) -> object:
        _field(b, {"txn"}, name)
        return cls(_txn(b["txn"]))

    return dec


def _dec_accept(b: dict[str, Any]) -> object:
    _field(b, {"txn", "out", "in"}, "SwapAccept")
    return SwapAccept(_txn(b["txn"]), _ids(b["out"]), _ids(b["in"]))


def _dec_adopt(b: dict[str, Any]) -> object:
    _field(b, {"txn", "out", "in"}, "SwapAdopt")
    return SwapAdopt(_txn(b["txn"]), _ids(b["out"]), _ids(b["in"]))


def _dec_propose(b: dict[str, Any]) -> object:
    """A proposal with the initiator's views (a process that judges swaps, THREAT_MODEL.md) or none."""
    if b.keys() == {"txn"}:
        return SwapPropose(_txn(b["txn"]))
    _field(b, {"txn", "out", "in"}, "SwapPropose")
    return SwapPropose(_txn(b["txn"]), _ids(b["out"]), _ids(b["in"]))


def _dec_lock_request(b: dict[str, Any]) -> object:
    """A lock request, asking the neighbour ``about`` the partner (THREAT_MODEL.md) or not."""
    if b.keys() == {"txn"}:
        return LockRequest(_txn(b["txn"]))
    _field(b, {"txn", "about"}, "LockRequest")
    return LockRequest(_txn(b["txn"]), _node_id(b["about"], "about"))


def _dec_lock_reply(b: dict[str, Any]) -> object:
    """A lock reply, with where the granting node's views name the swap's ends (THREAT_MODEL.md) or not."""
    if b.keys() == {"txn", "ok"}:
        return LockReply(_txn(b["txn"]), _bool(b["ok"]))
    _field(b, {"txn", "ok", "out", "in"}, "LockReply")
    return LockReply(_txn(b["txn"]), _bool(b["ok"]), _bool(b["out"]), _bool(b["in"]))


def _dec_commit(b: dict[str, Any]) -> object:
    _field(b, {"txn", "a", "b"}, "SwapCommit")
    return SwapCommit(_txn(b["txn"]), _node_id(b["a"], "a"), _node_id(b["b"], "b"))


def _dec_checked(b: dict[str, Any]) -> object:
    _field(b, {"txn", "st", "out", "in"}, "SwapChecked")
    state = b["st"]
    if type(state) is not int or state not in (CHECK_REFUSED, CHECK_PENDING, CHECK_ADOPTED):
        raise WireError("schema", "SwapChecked: st must be 0 (refused), 1 (pending) or 2 (adopted)")
    return SwapChecked(_txn(b["txn"]), state, _bool(b["out"]), _bool(b["in"]))


def _dec_leave(b: dict[str, Any]) -> object:
    _field(b, set(), "Leave")
    return Leave()


def _dec_shuffle(
    cls: Callable[[tuple[CyclonEntry, ...]], object], name: str
) -> Callable[[dict[str, Any]], object]:
    def dec(b: dict[str, Any]) -> object:
        _field(b, {"e"}, name)
        return cls(_entries(b["e"]))

    return dec


_Enc = Callable[[Any], dict[str, Any]]
_Dec = Callable[[dict[str, Any]], object]

_SAMPLING: dict[MsgType, tuple[type, _Enc, _Dec]] = {
    MsgType.SWAP_PROPOSE: (
        SwapPropose,
        lambda m: (
            {"txn": list(m.txn), "out": list(m.out_view), "in": list(m.in_view)}
            if m.out_view or m.in_view
            else {"txn": list(m.txn)}
        ),
        _dec_propose,
    ),
    MsgType.SWAP_ACCEPT: (
        SwapAccept,
        lambda m: {"txn": list(m.txn), "out": list(m.out_view), "in": list(m.in_view)},
        _dec_accept,
    ),
    MsgType.LOCK_REQUEST: (
        LockRequest,
        lambda m: {"txn": list(m.txn)} if m.about is None else {"txn": list(m.txn), "about": m.about},
        _dec_lock_request,
    ),
    MsgType.LOCK_REPLY: (
        LockReply,
        lambda m: (
            {"txn": list(m.txn), "ok": m.granted, "out": m.out, "in": m.into}
            if m.out or m.into
            else {"txn": list(m.txn), "ok": m.granted}
        ),
        _dec_lock_reply,
    ),
    MsgType.SWAP_COMMIT: (
        SwapCommit,
        lambda m: {"txn": list(m.txn), "a": m.a, "b": m.b},
        _dec_commit,
    ),
    MsgType.SWAP_ADOPT: (
        SwapAdopt,
        lambda m: {"txn": list(m.txn), "out": list(m.out_view), "in": list(m.in_view)},
        _dec_adopt,
    ),
    MsgType.UNLOCK: (Unlock, lambda m: {"txn": list(m.txn)}, _dec_txn_only(Unlock, "Unlock")),
    MsgType.SHUFFLE_REQUEST: (
        ShuffleRequest,
        lambda m: {"e": [list(e) for e in m.entries]},
        _dec_shuffle(ShuffleRequest, "ShuffleRequest"),
    ),
    MsgType.SHUFFLE_REPLY: (
        ShuffleReply,
        lambda m: {"e": [list(e) for e in m.entries]},
        _dec_shuffle(ShuffleReply, "ShuffleReply"),
    ),
    MsgType.LEAVE: (Leave, lambda m: {}, _dec_leave),
    MsgType.SWAP_CHECK: (SwapCheck, lambda m: {"txn": list(m.txn)}, _dec_txn_only(SwapCheck, "SwapCheck")),
    MsgType.SWAP_CHECKED: (
        SwapChecked,
        lambda m: {"txn": list(m.txn), "st": m.state, "out": m.out, "in": m.into},
        _dec_checked,
    ),
}


# -- the KNN service's bodies -----------------------------------------------------------------------


def _items(v: object) -> tuple[int, ...]:
    """Item ids packed as little-endian int32, at most MAX_PROFILE_ITEMS of them, each >= 0."""
    if not isinstance(v, bytes) or len(v) % 4 or len(v) > 4 * MAX_PROFILE_ITEMS:
        raise WireError("schema", f"items: the bytes of at most {MAX_PROFILE_ITEMS} int32 item ids")
    ids = np.frombuffer(v, dtype="<i4")
    if ids.size and int(ids.min()) < 0:
        raise WireError("schema", "an item id is an int in [0, 2^31)")
    return tuple(ids.tolist())


def _ratings(v: object, count: int) -> tuple[float, ...]:
    """``count`` ratings packed as little-endian float64, all finite."""
    if not isinstance(v, bytes) or len(v) != 8 * count:
        raise WireError("schema", "KnnProbe: one float64 rating per item")
    values = np.frombuffer(v, dtype="<f8")
    if not np.isfinite(values).all():
        raise WireError("schema", "a rating must be a finite number")
    return tuple(values.tolist())


def _pack_items(items: tuple[int, ...]) -> bytes:
    return np.asarray(items, dtype="<i4").tobytes()


def _number(v: object, what: str) -> float:
    if type(v) is int:
        v = float(v)
    if type(v) is not float or not np.isfinite(v):
        raise WireError("schema", f"{what} must be a finite number")
    return v


def _count(v: object, what: str) -> int:
    if type(v) is not int or not 0 <= v < 2**31:
        raise WireError("schema", f"{what} must be an int in [0, 2^31)")
    return v


def _dec_probe(b: dict[str, Any]) -> object:
    _field(b, {"i", "r"}, "KnnProbe")
    items = _items(b["i"])
    return KnnProbe(items, _ratings(b["r"], len(items)))


def _dec_profile(b: dict[str, Any]) -> object:
    _field(b, {"s", "c", "i", "n"} if "n" in b else {"s", "c", "i"}, "KnnProfile")
    near: tuple[int, ...] = ()
    if "n" in b:  # ranked candidates: the candidate's most similar peers
        if not isinstance(b["n"], list) or not 0 < len(b["n"]) <= MAX_NEAR:
            raise WireError("schema", f"KnnProfile: near is a list of 1 to {MAX_NEAR} node ids")
        near = tuple(_node_id(x, "near") for x in b["n"])
    return KnnProfile(_number(b["s"], "a similarity"), _count(b["c"], "co"), _items(b["i"]), near)


def _enc_profile(m: KnnProfile) -> dict[str, Any]:
    out: dict[str, Any] = {"s": m.sim, "c": m.co, "i": _pack_items(m.items)}
    if m.near:  # absent unless ranked: a profile answer is the bytes it was before ranked views
        out["n"] = list(m.near)
    return out


def _dec_ask(b: dict[str, Any]) -> object:
    _field(b, {"q", "i"}, "KnnAsk")
    return KnnAsk(_count(b["q"], "a query id"), _count(b["i"], "an item id"))


def _dec_answer(b: dict[str, Any]) -> object:
    _field(b, {"q", "i", "r"}, "KnnAnswer")
    rating = None if b["r"] is None else _number(b["r"], "a rating")
    return KnnAnswer(_count(b["q"], "a query id"), _count(b["i"], "an item id"), rating)


_KNN: dict[MsgType, tuple[type, _Enc, _Dec]] = {
    MsgType.KNN_PROBE: (
        KnnProbe,
        lambda m: {"i": _pack_items(m.items), "r": np.asarray(m.ratings, dtype="<f8").tobytes()},
        _dec_probe,
    ),
    MsgType.KNN_PROFILE: (
        KnnProfile,
        _enc_profile,
        _dec_profile,
    ),
    MsgType.KNN_ASK: (KnnAsk, lambda m: {"q": m.query, "i": m.item}, _dec_ask),
    MsgType.KNN_ANSWER: (KnnAnswer, lambda m: {"q": m.query, "i": m.item, "r": m.rating}, _dec_answer),
}
