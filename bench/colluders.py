"""Cost of a colluder run (CIA paper Table IV) before and after forwarders, side by side.

Two children run the same 943-node Rand-Gossip network with ``--colluders`` of the nodes in each
of ``--groups`` colluding groups, one after the other, each in its own process so that its peak
RSS is its own:

- ``every``: every colluder keeps its own observer and multicasts each observation to every
  partner (Algorithm 2 line 14 as written; how Tables IV-VI ran before forwarders, ``--multicast
  v``);
- ``forward``: the group's first member is the only observer (the only one whose accuracy is
  read); the others forward each received Θ_u to it and keep no attack state (``--multicast
  theta``, the default).

Each child prints its setup time, seconds per round, peak RSS, multicast frames per round and
the observer state it holds; the parent prints both and the ratios. ``--modes forward --rounds
100`` measures the peak of a whole run.

    .venv/bin/python -m bench.colluders [--nodes 943] [--rounds 8] [--colluders 0.2] [--groups 4]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from typing import Any

from p2pnode.attacks.attack import lab_for
from p2pnode.config import RunConfig
from p2pnode.runners.process import tune_process
from p2pnode.runners.sim import Simulation

MODES = {"every": "v", "forward": "theta"}  #: bench mode -> --multicast


def config_for(mode: str, args: argparse.Namespace) -> RunConfig:
    return RunConfig(nodes=args.nodes, rounds=args.rounds, seed=args.seed).replace(
        **{
            "learning.lr": 0.01,
            "attack.kind": "cia",
            "attack.target_k": 50,
            "attack.colluders": args.colluders,
            "attack.colluder_groups": args.groups,
            "attack.multicast": MODES[mode],
            "attack.momentum_estimator": args.estimator,
        }
    )


def child(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    tune_process()
    t0 = time.perf_counter()
    sim = Simulation(config_for(mode, args))
    lab = lab_for(sim.prep)
    setup = time.perf_counter() - t0
    rounds: list[float] = []
    for r in range(1, args.rounds + 1):
        t = time.perf_counter()
        sim.run_round()
        lab.evaluate(r, sim.host.nodes.values())
        rounds.append(time.perf_counter() - t)
    observers = pairs = held = 0
    for runtime in sim.host.nodes.values():
        obs = getattr(runtime.node, "observer", None)
        if obs is not None:
            observers += 1
            pairs += len(obs.v)
            held += sum(int(b.nbytes) for b in obs._buf.values())
    frames = sum(rt.counters.multicasts_sent for rt in sim.host.nodes.values())
    return {
        "mode": mode,
        "setup_s": setup,
        "round_s": sum(rounds) / len(rounds),
        "last_round_s": rounds[-1],
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "observers": observers,
        "pairs": pairs,
        "observer_mib": held / 2**20,
        "frames_per_round": frames / args.rounds,
        "aac": lab.accuracies[-1],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=943)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--colluders", type=float, default=0.2, help="share of nodes per group")
    ap.add_argument("--groups", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--estimator", default="debiased", help="momentum estimator (both modes)")
    ap.add_argument("--modes", default="every,forward", help="which children to run, in order")
    ap.add_argument("--child", choices=sorted(MODES))
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.child, args)))
        return
    rows = []
    for mode in [m.strip() for m in args.modes.split(",") if m.strip()]:
        cmd = [sys.executable, "-m", "bench.colluders", "--child", mode]
        for flag in ("nodes", "rounds", "colluders", "groups", "seed", "estimator"):
            cmd += [f"--{flag}", str(getattr(args, flag))]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
    print(
        f"{args.nodes} nodes, {args.groups} groups of {args.colluders:.0%} colluders, {args.rounds} rounds, "
        f"estimator {args.estimator}; one process per mode"
    )
    print(
        f"{'mode':8s} {'setup s':>8s} {'s/round':>8s} {'last s':>7s} {'peak GiB':>9s} "
        f"{'observers':>9s} {'v_u pairs':>9s} {'obs MiB':>8s} {'frames/round':>12s}"
    )
    for r in rows:
        print(
            f"{r['mode']:8s} {r['setup_s']:8.1f} {r['round_s']:8.2f} {r['last_round_s']:7.2f} "
            f"{r['peak_rss_mib'] / 1024:9.2f} {r['observers']:9d} {r['pairs']:9d} "
            f"{r['observer_mib']:8.1f} {r['frames_per_round']:12.0f}"
        )
    by = {r["mode"]: r for r in rows}
    if {"every", "forward"} <= by.keys():
        e, f = by["every"], by["forward"]
        print(
            f"forward / every: time per round {f['round_s'] / e['round_s']:.2f}x, "
            f"peak RSS {f['peak_rss_mib'] / e['peak_rss_mib']:.2f}x, "
            f"multicast frames {f['frames_per_round'] / max(e['frames_per_round'], 1):.4f}x"
        )
        print(f"read observers' accuracy, last round: every {e['aac']}, forward {f['aac']}")


if __name__ == "__main__":
    main()
