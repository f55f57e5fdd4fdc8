"""Local training: the numpy GMF backend next to the torch autograd reference, same batches.

Why the project has a hand-written GMF step at all: for 256-example batches on a 32-factor model,
torch's per-step dispatch (autograd, two optimizers) costs far more than the arithmetic. Both run
on the same ML-100k users, interleaved, so machine noise hits both alike.

    .venv/bin/python -m bench.train_step [--users 200] [--repeats 5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from learning import gmf
from learning.learner import GMFLearner, TrainConfig
from learning.split import leave_one_out
from p2pnode.datasets import load_ml100k


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--users", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    data = load_ml100k().subset_users(args.users)
    users = leave_one_out(data, seed=0)
    init = gmf.init_params(data.n_items, 32, seed=0)
    results = {}
    for sparse in (True, False):
        learners = {
            b: [
                GMFLearner(
                    u, init, TrainConfig(sparse_items=sparse, backend=b), np.random.default_rng(u.user)
                )
                for u in users
            ]
            for b in ("numpy", "torch")
        }
        secs = {"numpy": 0.0, "torch": 0.0}
        steps = {"numpy": 0, "torch": 0}
        for _ in range(args.repeats):
            for b in ("numpy", "torch"):  # interleaved
                t = time.perf_counter()
                for lrn in learners[b]:
                    steps[b] += lrn.local_update()
                secs[b] += time.perf_counter() - t
        us = {b: secs[b] / steps[b] * 1e6 for b in secs}
        label = "SparseAdam items" if sparse else "dense Adam"
        results[label] = us
        print(
            f"{label:17s} torch {us['torch']:6.0f} us/step   numpy {us['numpy']:6.0f} us/step   "
            f"torch/numpy = {us['torch'] / us['numpy']:.1f}x   ({steps['numpy']} steps each)"
        )


if __name__ == "__main__":
    main()
