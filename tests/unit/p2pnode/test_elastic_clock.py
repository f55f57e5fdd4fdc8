"""The real runs' clock holds back while its process runs behind (p2pnode.clock.ElasticClock)."""

from __future__ import annotations

import asyncio
import time

import pytest

from p2pnode.clock import ElasticClock


async def test_timers_fire_in_order_of_their_tick_and_cancelled_ones_not() -> None:
    clock = ElasticClock(0.001, slack_ticks=5)
    fired: list[str] = []
    done = asyncio.get_running_loop().create_future()
    clock.call_at(20, lambda: fired.append("b"))
    clock.call_at(10, lambda: fired.append("a"))
    clock.call_at(15, lambda: fired.append("x")).cancel()
    clock.call_at(30, lambda: done.set_result(None))
    await asyncio.wait_for(done, 5)
    assert fired == ["a", "b"]
    assert clock.now() >= 30


async def test_a_blocked_loop_holds_the_clock_back_by_all_but_the_slack() -> None:
    clock = ElasticClock(0.01, slack_ticks=2)  # 20 ms of slack
    seen: list[float] = []
    done = asyncio.get_running_loop().create_future()

    def block() -> None:
        time.sleep(0.3)  # a process that cannot keep up: 30 ticks of work in one turn

    def after() -> None:
        seen.append(clock.now())
        done.set_result(None)

    clock.call_at(1, block)
    clock.call_at(2, after)  # due 10 ms after the block began: fires ~290 ms late
    await asyncio.wait_for(done, 5)
    assert clock.holds == 1 and clock.held_s >= 0.3 - 0.01 - 0.02 - 0.005  # (more on a busy machine)
    assert seen[0] == pytest.approx(2 + 2, abs=0.5)  # the tick it shows: the timer's, plus the slack
    assert clock.stretch() > 1.5 and clock.worst_lag_s >= 0.25


async def test_with_no_slack_the_clock_never_holds_back() -> None:
    clock = ElasticClock(0.01, slack_ticks=0)
    done = asyncio.get_running_loop().create_future()
    clock.call_at(1, lambda: time.sleep(0.1))
    clock.call_at(2, lambda: done.set_result(None))
    await asyncio.wait_for(done, 5)
    assert clock.held_s == 0.0 and clock.stretch() == 1.0 and clock.worst_lag_s > 0.05


async def test_a_timer_set_earlier_than_the_armed_one_fires_first() -> None:
    clock = ElasticClock(0.001, slack_ticks=10)
    order: list[int] = []
    done = asyncio.get_running_loop().create_future()
    clock.call_at(50, lambda: (order.append(50), done.set_result(None)))
    clock.call_at(5, lambda: order.append(5))
    await asyncio.wait_for(done, 5)
    assert order == [5, 50]


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="tick_seconds"):
        ElasticClock(0.0, loop=asyncio.new_event_loop())
    with pytest.raises(ValueError, match="slack_ticks"):
        ElasticClock(0.01, -1, loop=asyncio.new_event_loop())


async def test_a_hold_moves_every_pending_timer_back() -> None:
    clock = ElasticClock(0.01, slack_ticks=5)
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    t0 = loop.time()
    clock.call_at(5, lambda: done.set_result(loop.time() - t0))
    clock.hold(0.2)
    took = await asyncio.wait_for(done, 5)
    assert took >= 0.05 + 0.2 - 0.005 and clock.held_s == pytest.approx(0.2)
