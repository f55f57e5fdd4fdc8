"""The compiled ziggurat's noise (learning/gauss.py): its bits, its law, its state."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from learning import gauss
from learning.gauss import ZigguratNoise

M64 = (1 << 64) - 1


def xoshiro_reference(state: list[int], n: int) -> list[int]:
    """xoshiro256++ as its authors define it, in plain Python integers."""
    s = list(state)
    rotl = lambda x, k: ((x << k) | (x >> (64 - k))) & M64  # noqa: E731
    out = []
    for _ in range(n):
        out.append((rotl((s[0] + s[3]) & M64, 23) + s[0]) & M64)
        t = (s[1] << 17) & M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
    return out


def test_the_compiled_generator_is_xoshiro256pp() -> None:
    words = gauss.seed_state(12345)
    expected = xoshiro_reference([int(w) for w in words], 50)
    got = [int(gauss.next_word(words)) for _ in range(50)]
    assert got == expected


def test_splitmix_seeding_gives_distinct_nonzero_states() -> None:
    states = {tuple(int(w) for w in gauss.seed_state(s)) for s in range(1000)}
    assert len(states) == 1000 and all(any(s) for s in states)
    assert (gauss.seed_state(2**62 + 5) == gauss.seed_state(2**62 + 5)).all()


def test_the_tables_tile_the_curve_in_layers_of_equal_area() -> None:
    f = lambda x: math.exp(-0.5 * x * x)  # noqa: E731
    v = gauss.R * f(gauss.R) + math.sqrt(math.pi / 2) * math.erfc(gauss.R / math.sqrt(2))
    x = gauss.X
    assert x[1] == gauss.R and x[gauss.LAYERS] == 0.0 and (np.diff(x) < 0).all()
    areas = [x[i] * (f(x[i + 1]) - f(x[i])) for i in range(1, gauss.LAYERS - 1)]
    np.testing.assert_allclose(areas, v, rtol=1e-9)
    # the top layer closes at f(0) = 1: R is the right edge for 256 layers
    assert f(x[gauss.LAYERS - 1]) + v / x[gauss.LAYERS - 1] == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("seed", [1, 2])
def test_the_samples_follow_the_standard_normal(seed: int) -> None:
    x = ZigguratNoise(seed).sample((1_000_000,), 1.0).astype(np.float64)
    n = x.size
    assert abs(x.mean()) < 4 / math.sqrt(n)
    assert abs((x * x).mean() - 1.0) < 4 * math.sqrt(2 / n)
    assert abs(stats.skew(x)) < 4 * math.sqrt(6 / n)
    assert abs(stats.kurtosis(x)) < 4 * math.sqrt(24 / n)
    assert stats.kstest(x, "norm").pvalue > 1e-4
    # the tail beyond R (~2.6e-4 of the mass) and the wedges come out at their share
    for t in (1.0, 2.0, 3.0, gauss.R, 4.0):
        p = 2 * stats.norm.sf(t)
        assert abs((np.abs(x) > t).mean() - p) < 5 * math.sqrt(p * (1 - p) / n), t
    assert np.abs(x).max() > 4.5  # the tail method does reach beyond the base layer


def test_std_scales_and_zero_draws_nothing() -> None:
    a, b = ZigguratNoise(3), ZigguratNoise(3)
    np.testing.assert_array_equal(a.sample((7, 5), 2.5), (b.sample((7, 5), 1.0) * np.float32(2.5)))
    before = a.state()
    assert not a.sample((100,), 0.0).any() and a.state() == before
    g = np.ones(10, np.float32)
    a.add(g, 0.0)
    assert (g == 1).all() and a.state() == before


def test_one_call_draws_what_calls_of_even_sizes_draw() -> None:
    """An odd count drops its last word's unused half: separate calls of even sizes, then one of
    any size, draw what one call of the total draws."""
    a, b = ZigguratNoise(9), ZigguratNoise(9)
    whole = a.sample((1000 + 32 + 33,), 1.0)
    parts = np.concatenate([b.sample((1000,), 1.0), b.sample((32,), 1.0), b.sample((33,), 1.0)])
    np.testing.assert_array_equal(whole, parts)
    assert a.state() == b.state()
    odd = ZigguratNoise(9)
    odd.sample((1,), 1.0)
    assert odd.sample((2,), 1.0)[0] == whole[2]  # the 1-value call used one whole word


def test_the_state_round_trips_and_refuses_other_streams() -> None:
    a = ZigguratNoise(4)
    a.sample((333,), 1.0)
    saved = a.state()
    assert len(saved) == ZigguratNoise.STATE_BYTES
    after = a.sample((1000,), 1.0)
    b = ZigguratNoise(99)
    b.restore(saved)
    np.testing.assert_array_equal(b.sample((1000,), 1.0), after)
    with pytest.raises(ValueError, match="another --dp-backend"):
        b.restore(b"\x01" * 5056)  # a torch generator's state
    with pytest.raises(ValueError, match="all-zero"):
        b.restore(bytes(32))
