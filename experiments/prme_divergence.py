"""Which users' PRME training diverges at a learning rate, trained alone (REPRODUCTION.md finding 11).

PRME's step (learning/prme_numpy.py) sums a minibatch's pairwise-ranking gradients. Beyond
τ = 6 h since the previous check-in an example puts its whole weight on the preference space
(α = 0.2 only within τ), and there the user row X^P_u and the item rows pull on each other:
the user steps by the sum over up to 256 examples of its positives' and negatives' separations,
and the items move by a fraction of their distance to it. When that gain passes one, both grow
each epoch until they overflow. This trains each user's learner alone from θ_0 for ``--rounds``
local epochs (one a round, as a gossip node does, without merges) and prints, per learning rate,
how many users went non-finite, at which round, and how many transitions they have and what
share of their gaps exceed τ, beside the users who did not.

``--fedavg`` resets the item tables to θ_0 before each epoch, as a FedAvg client loads a global
model that moves little: the feedback between the user row and the items cannot build up then.

    .venv/bin/python experiments/prme_divergence.py --dataset FILE [--lrs 0.2,0.1,0.05] [--rounds 200]
    .venv/bin/python experiments/prme_divergence.py --dataset ml-100k --lrs 0.2
"""

from __future__ import annotations

import argparse
import statistics
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from learning import prme
from learning.prme_learner import PRMELearner
from p2pnode.config import RunConfig
from p2pnode.nodes.prepare import nodes_of_dataset, prepare
from p2pnode.runners.build import make_learner


@dataclass(frozen=True)
class Trained:
    user: int
    transitions: int
    beyond_tau: float  #: share of the user's gaps longer than τ
    diverged_at: int | None  #: the first round whose epoch left a non-finite value, if any


def train_alone(config: RunConfig, rounds: int, fedavg: bool) -> list[Trained]:
    prep = prepare(config)
    out = []
    for user in range(config.nodes):
        learner = make_learner(prep, user)
        assert isinstance(learner, PRMELearner)
        gaps = learner._gap
        at = None
        for r in range(rounds):
            if fedavg:
                for name in (prme.ITEM_P, prme.ITEM_S):
                    learner.params[name][...] = prep.init[name]
            learner.local_update()
            if not learner.finite():
                at = r + 1
                break
        beyond = float(np.mean(gaps > prme.TAU_SECONDS)) if len(gaps) else 0.0
        out.append(Trained(user, len(gaps), beyond, at))
    return out


def describe(rows: Sequence[Trained], lr: float) -> str:
    bad = [r for r in rows if r.diverged_at is not None]
    good = [r for r in rows if r.diverged_at is None]
    lines = [f"lr {lr:g}: {len(bad)} of {len(rows)} users diverged"]
    for name, group in (("diverged", bad), ("did not", good)):
        if group:
            n = [r.transitions for r in group]
            share = [r.beyond_tau for r in group]
            lines.append(
                f"  {name:<9} transitions median {statistics.median(n):.0f} (min {min(n)}, max {max(n)}); "
                f"gaps beyond τ median {100 * statistics.median(share):.0f}%"
            )
    if bad:
        when = [r.diverged_at or 0 for r in bad]
        lines.append(f"  first non-finite at round {min(when)} (median {statistics.median(when):.0f})")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="ml-100k", help="ml-100k or a check-in file (every user)")
    ap.add_argument("--lrs", default="0.2,0.1,0.05", help="PRME learning rates to try")
    ap.add_argument("--rounds", type=int, default=200, help="local epochs per user (one a round)")
    ap.add_argument("--fedavg", action="store_true", help="item tables back to θ_0 before each epoch")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    base = RunConfig(dataset=args.dataset, model="prme", seed=args.seed)
    base = nodes_of_dataset(base) if args.dataset not in ("ml-100k", "synthetic") else base
    for lr in (float(x) for x in args.lrs.split(",")):
        config = base.replace(**{"learning.prme_lr": lr})
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            rows = train_alone(config, args.rounds, args.fedavg)
        print(describe(rows, lr), flush=True)


if __name__ == "__main__":
    main()
