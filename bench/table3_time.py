"""How long one ``table3`` GMF run takes, against a 10-minute budget.

Runs the "Rand-Gossip GMF" row of ``experiments/table3.toml`` exactly as ``p2pnode experiment
table3`` does (943 nodes, every node an adversary, CIA evaluated every round), in the simulator,
and with ``--real`` also over real HTTP processes on this machine (``p2pnode launch``), and prints
the wall times side by side with the ratio to the budget.

    .venv/bin/python -m bench.table3_time [--rounds R] [--real] [--processes 2]
"""

from __future__ import annotations

import argparse
import time

from p2plab import experiment as ex
from p2pnode.runners.process import tune_process

BUDGET_S = 600.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, help="override the experiment's rounds")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--real", action="store_true", help="also time the same run over real HTTP")
    ap.add_argument("--processes", type=int, default=2)
    args = ap.parse_args()
    tune_process()
    exp = ex.load("table3")
    row = next(r for r in exp.rows if r.label == "Rand-Gossip GMF")
    overrides = {"rounds": args.rounds} if args.rounds else {}
    config = exp.config(row, args.seed, overrides)
    print(f"table3 'Rand-Gossip GMF': {config.nodes} nodes, {config.rounds} rounds, seed {config.seed}")
    modes: list[tuple[str, ex.Runner]] = [("simulator", ex.simulator)]
    if args.real:
        modes.append((f"real HTTP ({args.processes} processes)", ex.real_network(args.processes)))
    for name, runner in modes:
        t0 = time.perf_counter()
        result = runner(config, None)
        wall = time.perf_counter() - t0
        cia = result["cia"]
        print(
            f"{name:28s} {wall:7.1f} s  = {wall / BUDGET_S:.2f} x the 600 s budget  "
            f"(Max AAC {100 * cia['max_aac']:.1f}%, bound {100 * cia['upper_bound']:.1f}%, "
            f"HR@20 {result['hit_ratio_at_20']:.3f})"
        )


if __name__ == "__main__":
    main()
