"""The fused GMF DP-SGD step (learning/gmf_dp_fused.py) against the numpy step it compiles."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from learning import gmf, gmf_dp_fused
from learning.dp import DPConfig, PrivateStepper
from learning.gmf_numpy import NumpyGMF
from learning.learner import GMFLearner, TrainConfig
from learning.split import leave_one_out
from learning.synthetic import SyntheticConfig, planted_communities

N_ITEMS, DIM = 60, 8


def pair(sigma: float, clip: float = 0.5) -> tuple[NumpyGMF, NumpyGMF, PrivateStepper, PrivateStepper]:
    params = gmf.init_params(N_ITEMS, DIM, seed=2)
    for p in params.values():
        p *= 5  # gradients large enough that the clip binds for some examples
    steppers = [PrivateStepper(DPConfig(noise_multiplier=sigma, clip=clip, backend="fused"), 40, 16, 7)]
    steppers.append(PrivateStepper(DPConfig(noise_multiplier=sigma, clip=clip, backend="fused"), 40, 16, 7))
    a, b = (NumpyGMF({k: v.copy() for k, v in params.items()}, 0.01, False) for _ in range(2))
    return a, b, steppers[0], steppers[1]


@pytest.mark.parametrize(("sigma", "share_less"), [(0.8, False), (0.8, True), (0.0, True)])
def test_a_fused_step_is_the_numpy_step_on_the_same_noise(sigma: float, share_less: bool) -> None:
    plain, fused, s_plain, s_fused = pair(sigma)
    init = {k: v.copy() for k, v in plain.params.items()}
    rng = np.random.default_rng(3)
    for step in range(12):
        n = 0 if step == 5 else 16  # an empty Poisson batch: noise (and Adam) alone
        idx = rng.integers(0, N_ITEMS, n)
        idx[:4] = idx[4] if n else idx[:4]  # one row several times in a batch
        y = (rng.random(n) < 0.4).astype(np.float32)
        anchor = plain.params[gmf.ITEM][idx] + 0.05 if share_less else None
        plain.dp_step(idx, y, s_plain, anchor, 0.1 * 16)
        gmf_dp_fused.dp_step(fused, idx, y, s_fused, None if anchor is None else anchor.copy(), 0.1 * 16)
    assert s_plain.noise.state() == s_fused.noise.state()  # the same draws, in the same order
    assert s_plain.accountant.steps == s_fused.accountant.steps == 12
    for name in gmf.PARAM_NAMES:
        moved = np.abs(plain.params[name] - init[name]).max()
        assert moved > 0.01, name  # the steps did train
        np.testing.assert_allclose(fused.params[name], plain.params[name], rtol=1e-5, atol=1e-5 * moved)
        np.testing.assert_allclose(fused.moments[name].v, plain.moments[name].v, rtol=1e-4, atol=1e-12)
        assert fused.moments[name].step == plain.moments[name].step == 12


def test_the_fused_step_clips_each_example_to_the_bound() -> None:
    """One example with a huge gradient moves the model no more than a clipped one may: with σ = 0
    and a 1-example batch, the clipped gradient's norm is at most C (checked through Adam's first
    moment: m = (1 − β₁) g / expected batch after one step)."""
    _, fused, _, stepper = pair(0.0, clip=0.5)
    p = fused.params
    p[gmf.ITEM][3] *= 1e4
    logit = (p[gmf.ITEM][3] * p[gmf.USER][0]) @ p[gmf.H] + p[gmf.B][0]
    wrong = np.array([1.0 if logit < 0 else 0.0], np.float32)  # a label the model gets wholly wrong
    gmf_dp_fused.dp_step(fused, np.array([3]), wrong, stepper)
    g = np.concatenate([st.m.reshape(-1) for st in fused.moments.values()]) / 0.1 * stepper.expected_batch
    assert np.linalg.norm(g) == pytest.approx(0.5, rel=1e-4)


def test_the_fused_step_refuses_torch_noise() -> None:
    plain, _, _, _ = pair(1.0)
    torch_noise = PrivateStepper(DPConfig(noise_multiplier=1.0), 40, 16, 7)
    with pytest.raises(TypeError, match="dp-backend fused"):
        gmf_dp_fused.dp_step(plain, np.array([1]), np.array([1.0], np.float32), torch_noise)


def learners(backend: str) -> list[GMFLearner]:
    data, _ = planted_communities(SyntheticConfig(users=6, items=200, communities=2, seed=1))
    init = gmf.init_params(data.n_items, DIM, seed=0)
    cfg = TrainConfig(factors=DIM, lr=0.01, batch_size=8, dp=DPConfig(noise_multiplier=0.5, backend=backend))
    return [GMFLearner(u, init, cfg, np.random.default_rng(u.user)) for u in leave_one_out(data, seed=0)]


def test_a_learner_on_the_fused_step_draws_and_spends_as_on_the_numpy_step() -> None:
    """``--dp-backend fused``: the learner's batches come from its own generator as before (the
    same calls), its ε is the same, and a checkpoint continues its noise stream exactly."""
    fused = learners("fused")
    plain = learners("fused")
    for lrn in plain:  # the numpy step on the fused noise: what the fused step must equal
        lrn.dp.config = DPConfig(noise_multiplier=0.5, backend="numpy")  # type: ignore[union-attr]
    for _ in range(3):
        for a, b in zip(fused, plain, strict=True):
            assert a.local_update() == b.local_update()
    for a, b in zip(fused, plain, strict=True):
        assert a.epsilon() == b.epsilon() and a.rng.random() == b.rng.random()
        for name in gmf.PARAM_NAMES:
            np.testing.assert_allclose(a.params[name], b.params[name], rtol=1e-4, atol=1e-5)
    saved = fused[0].state()
    fused[0].local_update()
    fresh = learners("fused")[0]
    fresh.restore(saved)
    fresh.local_update()
    for name in gmf.PARAM_NAMES:
        np.testing.assert_array_equal(fresh.params[name], fused[0].params[name])
    torch_one = learners("numpy")[0]
    with pytest.raises(ValueError, match="dp-backend"):
        torch_one.restore(saved)


def test_prme_under_the_fused_backend_draws_the_ziggurats_noise() -> None:
    """PRME keeps its numpy DP-SGD step; ``--dp-backend fused`` gives it the ziggurat's noise."""
    from learning import prme
    from learning.prme_learner import PRMEConfig, PRMELearner

    data, _ = planted_communities(SyntheticConfig(users=4, items=200, communities=2, seed=1))
    user = leave_one_out(data, seed=0)[0]
    init = prme.init_params(data.n_items, 8, seed=0)

    def make() -> PRMELearner:
        dp = DPConfig(noise_multiplier=0.5, backend="fused")
        return PRMELearner(user, init, PRMEConfig(dim=8, dp=dp), np.random.default_rng(0))

    a, b = make(), make()
    assert a.dp is not None and len(a.dp.noise.state()) == 32
    saved = a.state()
    assert a.local_update() > 0
    b.restore(saved)
    b.local_update()
    moved = np.abs(a.params[prme.ITEM_P] - init[prme.ITEM_P])
    assert (moved > 0).mean() > 0.99  # dense noise on every row
    for name in prme.PARAM_NAMES:
        np.testing.assert_array_equal(a.params[name], b.params[name])


