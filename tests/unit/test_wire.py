"""Wire round-trips, deltas and every rejection of a bad frame."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adversary.messages import CollusionMessage
from learning import gmf
from learning.params import spec_of
from p2pnode.intake import take
from p2pnode.wire import codec
from p2pnode.wire.codec import (
    _pack,
    decode_collusion,
    decode_frame,
    decode_model,
    decode_sampling,
    encode_model_body,
    encode_model_frame,
    encode_sampling_frame,
    frame_head,
    frame_with_body,
    pack_collusion_body,
)
from p2pnode.wire.delta import DeltaDecoder, DeltaEncoder
from p2pnode.wire.schema import (
    DECODE_REASONS,
    MAX_NODE_ID,
    WIRE_VERSION,
    Channel,
    MsgType,
    SharedFrame,
    WireError,
)
from p2pnode.wire.tensors import pack_tensor
from peer_sampling.messages import (
    LockReply,
    LockRequest,
    ShuffleReply,
    ShuffleRequest,
    SwapAccept,
    SwapAdopt,
    SwapCommit,
    SwapPropose,
    Unlock,
)
from protocols.messages import FedMessage, ModelMessage

LIMIT = 1 << 22


def model(seed: int = 0, items: int = 50, factors: int = 8) -> dict[str, np.ndarray]:
    return gmf.init_params(items, factors, seed)


def roundtrip(enc: DeltaEncoder, dec: DeltaDecoder, params, version=1, ack=True):
    encoded = enc.encode(7, version, params)
    data = encode_model_frame(3, 7, encoded)
    msg = decode_model(decode_frame(data, LIMIT), spec_of(params), dec)
    if ack:
        enc.acknowledged(7, version, encoded.view)
    return msg, encoded, len(data)


def test_full_model_roundtrip_is_exact() -> None:
    p = model()
    msg, encoded, _ = roundtrip(DeltaEncoder(), DeltaDecoder(), p)
    assert not encoded.is_delta
    assert msg.version == 1
    for k in p:
        assert msg.params[k].dtype == np.float32
        np.testing.assert_array_equal(msg.params[k], p[k])
        assert not msg.params[k].flags.writeable


def test_delta_is_exact_and_smaller() -> None:
    enc, dec = DeltaEncoder(), DeltaDecoder()
    p = model()
    _, _, full_len = roundtrip(enc, dec, p, version=1)
    q = {k: v.copy() for k, v in p.items()}
    q["item"][[3, 17, 40]] += 0.5
    q["h"] *= 2
    msg, encoded, delta_len = roundtrip(enc, dec, q, version=2)
    assert encoded.is_delta
    assert delta_len < full_len / 5
    for k in q:
        np.testing.assert_array_equal(msg.params[k], q[k])


def test_delta_falls_back_to_full_when_most_rows_change() -> None:
    enc, dec = DeltaEncoder(), DeltaDecoder()
    p = model()
    roundtrip(enc, dec, p)
    q = {k: v + 1.0 for k, v in p.items()}
    msg, encoded, _ = roundtrip(enc, dec, q, version=2)
    assert not encoded.is_delta
    np.testing.assert_array_equal(msg.params["item"], q["item"])


def test_delta_without_base_is_refused_with_no_base() -> None:
    enc = DeltaEncoder()
    p = model()
    roundtrip(enc, DeltaDecoder(), p)  # the encoder now believes peer 7 holds version 1
    fresh_receiver = DeltaDecoder()
    q = {k: v.copy() for k, v in p.items()}
    q["item"][0] += 1
    encoded = enc.encode(7, 2, q)
    assert encoded.is_delta
    frame = decode_frame(encode_model_frame(3, 7, encoded), LIMIT)
    with pytest.raises(WireError) as err:
        decode_model(frame, spec_of(p), fresh_receiver)
    assert err.value.reason == "no-base" and err.value.status == 409


def test_float16_both_sides_agree_exactly() -> None:
    enc, dec = DeltaEncoder(float16=True), DeltaDecoder()
    p = model()
    msg, encoded, n16 = roundtrip(enc, dec, p)
    _, _, n32 = roundtrip(DeltaEncoder(), DeltaDecoder(), p)
    assert n16 < 0.6 * n32
    for k in p:
        np.testing.assert_array_equal(msg.params[k], encoded.view[k])
        np.testing.assert_allclose(msg.params[k], p[k], rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize(
    "message",
    [
        SwapPropose((1, 2)),
        SwapAccept((1, 2), (3, 4, 5), (6,)),
        LockRequest((9, 1)),
        LockReply((9, 1), True),
        SwapCommit((9, 1), 4, 5),
        SwapAdopt((9, 1), (1, 2), (3,)),
        Unlock((9, 1)),
        ShuffleRequest(((1, "1@h:1", 0), (2, "2@h:1", 4))),
        ShuffleReply(()),
    ],
)
def test_sampling_messages_roundtrip(message: object) -> None:
    frame = decode_frame(encode_sampling_frame(1, 2, message), LIMIT)
    assert (frame.sender, frame.dest) == (1, 2)
    assert decode_sampling(frame) == message


def _frame(body: object, msg_type: int = MsgType.MODEL, version: int = WIRE_VERSION) -> bytes:
    return bytes(
        msgpack.packb({"v": version, "t": msg_type, "src": 1, "dst": 2, "b": body}, use_bin_type=True)
    )


def _model_body(p: dict[str, np.ndarray]) -> dict[str, object]:
    return {"ver": 1, "p": {k: pack_tensor(v) for k, v in p.items()}}


def _reason(data: bytes, limit: int = LIMIT) -> str:
    p = model()
    with pytest.raises(WireError) as err:
        frame = decode_frame(data, limit)
        decode_model(frame, spec_of(p), DeltaDecoder())
    return err.value.reason


def test_rejects_malformed_msgpack() -> None:
    assert _reason(b"\xc1\xc1\xc1 not msgpack") == "malformed"


def test_rejects_truncated_body() -> None:
    data = _frame(_model_body(model()))
    assert _reason(data[: len(data) // 2]) == "truncated"


def test_rejects_oversized_body() -> None:
    assert _reason(_frame(_model_body(model())), limit=1000) == "too-large"


def test_rejects_unknown_type_and_version() -> None:
    assert _reason(_frame({}, msg_type=999)) == "unknown-type"
    assert _reason(_frame({}, version=99)) == "version"


def test_rejects_wrong_dtype() -> None:
    p = model()
    body = _model_body(p)
    body["p"]["item"] = pack_tensor(p["item"].astype(np.int32))  # type: ignore[index]
    assert _reason(_frame(body)) == "dtype"
    body["p"]["item"] = {"d": "object", "s": [50, 8], "b": b"x"}  # type: ignore[index]
    assert _reason(_frame(body)) == "dtype"


def test_rejects_wrong_shape_and_byte_count() -> None:
    p = model()
    body = _model_body(p)
    body["p"]["item"] = pack_tensor(np.zeros((49, 8), np.float32))  # type: ignore[index]
    assert _reason(_frame(body)) == "shape"
    body["p"]["item"] = {"d": "float32", "s": [50, 8], "b": b"\0" * 12}  # type: ignore[index]
    assert _reason(_frame(body)) == "shape"
    body["p"]["item"] = {"d": "float32", "s": [10**9, 10**9], "b": b""}  # type: ignore[index]
    assert _reason(_frame(body)) == "shape"


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_rejects_non_finite(bad: float) -> None:
    p = model()
    p["item"][4, 2] = bad
    assert _reason(_frame(_model_body(p))) == "non-finite"


def test_accepts_huge_but_finite_values() -> None:
    p = model()
    p["item"][0, 0] = 3e38
    frame = decode_frame(_frame(_model_body(p)), LIMIT)
    assert decode_model(frame, spec_of(p), DeltaDecoder()).params["item"][0, 0] == np.float32(3e38)


def test_rejects_missing_or_extra_parameters() -> None:
    p = model()
    body = _model_body(p)
    del body["p"]["user"]  # type: ignore[attr-defined]
    assert _reason(_frame(body)) == "schema"
    body = _model_body(p)
    body["p"]["evil"] = pack_tensor(np.zeros(2, np.float32))  # type: ignore[index]
    assert _reason(_frame(body)) == "schema"


def test_rejects_bad_delta_rows() -> None:
    p = model()
    dec = DeltaDecoder()
    decode_model(decode_frame(_frame(_model_body(p)), LIMIT), spec_of(p), dec)
    rows = np.array([5, 3], np.int32)  # not increasing
    body = {
        "ver": 2,
        "base": 1,
        "p": {k: pack_tensor(v) for k, v in p.items() if k != "item"},
        "r": {"item": {"i": pack_tensor(rows), "v": pack_tensor(p["item"][rows])}},
    }
    with pytest.raises(WireError) as err:
        decode_model(decode_frame(_frame(body), LIMIT), spec_of(p), dec)
    assert err.value.reason == "shape"


KNOWN_REASONS = DECODE_REASONS


def decode_any(data: bytes) -> object:
    """The decoded message, or the WireError; any other exception fails the test."""
    try:
        frame = decode_frame(data, LIMIT)
        if frame.type == MsgType.MODEL:
            return decode_model(frame, spec_of(model()), DeltaDecoder())
        return decode_sampling(frame)
    except WireError as err:
        return err


def assert_clean_outcome(outcome: object) -> None:
    if isinstance(outcome, WireError):
        assert outcome.reason in KNOWN_REASONS
        assert 400 <= outcome.status < 500
    else:
        assert isinstance(outcome, ModelMessage) or type(outcome).__module__ == "peer_sampling.messages"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400))
def test_decoder_only_raises_wire_errors_on_garbage(data: bytes) -> None:
    assert_clean_outcome(decode_any(data))


@settings(max_examples=150, deadline=None)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers(-(2**63), 2**64 - 1)
        | st.floats()
        | st.text(max_size=8)
        | st.binary(max_size=16),
        lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=4), kids, max_size=4),
        max_leaves=12,
    ),
    st.sampled_from(list(MsgType)),
)
def test_decoder_only_raises_wire_errors_on_wrong_structures(body: object, t: MsgType) -> None:
    assert_clean_outcome(decode_any(_frame(body, msg_type=int(t))))


def test_mutation_fuzz_of_valid_frames_only_yields_clean_outcomes() -> None:
    """A short run of bench.wire_fuzz: damaged valid frames are decoded or refused, nothing else."""
    from bench.wire_fuzz import run

    outcomes = run(3000, seed=1)
    assert sum(outcomes.values()) == 3000
    assert outcomes["ok"] > 0 and outcomes["malformed"] > 0 and outcomes["truncated"] > 0


@settings(max_examples=60, deadline=None)
@given(st.integers(0, MAX_NODE_ID - 1), st.integers(0, MAX_NODE_ID - 1), st.integers(0, MAX_NODE_ID - 1))
def test_multicast_packed_once_is_the_same_frame_byte_for_byte(sender: int, dest: int, user: int) -> None:
    rng = np.random.default_rng(user % 97)
    kept = {"item": rng.normal(size=(3, 4)).astype(np.float32), "h": rng.normal(size=(4,)).astype(np.float32)}
    message = CollusionMessage(user, kept)
    body = {"u": user, "p": {k: pack_tensor(v) for k, v in kept.items()}}
    data = frame_with_body(MsgType.COLLUDE, sender, dest, pack_collusion_body(message))
    assert data == _pack(MsgType.COLLUDE, sender, dest, body)
    frame = decode_frame(data, 1 << 20)
    assert (frame.type, frame.sender, frame.dest) == (MsgType.COLLUDE, sender, dest)
    back = decode_collusion(frame, spec_of(kept))
    assert back.user == user
    for name, arr in kept.items():
        np.testing.assert_array_equal(back.params[name], arr)


class _Inbox:
    """A receiving node as the intake (``take``) sees it."""

    def __init__(self, node_id: int, params: dict[str, np.ndarray]) -> None:
        self.node_id = node_id
        self.spec = spec_of(params)
        self.decoder = DeltaDecoder()
        self.collusion_spec = None
        self.last_version: dict[int, int] = {}
        self.population: int | None = None
        self.newest_incarnation: int | None = None
        self.refuse: str | None = None

    def admit(self, sender: int, collusion: bool = False) -> str | None:
        return None

    def vet(self, message: object) -> str | None:
        return self.refuse


def test_the_intake_checks_route_identity_freshness_and_body() -> None:
    p = model()
    data = encode_model_frame(3, 7, DeltaEncoder().encode(7, 5, p))
    inbox = _Inbox(7, p)
    frame, msg = take(data, LIMIT, inbox, Channel.GOSSIP, sender=3, certified={3})
    assert frame.sender == 3 and isinstance(msg, ModelMessage) and msg.version == 5

    def reason(**kw: object) -> str:
        args = {"inbox": inbox, "channel": Channel.GOSSIP, **kw}
        with pytest.raises(WireError) as err:
            take(data, LIMIT, **args)  # type: ignore[arg-type]
        return err.value.reason

    assert reason(inbox=_Inbox(8, p)) == "wrong-route"
    assert reason(channel=Channel.SAMPLING) == "wrong-route"
    assert reason(sender=4) == "sender-mismatch"
    assert reason(certified={4}) == "cert-mismatch"
    inbox.refuse = "too-far"  # the node vets the decoded model away
    assert reason() == "too-far"
    inbox.refuse = None
    inbox.last_version[3] = 6  # a newer model from 3 was taken: version 5 is refused unread
    assert reason() == "old-model"
    assert reason(inbox=_Inbox(7, model(items=40))) == "shape"


def test_sampling_messages_naming_ids_outside_the_network_are_refused() -> None:
    from p2pnode.wire.codec import encode_sampling_frame
    from peer_sampling.messages import ShuffleRequest, SwapAdopt, SwapCommit

    inbox = _Inbox(7, model())
    inbox.population = 10
    ok = encode_sampling_frame(3, 7, ShuffleRequest(((3, "3@h:1", 0), (9, "9@h:1", 2))))
    assert take(ok, LIMIT, inbox, Channel.SAMPLING)[1] == ShuffleRequest(((3, "3@h:1", 0), (9, "9@h:1", 2)))
    counter_is_not_an_id = encode_sampling_frame(3, 7, SwapCommit((3, 500), 3, 4))
    assert isinstance(take(counter_is_not_an_id, LIMIT, inbox, Channel.SAMPLING)[1], SwapCommit)
    for message in (
        ShuffleRequest(((3, "3@h:1", 0), (4096, "x@h:1", 0))),
        SwapAdopt((3, 1), (1, 2, 10), (4, 5, 6)),
        SwapCommit((3, 1), 3, 11),
        SwapCommit((12, 1), 3, 4),
    ):
        with pytest.raises(WireError) as err:
            take(encode_sampling_frame(3, 7, message), LIMIT, inbox, Channel.SAMPLING)
        assert (err.value.reason, err.value.status) == ("unknown-id", 422)


def test_a_version_may_not_jump_within_a_life_and_a_new_incarnation_is_always_newer() -> None:
    from p2pnode.wire.schema import INCARNATION_SHIFT, MAX_VERSION_JUMP

    p = model()
    inbox = _Inbox(7, p)
    life = 1_800_000_000 << INCARNATION_SHIFT

    def post(version: int) -> str:
        data = encode_model_frame(3, 7, DeltaEncoder(False).encode(7, version, p))
        try:
            take(data, LIMIT, inbox, Channel.GOSSIP)
        except WireError as err:
            return err.reason
        return "ok"

    inbox.last_version[3] = life + 50
    assert post(life + 49) == "old-model"
    assert post(life + 50 + MAX_VERSION_JUMP) == "ok"
    assert post(life + 51 + MAX_VERSION_JUMP) == "version-jump"  # cannot pin the sender far ahead
    assert post(2**64 - 1) == "ok"  # a later incarnation: a restart is always taken...
    assert post(life + (1 << INCARNATION_SHIFT) + 3) == "ok"  # ...whatever its own count
    assert post((life >> INCARNATION_SHIFT) - 1 << INCARNATION_SHIFT) == "old-model"  # an earlier life
    inbox.newest_incarnation = 1_800_000_005  # a real node: no sender can have started after now
    assert post(2**64 - 1) == "version-jump"
    assert post((1_800_000_005 << INCARNATION_SHIFT) + 2) == "ok"


def test_batches_round_trip_and_refuse_anything_else_whole() -> None:
    from p2pnode.transport.base import Outcome
    from p2pnode.transport.batch import (
        MAX_AUTH,
        MAX_FRAMES,
        MAX_HEADER,
        pack_batch,
        pack_outcomes,
        parse_batch,
        parse_outcomes,
    )

    entries = [(1, Channel.SAMPLING, b"\x01\x02", {"X-P2P-Sender": "3"}), (7, Channel.GOSSIP, b"", {})]
    assert parse_batch(pack_batch(entries)) == entries
    ok = [1, 2, b"x", {}]
    bad = [
        b"",
        b"\xc1",
        msgpack.packb([ok]),  # one entry
        msgpack.packb([ok] * (MAX_FRAMES + 1)),
        msgpack.packb([[1, 2, "x", {}], ok]),  # a str, not bytes
        msgpack.packb([[1, 4, b"x", {}], ok]),  # no channel 4
        msgpack.packb([[1.0, 2, b"x", {}], ok]),
        msgpack.packb([[True, 2, b"x", {}], ok]),
        msgpack.packb([[1, 2, b"x"], ok]),  # no auth map
        msgpack.packb([[1, 2, b"x", {"a": 1}], ok]),  # a header that is not a string
        msgpack.packb([[1, 2, b"x", {str(k): "v" for k in range(MAX_AUTH + 1)}], ok]),  # too many headers
        msgpack.packb([[1, 2, b"x", {"a": "v" * (MAX_HEADER + 1)}], ok]),  # too long a header
        msgpack.packb([[1, 2, b"x", {}, 0], ok]),
        msgpack.packb({1: 2}),
        msgpack.packb([ok, ok]) + b"\x00",  # trailing bytes
    ]
    for body in bad:
        with pytest.raises(WireError) as err:
            parse_batch(body)
        assert err.value.reason == "bad-batch" and err.value.status == 400
    outcomes = [Outcome(200), Outcome(409, "no-base")]
    assert parse_outcomes(pack_outcomes(outcomes), 2) == outcomes
    assert parse_outcomes(pack_outcomes(outcomes), 3) is None
    assert parse_outcomes(b"\xc1", 2) is None
    assert parse_outcomes(msgpack.packb([[200, 1], [200, ""]]), 2) is None


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1), rows=st.integers(1, 300), scale=st.sampled_from([1e-3, 1.0, 1e9, 1e20])
)
def test_a_decoded_models_norm_is_the_finiteness_checks_dot_bit_for_bit(
    seed: int, rows: int, scale: float
) -> None:
    """The receiver's norm check (vet) reuses each tensor's dot product from the decode's
    finiteness check: the same value as reading the tensors again, overflow (inf) included;
    a tensor replaced after the decode (a delta's rows) is read again."""
    from learning.params import Checked, l2_norm
    from p2pnode.wire.tensors import unpack_tensors

    rng = np.random.default_rng(seed)
    params = {
        "item": (rng.standard_normal((rows, 8)) * scale).astype(np.float32),
        "h": rng.standard_normal(8).astype(np.float32),
    }
    packed = msgpack.unpackb(msgpack.packb({k: pack_tensor(v) for k, v in params.items()}), raw=False)
    got = unpack_tensors(packed, spec_of(params))
    assert isinstance(got, Checked) and set(got.squares) == {"item", "h"}
    plain = dict(got)
    assert l2_norm(got) == l2_norm(plain) and l2_norm(got, ["h"]) == l2_norm(plain, ["h"])
    got.update({"item": params["item"] * np.float32(2)})
    assert set(got.squares) == {"h"} and l2_norm(got) == l2_norm(dict(got))


def _partner(node_id: int, kept: dict[str, np.ndarray]) -> _Inbox:
    inbox = _Inbox(node_id, model())
    inbox.collusion_spec = spec_of(kept)  # type: ignore[assignment]
    return inbox


def test_the_partners_of_one_multicast_share_one_decode_of_its_body() -> None:
    """Frames of one multicast sent in this process share a memo: the first partner decodes the
    body, the others take that message once their own envelope is checked. A frame without the
    memo (as from a socket) decodes to the same message on its own."""
    rng = np.random.default_rng(3)
    kept = {"item": rng.normal(size=(5, 4)).astype(np.float32), "h": rng.normal(size=(4,)).astype(np.float32)}
    body, memo = pack_collusion_body(CollusionMessage(9, kept)), {}
    frames = {dest: frame_with_body(MsgType.COLLUDE, 2, dest, body) for dest in (4, 5, 6)}
    first = take(frames[4], 1 << 20, _partner(4, kept), Channel.COLLUDE, memo=memo)[1]
    second = take(frames[5], 1 << 20, _partner(5, kept), Channel.COLLUDE, memo=memo)[1]
    assert isinstance(first, CollusionMessage) and second is first
    plain = take(frames[6], 1 << 20, _partner(6, kept), Channel.COLLUDE)[1]
    assert isinstance(plain, CollusionMessage) and plain is not first and plain.user == 9
    for name, arr in kept.items():
        np.testing.assert_array_equal(plain.params[name], arr)
        assert not first.params[name].flags.writeable  # shared, so nobody may write to it
    # the envelope is still each partner's own: a frame for 5 posted to 6 is refused
    with pytest.raises(WireError) as err:
        take(frames[5], 1 << 20, _partner(6, kept), Channel.COLLUDE, memo=memo)
    assert err.value.reason == "wrong-route"


def test_a_partner_whose_spec_differs_decodes_the_multicast_itself_and_is_refused_as_before() -> None:
    rng = np.random.default_rng(4)
    kept = {"item": rng.normal(size=(5, 4)).astype(np.float32), "h": rng.normal(size=(4,)).astype(np.float32)}
    body, memo = pack_collusion_body(CollusionMessage(9, kept)), {}
    take(frame_with_body(MsgType.COLLUDE, 2, 4, body), 1 << 20, _partner(4, kept), Channel.COLLUDE, memo=memo)
    assert "collusion" in memo
    other = {"item": kept["item"][:3], "h": kept["h"]}
    with pytest.raises(WireError) as err:
        take(
            frame_with_body(MsgType.COLLUDE, 2, 5, body),
            1 << 20,
            _partner(5, other),
            Channel.COLLUDE,
            memo=memo,
        )
    assert err.value.reason == "shape"


@settings(max_examples=40, deadline=None)
@given(st.integers(0, MAX_NODE_ID - 1), st.integers(0, MAX_NODE_ID - 1), st.integers(0, 1 << 31))
def test_a_shared_frame_is_the_frame_of_its_head_and_body_byte_for_byte(
    sender: int, dest: int, fed_round: int
) -> None:
    encoded = DeltaEncoder().encode(dest, 5, model(seed=fed_round % 13))
    whole = encode_model_frame(sender, dest, encoded, MsgType.FED_GLOBAL, fed_round)
    shared = SharedFrame(frame_head(MsgType.FED_GLOBAL, sender, dest), encode_model_body(encoded, fed_round))
    assert bytes(shared) == bytes(whole) and len(shared) == len(whole)
    frame = decode_frame(shared, LIMIT, {})
    plain = decode_frame(whole, LIMIT)
    assert (frame.type, frame.sender, frame.dest) == (plain.type, plain.sender, plain.dest)
    assert frame.body == plain.body


def test_the_clients_of_one_broadcast_unpack_its_body_once_and_each_gets_its_own_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A FedAvg server's global model to its clients in this process: one body behind a head per
    client, one memo. The first client unpacks the body, the others take it from the memo; each
    decodes its own message (decode_model takes ``rnd`` out of the body's map), equal to what the
    bytes give on their own, and its route is still its own."""
    p = model(seed=4)
    encoded = DeltaEncoder().encode(0, 9, p)
    body, memo = encode_model_body(encoded, 3), {}
    frames = {d: SharedFrame(frame_head(MsgType.FED_GLOBAL, 99, d), body) for d in (4, 5, 6)}
    unpacked: list[int] = []
    unpack = codec._unpack

    def counted(data: bytes | memoryview, limit: int) -> object:
        unpacked.append(len(data))
        return unpack(data, limit)

    monkeypatch.setattr(codec, "_unpack", counted)
    got = {d: take(frames[d], LIMIT, _Inbox(d, p), Channel.GOSSIP, memo=memo)[1] for d in (4, 5)}
    assert unpacked == [len(body)]  # by the first client; the second's head alone was parsed
    monkeypatch.undo()
    alone = take(bytes(frames[6]), LIMIT, _Inbox(6, p), Channel.GOSSIP)[1]
    for message in (*got.values(), alone):
        assert isinstance(message, FedMessage) and message.kind == "global"
        assert (message.round, message.version) == (3, 9)
        for name, arr in p.items():
            np.testing.assert_array_equal(message.params[name], arr)
            assert not message.params[name].flags.writeable  # shared bytes: nobody writes to them
    assert got[4] is not got[5]
    with pytest.raises(WireError) as err:
        take(frames[5], LIMIT, _Inbox(6, p), Channel.GOSSIP, memo=memo)
    assert err.value.reason == "wrong-route"


@pytest.mark.parametrize(
    "head",
    [
        msgpack.packb({"v": WIRE_VERSION, "t": int(MsgType.FED_GLOBAL), "src": 1, "dst": 2}),  # no b
        b"\x85" + msgpack.packb(["v", WIRE_VERSION, "t", 11, "src", 1, "dst", 2, "c"])[1:],  # not b
        frame_head(MsgType.FED_GLOBAL, 1, 2) + b"\xc0",  # something after b
        frame_head(MsgType.FED_GLOBAL, 1, 2)[:-3],  # cut short
        b"\x86" + frame_head(MsgType.FED_GLOBAL, 1, 2)[1:],  # a map of 6
        b"",
    ],
    ids=["four-keys", "last-key-not-b", "trailing", "truncated", "six-entries", "empty"],
)
def test_a_shared_frame_whose_head_is_not_an_envelope_is_refused(head: bytes) -> None:
    body = encode_model_body(DeltaEncoder().encode(2, 1, model()), 1)
    with pytest.raises(WireError) as err:
        decode_frame(SharedFrame(head, body), LIMIT, {})
    assert err.value.reason == "malformed"


def test_a_shared_frame_without_its_memo_or_past_the_limit_is_refused() -> None:
    body = encode_model_body(DeltaEncoder().encode(2, 1, model()), 1)
    shared = SharedFrame(frame_head(MsgType.FED_GLOBAL, 1, 2), body)
    with pytest.raises(WireError) as err:
        decode_frame(shared, LIMIT)
    assert err.value.reason == "malformed"
    with pytest.raises(WireError) as err:
        decode_frame(shared, len(shared) - 1, {})
    assert err.value.reason == "too-large"
