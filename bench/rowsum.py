"""learning/rowsum.py against numpy's reduceat, per call, in the shapes the steps coalesce.

Both are timed in the same run, interleaved in rounds (reduceat, compiled, reduceat, ...), so a
busy machine slows both alike; the bench checks the two give the same bytes before timing them.

    .venv/bin/python -m bench.rowsum [--calls 3000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

from learning.rowsum import reduceat_rows, sum_rows

#: (label, rows in the batch, distinct rows drawn from, row width)
SHAPES = (
    ("PRME batch (3 tables' rows, dim 60)", 300, 200, 60),
    ("GMF numpy batch (64 examples, dim 32)", 64, 1682, 32),
    ("DP-SGD clipped sum (256 examples, dim 32)", 256, 400, 32),
)


def per_call(fn: Callable[..., object], idx: np.ndarray, values: np.ndarray, calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        fn(idx, values)
    return (time.perf_counter() - t0) / calls


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    for label, n, distinct, d in SHAPES:
        idx = rng.integers(0, distinct, n).astype(np.int64)
        values = rng.standard_normal((n, d)).astype(np.float32)
        assert sum_rows(idx, values)[1].tobytes() == reduceat_rows(idx, values)[1].tobytes()
        sum_rows(idx, values)  # compiled before timing
        numpy_s, compiled_s = [], []
        for _ in range(args.rounds):
            numpy_s.append(per_call(reduceat_rows, idx, values, args.calls))
            compiled_s.append(per_call(sum_rows, idx, values, args.calls))
        a, b = statistics.median(numpy_s), statistics.median(compiled_s)
        said = f"reduceat {a * 1e6:.1f} µs, compiled {b * 1e6:.1f} µs"
        print(f"{label}: {said}, compiled / reduceat = {b / a:.2f}")


if __name__ == "__main__":
    main()
