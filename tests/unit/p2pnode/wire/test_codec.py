"""Parsing: every frame round-trips, and every bad one is refused with its reason (p2pnode/wire/codec.py)."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adversary.messages import CollusionMessage
from learning.params import spec_of
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
    MsgType,
    SharedFrame,
    WireError,
)
from p2pnode.wire.tensors import pack_tensor
from peer_sampling.messages import (
    CHECK_ADOPTED,
    CHECK_PENDING,
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
    Unlock,
)
from protocols.messages import ModelMessage
from tests.unit.p2pnode.wire.helpers import LIMIT, model


@pytest.mark.parametrize(
    "message",
    [
        SwapPropose((1, 2)),
        SwapPropose((1, 2), (3, 4, 5), (6, 7, 8)),  # with the initiator's views
        SwapAccept((1, 2), (3, 4, 5), (6,)),
        LockRequest((9, 1)),
        LockReply((9, 1), True),
        SwapCommit((9, 1), 4, 5),
        SwapAdopt((9, 1), (1, 2), (3,)),
        Unlock((9, 1)),
        SwapCheck((9, 1)),
        LockRequest((9, 1), about=4),
        LockReply((9, 1), True, out=True, into=False),
        SwapChecked((9, 1), CHECK_ADOPTED, True, False),
        SwapChecked((9, 1), CHECK_PENDING),
        ShuffleRequest(((1, "1@h:1", 0), (2, "2@h:1", 4))),
        ShuffleReply(()),
    ],
)
def test_sampling_messages_roundtrip(message: object) -> None:
    frame = decode_frame(encode_sampling_frame(1, 2, message), LIMIT)
    assert (frame.sender, frame.dest) == (1, 2)
    assert decode_sampling(frame) == message


def test_a_proposal_without_views_is_encoded_as_before() -> None:
    """A proposal shows views only where the initiator's process judges swaps: the lab's and a
    process's without identities are the bytes they were (no golden's byte count moves)."""
    plain = encode_sampling_frame(1, 2, SwapPropose((1, 2)))
    assert msgpack.unpackb(plain)["b"] == {"txn": [1, 2]}
    shown = encode_sampling_frame(1, 2, SwapPropose((1, 2), (3,), (4,)))
    assert msgpack.unpackb(shown)["b"] == {"txn": [1, 2], "out": [3], "in": [4]}
    half = msgpack.packb(
        {"v": WIRE_VERSION, "t": MsgType.SWAP_PROPOSE, "src": 1, "dst": 2, "b": {"txn": [1, 2], "out": [3]}}
    )
    with pytest.raises(WireError):
        decode_sampling(decode_frame(half, LIMIT))


def test_lock_frames_without_the_swap_question_are_encoded_as_before_and_bad_checks_are_refused() -> None:
    """``LockRequest.about`` and ``LockReply``'s ``out``/``in`` travel only where a process asks
    : every other lock frame is the bytes it was. A ``SwapChecked`` with a state that
     is not 0, 1 or 2, or a lock reply with one flag of two, is a schema error, not a crash."""
    assert msgpack.unpackb(encode_sampling_frame(1, 2, LockRequest((1, 2))))["b"] == {"txn": [1, 2]}
    assert msgpack.unpackb(encode_sampling_frame(1, 2, LockReply((1, 2), True)))["b"] == {
        "txn": [1, 2],
        "ok": True,
    }
    for t, body in (
        (MsgType.SWAP_CHECKED, {"txn": [1, 2], "st": 3, "out": False, "in": False}),
        (MsgType.SWAP_CHECKED, {"txn": [1, 2], "st": True, "out": False, "in": False}),
        (MsgType.LOCK_REPLY, {"txn": [1, 2], "ok": True, "out": True}),
        (MsgType.LOCK_REQUEST, {"txn": [1, 2], "about": -1}),
    ):
        with pytest.raises(WireError) as err:
            decode_sampling(decode_frame(_frame(body, t), LIMIT))
        assert err.value.reason == "schema"


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
