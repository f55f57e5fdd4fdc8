"""Paper 004's training in the simulator (``--preset 004``): clients evaluated under the FedAvg
server's coming global model, the early stop on the validation item, the popularity baseline,
and attribute inference read at the round the run reports."""

from __future__ import annotations

import numpy as np
import pytest

from learning import ncf
from p2pnode.config import PRESETS, ConfigError, RunConfig
from p2pnode.runners.sim import Simulation, simulate

_SMALL = {"nodes": 40, "seed": 3, "learning.ncf_dim": 8, "learning.ncf_hidden": 4}


def _config(**changes: object) -> RunConfig:
    return RunConfig().replace(**{**PRESETS["004"], **_SMALL, **changes}).validate()


def test_a_client_is_evaluated_under_the_global_model_the_server_makes_next() -> None:
    sim = Simulation(_config(rounds=3))
    sim.run_round()
    server = sim.host.nodes[40]
    coming = server.node.protocol.upcoming()
    assert coming is not None
    sim.run_round()  # the server's round timer takes the mean it promised
    taken = server.learner.snapshot()
    for name in (ncf.ITEM, ncf.W1, ncf.B2):
        np.testing.assert_array_equal(coming[name], taken[name])
    client = sim.host.nodes[0].learner
    view = client.under(coming)
    np.testing.assert_array_equal(view[ncf.ITEM], coming[ncf.ITEM])
    np.testing.assert_array_equal(view[ncf.USER], client.params[ncf.USER])  # its own row


def test_the_summary_is_the_best_validation_rounds_and_says_so() -> None:
    result = simulate(_config(rounds=12, stop_patience=2, **{"attack.kind": "aia"}))
    early = result["early_stop"]
    history = {h["round"]: h for h in result["history"]}
    best = early["best_round"]
    assert best is not None and result["round"] == best
    figure = [
        h["validation"]["hit_ratio_at_10"] + h["validation"]["hit_ratio_at_20"] for h in history.values()
    ]
    assert early["validation"] == pytest.approx(max(figure))
    assert result["hit_ratio_at_10"] == history[best]["hit_ratio_at_10"]
    if early["stopped"] is not None:  # patience ran out: two evaluations below the best
        assert early["stopped"] == best + 2 == result["rounds"]
    assert result["aia"]["server"]["chosen"]["round"] == best
    assert 0.0 < result["hit_ratio_at_10_popularity"] < 1.0
    assert all("hit_ratio_at_10_popularity" in h for h in result["history"])


def test_sgd_is_refused_outside_fedavg_and_the_early_stop_in_real_runs() -> None:
    with pytest.raises(ConfigError, match="FedAvg"):
        _config(protocol="base", **{"learning.eval_model": "own"})
    cfg = RunConfig().replace(**PRESETS["004-pard"]).validate()
    assert cfg.learning.defence == "pard" and cfg.learning.pard_warmup == 30 and cfg.stop_patience == 30
