"""Why the FedAvg server's CIA lands *below* the random bound under DP-SGD (REPRODUCTION.md finding 7).

The server scores every user's update against every target (CIA paper §IV, Algorithm 1). This
runs FedAvg at full size, then measures, over the server's observer:

- the rank correlation (Spearman) between a user's score and the user's number of training
  interactions, per target (median over the targets);
- how far the true communities C lean towards heavy users (mean size, plain and weighted by
  how many communities a user belongs to);
- the accuracy of two attacks that read no model at all: rank users by size, largest first, or
  smallest first. A CIA whose scores say nothing but "small users score high" lands on the second.

    .venv/bin/python experiments/fedavg_score_bias.py [--epsilon 1000] [--rounds 30] [--nodes 943]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from adversary.community import accuracy
from adversary.node import AdversaryNode
from p2pnode.attacks.attack import lab_for
from p2pnode.config import RunConfig
from p2pnode.runners.process import tune_process
from p2pnode.runners.sim import Simulation


def spearman(a: npt.ArrayLike, b: npt.ArrayLike) -> float:
    """Rank correlation (ties broken by position; enough for a sign and a size)."""
    ra = np.argsort(np.argsort(np.asarray(a, dtype=np.float64))).astype(np.float64)
    rb = np.argsort(np.argsort(np.asarray(b, dtype=np.float64))).astype(np.float64)
    return float(np.corrcoef(ra, rb)[0, 1])


def by_size(order: npt.NDArray[np.int64], exclude: int, k: int) -> npt.NDArray[np.int64]:
    return np.array([u for u in order if u != exclude][:k], dtype=np.int64)


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--epsilon", type=float, default=None, help="DP-SGD ε per node (default: no noise)")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--nodes", type=int, default=943)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--k", type=int, default=50, help="community size K")
    args = ap.parse_args(argv)
    tune_process()
    settings: dict[str, object] = {"learning.lr": 0.01, "attack.kind": "cia", "attack.target_k": args.k}
    if args.epsilon is not None:
        settings["learning.dp_epsilon"] = args.epsilon
    config = RunConfig(nodes=args.nodes, rounds=args.rounds, protocol="fedavg", model="gmf", seed=args.seed)
    sim = Simulation(config.replace(**settings))
    lab = lab_for(sim.prep)
    for _ in range(args.rounds):
        sim.run_round()
    assert lab.plan is not None
    (spec,) = lab.plan.adversaries.values()
    server = sim.host.nodes[spec.node_id].node
    assert isinstance(server, AdversaryNode)
    obs = server.observer
    users = sorted(obs.scores)
    scores = np.array([obs.scores[u] for u in users])  # users × targets
    size = np.array([len(sim.prep.users[u].train_items) for u in users], dtype=np.float64)
    k = lab.plan.k
    membership = np.zeros(len(users))
    centred = scores - scores.mean(axis=1, keepdims=True)  # each user's offset removed
    cia, large, small, corr, fair, fair_corr = [], [], [], [], [], []
    largest_first = np.argsort(-size, kind="stable").astype(np.int64)
    smallest_first = largest_first[::-1].copy()
    for target, truth in spec.evaluated:
        membership[np.asarray(truth, dtype=np.int64)] += 1
        cia.append(accuracy(obs.predicted_ids(target), truth, k))
        large.append(accuracy(by_size(largest_first, target, k), truth, k))
        small.append(accuracy(by_size(smallest_first, target, k), truth, k))
        corr.append(spearman(scores[:, target], size))
        fair_corr.append(spearman(centred[:, target], size))
        col = centred[:, target].copy()
        col[[users.index(u) for u in spec.exclude[target]]] = -np.inf
        fair.append(
            accuracy(np.asarray(users, dtype=np.int64)[np.argsort(-col, kind="stable")[:k]], truth, k)
        )
    noise = "no noise" if args.epsilon is None else f"ε = {args.epsilon:g}"
    print(f"FedAvg GMF, {args.nodes} nodes, {args.rounds} rounds, {noise}, seed {args.seed}, K = {k}:")
    print(
        f"  CIA AAC at the last round                  {np.mean(cia):.3f}   random bound {k / args.nodes:.3f}"
    )
    print(f"  Spearman(score, training size), median     {np.median(corr):+.2f}")
    print(
        f"  mean training size: every user {size.mean():.0f}, "
        f"weighted by membership of C {np.average(size, weights=membership):.0f}"
    )
    print(
        f"  CIA with each user's mean score over all targets subtracted   {np.mean(fair):.3f}"
        f"   (Spearman with size, median {np.median(fair_corr):+.2f})"
    )
    print(
        f"  no model read, users ranked by size: largest first {np.mean(large):.3f}, "
        f"smallest first {np.mean(small):.3f}"
    )


if __name__ == "__main__":
    main()
