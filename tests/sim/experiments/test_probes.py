"""The probe scripts of experiments/ run and measure."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from p2pnode.config import RunConfig


def test_the_dp_gradient_norm_probe_runs_and_measures(capsys: pytest.CaptureFixture[str]) -> None:
    """experiments/dp_gradient_norms.py (REPRODUCTION finding 7) at a tiny size."""
    import runpy

    script = Path(__file__).resolve().parents[3] / "experiments" / "dp_gradient_norms.py"
    main = runpy.run_path(str(script))["main"]
    main(["--users", "2", "--epochs", "1", "--nodes", "30", "--budgets", "1000:60"])
    out = capsys.readouterr().out
    assert out.count("examples of 2 users") == 2
    # at θ_0 every example's gradient is the bias term's 0.5: σ(0·…) − y = ±0.5 (up to the
    # tiny item and user parts), which is what the finding's argument rests on
    first = out.split("after")[0]
    assert "median 5.00e-01" in first and "clipped at C = 2.0: 0.0%" in first
    assert "σC = 0.325" in out  # ε = 1000 over 60 steps at q = 0.5, Opacus' calibration


def test_the_fedavg_score_bias_probe_runs_and_measures(capsys: pytest.CaptureFixture[str]) -> None:
    """experiments/fedavg_score_bias.py (REPRODUCTION finding 7) at a tiny size."""
    import re
    import runpy

    script = Path(__file__).resolve().parents[3] / "experiments" / "fedavg_score_bias.py"
    namespace = runpy.run_path(str(script))
    spearman = namespace["spearman"]
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    namespace["main"](["--nodes", "40", "--rounds", "2", "--k", "5"])
    out = capsys.readouterr().out
    assert "40 nodes, 2 rounds, no noise" in out
    rho = float(re.search(r"median\s+([+-][0-9.]+)", out).group(1))  # type: ignore[union-attr]
    assert -1.0 <= rho <= 1.0
    sizes = re.search(r"every user (\d+), weighted by membership of C (\d+)", out)
    assert sizes is not None
    # the true communities lean towards heavy users: the data's fact the finding rests on
    assert int(sizes.group(2)) > int(sizes.group(1))
    ranked = re.search(r"largest first ([0-9.]+), smallest first ([0-9.]+)", out)
    assert ranked is not None and float(ranked.group(1)) > float(ranked.group(2))


def test_the_short_prediction_probe_runs_and_caps_accuracy(capsys: pytest.CaptureFixture[str]) -> None:
    """experiments/fedavg_short_prediction.py (REPRODUCTION finding 2, Table VII) at a tiny size."""
    import re
    import runpy

    script = Path(__file__).resolve().parents[3] / "experiments" / "fedavg_short_prediction.py"
    namespace = runpy.run_path(str(script))
    assert namespace["short_accuracy"]([1, 2, 3], [2, 3, 4, 5], 4) == 0.5
    namespace["main"](["--nodes", "40", "--rounds", "2", "--k", "10", "--predict", "5", "--fictive-user"])
    out = capsys.readouterr().out
    found = re.search(r"Max AAC over rounds: 10 predicted ([0-9.]+), 5 predicted ([0-9.]+)", out)
    assert found is not None
    full, short = float(found.group(1)), float(found.group(2))
    # five predictions can match at most five of ten members, and never more than ten predictions do
    assert short <= 0.5 and short <= full
    assert out.count("  round ") == 2
    with pytest.raises(SystemExit):
        namespace["main"](["--k", "10", "--predict", "11"])


def test_the_prme_divergence_probe_tells_users_who_overflow_from_those_who_do_not() -> None:
    """experiments/prme_divergence.py (REPRODUCTION finding 11): a step far too large overflows
    every user within a few rounds and is counted; a small one overflows none."""
    from experiments.prme_divergence import describe, train_alone

    config = RunConfig(nodes=6, dataset="ml-100k", model="prme", seed=0)
    with np.errstate(all="ignore"):
        wild = train_alone(config.replace(**{"learning.prme_lr": 1e8}), rounds=5, fedavg=False)
        calm = train_alone(config.replace(**{"learning.prme_lr": 0.05}), rounds=5, fedavg=False)
    assert all(t.diverged_at is not None and 1 <= t.diverged_at <= 5 for t in wild)
    assert all(t.diverged_at is None for t in calm) and calm[0].transitions > 0
    assert describe(wild, 1e8).startswith("lr 1e+08: 6 of 6 users diverged")
    assert describe(calm, 0.05).startswith("lr 0.05: 0 of 6 users diverged")
