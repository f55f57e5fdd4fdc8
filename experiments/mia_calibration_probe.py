"""What the calibrated membership attack's parts do on ML-100k (finding 23's probe).

    python experiments/mia_calibration_probe.py [--nodes 200] [--rounds 20] [--seed 0]

Runs one FedAvg simulation with ``--mia --mia-holdout 10 --mia-reference 0.2`` three times, the
calibrated attack's reference swapped each time: ``rmia`` (as built: Pr(x) from the reference GMF,
z drawn from the reference users' interactions), ``no-item-calibration`` (Pr(x) the same for every
item: only the comparison with z of the same model) and ``popularity`` (Pr(x) the items' counts in
the reference data). Prints the pooled MPE's and the calibrated attack's AUC and TPR at low FPR.
"""

from __future__ import annotations

import argparse

import numpy as np

import p2pnode.attacks.attack as attack
from adversary.evaluation import Reference
from p2pnode.config import RunConfig
from p2pnode.runners.sim import simulate


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    built = attack.reference_for
    for mode in ("rmia", "no-item-calibration", "popularity"):

        def swapped(prep: object, mode: str = mode) -> Reference:
            ref = built(prep)  # type: ignore[arg-type]
            if mode == "no-item-calibration":
                return Reference(np.full_like(ref.likelihood, 0.5), ref.users, ref.pool, seed=ref.seed)
            if mode == "popularity":
                counts = np.bincount(ref.pool, minlength=len(ref.likelihood)) + 1.0
                return Reference(counts / counts.max(), ref.users, ref.pool, seed=ref.seed)
            return ref

        attack.reference_for = swapped  # type: ignore[assignment]
        cfg = RunConfig(nodes=args.nodes, rounds=args.rounds, seed=args.seed, protocol="fedavg").replace(
            **{"learning.lr": 0.01, "attack.mia": True, "attack.mia_holdout": 10, "attack.mia_reference": 0.2}
        )
        mia = simulate(cfg)["mia"]
        for name in ("pooled", "calibrated"):
            tprs = ", ".join(f"{k} {100 * v[-1]:.2f}%" for k, v in mia[name]["tpr_at_fpr"].items())
            print(f"{mode:20s} {name:10s} AUC {mia[name]['auc'][-1]:.3f}; TPR at FPR {tprs}")
    attack.reference_for = built


if __name__ == "__main__":
    main()
