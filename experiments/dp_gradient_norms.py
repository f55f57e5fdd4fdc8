"""How large a GMF example's gradient is, next to the DP-SGD noise σC (REPRODUCTION.md finding 7).

DP-SGD (CIA paper §III-E) clips each example's gradient to norm C and adds N(0, σ²C²) to every
coordinate of the summed gradient. Whether the noise drowns the signal depends on how the
gradients compare with C: this prints, for the first ``--users`` ML-100k users, the per-example
gradient norm, the share of it that is the bias term ∂b, and the RMS of a coordinate of the
example's item row, at the shared θ_0 and after ``--epochs`` plain local epochs of that user.

    .venv/bin/python experiments/dp_gradient_norms.py [--users 50] [--epochs 20] [--clip 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Sequence

import numpy as np

from learning import gmf
from learning.dp import calibrate_noise
from learning.gmf_numpy import NumpyGMF
from learning.learner import GMFLearner
from p2pnode.config import LearningConfig, RunConfig
from p2pnode.nodes.prepare import prepare
from p2pnode.runners.build import make_learner


def example_gradients(learner: GMFLearner) -> tuple[list[float], list[float], list[float]]:
    """For one epoch's examples: ‖∇ℓ_i‖, |∂b| / ‖∇ℓ_i‖ and the RMS of a coordinate of ∂q_i."""
    backend = learner._backend
    assert isinstance(backend, NumpyGMF)
    norms, bias_share, item_rms = [], [], []
    for idx, y in learner.batches():
        for i in range(len(idx)):
            one = backend.clipped_sum(idx[i : i + 1], y[i : i + 1], math.inf)
            row = one[gmf.ITEM][idx[i]]
            total = math.sqrt(sum(float((g * g).sum()) for g in one.values()))
            norms.append(total)
            bias_share.append(abs(float(one[gmf.B][0])) / total if total else 0.0)
            item_rms.append(float(np.sqrt((row * row).mean())))
    return norms, bias_share, item_rms


def describe(name: str, values: Sequence[float]) -> str:
    q = np.percentile(values, [10, 50, 90])
    return f"{name:<34} p10 {q[0]:.2e}   median {q[1]:.2e}   p90 {q[2]:.2e}"


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", type=int, default=50, help="how many ML-100k users (the first ones)")
    ap.add_argument("--epochs", type=int, default=20, help="plain local epochs before the second look")
    ap.add_argument("--clip", type=float, default=2.0, help="the clipping bound C to compare with")
    ap.add_argument("--nodes", type=int, default=943, help="users loaded (the split depends on it)")
    ap.add_argument(
        "--budgets",
        default="1000:60,1000:800,100:60,10:60",
        help="ε:steps pairs whose calibrated noise to print (q = 0.5; a few seconds each)",
    )
    args = ap.parse_args(argv)
    try:
        budgets = [(float(e), int(n)) for e, n in (b.split(":") for b in args.budgets.split(","))]
    except ValueError:
        ap.error(f"--budgets {args.budgets!r}: give EPS:STEPS pairs separated by commas, e.g. 1000:60")
    config = RunConfig(nodes=args.nodes, learning=dataclasses.replace(LearningConfig(), lr=0.01))
    prep = prepare(config)
    learners = [make_learner(prep, u) for u in range(min(args.users, args.nodes))]
    for when in ("θ_0", f"after {args.epochs} local epochs"):
        if when != "θ_0":
            for learner in learners:
                for _ in range(args.epochs):
                    learner.local_update()
        norms, shares, rms = [], [], []
        for learner in learners:
            assert isinstance(learner, GMFLearner)
            n, s, r = example_gradients(learner)
            norms += n
            shares += s
            rms += r
        print(f"{len(norms)} examples of {len(learners)} users, {when}:")
        print("  " + describe("‖∇ℓ_i‖ (unclipped)", norms))
        print("  " + describe("|∂b| / ‖∇ℓ_i‖", shares))
        print("  " + describe("RMS of a coordinate of ∂q_i", rms))
        print(f"  clipped at C = {args.clip}: {np.mean(np.asarray(norms) > args.clip):.1%} of examples")
    for eps, steps in budgets:
        sigma = calibrate_noise(eps, 1e-6, 0.5, steps)
        print(
            f"noise a coordinate, ε = {eps:g} over {steps} steps at q = 0.5: "
            f"σ = {sigma:.3f}, σC = {sigma * args.clip:.3f}"
        )


if __name__ == "__main__":
    main()
