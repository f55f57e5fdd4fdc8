"""PRME's local training and a PRME gossip round, the numpy and the fused backends side by side
(a PRME gossip round with the CIA on every node at most 0.5x today's).

Two parts, each interleaved so that machine noise hits both alike:

- local updates: every ML-100k user's PRME learner (dim 60, lr 0.2, Table III's), the same
  users and draws, one local update each per repeat, with ``--prme-backend numpy`` and ``fused``;
- rounds: Table III's Rand-Gossip PRME run (943 nodes, Base GL on PeerSwap, the CIA on every
  node, K = 50), built once per backend, ``--warm`` rounds, then ``--rounds`` rounds timed one
  after the other, alternating backends.

    .venv/bin/python -m bench.prme_step [--repeats 3] [--warm 2] [--rounds 3]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as experiments/reproduce.sh runs simulations
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import statistics
import time

import numpy as np
import torch

from learning import prme
from learning.prme_fused import warm
from learning.prme_learner import PRMEConfig, PRMELearner
from learning.split import leave_one_out
from p2pnode.config import RunConfig
from p2pnode.data.datasets import load_ml100k
from p2pnode.runners.sim import Simulation

BACKENDS = ("numpy", "fused")


def local_updates(repeats: int) -> dict[str, list[float]]:
    data = load_ml100k()
    users = leave_one_out(data, seed=0)
    init = prme.init_params(data.n_items, 60, seed=0)
    learners = {
        b: [PRMELearner(u, init, PRMEConfig(lr=0.2, backend=b), np.random.default_rng(u.user)) for u in users]
        for b in BACKENDS
    }
    times: dict[str, list[float]] = {b: [] for b in BACKENDS}
    for _ in range(repeats):
        for b in BACKENDS:
            t0 = time.perf_counter()
            for learner in learners[b]:
                learner.local_update()
                learner.finite()
            times[b].append(time.perf_counter() - t0)
    return times


def table3_config(backend: str) -> RunConfig:
    return RunConfig(nodes=943, rounds=400, seed=0, model="prme").replace(
        **{
            "clip_factor": 0.0,
            "learning.lr": 0.01,
            "learning.prme_lr": 0.2,
            "learning.prme_backend": backend,
            "attack.kind": "cia",
            "attack.target_k": 50,
            "attack.attackers": "all",
        }
    )


def rounds(warm_rounds: int, timed: int) -> dict[str, list[float]]:
    sims = {b: Simulation(table3_config(b)) for b in BACKENDS}
    for sim in sims.values():
        for _ in range(warm_rounds):
            sim.run_round()
    times: dict[str, list[float]] = {b: [] for b in BACKENDS}
    for _ in range(timed):
        for b, sim in sims.items():
            t0 = time.perf_counter()
            sim.run_round()
            times[b].append(time.perf_counter() - t0)
    return times


def show(what: str, times: dict[str, list[float]]) -> None:
    base = statistics.median(times["numpy"])
    for b in BACKENDS:
        med = statistics.median(times[b])
        print(f"{what:<44} {b:<6} median {med:7.3f} s  ({len(times[b])} timed)  x{med / base:.2f} of numpy")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warm", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    warm()
    show("943 local updates (ML-100k, dim 60)", local_updates(args.repeats))
    show("a Table III PRME round (943 nodes, CIA on all)", rounds(args.warm, args.rounds))


if __name__ == "__main__":
    main()
