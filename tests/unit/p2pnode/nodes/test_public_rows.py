"""Rows of PARD's public set D_pub on the wire (protocols/public.py, p2pnode/wire/codec.py): parsed
and checked like every other message, taken only from nodes that opted in to publish (or, by a
FedAvg client, from its server), a publisher's rows naming itself alone, and bounded by the
public users."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest

from p2pcore.effects import Send
from p2pnode.nodes.intake import take
from p2pnode.wire.codec import PublicSpec, encode_public_frame
from p2pnode.wire.schema import Channel, WireError
from protocols.messages import ModelMessage, PublicMessage
from protocols.public import PublicBoard
from tests.unit.p2pnode.wire.helpers import LIMIT, Inbox, model

SPEC = PublicSpec(dim=2, classes=(2, 3), max_rows=3)


def rows(users: tuple[int, ...], labels: list[list[int]] | None = None) -> PublicMessage:
    n = len(users)
    return PublicMessage(
        users,
        np.arange(n * 4, dtype=np.float32).reshape(n, 4),
        np.ones((n, 2), np.float32),
        np.array(labels if labels is not None else [[1, 2]] * n, dtype=np.int64),
    )


def inbox(board: PublicBoard | None, node_id: int = 9) -> Inbox:
    box = Inbox(node_id, model())
    box.public_spec = SPEC  # type: ignore[assignment]
    box.board = board  # type: ignore[assignment]
    return box


def reason(data: bytes, box: Inbox, sender: int) -> str:
    with pytest.raises(WireError) as err:
        take(data, LIMIT, box, Channel.GOSSIP, sender=sender)
    return err.value.reason


def test_a_publishers_own_row_is_taken_and_every_malformed_body_refused() -> None:
    board = PublicBoard(9, frozenset({3, 4, 5}), None)
    box = inbox(board)
    _, msg = take(encode_public_frame(3, 9, rows((3,))), LIMIT, box, Channel.GOSSIP, sender=3)
    assert isinstance(msg, PublicMessage) and msg.users == (3,)
    np.testing.assert_array_equal(msg.labels, [[1, 2]])
    assert reason(encode_public_frame(7, 9, rows((7,))), box, 7) == "not-public"  # did not opt in
    assert reason(encode_public_frame(3, 9, rows((4,))), box, 3) == "not-own-row"  # another's row
    assert reason(encode_public_frame(3, 9, rows((3, 4))), box, 3) == "not-own-row"
    assert (
        reason(encode_public_frame(3, 9, rows((3,), [[2, 0]])), box, 3) == "schema"
    )  # label past its classes
    assert reason(encode_public_frame(3, 9, rows((3,), [[-1, 0]])), box, 3) == "schema"
    assert (
        reason(encode_public_frame(3, 9, rows((3, 4, 5, 6))), box, 3) == "schema"
    )  # more rows than publishers
    assert reason(encode_public_frame(3, 9, rows((3, 3))), box, 3) == "schema"  # one user twice
    bad = rows((3,))
    nan = PublicMessage(bad.users, bad.features.copy(), bad.user_re, bad.labels)
    nan.features[0, 1] = np.nan
    assert reason(encode_public_frame(3, 9, nan), box, 3) == "non-finite"
    wide = PublicMessage(bad.users, np.zeros((1, 6), np.float32), bad.user_re, bad.labels)
    assert reason(encode_public_frame(3, 9, wide), box, 3) == "shape"
    body = msgpack.unpackb(encode_public_frame(3, 9, rows((3,))), raw=False)
    body["b"]["f"]["d"] = "float16"  # rows are not models: no half precision
    body["b"]["f"]["b"] = body["b"]["f"]["b"][:8]
    assert reason(msgpack.packb(body), box, 3) == "dtype"
    del body["b"]["y"]
    assert reason(msgpack.packb(body), box, 3) == "schema"
    no_pard = Inbox(9, model())  # a node without PARD takes no rows at all
    assert reason(encode_public_frame(3, 9, rows((3,))), no_pard, 3) == "not-public"


def test_a_fedavg_client_takes_rows_from_its_server_alone() -> None:
    held: list[PublicMessage] = []
    board = PublicBoard(9, frozenset({3, 4}), None, server=100, on_rows=held.append)
    box = inbox(board)
    assert (
        reason(encode_public_frame(3, 9, rows((3,))), box, 3) == "not-public"
    )  # a publisher, not the server
    assert reason(encode_public_frame(100, 9, rows((3, 7))), box, 100) == "not-public"  # 7 never opted in
    _, msg = take(encode_public_frame(100, 9, rows((3, 4))), LIMIT, box, Channel.GOSSIP, sender=100)
    board.take(100, msg)
    assert held[-1].users == (3, 4)
    board.take(100, rows((4,)))  # the server's set replaces what the client held
    assert held[-1].users == (4,)


def test_the_server_relays_the_newest_row_of_each_publisher_before_each_global_model() -> None:
    server = PublicBoard(100, frozenset({3, 4}), None, is_server=True)
    server.take(3, rows((3,)))
    newer = rows((3,))
    newer.user_re[...] = 5.0
    server.take(3, newer)
    server.take(4, rows((4,)))
    global_model = ModelMessage(1, {})
    out = server.outgoing([Send(1, global_model), Send(2, global_model)])
    assert [type(e.message).__name__ for e in out if isinstance(e, Send)] == [
        "PublicMessage",
        "ModelMessage",
        "PublicMessage",
        "ModelMessage",
    ]
    first = out[0].message  # type: ignore[union-attr]
    assert first.users == (3, 4) and float(first.user_re[0, 0]) == 5.0
    assert len(server.rows) == 2  # one row per publisher, however often it sends


def test_a_publisher_sends_its_own_row_after_each_model_and_others_send_none() -> None:
    sent = rows((3,))
    publisher = PublicBoard(3, frozenset({3}), lambda: sent)
    out = publisher.outgoing([Send(5, ModelMessage(1, {})), Send(6, ModelMessage(1, {}))])
    assert [e.message for e in out if isinstance(e, Send)][1::2] == [sent, sent]
    private = PublicBoard(4, frozenset({3}), lambda: sent)  # not a publisher: its row never leaves
    effects = [Send(5, ModelMessage(1, {}))]
    assert private.outgoing(effects) == effects
