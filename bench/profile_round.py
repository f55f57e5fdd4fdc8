"""Where a simulated round's time goes: cProfile over a few rounds of 943 ML-100k nodes, after
warm-up rounds, sorted by each function's own time (this profile is wanted before and
after the simulator work).

    .venv/bin/python -m bench.profile_round [--nodes 943] [--rounds 3] [--protocol base]
        [--model gmf|prme] [--attack] [--set KEY=VALUE]... [--top 25]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

from p2pnode.config import RunConfig
from p2pnode.runners.process import tune_process
from p2pnode.runners.sim import Simulation


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=943)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--protocol", default="base")
    parser.add_argument("--model", default="gmf", choices=("gmf", "prme"))
    parser.add_argument("--attack", action="store_true", help="every node a CIA adversary (Table III)")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="a config change, as experiments take"
    )
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args(argv)
    tune_process()  # one torch thread, as experiments run
    rounds = args.warmup + args.rounds
    config = RunConfig(nodes=args.nodes, rounds=rounds, protocol=args.protocol, model=args.model)
    if args.model == "prme":
        config = config.replace(**{"learning.prme_lr": 0.2})  # table3's PRME setting
    if args.attack:
        config = config.replace(**{"attack.kind": "cia", "attack.attackers": "all"})
    if args.set:
        from bench.revisions import parse_sets

        config = config.replace(**parse_sets(args.set))
    sim = Simulation(config)
    for _ in range(args.warmup):
        sim.run_round()
    profile = cProfile.Profile()
    t0 = time.perf_counter()
    profile.enable()
    for _ in range(args.rounds):
        sim.run_round()
    profile.disable()
    wall = (time.perf_counter() - t0) / args.rounds
    out = io.StringIO()
    pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(args.top)
    what = f"{args.nodes} nodes, {args.protocol}" + (", CIA everywhere" if args.attack else "")
    print(
        f"{what}: {wall:.3f} s a round under the profiler ({args.rounds} rounds after {args.warmup} warm-up)"
    )
    print(out.getvalue())


if __name__ == "__main__":
    main()
