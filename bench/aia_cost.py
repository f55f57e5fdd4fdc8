"""Attribute inference's cost in a simulated network: whole runs with and without it, side by side.

Same config and seed, run one after the other in this process: the honest run, then
``--attack aia`` (the omniscient observer; the FedAvg server too with ``--protocol fedavg``) at
each ``--every`` cadence (default 10, the default ``--aia-every``, and 1). Prints seconds per
round and each run's ratio to the honest one; the issue's goal is at most 1.10 at the default
cadence. The first attacked run also pays torch's and scikit-learn's one-time start (a few
seconds): over a short run it weighs more than the evaluations do.

    .venv/bin/python -m bench.aia_cost [--protocol base|fedavg] [--nodes 943] [--rounds 20] [--every 10,1]
"""

from __future__ import annotations

import argparse

from bench.whole_runs import print_ratios, seconds_per_round
from p2pnode.config import RunConfig
from p2pnode.runners.process import tune_process


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--protocol", default="base", choices=("base", "samo", "fedavg"))
    parser.add_argument("--nodes", type=int, default=943)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--every", default="10,1", help="the --aia-every cadences to run")
    args = parser.parse_args()
    tune_process()
    base = RunConfig(nodes=args.nodes, rounds=args.rounds, protocol=args.protocol, seed=1).replace(
        **{"learning.lr": 0.01}
    )
    runs = {"honest": base}
    for every in (int(x) for x in args.every.split(",")):
        runs[f"aia every {every}"] = base.replace(**{"attack.kind": "aia", "attack.aia_every": every})
    print_ratios(
        f"{args.protocol}, {args.nodes} nodes, {args.rounds} rounds",
        seconds_per_round(runs, args.rounds),
        "honest",
    )


if __name__ == "__main__":
    main()