def test_the_fused_epoch_stops_where_the_budget_does() -> None:
    """A target ε lasts ``horizon_updates`` updates: past them the numpy loop refuses each epoch's
    steps (counting one refusal an epoch); the fused epoch takes and refuses the same."""

    def budgeted(backend: str) -> list[GMFLearner]:
        data, _ = planted_communities(SyntheticConfig(users=4, items=200, communities=2, seed=2))
        init = gmf.init_params(data.n_items, DIM, seed=0)
        dp = DPConfig(target_epsilon=8.0, horizon_updates=2, backend="fused")
        cfg = TrainConfig(factors=DIM, lr=0.01, batch_size=8, local_epochs=2, dp=dp)
        out = [GMFLearner(u, init, cfg, np.random.default_rng(u.user)) for u in leave_one_out(data, seed=0)]
        for lrn in out:
            assert lrn.dp is not None
            lrn.dp.config = dataclasses.replace(lrn.dp.config, backend=backend)
        return out

    fused, plain = budgeted("fused"), budgeted("numpy")
    for _ in range(3):  # the budget is 2 epochs' steps: the first update spends it, the others none
        for a, b in zip(fused, plain, strict=True):
            assert a.local_update() == b.local_update()
    for a, b in zip(fused, plain, strict=True):
        assert a.dp is not None and b.dp is not None
        assert a.dp.accountant.steps == b.dp.accountant.steps == a.dp.budget_steps
        assert a.dp.skipped_steps == b.dp.skipped_steps == 4  # one refusal in each epoch after
        assert a.epsilon() == b.epsilon() and a.rng.random() == b.rng.random()
        for name in gmf.PARAM_NAMES:
            np.testing.assert_allclose(a.params[name], b.params[name], rtol=1e-4, atol=1e-5)
