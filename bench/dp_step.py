"""DP-SGD's noise, a GMF DP-SGD step and a DP gossip round: the numpy and the fused backends side
by side (a DP gossip round at most 0.5x today's).

Three parts, each interleaved so that machine noise hits both alike:

- noise: N(0, 1) on ML-100k's item table (1,682 × 32 values), torch's ``normal_`` (the numpy
  backend's source) against ``learning.gauss``'s compiled ziggurat;
- steps: one ML-100k user's Poisson batches (σ = 1, C = 2, Share less off), ``NumpyGMF.dp_step``
  with torch's noise against ``learning.gmf_dp_fused.dp_step``;
- rounds: Figure 5's "Rand-Gossip, ε = 1000" run (or ``--epsilon``'s row; 943 nodes, Base GL on
  PeerSwap, the CIA on every node, K = 50, 400-round ε budget), built once per backend,
  ``--warm`` rounds, then ``--rounds`` rounds timed one after the other, alternating backends.
  The CIA's observers hold more models as rounds go by, so a later round (``--warm 100``) costs
  more outside DP-SGD than an early one.

    .venv/bin/python -m bench.dp_step [--repeats 200] [--warm 1] [--rounds 4] [--nodes 943]
        [--epsilon 1000] [--skip-parts]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as experiments/reproduce.sh runs simulations
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import statistics
import time
from collections.abc import Callable, Mapping

import numpy as np
import torch

from learning import gmf, gmf_dp_fused
from learning.dp import DPConfig, GaussianNoise, PrivateStepper, poisson_batch
from learning.gauss import ZigguratNoise
from learning.gmf_numpy import NumpyGMF
from learning.split import leave_one_out
from p2pnode.config import RunConfig
from p2pnode.data.datasets import load_ml100k
from p2pnode.runners.sim import Simulation

BACKENDS = ("numpy", "fused")


def interleaved(calls: Mapping[str, Callable[[], object]], repeats: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {b: [] for b in calls}
    for _ in range(repeats):
        for b, call in calls.items():
            t0 = time.perf_counter()
            call()
            times[b].append(time.perf_counter() - t0)
    return times


def noise(repeats: int) -> dict[str, list[float]]:
    shape = (1682, 32)
    torch_noise, zig = GaussianNoise(1), ZigguratNoise(1)
    calls = {"numpy": lambda: torch_noise.sample(shape, 1.0), "fused": lambda: zig.sample(shape, 1.0)}
    return interleaved(calls, repeats)


def steps(repeats: int) -> dict[str, list[float]]:
    data = load_ml100k()
    user = leave_one_out(data, seed=0)[0]
    init = gmf.init_params(data.n_items, 32, seed=0)
    rng = np.random.default_rng(0)
    n = len(user.train_items)
    items = np.concatenate((user.train_items, rng.integers(0, data.n_items, 4 * n)))  # 4 negatives each
    labels = np.concatenate((np.ones(n), np.zeros(4 * n))).astype(np.float32)
    calls = {}
    for b in BACKENDS:
        model = NumpyGMF({k: v.copy() for k, v in init.items()}, 0.01, False)
        dp = PrivateStepper(DPConfig(noise_multiplier=1.0, backend=b), len(items), 64, 1)
        step = model.dp_step if b == "numpy" else (lambda *a, m=model: gmf_dp_fused.dp_step(m, *a))

        def call(step: Callable[..., None] = step, dp: PrivateStepper = dp) -> None:
            sel = poisson_batch(rng, len(items), dp.sample_rate)
            step(items[sel], labels[sel], dp)

        calls[b] = call
    return interleaved(calls, repeats)


def fig5_config(backend: str, nodes: int, epsilon: float) -> RunConfig:
    return RunConfig(nodes=nodes, rounds=400, seed=0).replace(
        **{
            "clip_factor": 0.0,
            "learning.lr": 0.01,
            "learning.dp_epsilon": epsilon,
            "learning.dp_backend": backend,
            "attack.kind": "cia",
            "attack.target_k": 50,
            "attack.attackers": "all",
        }
    )


def rounds(warm_rounds: int, timed: int, nodes: int, epsilon: float) -> dict[str, list[float]]:
    sims = {b: Simulation(fig5_config(b, nodes, epsilon)) for b in BACKENDS}
    for sim in sims.values():
        for _ in range(warm_rounds):
            sim.run_round()
    return interleaved({b: sim.run_round for b, sim in sims.items()}, timed)


def show(what: str, times: dict[str, list[float]], unit: float, label: str) -> None:
    base = statistics.median(times["numpy"])
    for b in BACKENDS:
        med = statistics.median(times[b])
        timed = f"({len(times[b])} timed)"
        print(f"{what:<50} {b:<6} median {med * unit:9.3f} {label}  {timed}  x{med / base:.2f} of numpy")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--warm", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--nodes", type=int, default=943)
    ap.add_argument("--epsilon", type=float, default=1000.0, help="the Fig. 5 row's ε (1000, 100, 10, 1)")
    ap.add_argument("--skip-parts", action="store_true", help="time the rounds alone")
    args = ap.parse_args()
    torch.set_num_threads(1)
    gmf_dp_fused.warm()
    if not args.skip_parts:
        show("N(0,1) on 1,682 x 32 values", noise(args.repeats), 1e6, "us")
        show("a DP-SGD step (ML-100k user 0, sigma 1)", steps(args.repeats), 1e6, "us")
    what = f"a Fig. 5 round, eps {args.epsilon:g}, after {args.warm} ({args.nodes} nodes)"
    show(what, rounds(args.warm, args.rounds, args.nodes, args.epsilon), 1, "s ")


if __name__ == "__main__":
    main()
