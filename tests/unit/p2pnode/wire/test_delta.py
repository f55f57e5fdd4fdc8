"""Model frames, full and delta, round-trip exactly (p2pnode/wire/delta.py)."""

from __future__ import annotations

import numpy as np
import pytest

from learning.params import spec_of
from p2pnode.wire.codec import (
    decode_frame,
    decode_model,
    encode_model_frame,
)
from p2pnode.wire.delta import DeltaDecoder, DeltaEncoder
from p2pnode.wire.schema import (
    WireError,
)
from tests.unit.p2pnode.wire.helpers import LIMIT, model, roundtrip


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
