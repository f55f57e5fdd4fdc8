"""PARD (paper 004 §III, learning/pard.py and learning/pard_learner.py): each loss term against a
value computed by hand or by an independent numpy forward pass on a tiny model, the estimators'
stage, and the learner's two stages."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from learning import gmf, ncf
from learning.pard import USER_RE, Estimators, PardConfig, PublicSet, clip_each, empty_public
from learning.pard_learner import PardLearner, PardTrain, init_user_re
from learning.split import leave_one_out
from learning.synthetic import SyntheticConfig, planted_communities


def _numpy_mlp(net: torch.nn.Module, x: np.ndarray) -> np.ndarray:
    """The estimator's eval-mode forward pass in float64 numpy: Linear, LeakyReLU(0.2), dropout off."""
    out = x.astype(np.float64)
    for layer in net:
        if isinstance(layer, torch.nn.Linear):
            out = out @ layer.weight.detach().double().numpy().T + layer.bias.detach().double().numpy()
        elif isinstance(layer, torch.nn.LeakyReLU):
            out = np.where(out > 0, out, 0.2 * out)
    return out


def _numpy_ce(logits: np.ndarray, y: np.ndarray, classes: int) -> float:
    if classes == 2:
        p = 1.0 / (1.0 + np.exp(-logits[:, 0]))
        return float(np.mean(-(y * np.log(p) + (1 - y) * np.log(1 - p))))
    z = logits - logits.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return float(np.mean(-logp[np.arange(len(y)), y]))


def test_the_inverse_term_is_the_distance_to_the_mean_attribute_embedding() -> None:
    est = Estimators(2, (2, 3), seed=0)
    with torch.no_grad():
        est.ip[0].weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 1.0]]))
        est.ip[1].weight.copy_(torch.tensor([[2.0, 2.0], [0.0, 0.0], [-2.0, 0.0]]))
    labels = torch.tensor([[1, 2], [0, 1]])
    # g^IP of (1, 2) is the mean of [0, 1] and [-2, 0] = [-1, 0.5]; of (0, 1), [0.5, 0]
    user_re = torch.tensor([[2.0, 4.5], [0.5, 0.0]])  # distances 5 (3-4-5) and 0
    assert est.loss_ip(user_re, labels).item() == pytest.approx(2.5)


def test_the_forward_and_irrelevant_terms_are_cross_entropies_of_the_estimators() -> None:
    dim, classes = 3, (2, 4)
    est = Estimators(dim, classes, seed=1)
    rng = np.random.default_rng(0)
    feats = rng.normal(size=(5, 2 * dim)).astype(np.float32)
    user_re = rng.normal(size=(5, dim)).astype(np.float32)
    labels = np.stack([rng.integers(0, c, 5) for c in classes], axis=1)
    lab = torch.from_numpy(labels)
    fp = sum(_numpy_ce(_numpy_mlp(est.fp[t], user_re), labels[:, t], c) for t, c in enumerate(classes))
    ir = sum(_numpy_ce(_numpy_mlp(est.ir[t], feats), labels[:, t], c) for t, c in enumerate(classes))
    assert est.loss_fp(torch.from_numpy(user_re), lab).item() == pytest.approx(fp, rel=1e-5)
    assert est.loss_ir(torch.from_numpy(feats), lab).item() == pytest.approx(
        -ir, rel=1e-5
    )  # eq. 16: maximised
    ip = float(np.mean(np.linalg.norm(user_re - est.ip_of(lab).detach().numpy(), axis=1)))
    cfg = PardConfig(lambda_ir=0.5, lambda_re=0.3)
    total = est.loss_encoders(torch.from_numpy(feats), torch.from_numpy(user_re), lab, cfg).item()
    assert total == pytest.approx(0.5 * -ir + 0.3 * (fp + ip), rel=1e-5)
    con = est.loss_con(torch.from_numpy(feats), torch.from_numpy(user_re), lab).item()
    assert con == pytest.approx(ir + fp + ip, rel=1e-5)  # eq. 37: every estimator predicts


def test_the_estimators_stage_sees_no_gradient_reach_the_representations() -> None:
    est = Estimators(2, (2,), seed=0)
    feats = torch.randn(4, 4, requires_grad=True)
    user_re = torch.randn(4, 2, requires_grad=True)
    est.loss_con(feats, user_re, torch.tensor([[0], [1], [0], [1]])).backward()
    assert feats.grad is None and user_re.grad is None
    assert all(p.grad is not None for p in est.parameters())


