"""Local training cost per node on ML-100k: one local epoch of GMF and PRME, plain and DP-SGD.

Every variant trains the same users, interleaved repeat by repeat so machine noise hits all alike,
and the ratios are taken within this one run. DP-SGD (learning/dp.py) costs more per step because
the noise is dense: N(0, σ²C²) on every coordinate of the item tables (1682 × 32 for GMF,
2 × 1682 × 60 for PRME), and GMF's Adam then updates every row instead of the batch's rows. The
"plain dense" GMF row (dense Adam, no DP) separates that optimizer cost from clipping and noise.

    .venv/bin/python -m bench.local_epoch [--users 200] [--repeats 5]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
import torch

from learning import gmf, prme
from learning.dp import DPConfig
from learning.learner import BaseLearner, GMFLearner, TrainConfig
from learning.prme_learner import PRMEConfig, PRMELearner
from learning.split import leave_one_out
from p2pnode.data.datasets import load_ml100k

DP = DPConfig(noise_multiplier=1.0, clip=2.0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--users", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(1)
    data = load_ml100k().subset_users(args.users)
    users = leave_one_out(data, seed=0)
    g_init = gmf.init_params(data.n_items, 32, seed=0)
    p_init = prme.init_params(data.n_items, 60, seed=0)

    def gmf_learners(cfg: TrainConfig) -> list[BaseLearner]:
        return [GMFLearner(u, g_init, cfg, np.random.default_rng(u.user)) for u in users]

    def prme_learners(cfg: PRMEConfig) -> list[BaseLearner]:
        return [PRMELearner(u, p_init, cfg, np.random.default_rng(u.user)) for u in users]

    variants: dict[str, Callable[[], list[BaseLearner]]] = {
        "GMF plain (SparseAdam)": lambda: gmf_learners(TrainConfig()),
        "GMF plain (dense Adam)": lambda: gmf_learners(TrainConfig(sparse_items=False)),
        "GMF DP-SGD": lambda: gmf_learners(TrainConfig(dp=DP)),
        "PRME plain": lambda: prme_learners(PRMEConfig()),
        "PRME DP-SGD": lambda: prme_learners(PRMEConfig(dp=DP)),
    }
    learners = {name: make() for name, make in variants.items()}
    secs = dict.fromkeys(variants, 0.0)
    steps = dict.fromkeys(variants, 0)
    epochs = dict.fromkeys(variants, 0)
    for _ in range(args.repeats):
        for name, group in learners.items():
            t = time.perf_counter()
            for lrn in group:
                steps[name] += lrn.local_update()
            secs[name] += time.perf_counter() - t
            epochs[name] += len(group)
    per_step = {n: secs[n] / max(steps[n], 1) * 1e6 for n in variants}
    per_epoch = {n: secs[n] / epochs[n] * 1e3 for n in variants}
    print(f"{args.users} ML-100k users, {args.repeats} local epochs each, σ = 1, C = 2")
    print(f"{'variant':24s} {'ms/epoch/node':>14s} {'us/step':>9s} {'steps/epoch':>12s}")
    for n in variants:
        print(f"{n:24s} {per_epoch[n]:14.2f} {per_step[n]:9.0f} {steps[n] / epochs[n]:12.2f}")
    print("DP-SGD cost as a multiple of the plain step (same run):")
    for model, plain in (("GMF", "GMF plain (SparseAdam)"), ("PRME", "PRME plain")):
        dp = f"{model} DP-SGD"
        print(
            f"  {model:5s} per step {per_step[dp] / per_step[plain]:5.2f}x   "
            f"per epoch {per_epoch[dp] / per_epoch[plain]:5.2f}x"
        )
    dense = "GMF plain (dense Adam)"
    print(f"  GMF   per step vs dense-Adam plain {per_step['GMF DP-SGD'] / per_step[dense]:5.2f}x")


if __name__ == "__main__":
    main()
