"""The CIA's fictive user e_A, the numpy and the fused backends side by side (an
`fl-probes` fictive-user round at most 0.3x today's).

``fl-probes``' "GMF, fictive user e_A" run (943 FedAvg clients, ML-100k, the server observing with
a fictive user per target, K = 50: 943 targets of 50 items, e_A retrained every round), built once
per backend, ``--warm`` rounds, then ``--rounds`` rounds timed one after the other, alternating
backends; each round's time split into the e_A refresh and the rest. Share-less runs (Table VII,
fig3's FL rows, the colluder probes that score with e_A) run the same two calls.

    .venv/bin/python -m bench.fictive_user [--warm 1] [--rounds 3] [--nodes 943]
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # as experiments/reproduce.sh runs simulations
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import statistics
import time

import torch

from adversary import fictive_fused
from adversary.cia import CIAObserver
from p2pnode.config import RunConfig
from p2pnode.runners.sim import Simulation

BACKENDS = ("numpy", "fused")


def config(backend: str, nodes: int) -> RunConfig:
    return RunConfig(nodes=nodes, rounds=30, seed=0, protocol="fedavg").replace(
        **{
            "learning.lr": 0.01,
            "attack.kind": "cia",
            "attack.target_k": 50,
            "attack.fictive_user": True,
            "attack.fictive_backend": backend,
        }
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--warm", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--nodes", type=int, default=943)
    args = ap.parse_args()
    torch.set_num_threads(1)
    fictive_fused.warm()
    refresh = {b: 0.0 for b in BACKENDS}
    timing = {"b": BACKENDS[0]}
    original = CIAObserver.set_reference

    def timed_reference(self: CIAObserver, *a: object, **k: object) -> None:
        t0 = time.perf_counter()
        original(self, *a, **k)  # type: ignore[arg-type]
        refresh[timing["b"]] += time.perf_counter() - t0

    CIAObserver.set_reference = timed_reference  # type: ignore[method-assign]
    sims = {b: Simulation(config(b, args.nodes)) for b in BACKENDS}
    for b, sim in sims.items():
        timing["b"] = b
        for _ in range(args.warm):
            sim.run_round()
    rounds: dict[str, list[float]] = {b: [] for b in BACKENDS}
    refreshes: dict[str, list[float]] = {b: [] for b in BACKENDS}
    for _ in range(args.rounds):
        for b, sim in sims.items():
            timing["b"] = b
            before = refresh[b]
            t0 = time.perf_counter()
            sim.run_round()
            rounds[b].append(time.perf_counter() - t0)
            refreshes[b].append(refresh[b] - before)
    base = statistics.median(rounds["numpy"])
    for b in BACKENDS:
        med, ref = statistics.median(rounds[b]), statistics.median(refreshes[b])
        print(
            f"an fl-probes fictive-user round ({args.nodes} clients)  {b:<6} median {med:7.3f} s "
            f"(e_A refresh {ref:6.3f} s, the rest {med - ref:6.3f} s; {len(rounds[b])} timed)  "
            f"x{med / base:.2f} of numpy"
        )


if __name__ == "__main__":
    main()
