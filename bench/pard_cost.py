"""PARD's cost in a simulated FedAvg round: whole runs with and without the privacy terms, side by side.

Same config and seed, run one after the other in this process: FedNCF with the head kept home
(004's PFedRec-like backbone that PARD builds on), then ``--defence pard`` at its defaults and at
each ``--sample`` share of D_pub an estimator step reads (004's code: 0.08) and each ``--every``
(the estimators fitted at every local update, Algorithm 1, or every second, 004's code), and once
with the estimators in numpy calls (``--backend numpy``: the code before learning/pard_fused.py).
Also PARD's own model with both terms at λ 0: the same round without the privacy terms (no
estimator fitted, no term's gradient). Prints seconds per round and each run's ratio to the
plain one and to PARD at λ 0; the goal is at most 3x the round without the privacy terms. The
first rounds of a PARD run have a small D_pub (the public clients publish after their first
update). The compiled kernels are loaded (or compiled) before any run is timed.

``--training 004`` times the same runs under 004's training (``--preset 004``'s SGD in three
rate groups, 5 negatives, 99 test negatives, every client evaluated under the global model; PARD
as ``--preset 004-pard`` fine-tunes it, at lr 0.1 and η 1, its warm-up left out so that every
timed round has the privacy terms; no early stop: every run times the same rounds).

    .venv/bin/python -m bench.pard_cost [--nodes 943] [--rounds 4] [--sample 0.08,1] [--every 1,2]
        [--training adam|004]
"""

from __future__ import annotations

import argparse

from bench.whole_runs import print_ratios, seconds_per_round
from learning import pard
from p2pnode.config import FEDNCF_004, PARD_004, RunConfig
from p2pnode.runners.process import tune_process


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=943)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--sample", default="0.08", help="the public_sample shares to run")
    parser.add_argument(
        "--every", default="1,2", help="the estimator_every settings to run (Algorithm 1: 1; 004's code: 2)"
    )
    parser.add_argument("--training", choices=("adam", "004"), default="adam", help="p2pnode's or 004's")
    args = parser.parse_args()
    tune_process()
    pard.warm()
    base = RunConfig(nodes=args.nodes, rounds=args.rounds, protocol="fedavg", model="ncf", seed=1).replace(
        **{"learning.lr": 0.01, "learning.local_head": True, "learning.personal_user": True}
    )
    pard_on: dict[str, object] = {"learning.defence": "pard"}
    if args.training == "004":
        timed = {k: v for k, v in FEDNCF_004.items() if k not in ("rounds", "stop_patience")}
        base = base.replace(**timed)
        fine = {k: v for k, v in PARD_004.items() if k not in ("rounds", "stop_patience")}
        pard_on = {
            **fine,
            "learning.pard_warmup": 0,
            "learning.pard_warmup_lr": 0.0,
            "learning.pard_warmup_lr_eta": 0.0,
        }
    runs = {"plain": base}
    #: PARD's own model (two user rows, its learner) with both terms weighing nothing: the same
    #: round without the privacy terms, which fit no estimator and take no term's gradient
    runs["pard, no privacy terms (λ 0)"] = base.replace(
        **{**pard_on, "learning.pard_lambda_ir": 0.0, "learning.pard_lambda_re": 0.0}
    )
    for share in (float(x) for x in args.sample.split(",")):
        for every in (int(x) for x in args.every.split(",")):
            runs[f"pard, D_pub x{share:g}, estimators every {every}"] = base.replace(
                **{
                    **pard_on,
                    "learning.pard_public_sample": share,
                    "learning.pard_estimator_every": every,
                }
            )
    #: the code before the compiled estimators (learning/pard_fused.py): the same run in numpy calls
    runs["pard, numpy estimators (before)"] = base.replace(**{**pard_on, "learning.backend": "numpy"})
    seconds = seconds_per_round(runs, args.rounds)
    title = f"FedAvg NCF ({args.training} training), {args.nodes} clients, {args.rounds} rounds"
    print_ratios(title, seconds, "plain")
    print_ratios(title, seconds, "pard, no privacy terms (λ 0)")


if __name__ == "__main__":
    main()
