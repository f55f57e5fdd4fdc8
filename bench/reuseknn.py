"""ReuseKNN's queries (paper 003): the vectorised ``learning.reuseknn.answer`` against the plain
per-candidate loop of the authors' code (``learning.reuseknn_reference.loop_answer``), side by
side on the same queries of one ML-100k fold, with the same seed (they agree to the last bit:
the bench checks it), and the whole experiment's unit of work: one method at one k over 5 folds.

    .venv/bin/python -m bench.reuseknn [--queries 2000] [--k 10]

The goal: one k over 5 folds on ML-100k in under a minute on one core (a loop per query takes
minutes).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from learning import reuseknn as rk
from learning.reuseknn_reference import loop_answer
from p2plab.reuseknn_lab import load_ratings
from p2pnode.runners.process import tune_process


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=2000, help="test queries both answer")
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()
    tune_process()
    data = load_ratings("ml-100k")
    parts = rk.folds(len(data), 5, 42)
    train, test = parts[0]
    nb = rk.Neighbourhoods.fit(data.subset(train))
    q = test[: args.queries]
    pairs = list(zip(data.users[q].tolist(), data.items[q].tolist(), strict=True))
    print(f"ML-100k fold 1: {len(test)} queries; timing the first {len(pairs)} at k = {args.k}")
    print(f"{'strategy':10s} {'loop s':>8s} {'vectorised s':>13s} {'ratio':>7s}  loop's whole fold")
    for strategy in rk.STRATEGIES:
        t0 = time.perf_counter()
        fast = rk.answer(nb, strategy, args.k, pairs, 90.0, True, np.random.default_rng(1))
        t1 = time.perf_counter()
        slow, usage, _, _ = loop_answer(nb, strategy, args.k, pairs, 90.0, True, np.random.default_rng(1))
        t2 = time.perf_counter()
        assert np.allclose(fast.estimates, slow) and np.array_equal(fast.data_usage, usage)
        vec, loop = t1 - t0, t2 - t1
        whole = loop * len(test) / len(pairs)
        print(f"{strategy:10s} {loop:8.2f} {vec:13.2f} {loop / vec:6.1f}x  ~{whole:.0f} s")
    t0 = time.perf_counter()
    for train, test in parts:
        nb = rk.Neighbourhoods.fit(data.subset(train))
        rk.answer(nb, "userknn", args.k, (data.users[test], data.items[test]), math.inf, False,
                  np.random.default_rng(0))  # fmt: skip
    print(f"one method at k = {args.k} over 5 folds (fit and every query): {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
