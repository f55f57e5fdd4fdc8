"""Batches of frames round-trip, and anything else is refused whole (p2pnode/transport/batch.py)."""

from __future__ import annotations

import msgpack
import pytest

from p2pnode.wire.schema import (
    Channel,
    WireError,
)


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
        msgpack.packb([[1, 5, b"x", {}], ok]),  # no channel 5
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
