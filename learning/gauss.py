"""Gaussian noise for DP-SGD from a compiled ziggurat: the noise source of ``--dp-backend fused``.

A DP-SGD step (CIA paper §VII-E, learning/dp.py) draws N(0, σ²C²) on every coordinate of the
model: ~54k values a step for ML-100k's GMF, a few thousand steps a simulated round. torch's
``normal_`` (the numpy backend's source) costs ~5 ns a value here; the noise was a third of a
DP gossip round (docs/design.md, Speed). This module draws the same distribution in ~2.5 ns a value
(``bench/dp_step.py`` prints the two side by side):

- **bits**: xoshiro256++ (Blackman & Vigna, "Scrambled linear pseudorandom number generators",
  2021): four 64-bit words of state per node, seeded from the node's seed through splitmix64, kept
  in checkpoints as 32 bytes;
- **normals**: the ziggurat method (Marsaglia & Tsang, "The ziggurat method for generating random
  variables", 2000) with 256 layers of equal area under exp(−x²/2). Each 64-bit word gives two
  32-bit draws; a draw's low 8 bits pick the layer, the next bit the sign, the top 23 bits the
  position in the layer. A draw that lands inside the part of its layer wholly under the curve
  (~99% of them) is the sample; the others take the exact wedge test against exp(−x²/2) or, in
  the base layer, Marsaglia's exact tail method beyond r, in double precision, drawing more
  words as they need.

A call that fills an odd number of values drops the unused half of its last word, so one call
for n values draws what separate calls for the same sizes draw when all but the last are even.
The stream is not torch's: runs under the fused backend get other noise, of the same law.
``tests/unit/learning/test_gauss.py`` checks the generator against a plain Python xoshiro256++,
and the samples' moments, tails and Kolmogorov–Smirnov distance against N(0, 1).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from learning.params import Array

LAYERS = 256
#: the base layer's right edge for 256 layers (Marsaglia & Tsang 2000, §4)
R = 3.6541528853610088
_M64 = (1 << 64) - 1
_U53 = 1.0 / 9007199254740992.0  # 2^-53
_SCALE23 = 2.0**23
_F1 = np.float32(1.0)
_F2 = np.float32(2.0)


def _f(x: float) -> float:
    return math.exp(-0.5 * x * x)


def _tables() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(X, F, W64, W32, K): layer edges x_0 > x_1 = R > … > x_256 = 0 with each layer's area
    V = R f(R) + ∫_R^∞ f, f(x) = exp(−x²/2) (x_0 = V / f(R) is the base layer's width with its
    tail folded in); F = f(X); W = X / 2^23 (a draw's 23-bit position times W is its x); K[i] the
    largest 23-bit position whose x lies under layer i + 1's edge (accepted without a test)."""
    f = _f
    v = R * f(R) + math.sqrt(math.pi / 2) * math.erfc(R / math.sqrt(2))
    x = np.zeros(LAYERS + 1)
    x[0], x[1] = v / f(R), R
    for i in range(1, LAYERS):
        y = f(x[i]) + v / x[i]
        x[i + 1] = math.sqrt(-2.0 * math.log(y)) if y < 1.0 else 0.0
    x[LAYERS] = 0.0
    fx = np.array([f(e) for e in x])
    w64 = x / _SCALE23
    k = np.array([math.floor(x[i + 1] / x[i] * _SCALE23) for i in range(LAYERS)], dtype=np.uint32)
    return x, fx, w64, w64.astype(np.float32), k


X, F, W64, W32, K = _tables()


def seed_state(seed: int) -> np.ndarray:
    """xoshiro256++'s four words from ``seed`` by splitmix64 (its authors' recommended seeding)."""
    state = np.zeros(4, dtype=np.uint64)
    z = seed & _M64
    for n in range(4):
        z = (z + 0x9E3779B97F4A7C15) & _M64
        w = z
        w = ((w ^ (w >> 30)) * 0xBF58476D1CE4E5B9) & _M64
        w = ((w ^ (w >> 27)) * 0x94D049BB133111EB) & _M64
        state[n] = w ^ (w >> 31)
    if not state.any():  # the one state xoshiro cannot leave
        raise ValueError("an all-zero xoshiro256++ state")
    return state


@numba.njit(inline="always")
def _rotl(x: np.uint64, k: int) -> np.uint64:
    return (x << np.uint64(k)) | (x >> np.uint64(64 - k))


@numba.njit(inline="always")
def _advance(
    s0: np.uint64, s1: np.uint64, s2: np.uint64, s3: np.uint64
) -> tuple[np.uint64, np.uint64, np.uint64, np.uint64, np.uint64]:
    """xoshiro256++: (the next word, the advanced state), on a state held in registers."""
    out = _rotl(s0 + s3, 23) + s0
    t = s1 << np.uint64(17)
    s2 ^= s0
    s3 ^= s1
    s1 ^= s2
    s0 ^= s3
    s2 ^= t
    return out, s0, s1, s2, _rotl(s3, 45)


