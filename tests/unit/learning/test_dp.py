"""DP-SGD: per-example clipping checked against Opacus, the accountant, noise, the ε budget."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch
from opacus import GradSampleModule
from opacus.accountants import RDPAccountant
from opacus.optimizers import DPOptimizer

from learning import gmf, prme
from learning.dp import DPConfig, NodeAccountant, PrivateStepper, clip_factors, poisson_batch
from learning.gmf_numpy import NumpyGMF
from learning.learner import GMFLearner, TrainConfig
from learning.prme_learner import PRMEConfig, PRMELearner
from learning.prme_numpy import NumpyPRME
from learning.split import leave_one_out
from learning.synthetic import SyntheticConfig, planted_communities

N_ITEMS, DIM = 40, 8
pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook:UserWarning")


class TorchGMFModule(torch.nn.Module):
    """GMF as standard layers so that Opacus computes per-sample gradients with its own hooks."""

    def __init__(self, params: dict[str, np.ndarray]) -> None:
        super().__init__()
        self.item = torch.nn.Embedding(N_ITEMS, DIM)
        self.user = torch.nn.Embedding(1, DIM)
        self.out = torch.nn.Linear(DIM, 1)
        with torch.no_grad():
            self.item.weight.copy_(torch.from_numpy(params[gmf.ITEM]))
            self.user.weight.copy_(torch.from_numpy(params[gmf.USER]))
            self.out.weight.copy_(torch.from_numpy(params[gmf.H])[None, :])
            self.out.bias.copy_(torch.from_numpy(params[gmf.B]))

    def forward(self, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        q = self.item(idx)
        p = self.user(torch.zeros_like(idx))
        return self.out(q * p).squeeze(-1), q


def opacus_clipped_mean(
    params: dict[str, np.ndarray],
    idx: np.ndarray,
    y: np.ndarray,
    clip: float,
    anchor: np.ndarray | None = None,
    tau: float = 0.0,
) -> dict[str, np.ndarray]:
    """What Opacus puts in ``.grad`` for a mean BCE (+ τ Σ‖q − a‖ over positives) with σ = 0."""
    model = GradSampleModule(TorchGMFModule(params), loss_reduction="mean")
    opt = DPOptimizer(
        torch.optim.SGD(model.parameters(), lr=1.0),
        noise_multiplier=0.0,
        max_grad_norm=clip,
        expected_batch_size=len(idx),
        loss_reduction="mean",
    )
    opt.zero_grad()
    logits, q = model(torch.from_numpy(idx))
    loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, torch.from_numpy(y))
    if anchor is not None:
        pos = torch.from_numpy(y > 0.5)
        loss = loss + tau * torch.linalg.vector_norm(q[pos] - torch.from_numpy(anchor)[pos], dim=1).sum()
    loss.backward()
    opt.pre_step()
    inner = model._module
    return {
        gmf.ITEM: inner.item.weight.grad.numpy(),
        gmf.USER: inner.user.weight.grad.numpy(),
        gmf.H: inner.out.weight.grad.numpy()[0],
        gmf.B: inner.out.bias.grad.numpy(),
    }


def random_params(seed: int, scale: float = 0.5) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        gmf.ITEM: rng.normal(0, scale, (N_ITEMS, DIM)).astype(np.float32),
        gmf.USER: rng.normal(0, scale, (1, DIM)).astype(np.float32),
        gmf.H: rng.normal(0, scale, DIM).astype(np.float32),
        gmf.B: rng.normal(0, scale, 1).astype(np.float32),
    }


@pytest.mark.parametrize(("clip", "tau"), [(0.05, 0.0), (2.0, 0.0), (0.3, 0.02), (100.0, 0.0)])
def test_gmf_clipped_sum_matches_opacus(clip: float, tau: float) -> None:
    params = random_params(1, scale=1.5)
    rng = np.random.default_rng(2)
    idx = rng.integers(0, N_ITEMS, 30).astype(np.int64)  # repeated items share a row
    y = (rng.random(30) < 0.3).astype(np.float32)
    anchor = (params[gmf.ITEM][idx] + rng.normal(0, 0.1, (30, DIM))).astype(np.float32) if tau else None
    ours = NumpyGMF(params, lr=0.0, sparse_items=False).clipped_sum(idx, y, clip, anchor, tau * len(idx))
    ref = opacus_clipped_mean(params, idx, y, clip, anchor, tau)
    for name in gmf.PARAM_NAMES:
        np.testing.assert_allclose(ours[name] / len(idx), ref[name], rtol=2e-4, atol=2e-6, err_msg=name)


def test_one_huge_gradient_example_is_clipped_to_the_bound() -> None:
    params = random_params(3, scale=0.1)
    # row 7 gives a huge positive logit to a negative example: an enormous gradient
    params[gmf.ITEM][7] = 1e4 * np.sign(params[gmf.H] * params[gmf.USER][0])
    idx = np.array([7, 1, 2, 3], np.int64)
    y = np.array([0.0, 1.0, 0.0, 1.0], np.float32)
    trainer = NumpyGMF(params, lr=0.0, sparse_items=False)
    alone = trainer.clipped_sum(idx[:1], y[:1], clip=2.0)
    norm = math.sqrt(sum(float((g.astype(np.float64) ** 2).sum()) for g in alone.values()))
    assert norm == pytest.approx(2.0, rel=1e-3)  # clipped to C, not ~1e8
    others = trainer.clipped_sum(idx[1:], y[1:], clip=2.0)
    both = trainer.clipped_sum(idx, y, clip=2.0)
    for name in gmf.PARAM_NAMES:  # the sum is per example: the huge one does not rescale the others
        np.testing.assert_allclose(both[name], alone[name] + others[name], rtol=1e-5, atol=1e-6)


def test_clip_factors_leave_small_gradients_alone() -> None:
    c = clip_factors(np.array([0.0, 1.0, 16.0], np.float32), clip=2.0)
    np.testing.assert_allclose(c, [1.0, 1.0, 2.0 / (4.0 + 1e-6)], rtol=1e-6)


@pytest.mark.slow
def test_node_accountant_matches_opacus_and_grows_with_steps() -> None:
    ours, ref = NodeAccountant(), RDPAccountant()
    eps = []
    for _ in range(30):
        ours.step(noise_multiplier=1.1, sample_rate=0.25)
        ref.step(noise_multiplier=1.1, sample_rate=0.25)
        eps.append(ours.get_epsilon(1e-6))
    ours.step(noise_multiplier=0.8, sample_rate=0.5)
    ref.step(noise_multiplier=0.8, sample_rate=0.5)
    assert ours.get_epsilon(1e-6) == pytest.approx(ref.get_epsilon(1e-6), rel=1e-9)
    assert all(b > a for a, b in itertools.pairwise(eps))


@pytest.mark.slow
def test_target_epsilon_is_reached_and_never_exceeded() -> None:
    cfg = DPConfig(target_epsilon=5.0, horizon_updates=20)
    dp = PrivateStepper(cfg, rows=600, batch_size=256, seed=0)
    assert dp.steps_per_epoch == 3 and dp.sample_rate == pytest.approx(1 / 3)
    taken = 0
    while dp.may_step():
        dp.charge()
        taken += 1
    assert taken == 60 == dp.budget_steps
    assert 4.8 < dp.epsilon() <= 5.0
    assert not dp.may_step() and dp.skipped_steps == 2


def test_poisson_batches_include_each_row_at_the_sample_rate() -> None:
    rng = np.random.default_rng(0)
    counts = np.zeros(200)
    for _ in range(2000):
        counts[poisson_batch(rng, 200, 0.25)] += 1
    assert counts.mean() / 2000 == pytest.approx(0.25, abs=0.01)


def test_noise_has_the_configured_scale_and_reaches_every_coordinate() -> None:
    dp = PrivateStepper(DPConfig(noise_multiplier=1.5, clip=2.0), rows=100, batch_size=50, seed=1)
    assert dp.noise_std == 3.0 and dp.expected_batch == 50
    g = np.zeros(200_000, np.float32)
    dp.noise.add(g, dp.noise_std)
    assert g.std() == pytest.approx(3.0, rel=0.01) and abs(g.mean()) < 0.02

    params = random_params(4)
    before = {k: v.copy() for k, v in params.items()}
    trainer = NumpyGMF(params, lr=0.01, sparse_items=False)
    empty = np.array([], np.int64)
    assert all(not v.any() for v in trainer.clipped_sum(empty, np.array([], np.float32), 2.0).values())
    trainer.dp_step(empty, np.array([], np.float32), dp)  # an empty Poisson batch: noise only
    for name in gmf.PARAM_NAMES:  # yet every coordinate moves: the noise is dense
        assert (params[name] != before[name]).mean() > 0.99, name
    assert dp.accountant.steps == 1


@pytest.mark.slow
def test_dp_learner_spends_epsilon_and_noise_costs_utility() -> None:
    data, _planted = planted_communities(SyntheticConfig(users=60, items=200, seed=0))
    users = leave_one_out(data, seed=0)
    init = gmf.init_params(data.n_items, 16, seed=0)
    ranks: dict[float, float] = {}
    eps: dict[float, float] = {}
    for sigma in (0.0, 0.1, 1.0):
        dp = DPConfig(noise_multiplier=sigma) if sigma else DPConfig()
        cfg = TrainConfig(factors=16, lr=0.01, batch_size=64, dp=dp)
        learners = [GMFLearner(u, init, cfg, np.random.default_rng(u.user)) for u in users]
        for _ in range(30):
            for lrn in learners:
                lrn.local_update()
        ranks[sigma] = float(np.mean([lrn.test_rank() for lrn in learners]))
        if sigma:
            spent = [lrn.epsilon() for lrn in learners]
            assert all(e is not None and 0 < e < math.inf for e in spent)
            eps[sigma] = float(np.mean([e for e in spent if e is not None]))
    # random ranking gives 0.5; noise costs utility, more noise costs more, and buys a smaller ε
    assert ranks[0.0] < 0.05 < ranks[0.1] < 0.45 and ranks[0.1] < ranks[1.0]
    assert eps[0.1] > 10 * eps[1.0]


def test_dp_config_refuses_contradictions() -> None:
    with pytest.raises(ValueError, match="either"):
        DPConfig(noise_multiplier=1.0, target_epsilon=3.0)
    with pytest.raises(ValueError, match="clipping"):
        DPConfig(noise_multiplier=1.0, clip=0.0)
    with pytest.raises(ValueError, match="local updates"):
        PrivateStepper(DPConfig(target_epsilon=1.0), rows=10, batch_size=5, seed=0)


class TorchPRMEModule(torch.nn.Module):
    """PRME's per-example loss from standard embeddings, for Opacus' per-sample gradients."""

    def __init__(self, params: dict[str, np.ndarray]) -> None:
        super().__init__()
        n, d = params[prme.ITEM_P].shape
        self.user = torch.nn.Embedding(1, d)
        self.item_p = torch.nn.Embedding(n, d)
        self.item_s = torch.nn.Embedding(n, d)
        with torch.no_grad():
            for name in prme.PARAM_NAMES:
                getattr(self, name.replace("user_p", "user")).weight.copy_(torch.from_numpy(params[name]))

    def forward(
        self, prev: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor, w: torch.Tensor, anchor: torch.Tensor
    ) -> torch.Tensor:
        u = self.user(torch.zeros_like(pos))
        p = self.item_p(torch.stack((pos, neg), 1))
        s = self.item_s(torch.stack((pos, neg, prev), 1))
        w_p, w_s, tau = w[:, 0], w[:, 1], w[:, 2]

        def dist(k: int) -> torch.Tensor:
            a = u - p[:, k]
            b = s[:, k] - s[:, 2]
            return w_p * (a * a).sum(1) + w_s * (b * b).sum(1)

        reg = 0.5 * 0.03 * ((u * u).sum(1) + (p * p).sum((1, 2)) + (s * s).sum((1, 2)))
        own = torch.cat((p[:, 0], s[:, 0]), 1)
        return torch.nn.functional.softplus(dist(0) - dist(1)) + reg + tau * (own - anchor).norm(dim=1)


@pytest.mark.parametrize(("clip", "tau"), [(0.01, 0.0), (0.2, 0.0), (0.05, 0.3), (1e3, 0.0)])
def test_prme_clipped_sum_matches_opacus(clip: float, tau: float) -> None:
    rng = np.random.default_rng(5)
    params = {k: v * 20 for k, v in prme.init_params(N_ITEMS, DIM, seed=1).items()}
    n = 24
    prev, pos, neg = (rng.integers(0, N_ITEMS, n).astype(np.int64) for _ in range(3))
    pos[:3] = prev[:3]  # l = l_c: the same item_s row twice in one example
    neg[3:5] = pos[3:5]
    gap = rng.choice([100.0, 1e6, 21600.0, 21601.0], n)
    anchor_p = (params[prme.ITEM_P][pos] + rng.normal(0, 0.05, (n, DIM))).astype(np.float32)
    anchor_s = (params[prme.ITEM_S][pos] + rng.normal(0, 0.05, (n, DIM))).astype(np.float32)
    anchor = (anchor_p, anchor_s) if tau else None
    ours, _loss = NumpyPRME(params, lr=0.0).clipped_sum(prev, pos, neg, gap, clip, anchor, tau)

    model = GradSampleModule(TorchPRMEModule(params), loss_reduction="sum")
    opt = DPOptimizer(
        torch.optim.SGD(model.parameters(), lr=1.0),
        noise_multiplier=0.0,
        max_grad_norm=clip,
        expected_batch_size=n,
        loss_reduction="sum",
    )
    w_p, w_s = prme.weights(gap)
    w = torch.from_numpy(np.stack((w_p, w_s, np.full(n, tau, np.float32)), 1))
    anchors = torch.from_numpy(np.concatenate((anchor_p, anchor_s), 1))
    t = (torch.from_numpy(a) for a in (prev, pos, neg))
    model(*t, w, anchors).sum().backward()
    opt.pre_step()
    inner = model._module
    ref = {"user_p": inner.user, "item_p": inner.item_p, "item_s": inner.item_s}
    for name, module in ref.items():
        np.testing.assert_allclose(ours[name], module.weight.grad.numpy(), rtol=3e-4, atol=3e-6, err_msg=name)


def _selective_learner(model: str) -> GMFLearner | PRMELearner:
    data, _planted = planted_communities(SyntheticConfig(users=10, items=200, seed=0))
    user = leave_one_out(data, seed=0)[0]
    dp = DPConfig(noise_multiplier=1.0)
    rng = np.random.default_rng(0)
    learner: GMFLearner | PRMELearner
    if model == "gmf":
        cfg = TrainConfig(factors=8, backend="numpy", dp=dp)
        learner = GMFLearner(user, gmf.init_params(data.n_items, 8, seed=0), cfg, rng)
    else:
        learner = PRMELearner(user, prme.init_params(data.n_items, 8, seed=0), PRMEConfig(dim=8, dp=dp), rng)
    learner.dp_after = 2
    return learner


@pytest.mark.parametrize("model", ["gmf", "prme"])
def test_selective_dp_trains_plainly_until_the_switch_then_charges_every_step(model: str) -> None:
    """003's DP only past τ, for model gossip: no DP-SGD step (and no ε) while fewer than
    ``dp_after`` models were taken; then every update is private, and a checkpoint keeps the
    count so a restart does not reopen the unprotected window."""
    learner = _selective_learner(model)
    assert learner.dp is not None and not learner.private
    for _ in range(2):
        assert learner.local_update() > 0
        assert learner.dp.accountant.steps == 0 and learner.epsilon() == 0.0
        learner.note_delivered()
    assert learner.private and learner.unprotected() == 2
    steps = learner.local_update()
    spent = learner.epsilon()
    assert steps > 0 and learner.dp.accountant.steps == steps and spent is not None and spent > 0
    learner.note_delivered()
    assert learner.unprotected() == 2  # a model sent after the switch was trained under DP-SGD
    fresh = _selective_learner(model)
    fresh.restore(learner.state())
    assert fresh.delivered == 3 and fresh.private