def test_fitting_the_estimators_on_a_public_set_makes_them_predict_it() -> None:
    rng = np.random.default_rng(0)
    dim, n = 4, 40
    y = rng.integers(0, 2, n)
    user_re = (rng.normal(size=(n, dim)) + 2.0 * (2 * y[:, None] - 1)).astype(np.float32)  # separable
    feats = rng.normal(size=(n, 2 * dim)).astype(np.float32)
    public = PublicSet(feats, user_re, y[:, None].astype(np.int64))
    est = Estimators(dim, (2,), seed=3)
    lab = torch.from_numpy(public.labels)
    before_fp = est.loss_fp(torch.from_numpy(user_re), lab).item()
    before_ip = est.loss_ip(torch.from_numpy(user_re), lab).item()
    every_row = PardConfig(epochs=30, lr=0.1, public_sample=1.0)
    est.fit(public, feats[0], user_re[0], public.labels[0], every_row, seed=0)
    assert est.loss_fp(torch.from_numpy(user_re), lab).item() < 0.5 * before_fp
    assert est.loss_ip(torch.from_numpy(user_re), lab).item() < before_ip
    # with D_pub empty, g^IP has nothing to learn from (eq. 34: public data only)
    fresh = Estimators(dim, (2,), seed=3)
    ip_before = [p.detach().clone() for p in fresh.ip.parameters()]
    fresh.fit(empty_public(dim, 1), feats[0], user_re[0], public.labels[0], PardConfig(epochs=3), seed=0)
    assert all(torch.equal(a, b) for a, b in zip(fresh.ip.parameters(), ip_before, strict=True))


def _learner(
    model: str, pard: PardConfig, user: int = 0, lr: float = 0.01, combine: str = "concat"
) -> PardLearner:
    data, _ = planted_communities(SyntheticConfig(users=12, items=200, per_user=25))
    users = leave_one_out(data, 0, 50)
    base = (
        ncf.init_params(data.n_items, 8, 4, seed=0) if model == "ncf" else gmf.init_params(data.n_items, 8, 0)
    )
    init = init_user_re(base, 0, combine)
    shared = (gmf.USER, gmf.ITEM)
    return PardLearner(
        users[user],
        init,
        PardTrain(model=model, lr=lr),
        pard,
        np.array([1, 2]),
        (2, 3),
        np.random.default_rng(0),
        shared,
        seed=7,
    )


@pytest.mark.parametrize("model", ["gmf", "ncf"])
def test_summed_rows_take_the_same_steps_and_side_by_side_rows_their_own(model: str) -> None:
    """Without privacy terms: under 004's code's sum the recommender's gradient reaches both rows
    alike; side by side (eq. 35) each row has its own part of the head."""
    for combine in ("sum", "concat"):
        learner = _learner(model, PardConfig(lambda_ir=0.0, lambda_re=0.0), combine=combine)
        assert learner.concat == (combine == "concat")
        ir0, re0 = learner.params[gmf.USER].copy(), learner.params[USER_RE].copy()
        before = learner.catalogue_scores()
        learner.local_update()
        step_ir, step_re = learner.params[gmf.USER] - ir0, learner.params[USER_RE] - re0
        assert not np.allclose(step_ir, 0.0) and not np.allclose(step_re, 0.0)
        assert np.allclose(step_ir, step_re, atol=1e-7) == (combine == "sum")
        assert not np.array_equal(learner.catalogue_scores(), before)


def test_side_by_side_scores_are_the_heads_reading_of_both_rows() -> None:
    """The numpy scores a concat model ranks by are its torch forward pass's."""
    for model in ("gmf", "ncf"):
        learner = _learner(model, PardConfig(), combine="concat")
        learner.params[USER_RE][...] = np.random.default_rng(0).normal(0, 0.5, learner.params[USER_RE].shape)
        items = np.arange(20)
        dense = {k: torch.from_numpy(v) for k, v in learner.params.items() if k != gmf.ITEM}
        logits = learner._logits(dense, torch.from_numpy(learner.params[gmf.ITEM][items]))
        np.testing.assert_allclose(
            learner._scores(learner.params, items, 0.0), torch.sigmoid(logits).numpy(), rtol=1e-5
        )


@pytest.mark.parametrize("model", ["gmf", "ncf"])
def test_the_irrelevant_term_pushes_the_shared_side_away_from_the_estimator(model: str) -> None:
    """λ_ir alone: the frozen g^ir's cross-entropy on the node's own features rises more than
    without it (eq. 16 is maximised by the encoders)."""

    def ce_after(lambda_ir: float) -> float:
        learner = _learner(model, PardConfig(lambda_ir=lambda_ir, lambda_re=0.0, epochs=0), lr=0.05)
        for _ in range(20):
            learner.local_update()
        feats = torch.from_numpy(learner.features()[None, :])
        return -learner.estimators.loss_ir(feats, torch.from_numpy(learner.labels[None, :])).item()

    assert ce_after(5.0) > ce_after(0.0) + 0.1


