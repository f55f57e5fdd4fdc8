"""Load bounds: the concurrency gate and per-(sender, node) token buckets."""

from __future__ import annotations

import pytest

from p2pnode.trust.limits import Gate, Limits, RateLimiter


def test_gate_refuses_past_its_limit_and_reopens() -> None:
    gate = Gate(2)
    assert gate.enter() and gate.enter() and not gate.enter()
    gate.leave()
    assert gate.enter() and gate.peak == 2


def test_token_bucket_allows_the_burst_then_the_rate() -> None:
    rl = RateLimiter(rate=10.0, burst=5.0, max_keys=100)
    assert [rl.allow(1, 7, 0.0) for _ in range(6)] == [True] * 5 + [False]
    assert rl.allow(2, 7, 0.0)  # another sender is not affected
    assert rl.allow(1, 8, 0.0)  # nor the same sender to another node
    assert not rl.allow(1, 7, 0.05)  # half a token
    assert rl.allow(1, 7, 0.1)  # one token refilled
    assert sum(rl.allow(1, 7, 10.0) for _ in range(10)) == 5  # refill is capped at the burst


def test_rate_limiter_memory_is_bounded() -> None:
    rl = RateLimiter(rate=1.0, burst=1.0, max_keys=3)
    for s in range(10):
        rl.allow(s, 0, 0.0)
    assert len(rl) == 3


def test_limits_are_validated() -> None:
    with pytest.raises(ValueError):
        Limits(max_inflight=0)
    with pytest.raises(ValueError):
        Limits(rate_per_s=0)


def test_lag_shedder_trips_on_sustained_lag_and_recovers() -> None:
    from p2pnode.trust.limits import LagShedder

    shed = LagShedder(max_lag_s=0.1)
    shed.record(0.5)  # one late wake-up: smoothed to 0.15
    assert shed.overloaded()
    for _ in range(10):
        shed.record(0.0)
    assert not shed.overloaded()  # the queue drained, requests are served again
    calm = LagShedder(max_lag_s=0.1)
    for _ in range(50):
        calm.record(0.02)  # ordinary jitter never trips it
    assert not calm.overloaded()
    with pytest.raises(ValueError):
        Limits(max_lag_s=0)


def test_address_guard_caps_connections_and_requests_per_address_and_forgets_closed_ones() -> None:
    from p2pnode.trust.limits import AddressGuard

    guard = AddressGuard(max_connections=2, max_inflight=1)
    assert guard.connect("10.0.0.9") and guard.connect("10.0.0.9") and not guard.connect("10.0.0.9")
    assert guard.connect("10.0.0.1")  # another address keeps its own share
    assert guard.enter("10.0.0.9") and not guard.enter("10.0.0.9") and guard.enter("10.0.0.1")
    assert (guard.refused_connections, guard.refused_requests) == (1, 1)
    guard.leave("10.0.0.9")
    guard.disconnect("10.0.0.9")
    assert guard.connect("10.0.0.9") and guard.inflight("10.0.0.9") == 0
    for _ in range(2):
        guard.disconnect("10.0.0.9")
    guard.disconnect("10.0.0.1")
    assert guard.connections("10.0.0.9") == 0 and guard.addresses == 0  # nothing kept
    with pytest.raises(ValueError):
        Limits(max_connections_per_address=0)
    with pytest.raises(ValueError):
        Limits(body_timeout_s=0)


def test_timeouts_grow_with_the_largest_frame_a_model_makes() -> None:
    """A 4.9 MB Foursquare-shaped model's frame gets ~6 s more to arrive and be answered than an
    ML-100k one, which keeps today's timeouts to within a third of a second."""
    from p2pnode.nodes.host import body_limit
    from p2pnode.trust.limits import CLIENT_TIMEOUT_S, client_timeout

    ml100k = body_limit((1682 + 1) * 32 * 4 + 32 * 4 + 4)  # items, its own user, h, bias
    poi = body_limit((38_333 + 1) * 32 * 4 + 32 * 4 + 4)
    base = Limits()
    assert base.sized(ml100k).body_timeout_s - base.body_timeout_s < 0.4
    assert client_timeout(ml100k) - CLIENT_TIMEOUT_S < 0.4
    assert 5.5 < base.sized(poi).body_timeout_s - base.body_timeout_s < 6.5
    assert 5.5 < client_timeout(poi) - CLIENT_TIMEOUT_S < 6.5
    assert base.sized(poi).header_timeout_s == base.header_timeout_s  # strangers get no more time
