"""The fused PRME epoch (learning/prme_fused.py) against the numpy steps it compiles."""

from __future__ import annotations

import numpy as np
import pytest

from learning import prme
from learning.prme_fused import FusedPRME
from learning.prme_numpy import NumpyPRME


def transitions(seed: int, n: int = 41, items: int = 30) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    prev = rng.integers(0, items, n)
    pos = rng.integers(0, items, n)
    pos[:3] = prev[:3]  # l = l_c: one row touched twice by one example
    neg = rng.integers(0, items, n)
    gap = np.where(rng.random(n) < 0.5, rng.uniform(0, prme.TAU_SECONDS, n), 1e6)  # within τ and beyond
    return prev, pos, neg, gap, rng.permutation(n)


@pytest.mark.parametrize("tau", [0.0, 0.05])
def test_a_fused_epoch_is_the_numpy_steps_to_float32_precision(tau: float) -> None:
    prev, pos, neg, gap, order = transitions(1)
    init = prme.init_params(30, 8, seed=3)
    for p in init.values():
        p *= 10  # away from zero, so that relative differences mean something
    plain = NumpyPRME({k: v.copy() for k, v in init.items()}, lr=0.2)
    fused = FusedPRME({k: v.copy() for k, v in init.items()}, lr=0.2, reg=plain.reg)
    before = (init[prme.ITEM_P].copy(), init[prme.ITEM_S].copy())
    loss = 0.0
    batch = 7
    for start in range(0, len(order), batch):
        sel = order[start : start + batch]
        anchor = (before[0][pos[sel]], before[1][pos[sel]]) if tau else None
        loss += plain.step(prev[sel], pos[sel], neg[sel], gap[sel], anchor, tau)
    anchors = before if tau else None
    steps, fused_loss, finite = fused.epoch(prev, pos, neg, prme.weights(gap), order, batch, anchors, tau)
    assert steps == 6 and finite
    assert fused_loss == pytest.approx(loss, rel=1e-5)
    for name in init:
        moved = np.abs(plain.params[name] - init[name]).max()
        assert moved > 0.01  # the epoch did train
        np.testing.assert_allclose(fused.params[name], plain.params[name], rtol=2e-5, atol=2e-5 * moved)


def test_a_fused_epoch_that_overflows_says_so() -> None:
    prev, pos, neg, gap, order = transitions(2)
    params = prme.init_params(30, 8, seed=3)
    for p in params.values():
        p *= 1e18
    steps, _, finite = FusedPRME(params, lr=1e20, reg=0.03).epoch(prev, pos, neg, prme.weights(gap), order, 7)
    assert steps == 6 and not finite
    assert not all(np.isfinite(p).all() for p in params.values())


@pytest.mark.parametrize("tau", [0.0, 0.05])
def test_a_learner_on_the_fused_path_draws_and_trains_as_on_the_numpy_path(tau: float) -> None:
    """``--prme-backend fused``: the same negatives and batches (the same calls on the node's
    generator), the same model to float32 precision after several updates, the same loss; a
    recovery after a non-finite update restores the model before it exactly."""
    from learning.prme_learner import PRMEConfig, PRMELearner
    from learning.split import leave_one_out
    from tests.unit.learning.test_learning import toy

    users = leave_one_out(toy(), seed=0)
    init = prme.init_params(toy().n_items, 16, seed=0)
    learners = [
        PRMELearner(users[0], init, PRMEConfig(dim=16, lr=0.1, batch_size=4, share_less_tau=tau, backend=b),
                    np.random.default_rng(0))
        for b in ("numpy", "fused")
    ]  # fmt: skip
    for _ in range(5):
        for learner in learners:
            learner.local_update()
            assert learner.finite()
    plain, fused = learners
    assert fused.last_loss == pytest.approx(plain.last_loss, rel=1e-4)
    assert plain.rng.integers(2**62) == fused.rng.integers(2**62)  # the same draws were made
    for name in init:
        np.testing.assert_allclose(fused.params[name], plain.params[name], rtol=1e-4, atol=1e-6)
    good = {k: v.copy() for k, v in fused.params.items()}
    fused._fused.lr = 1e30  # type: ignore[union-attr]  # the next update overflows
    fused.local_update()
    assert not fused.finite()
    fused.recover()
    for name in init:
        assert np.array_equal(fused.params[name], good[name])
    with pytest.raises(ValueError, match="unknown PRME training backend"):
        PRMELearner(users[0], init, PRMEConfig(backend="torch"), np.random.default_rng(0))
