"""The KNN service's frames (protocols/knn_messages.py on /v1/nodes/{id}/knn): they round-trip,
and a malformed or oversized one is refused in one line, before the node takes it."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

from p2pnode.nodes.intake import take
from p2pnode.wire.codec import decode_frame, decode_knn, encode_sampling_frame
from p2pnode.wire.schema import MAX_NEAR, MAX_PROFILE_ITEMS, WIRE_VERSION, Channel, MsgType, WireError
from protocols.knn import KnnService, KnnSettings
from protocols.knn_messages import KnnAnswer, KnnAsk, KnnProbe, KnnProfile
from tests.unit.p2pnode.wire.helpers import LIMIT, Inbox, model


@pytest.mark.parametrize(
    "message",
    [
        KnnProbe((1, 5, 9), (4.0, 3.5, 1.0)),
        KnnProbe((), ()),
        KnnProfile(0.25, 2, (0, 5)),
        KnnProfile(0.25, 2, (0, 5), (3, 17, 4)),  # ranked candidates: the candidate's nearest
        KnnAsk(7, 42),
        KnnAnswer(7, 42, 3.0),
        KnnAnswer(7, 42, None),
    ],
)
def test_knn_messages_roundtrip_on_their_own_channel(message: object) -> None:
    frame = decode_frame(encode_sampling_frame(1, 2, message), LIMIT)
    assert frame.channel is Channel.KNN
    assert decode_knn(frame) == message


def _i(*ids: int) -> bytes:
    return np.asarray(ids, dtype="<i4").tobytes()


def _r(*values: float) -> bytes:
    return np.asarray(values, dtype="<f8").tobytes()


def _frame(msg_type: MsgType, body: object) -> bytes:
    return bytes(msgpack.packb({"v": WIRE_VERSION, "t": int(msg_type), "src": 1, "dst": 2, "b": body}))


@pytest.mark.parametrize(
    ("msg_type", "body", "reason"),
    [
        (MsgType.KNN_PROBE, {"i": _i(1, 2), "r": _r(1.0)}, "schema"),  # one rating per item
        (MsgType.KNN_PROBE, {"i": [1, 2], "r": _r(1.0, 2.0)}, "schema"),  # not packed
        (MsgType.KNN_PROBE, {"i": _i(1, 2)[:7], "r": _r(1.0, 2.0)}, "schema"),  # cut inside an id
        (MsgType.KNN_PROBE, {"i": _i(1, -2), "r": _r(1.0, 2.0)}, "schema"),
        (MsgType.KNN_PROBE, {"i": _i(1), "r": _r(float("nan"))}, "schema"),
        (MsgType.KNN_PROBE, {"i": _i(1), "r": _r(1.0), "x": 1}, "schema"),  # a field too many
        (MsgType.KNN_PROBE, {"i": _i(*range(MAX_PROFILE_ITEMS + 1)), "r": _r(1.0)}, "schema"),  # too many
        (MsgType.KNN_PROFILE, {"s": "1", "c": 1, "i": _i()}, "schema"),
        (MsgType.KNN_PROFILE, {"s": 0.5, "c": -1, "i": _i()}, "schema"),
        (MsgType.KNN_PROFILE, {"s": 0.5, "c": 1, "i": _i(), "n": []}, "schema"),  # near, but empty
        (MsgType.KNN_PROFILE, {"s": 0.5, "c": 1, "i": _i(), "n": list(range(MAX_NEAR + 1))}, "schema"),
        (MsgType.KNN_PROFILE, {"s": 0.5, "c": 1, "i": _i(), "n": [1, -4]}, "schema"),
        (MsgType.KNN_PROFILE, {"s": 0.5, "c": 1, "i": _i(), "n": _i(1)}, "schema"),
        (MsgType.KNN_ASK, {"q": 1, "i": -3}, "schema"),
        (MsgType.KNN_ASK, [1, 2], "schema"),
        (MsgType.KNN_ANSWER, {"q": 1, "i": 2, "r": float("inf")}, "schema"),
        (MsgType.KNN_ANSWER, {"q": 1, "i": 2}, "schema"),
    ],
)
def test_malformed_or_oversized_knn_frames_are_refused_in_one_line(
    msg_type: MsgType, body: object, reason: str
) -> None:
    with pytest.raises(WireError) as err:
        decode_knn(decode_frame(_frame(msg_type, body), LIMIT))
    assert err.value.reason == reason
    assert "\n" not in str(err.value)


def test_the_intake_refuses_knn_frames_to_a_node_without_the_service_or_out_of_its_range() -> None:
    inbox = Inbox(2, model())
    ask = encode_sampling_frame(1, 2, KnnAsk(1, 3))

    def reason(data: bytes, channel: Channel = Channel.KNN) -> tuple[str, int]:
        with pytest.raises(WireError) as err:
            take(data, LIMIT, inbox, channel, sender=1)  # type: ignore[arg-type]
        return err.value.reason, err.value.status

    assert reason(ask) == ("not-knn", 403)
    assert reason(ask, Channel.SAMPLING) == ("wrong-route", 400)
    inbox.knn = KnnService(  # type: ignore[assignment]
        2, KnnSettings(n_items=10, population=5), [3], [4.0], [], np.random.default_rng(0)
    )
    _, message = take(ask, LIMIT, inbox, Channel.KNN, sender=1)  # type: ignore[arg-type]
    assert message == KnnAsk(1, 3)
    assert reason(encode_sampling_frame(1, 2, KnnAsk(1, 10))) == ("schema", 400)  # past the catalogue
    assert reason(encode_sampling_frame(1, 2, KnnAnswer(1, 3, 4.0))) == ("not-asked", 422)
    assert reason(encode_sampling_frame(1, 2, KnnProbe((3,), (9.0,)))) == ("schema", 400)


def test_a_profile_without_suggestions_is_the_bytes_it_was_before_ranked_candidates() -> None:
    """The ``n`` field is sent only with ranked candidates: full and view runs speak as before."""
    frame = encode_sampling_frame(1, 2, KnnProfile(0.5, 1, (3,)))
    assert frame == _frame(MsgType.KNN_PROFILE, {"s": 0.5, "c": 1, "i": _i(3)})
