"""Local training: the fused, numpy and torch GMF backends side by side, same batches.

Why the project has a hand-written GMF step at all: for 256-example batches on a 32-factor model,
torch's per-step dispatch (autograd, two optimizers) costs far more than the arithmetic, and so
do numpy's ~20 calls a step; the fused backend compiles a whole epoch into one call. All three
run on the same ML-100k users, interleaved, so machine noise hits them alike.

    .venv/bin/python -m bench.train_step [--users 200] [--repeats 5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from learning import gmf
from learning.learner import BACKENDS, GMFLearner, TrainConfig
from learning.split import leave_one_out
from p2pnode.data.datasets import load_ml100k


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
            for b in BACKENDS
        }
        for lrn in learners["fused"][:1]:  # compile (or load the cached kernel) before timing
            lrn.local_update()
        secs = dict.fromkeys(BACKENDS, 0.0)
        steps = dict.fromkeys(BACKENDS, 0)
        for _ in range(args.repeats):
            for b in BACKENDS:  # interleaved
                t = time.perf_counter()
                for lrn in learners[b]:
                    steps[b] += lrn.local_update()
                secs[b] += time.perf_counter() - t
        us = {b: secs[b] / steps[b] * 1e6 for b in secs}
        label = "SparseAdam items" if sparse else "dense Adam"
        results[label] = us
        print(
            f"{label:17s} torch {us['torch']:6.0f}   numpy {us['numpy']:6.0f}   fused {us['fused']:6.1f} "
            f"us/step   torch/fused = {us['torch'] / us['fused']:.1f}x   "
            f"numpy/fused = {us['numpy'] / us['fused']:.1f}x   ({steps['numpy']} steps each)"
        )


if __name__ == "__main__":
    main()
