"""What membership inference adds to a simulated run, side by side: MPE alone, the calibrated
attack's reference model, the placed observers.

Same config and seed, run one after the other in this process (bench.whole_runs, setup included):
FedAvg GMF over ML-100k without any attack; with ``--mia`` (the omniscient MPE attack, pooled ROC,
and the FedAvg server's watch of every update: adversary/mia_observer.py); with ``--mia
--mia-reference 0.2`` (the reference GMF trained once before the first round on a fifth of the
users, then 1,000 population items a victim each MIA round: adversary/calibrated.py); and Base
GL without an attack against ``--mia --colluders 0.1`` (94 members each keeping the catalogue
scores of every model they receive). Prints seconds per round and each run's ratio to its
protocol's run without an attack. A first short run, untimed, loads the data and the kernels.

    .venv/bin/python -m bench.mia_cost [--nodes 943] [--rounds 5] [--eval-every 1]
"""

from __future__ import annotations

import argparse

from bench.whole_runs import print_ratios, seconds_per_round
from p2pnode.config import RunConfig
from p2pnode.runners.process import tune_process
from p2pnode.runners.sim import simulate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=943)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--eval-every", type=int, default=1, help="MIA runs at every evaluation")
    args = parser.parse_args()
    tune_process()
    fed = RunConfig(nodes=args.nodes, rounds=args.rounds, protocol="fedavg", model="gmf", seed=0).replace(
        **{"learning.lr": 0.01, "eval_every": args.eval_every, "attack.kind": ""}
    )
    mia = {"attack.mia": True}
    base = fed.replace(protocol="base", sampling="peerswap")
    for warm in (fed, base):  # data and kernels loaded, untimed
        simulate(warm.replace(rounds=1, nodes=min(args.nodes, 100)).validate())
    runs = {
        "FedAvg, no attack": fed,
        "FedAvg, --mia": fed.replace(**mia),
        "FedAvg, --mia, reference 0.2": fed.replace(**mia, **{"attack.mia_reference": 0.2}),
    }
    seconds = seconds_per_round(runs, args.rounds)
    title = f"FedAvg GMF, {args.nodes} clients, {args.rounds} rounds, MIA every {args.eval_every}"
    print_ratios(title, seconds, "FedAvg, no attack")
    gossip = {
        "Base GL, no attack": base,
        "Base GL, --mia": base.replace(**mia),
        "Base GL, --mia, 10% colluders": base.replace(**mia, **{"attack.colluders": 0.1}),
    }
    seconds = seconds_per_round(gossip, args.rounds)
    print_ratios(title.replace("FedAvg GMF", "Base GL GMF"), seconds, "Base GL, no attack")


if __name__ == "__main__":
    main()