def test_the_relevant_term_pulls_z_re_toward_the_attribute_representation() -> None:
    def distance_after(lambda_re: float) -> float:
        learner = _learner("ncf", PardConfig(lambda_ir=0.0, lambda_re=lambda_re, epochs=0), lr=0.05)
        for _ in range(5):
            learner.local_update()
        lab = torch.from_numpy(learner.labels[None, :])
        return learner.estimators.loss_ip(torch.from_numpy(learner.params[USER_RE]), lab).item()

    assert distance_after(2.0) < distance_after(0.0)


def test_z_re_never_leaves_and_a_checkpoint_brings_everything_back() -> None:
    learner = _learner("ncf", PardConfig())
    assert USER_RE not in learner.snapshot()
    public = PublicSet(
        np.ones((3, 16), np.float32), np.zeros((3, 8), np.float32), np.array([[0, 1], [1, 2], [0, 0]])
    )
    learner.public = public
    learner.local_update()
    rec = learner.record()
    assert rec.features.shape == (1, 16) and rec.user_re.shape == (1, 8)
    np.testing.assert_array_equal(rec.labels, [[1, 2]])
    state = learner.state()
    again = _learner("ncf", PardConfig())
    again.restore(state)
    np.testing.assert_array_equal(again.catalogue_scores(), learner.catalogue_scores())
    for a, b in zip(again.estimators.parameters(), learner.estimators.parameters(), strict=True):
        assert torch.equal(a, b)
    again.public = public
    learner.local_update()
    again.local_update()  # the same random stream, moments and estimators: the same step
    np.testing.assert_array_equal(again.params[ncf.ITEM], learner.params[ncf.ITEM])


def test_a_pard_model_is_refused_what_it_cannot_be() -> None:
    data, _ = planted_communities(SyntheticConfig(users=5, items=200, per_user=10))
    users = leave_one_out(data, 0, 20)
    init = init_user_re(gmf.init_params(200, 4, 0), 0)
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="never leaves"):
        PardLearner(users[0], init, PardTrain("gmf"), PardConfig(), np.array([0]), (2,), rng, (USER_RE,), 0)
    with pytest.raises(ValueError, match="labels"):
        PardLearner(users[0], init, PardTrain("gmf"), PardConfig(), np.array([2]), (2,), rng, (gmf.ITEM,), 0)
    with pytest.raises(ValueError, match="GMF or NCF"):
        PardLearner(users[0], init, PardTrain("prme"), PardConfig(), np.array([0]), (2,), rng, (gmf.ITEM,), 0)


def test_each_estimator_step_reads_a_seeded_draw_of_the_public_rows() -> None:
    rng = np.random.default_rng(1)
    public = PublicSet(
        rng.normal(size=(50, 8)).astype(np.float32),
        rng.normal(size=(50, 4)).astype(np.float32),
        rng.integers(0, 2, (50, 1)),
    )

    def weights(sample: float, seed: int) -> list[torch.Tensor]:
        est = Estimators(4, (2,), seed=0)
        est.fit(
            public,
            public.features[0],
            public.user_re[0],
            public.labels[0],
            PardConfig(public_sample=sample),
            seed,
        )
        return [p.detach().clone() for p in est.parameters()]

    def same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
        return all(torch.equal(x, y) for x, y in zip(a, b, strict=True))

    assert same(weights(0.08, 3), weights(0.08, 3))  # the node's seed decides the draw
    assert not same(weights(0.08, 3), weights(0.08, 4))
    assert not same(weights(0.08, 3), weights(1.0, 3))  # 4 rows of 50 a step, not all of them


def test_clipping_each_estimator_is_torchs_clip_grad_norm_per_group() -> None:
    torch.manual_seed(0)
    groups = [[torch.nn.Parameter(torch.randn(3, 4)) for _ in range(2)], [torch.nn.Parameter(torch.randn(5))]]
    grads = [
        torch.randn(3, 4) * 5,
        torch.randn(3, 4) * 5,
        torch.randn(5) * 0.01,
    ]  # the first past 2, the second not
    reference = [[torch.nn.Parameter(p.detach().clone()) for p in g] for g in groups]
    flat, flat_ref = [p for g in groups for p in g], [p for g in reference for p in g]
    for p, r, grad in zip(flat, flat_ref, grads, strict=True):
        p.grad, r.grad = grad.clone(), grad.clone()
    clip_each(groups, 2.0)
    for group in reference:
        torch.nn.utils.clip_grad_norm_(group, 2.0)
    for p, r in zip(flat, flat_ref, strict=True):
        torch.testing.assert_close(p.grad, r.grad)
    assert float(torch.linalg.vector_norm(torch.cat([p.grad.flatten() for p in groups[0]]))) == pytest.approx(
        2.0
    )
    torch.testing.assert_close(groups[1][0].grad, grads[2])  # within the bound: unchanged
