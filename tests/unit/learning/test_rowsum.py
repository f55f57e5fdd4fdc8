"""learning/rowsum.py: the compiled coalesced gradient gives numpy's sums bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

from learning.rowsum import reduceat_rows, sum_rows


@pytest.mark.parametrize("seed", range(6))
def test_compiled_row_sums_are_numpys_bit_for_bit(seed: int) -> None:
    """Segments of every length numpy sums differently (one row; fewer than 8 more, summed one by
    one from -0.0; up to 128 more, in eight interleaved sums; longer: numpy's recursion, left to
    numpy), signed zeros and magnitudes far apart, in the dimensions the models use."""
    rng = np.random.default_rng(seed)
    for _ in range(60):
        n = int(rng.integers(1, 420))
        d = int(rng.choice([1, 8, 32, 60]))
        distinct = int(rng.choice([1, 2, 3, 9, 60, 5000]))
        idx = rng.integers(0, distinct, n).astype(np.int64)
        values = (rng.standard_normal((n, d)) * rng.choice([1e-4, 1.0, 1e4], size=(n, 1))).astype(np.float32)
        values[rng.random((n, d)) < 0.05] = -0.0
        want_rows, want = reduceat_rows(idx, values)
        rows, got = sum_rows(idx, values)
        assert np.array_equal(rows, want_rows)
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


def test_segment_lengths_at_numpys_boundaries() -> None:
    """Exactly at the switches of numpy's pairwise summation: 1, 2, 8, 9, 16, 129 and 130 rows."""
    rng = np.random.default_rng(7)
    for length in (1, 2, 8, 9, 15, 16, 17, 128, 129, 130, 300):
        idx = np.concatenate((np.full(length, 4), rng.integers(0, 3, 20))).astype(np.int64)
        rng.shuffle(idx)
        values = rng.standard_normal((len(idx), 60)).astype(np.float32)
        assert sum_rows(idx, values)[1].tobytes() == reduceat_rows(idx, values)[1].tobytes(), length
