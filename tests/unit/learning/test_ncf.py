"""NCF (paper 004's FedNCF model, learning/ncf.py): the analytic gradient against torch's autograd,
the learner's training, and the attack adapter's fictive user."""

from __future__ import annotations

import numpy as np
import torch

from adversary.models import NCFAttack
from learning import ncf
from learning.ncf_learner import NCFConfig, NCFLearner
from learning.split import leave_one_out
from learning.synthetic import SyntheticConfig, planted_communities


def test_the_analytic_gradient_is_autograds() -> None:
    params = ncf.init_params(30, 8, 5, seed=1)
    rng = np.random.default_rng(0)
    params[ncf.USER] = rng.normal(0, 0.5, (1, 8)).astype(np.float32)
    params[ncf.ITEM] = rng.normal(0, 0.5, (30, 8)).astype(np.float32)
    idx = np.array([3, 7, 7, 12, 0, 29])
    y = np.array([1, 0, 0, 1, 0, 1], np.float32)
    grads, rows = ncf.gradients(params, params[ncf.USER][0], idx, y)
    t = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in params.items()}
    q = t[ncf.ITEM][torch.from_numpy(idx)]
    h = torch.cat((t[ncf.USER].expand(len(idx), -1), q), dim=1)
    logit = torch.relu(h @ t[ncf.W1] + t[ncf.B1]) @ t[ncf.W2] + t[ncf.B2]
    torch.nn.functional.binary_cross_entropy_with_logits(logit, torch.from_numpy(y).double()).backward()
    for name, grad in grads.items():
        np.testing.assert_allclose(grad, t[name].grad.numpy(), rtol=1e-4, atol=1e-6, err_msg=name)
    summed = np.zeros_like(params[ncf.ITEM])
    np.add.at(summed, idx, rows)
    np.testing.assert_allclose(summed, t[ncf.ITEM].grad.numpy(), rtol=1e-4, atol=1e-6)
    scores = ncf.score(params, params[ncf.USER][0], idx)
    np.testing.assert_allclose(scores, torch.sigmoid(logit).detach().numpy(), rtol=1e-5)


def test_a_learner_fits_its_own_items_and_a_fictive_user_likes_the_given_items() -> None:
    data, _ = planted_communities(SyntheticConfig(users=20, items=200, per_user=30))
    users = leave_one_out(data, 0, 50)
    init = ncf.init_params(data.n_items, 16, 8, seed=0)
    learner = NCFLearner(users[0], init, NCFConfig(dim=16, hidden=8, lr=0.01), np.random.default_rng(0))
    own = users[0].train_items
    others = np.setdiff1d(np.arange(data.n_items), own)

    def margin() -> float:
        s = learner.catalogue_scores()
        return float(s[own].mean() - s[others].mean())

    before = margin()
    for _ in range(30):
        learner.local_update()
    assert margin() > before + 0.3  # its own items now score well above the rest
    state = learner.state()
    again = NCFLearner(users[0], init, NCFConfig(dim=16, hidden=8, lr=0.01), np.random.default_rng(0))
    again.restore(state)
    np.testing.assert_array_equal(again.catalogue_scores(), learner.catalogue_scores())
    e_a = NCFAttack().fit_user(learner.params, own, np.random.default_rng(1), None)
    s = ncf.score(learner.params, e_a, slice(None))
    assert s[own].mean() > s[others].mean()


def test_a_personal_user_row_is_sent_but_never_merged_nor_loaded() -> None:
    data, _ = planted_communities(SyntheticConfig(users=20, items=200, per_user=30))
    users = leave_one_out(data, 0, 50)
    init = ncf.init_params(data.n_items, 8, 4, seed=0)
    learner = NCFLearner(users[0], init, NCFConfig(dim=8, hidden=4), np.random.default_rng(0))
    learner.personal = frozenset({ncf.USER})
    own = learner.params[ncf.USER].copy()
    other = {k: v + 1.0 for k, v in learner.snapshot().items()}
    assert ncf.USER in learner.snapshot()  # it is sent
    learner.merge([other])
    np.testing.assert_array_equal(learner.params[ncf.USER], own)  # and kept
    np.testing.assert_allclose(learner.params[ncf.ITEM], init[ncf.ITEM] + 0.5, rtol=1e-6)
    learner.load(other)
    np.testing.assert_array_equal(learner.params[ncf.USER], own)
    np.testing.assert_array_equal(learner.params[ncf.W1], other[ncf.W1])
