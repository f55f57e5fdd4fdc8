"""The intake of a frame: route, node admit, parse body, node vet, in that order (p2pnode/nodes/intake.py)."""

from __future__ import annotations

import numpy as np
import pytest

from adversary.messages import CollusionMessage
from p2pnode.nodes.intake import take
from p2pnode.wire import codec
from p2pnode.wire.codec import (
    encode_model_body,
    encode_model_frame,
    encode_sampling_frame,
    frame_head,
    frame_with_body,
    pack_collusion_body,
)
from p2pnode.wire.delta import DeltaEncoder
from p2pnode.wire.schema import (
    Channel,
    MsgType,
    SharedFrame,
    WireError,
)
from peer_sampling.messages import (
    ShuffleRequest,
    SwapAdopt,
    SwapCommit,
)
from protocols.messages import FedMessage, ModelMessage
from tests.unit.p2pnode.wire.helpers import LIMIT, Inbox, model, partner


def test_the_intake_checks_route_identity_freshness_and_body() -> None:
    p = model()
    data = encode_model_frame(3, 7, DeltaEncoder().encode(7, 5, p))
    inbox = Inbox(7, p)
    frame, msg = take(data, LIMIT, inbox, Channel.GOSSIP, sender=3, certified={3})
    assert frame.sender == 3 and isinstance(msg, ModelMessage) and msg.version == 5

    def reason(**kw: object) -> str:
        args = {"inbox": inbox, "channel": Channel.GOSSIP, **kw}
        with pytest.raises(WireError) as err:
            take(data, LIMIT, **args)  # type: ignore[arg-type]
        return err.value.reason

    assert reason(inbox=Inbox(8, p)) == "wrong-route"
    assert reason(channel=Channel.SAMPLING) == "wrong-route"
    assert reason(sender=4) == "sender-mismatch"
    assert reason(certified={4}) == "cert-mismatch"
    inbox.refuse = "too-far"  # the node vets the decoded model away
    assert reason() == "too-far"
    inbox.refuse = None
    inbox.last_version[3] = 6  # a newer model from 3 was taken: version 5 is refused unread
    assert reason() == "old-model"
    assert reason(inbox=Inbox(7, model(items=40))) == "shape"


def test_an_admitted_model_refused_later_costs_its_sender_but_a_lost_base_does_not() -> None:
    p = model()
    inbox = Inbox(7, p)
    whole = encode_model_frame(3, 7, DeltaEncoder().encode(7, 5, p))
    take(whole, LIMIT, inbox, Channel.GOSSIP)
    assert inbox.charged == []  # a taken model is charged by the node when it takes it
    inbox.refuse = "too-far"
    with pytest.raises(WireError, match="too-far"):
        take(whole, LIMIT, inbox, Channel.GOSSIP)
    assert inbox.charged == [3]  # probing the bound is not free
    with pytest.raises(WireError, match="shape"):
        take(whole, LIMIT, Inbox(7, model(items=40)), Channel.GOSSIP)  # a body that does not fit
    narrow = Inbox(7, model(items=40))
    with pytest.raises(WireError):
        take(whole, LIMIT, narrow, Channel.GOSSIP)
    assert narrow.charged == [3]
    enc = DeltaEncoder()
    enc.acknowledged(7, 5, enc.encode(7, 5, p).view)
    q = {k: v.copy() for k, v in p.items()}
    q["item"][0] += 1  # one row changed: sent as a delta on version 5
    encoded = enc.encode(7, 6, q)
    assert encoded.is_delta
    delta = encode_model_frame(3, 7, encoded)
    fresh = Inbox(7, p)  # never saw version 5: the delta's base is not there
    with pytest.raises(WireError, match="base"):
        take(delta, LIMIT, fresh, Channel.GOSSIP)
    assert fresh.charged == []  # an honest sender meets this and sends the model whole


def test_sampling_messages_naming_ids_outside_the_network_are_refused() -> None:

    inbox = Inbox(7, model())
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
    inbox = Inbox(7, p)
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


def test_the_partners_of_one_multicast_share_one_decode_of_its_body() -> None:
    """Frames of one multicast sent in this process share a memo: the first partner decodes the
    body, the others take that message once their own envelope is checked. A frame without the
    memo (as from a socket) decodes to the same message on its own."""
    rng = np.random.default_rng(3)
    kept = {"item": rng.normal(size=(5, 4)).astype(np.float32), "h": rng.normal(size=(4,)).astype(np.float32)}
    body, memo = pack_collusion_body(CollusionMessage(9, kept)), {}
    frames = {dest: frame_with_body(MsgType.COLLUDE, 2, dest, body) for dest in (4, 5, 6)}
    first = take(frames[4], 1 << 20, partner(4, kept), Channel.COLLUDE, memo=memo)[1]
    second = take(frames[5], 1 << 20, partner(5, kept), Channel.COLLUDE, memo=memo)[1]
    assert isinstance(first, CollusionMessage) and second is first
    plain = take(frames[6], 1 << 20, partner(6, kept), Channel.COLLUDE)[1]
    assert isinstance(plain, CollusionMessage) and plain is not first and plain.user == 9
    for name, arr in kept.items():
        np.testing.assert_array_equal(plain.params[name], arr)
        assert not first.params[name].flags.writeable  # shared, so nobody may write to it
    # the envelope is still each partner's own: a frame for 5 posted to 6 is refused
    with pytest.raises(WireError) as err:
        take(frames[5], 1 << 20, partner(6, kept), Channel.COLLUDE, memo=memo)
    assert err.value.reason == "wrong-route"


def test_a_partner_whose_spec_differs_decodes_the_multicast_itself_and_is_refused_as_before() -> None:
    rng = np.random.default_rng(4)
    kept = {"item": rng.normal(size=(5, 4)).astype(np.float32), "h": rng.normal(size=(4,)).astype(np.float32)}
    body, memo = pack_collusion_body(CollusionMessage(9, kept)), {}
    take(frame_with_body(MsgType.COLLUDE, 2, 4, body), 1 << 20, partner(4, kept), Channel.COLLUDE, memo=memo)
    assert "collusion" in memo
    other = {"item": kept["item"][:3], "h": kept["h"]}
    with pytest.raises(WireError) as err:
        take(
            frame_with_body(MsgType.COLLUDE, 2, 5, body),
            1 << 20,
            partner(5, other),
            Channel.COLLUDE,
            memo=memo,
        )
    assert err.value.reason == "shape"


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
    got = {d: take(frames[d], LIMIT, Inbox(d, p), Channel.GOSSIP, memo=memo)[1] for d in (4, 5)}
    assert unpacked == [len(body)]  # by the first client; the second's head alone was parsed
    monkeypatch.undo()
    alone = take(bytes(frames[6]), LIMIT, Inbox(6, p), Channel.GOSSIP)[1]
    for message in (*got.values(), alone):
        assert isinstance(message, FedMessage) and message.kind == "global"
        assert (message.round, message.version) == (3, 9)
        for name, arr in p.items():
            np.testing.assert_array_equal(message.params[name], arr)
            assert not message.params[name].flags.writeable  # shared bytes: nobody writes to them
    assert got[4] is not got[5]
    with pytest.raises(WireError) as err:
        take(frames[5], LIMIT, Inbox(6, p), Channel.GOSSIP, memo=memo)
    assert err.value.reason == "wrong-route"