@numba.njit(cache=True, nogil=True)
def next_word(s: np.ndarray) -> np.uint64:
    """xoshiro256++: the next 64-bit word, advancing ``s`` in place."""
    out, s[0], s[1], s[2], s[3] = _advance(s[0], s[1], s[2], s[3])
    return out


@numba.njit(cache=True, nogil=True)
def _unit(s: np.ndarray) -> float:
    """A uniform double in [0, 1) from the top 53 bits of a word."""
    return float(next_word(s) >> np.uint64(11)) * _U53


@numba.njit(cache=True, nogil=True)
def _rare(s: np.ndarray, layer: np.uint32, sign: float, pos: np.uint32) -> float:
    """A draw outside its layer's inner rectangle: the tail (layer 0) or the wedge test; a
    rejected draw starts over with a fresh one, which may itself be accepted at once."""
    i, sg, j = layer, sign, pos
    while True:
        if i == 0:  # beyond R: Marsaglia's exact tail method
            while True:
                a = -math.log1p(-_unit(s)) / R
                b = -math.log1p(-_unit(s))
                if 2.0 * b > a * a:
                    return sg * (R + a)
        xv = j * W64[i]
        if F[i] + _unit(s) * (F[i + 1] - F[i]) < math.exp(-0.5 * xv * xv):
            return float(sg * xv)
        draw = np.uint32(next_word(s) & np.uint64(0xFFFFFFFF))
        i = draw & np.uint32(0xFF)
        sg = -1.0 if (draw >> np.uint32(8)) & np.uint32(1) else 1.0
        j = draw >> np.uint32(9)
        if j < K[i]:
            return float(sg * (j * W64[i]))


@numba.njit(cache=True, nogil=True)
def fill(s: np.ndarray, flat: Array, std: np.float32) -> None:
    """``flat`` (float32, one dimension) ← N(0, std²) values, advancing the state ``s``."""
    n = flat.size
    s0, s1, s2, s3 = s[0], s[1], s[2], s[3]  # in registers: ``out`` cannot alias them
    k = 0
    while k + 1 < n:
        word, s0, s1, s2, s3 = _advance(s0, s1, s2, s3)
        for half in range(2):
            draw = np.uint32((word >> np.uint64(32 * half)) & np.uint64(0xFFFFFFFF))
            i = draw & np.uint32(0xFF)
            j = draw >> np.uint32(9)
            sign = _F1 - _F2 * np.float32((draw >> np.uint32(8)) & np.uint32(1))
            if j < K[i]:
                flat[k + half] = np.float32(j) * W32[i] * sign * std
            else:
                s[0], s[1], s[2], s[3] = s0, s1, s2, s3
                flat[k + half] = np.float32(_rare(s, i, np.float64(sign), j)) * std
                s0, s1, s2, s3 = s[0], s[1], s[2], s[3]
        k += 2
    s[0], s[1], s[2], s[3] = s0, s1, s2, s3
    if k < n:  # an odd count: the low half of one more word, the high half dropped
        draw = np.uint32(next_word(s) & np.uint64(0xFFFFFFFF))
        i = draw & np.uint32(0xFF)
        j = draw >> np.uint32(9)
        sign = _F1 - _F2 * np.float32((draw >> np.uint32(8)) & np.uint32(1))
        if j < K[i]:
            flat[k] = np.float32(j) * W32[i] * sign * std
        else:
            flat[k] = np.float32(_rare(s, i, np.float64(sign), j)) * std


class ZigguratNoise:
    """Fresh N(0, std²) noise, seeded per node: the same calls as ``learning.dp.GaussianNoise``."""

    STATE_BYTES = 32

    def __init__(self, seed: int) -> None:
        self.words = seed_state(seed)

    def state(self) -> bytes:
        return bytes(self.words.astype("<u8").tobytes())

    def restore(self, state: bytes) -> None:
        if len(state) != self.STATE_BYTES:
            raise ValueError(
                f"a ziggurat noise state is {self.STATE_BYTES} bytes, this one {len(state)}: "
                "the checkpoint was made with another --dp-backend"
            )
        words = np.frombuffer(state, dtype="<u8").astype(np.uint64)
        if not words.any():
            raise ValueError("an all-zero xoshiro256++ state")
        self.words[...] = words

    def sample(self, shape: tuple[int, ...], std: float) -> Array:
        """A fresh float32 array of N(0, std²) values (zeros, drawing nothing, when std is 0)."""
        out = np.empty(shape, dtype=np.float32)
        if std == 0.0:
            out[...] = 0.0
        else:
            fill(self.words, out.reshape(-1), np.float32(std))
        return out

    def add(self, grad: Array, std: float) -> None:
        """grad += N(0, std²) on every coordinate, in place."""
        if std != 0.0:
            grad += self.sample(grad.shape, std)


def warm() -> None:
    """Compile (or load from numba's cache) before the first timed step."""
    ZigguratNoise(1).sample((3,), 1.0)
