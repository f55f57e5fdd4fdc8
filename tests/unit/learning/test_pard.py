"""PARD (paper 004 §III, learning/pard.py and learning/pard_learner.py): each loss term against a
value computed by hand or by an independent numpy forward pass on a tiny model, the estimators'
stage, and the learner's two stages."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pytest
import torch

from learning import gmf, ncf
from learning.attribute_mlp import mlp
from learning.pard import USER_RE, Estimators, PardConfig, PublicSet, Stack, empty_public
from learning.pard_learner import PardLearner, PardTrain, init_user_re
from learning.split import leave_one_out
from learning.synthetic import SyntheticConfig, planted_communities


def _numpy_mlp(stack: Stack, t: int, x: np.ndarray) -> np.ndarray:
    """Estimator ``t``'s eval-mode forward pass in float64 numpy: Linear, LeakyReLU(0.2), dropout off."""
    out = x.astype(np.float64)
    layers = stack.layer(t)
    for k, (w, b) in enumerate(layers):
        out = out @ w.astype(np.float64) + b
        if k < len(layers) - 1:
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
    est.ip_rows(0)[...] = [[1.0, 0.0], [0.0, 1.0]]
    est.ip_rows(1)[...] = [[2.0, 2.0], [0.0, 0.0], [-2.0, 0.0]]
    labels = np.array([[1, 2], [0, 1]])
    # g^IP of (1, 2) is the mean of [0, 1] and [-2, 0] = [-1, 0.5]; of (0, 1), [0.5, 0]
    user_re = np.array([[2.0, 4.5], [0.5, 0.0]], np.float32)  # distances 5 (3-4-5) and 0
    assert est.loss_ip(user_re, labels) == pytest.approx(2.5)


def test_the_forward_and_irrelevant_terms_are_cross_entropies_of_the_estimators() -> None:
    dim, classes = 3, (2, 4)
    est = Estimators(dim, classes, seed=1)
    rng = np.random.default_rng(0)
    feats = rng.normal(size=(5, 2 * dim)).astype(np.float32)
    user_re = rng.normal(size=(5, dim)).astype(np.float32)
    labels = np.stack([rng.integers(0, c, 5) for c in classes], axis=1)
    fp = sum(_numpy_ce(_numpy_mlp(est.fp, t, user_re), labels[:, t], c) for t, c in enumerate(classes))
    ir = sum(_numpy_ce(_numpy_mlp(est.ir, t, feats), labels[:, t], c) for t, c in enumerate(classes))
    assert est.loss_fp(user_re, labels) == pytest.approx(fp, rel=1e-5)
    assert est.loss_ir(feats, labels) == pytest.approx(-ir, rel=1e-5)  # eq. 16: maximised
    ip = float(np.mean(np.linalg.norm(user_re - est.ip_of(labels), axis=1)))
    cfg = PardConfig(lambda_ir=0.5, lambda_re=0.3)
    total = est.encoders(feats, user_re, labels, cfg)[0]
    assert total == pytest.approx(0.5 * -ir + 0.3 * (fp + ip), rel=1e-5)
    con = est.loss_con(feats, user_re, labels)
    assert con == pytest.approx(ir + fp + ip, rel=1e-5)  # eq. 37: every estimator predicts


def test_fitting_the_estimators_on_a_public_set_makes_them_predict_it() -> None:
    rng = np.random.default_rng(0)
    dim, n = 4, 40
    y = rng.integers(0, 2, n)
    user_re = (rng.normal(size=(n, dim)) + 2.0 * (2 * y[:, None] - 1)).astype(np.float32)  # separable
    feats = rng.normal(size=(n, 2 * dim)).astype(np.float32)
    public = PublicSet(feats, user_re, y[:, None].astype(np.int64))
    est = Estimators(dim, (2,), seed=3)
    before_fp = est.loss_fp(user_re, public.labels)
    before_ip = est.loss_ip(user_re, public.labels)
    every_row = PardConfig(epochs=30, lr=0.1, public_sample=1.0)
    est.fit(public, feats[0], user_re[0], public.labels[0], every_row, seed=0)
    assert est.loss_fp(user_re, public.labels) < 0.5 * before_fp
    assert est.loss_ip(user_re, public.labels) < before_ip
    # with D_pub empty, g^IP has nothing to learn from (eq. 34: public data only)
    fresh = Estimators(dim, (2,), seed=3)
    ip_before = fresh.ip.copy()
    fresh.fit(empty_public(dim, 1), feats[0], user_re[0], public.labels[0], PardConfig(epochs=3), seed=0)
    np.testing.assert_array_equal(fresh.ip, ip_before)


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


def _torch_logits(learner: PardLearner, dense: dict[str, torch.Tensor], q: torch.Tensor) -> torch.Tensor:
    """An independent torch forward pass of a PARD backbone: eq. 35's head on [z^ir ; z^re ; q]
    (NCF's first layer, GMF's output weight per row) or 004's code's on z^ir + z^re."""
    ir, re = dense[gmf.USER][0], dense[USER_RE][0]
    d = learner.dim
    if learner.model_name == "ncf":
        w1 = dense[ncf.W1]
        if learner.concat:
            x = torch.cat((torch.cat((ir, re)).expand(len(q), 2 * d), q), dim=1)
        else:
            x = torch.cat(((ir + re).expand(len(q), d), q), dim=1)
        return torch.relu(x @ w1 + dense[ncf.B1]) @ dense[ncf.W2] + dense[ncf.B2][0]
    h = dense[gmf.H]
    if learner.concat:
        return (q * ir) @ h[:d] + (q * re) @ h[d:] + dense[gmf.B][0]
    return (q * (ir + re)) @ h + dense[gmf.B][0]


@pytest.mark.parametrize("model", ["gmf", "ncf"])
@pytest.mark.parametrize("combine", ["concat", "sum"])
def test_scores_and_a_steps_gradients_are_torch_autograds(model: str, combine: str) -> None:
    """The numpy scores a PARD model ranks by, and the analytic gradient of one step of eq. 38
    (BCE on the batch, λ_ir·L_ir on [z^ir, mean of the positives' rows], λ_re·(L^FP + L^IP) on
    z^re), against torch's forward pass and autograd of the same loss."""
    pard = PardConfig(lambda_ir=0.7, lambda_re=0.4)
    learner = _learner(model, pard, combine=combine)
    rng = np.random.default_rng(0)
    learner.params[USER_RE][...] = rng.normal(0, 0.5, learner.params[USER_RE].shape)
    learner.params[gmf.USER][...] = rng.normal(0, 0.5, learner.params[gmf.USER].shape)
    items = np.arange(20)
    dense = {
        k: torch.from_numpy(v.copy()).requires_grad_(True) for k, v in learner.params.items() if k != gmf.ITEM
    }
    table = torch.from_numpy(learner.params[gmf.ITEM].copy()).requires_grad_(True)
    np.testing.assert_allclose(
        learner._scores(learner.params, items, 0.0),
        torch.sigmoid(_torch_logits(learner, dense, table[items])).detach().numpy(),
        rtol=1e-5,
    )
    idx, y = items[:12], (rng.random(12) < 0.5).astype(np.float32)
    loss = torch.nn.functional.binary_cross_entropy_with_logits(
        _torch_logits(learner, dense, table[idx]), torch.from_numpy(y)
    )
    lab = learner.labels[None, :]
    ir_net, fp_net = _modules(learner.estimators.ir), _modules(learner.estimators.fp)
    feats = torch.cat((dense[gmf.USER][0], table[learner._positives].mean(dim=0)))[None, :]
    for t, c in enumerate(learner.estimators.classes):
        loss = loss - pard.lambda_ir * _torch_ce(ir_net[t](feats), lab[:, t], c)
        loss = loss + pard.lambda_re * _torch_ce(fp_net[t](dense[USER_RE]), lab[:, t], c)
    ip = torch.from_numpy(learner.estimators.ip_of(lab))
    loss = loss + pard.lambda_re * torch.linalg.vector_norm(dense[USER_RE] - ip, dim=1).mean()
    loss.backward()  # type: ignore[no-untyped-call]
    grads, g_rows = learner.gradients(idx, y)
    _, d_feats, d_re = learner.estimators.encoders(
        learner.features(), learner.params[USER_RE][0], learner.labels, pard
    )
    d = learner.dim
    grads[gmf.USER] = grads[gmf.USER] + d_feats[None, :d]
    grads[USER_RE] = grads[USER_RE] + d_re[None, :]
    assert set(grads) == set(dense)
    for name, g in grads.items():
        np.testing.assert_allclose(g, dense[name].grad.numpy(), rtol=2e-4, atol=1e-6, err_msg=name)
    item_grad = np.zeros_like(learner.params[gmf.ITEM])
    np.add.at(item_grad, idx, g_rows)
    pos = learner._positives
    np.add.at(item_grad, pos, np.broadcast_to(d_feats[d:] / len(pos), (len(pos), d)))
    np.testing.assert_allclose(item_grad, table.grad.numpy(), rtol=2e-4, atol=1e-6)


@pytest.mark.parametrize("model", ["gmf", "ncf"])
def test_the_irrelevant_term_pushes_the_shared_side_away_from_the_estimator(model: str) -> None:
    """λ_ir alone: the frozen g^ir's cross-entropy on the node's own features rises more than
    without it (eq. 16 is maximised by the encoders). The frozen estimator's weights are scaled
    up so that its output depends on its input more than a fresh draw's does."""

    def ce_after(lambda_ir: float) -> float:
        learner = _learner(model, PardConfig(lambda_ir=lambda_ir, lambda_re=0.0, epochs=0), lr=0.05)
        for w in learner.estimators.ir.weights:
            w *= 3.0
        for _ in range(20):
            learner.local_update()
        return -learner.estimators.loss_ir(learner.features()[None, :], learner.labels[None, :])

    assert ce_after(5.0) > ce_after(0.0) + 1.0


def test_the_relevant_term_pulls_z_re_toward_the_attribute_representation() -> None:
    def distance_after(lambda_re: float) -> float:
        learner = _learner("ncf", PardConfig(lambda_ir=0.0, lambda_re=lambda_re, epochs=0), lr=0.05)
        for _ in range(5):
            learner.local_update()
        return learner.estimators.loss_ip(learner.params[USER_RE], learner.labels[None, :])

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
        np.testing.assert_array_equal(a, b)
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

    def weights(sample: float, seed: int) -> list[np.ndarray]:
        est = Estimators(4, (2,), seed=0)
        est.fit(
            public,
            public.features[0],
            public.user_re[0],
            public.labels[0],
            PardConfig(public_sample=sample),
            seed,
        )
        return [p.copy() for p in est.parameters()]

    def same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
        return all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))

    assert same(weights(0.08, 3), weights(0.08, 3))  # the node's seed decides the draw
    assert not same(weights(0.08, 3), weights(0.08, 4))
    assert not same(weights(0.08, 3), weights(1.0, 3))  # 4 rows of 50 a step, not all of them


def _modules(stack: Stack) -> list[torch.nn.Module]:
    """torch's own discriminator modules (learning.attribute_mlp.mlp) holding a stack's weights."""
    nets = []
    for t, c in enumerate(stack.classes):
        net = mlp(stack.weights[0].shape[1], c)
        linears = [m for m in net if isinstance(m, torch.nn.Linear)]
        with torch.no_grad():
            for lin, (w, b) in zip(linears, stack.layer(t), strict=True):
                lin.weight.copy_(torch.from_numpy(np.ascontiguousarray(w.T)))
                lin.bias.copy_(torch.from_numpy(b.copy()))
        net.eval()  # dropout off: the encoders' stage reads the estimators frozen
        nets.append(net)
    return nets


def _torch_ce(out: torch.Tensor, y: np.ndarray, classes: int) -> torch.Tensor:
    target = torch.from_numpy(np.asarray(y))
    if classes == 2:
        return torch.nn.functional.binary_cross_entropy_with_logits(out.squeeze(1), target.float())
    return torch.nn.functional.cross_entropy(out, target)


@pytest.mark.parametrize("uniform", [False, True])
def test_the_stacked_estimators_gradients_are_torchs_each_clipped_on_its_own(uniform: bool) -> None:
    """The stacked estimators' analytic gradients (weights and input) against torch's modules and
    autograd, then clipped against ``clip_grad_norm_`` per module, attribute by attribute."""
    dim, classes = 4, (2, 3, 5)
    est = Estimators(dim, classes, seed=2)
    rng = np.random.default_rng(3)
    x = rng.normal(size=(6, 2 * dim)).astype(np.float32) * 40  # gradients past the bound
    y = np.stack([rng.integers(0, c, 6) for c in classes], axis=1)
    nets = _modules(est.ir)
    xt = torch.from_numpy(x).requires_grad_(True)
    run = est.ir.forward(x)
    value, d_logits = est.ir.uniform(run) if uniform else est.ir.cross_entropy(run, y)
    dx, grads = est.ir.backward(run, d_logits, weights=True)
    total = torch.zeros(())
    for t, (net, c) in enumerate(zip(nets, classes, strict=True)):
        net.eval()
        out = net(xt)
        if not uniform:
            total = total + _torch_ce(out, y[:, t], c)
        else:
            logp = torch.nn.functional.logsigmoid(torch.cat((-out, out), 1)) if c == 2 else out.log_softmax(1)
            total = total - logp.mean()
    total.backward()  # type: ignore[no-untyped-call]
    assert value == pytest.approx(total.item(), rel=1e-5)
    assert dx is not None
    np.testing.assert_allclose(dx, xt.grad.numpy(), rtol=1e-4, atol=1e-6)
    grads_all: list[np.ndarray | None] = [*grads, *(np.zeros_like(g) for g in est.fp.tensors()), None]
    est._clip(grads_all, 2.0)
    for t, (net, c) in enumerate(zip(nets, classes, strict=True)):
        norm = float(torch.nn.utils.clip_grad_norm_(list(net.parameters()), 2.0))
        assert norm > 2.0  # the bound was reached: the clip is tested, not skipped
        linears = [m for m in net if isinstance(m, torch.nn.Linear)]
        cols = slice(1, 2) if c == 2 else slice(0, c)
        for k, lin in enumerate(linears):
            gw, gb = grads_all[2 * k][t], grads_all[2 * k + 1][t, 0]
            if k == len(linears) - 1:
                unread = [j for j in range(gw.shape[1]) if j not in range(gw.shape[1])[cols]]
                assert np.count_nonzero(gw[:, unread]) == 0 and np.count_nonzero(gb[unread]) == 0
                gw, gb = gw[:, cols], gb[cols]
            np.testing.assert_allclose(gw, lin.weight.grad.T.numpy(), rtol=1e-4, atol=1e-6)
            np.testing.assert_allclose(gb, lin.bias.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_the_estimators_run_on_schedule_and_the_privacy_terms_from_their_first_fit() -> None:
    """Algorithm 1 (every update from the first), 004's code (every second update after a
    warm-up of recommendation alone), and a learner that follows the schedule."""
    assert [PardConfig().phase(u) for u in range(3)] == [(True, True)] * 3
    code = PardConfig(every=2, warmup=3)
    assert [code.phase(u) for u in range(7)] == [
        (False, False),
        (False, False),
        (False, False),
        (False, False),  # the fine-tuning's first update: no estimators yet, no privacy terms
        (True, True),
        (False, True),
        (True, True),
    ]
    with pytest.raises(ValueError):
        PardConfig(every=0)
    learner = _learner("ncf", PardConfig(every=2, warmup=1))
    weights = [learner.estimators.parameters()[0].copy()]
    for _ in range(4):
        learner.public = PublicSet(
            np.ones((3, 16), np.float32), np.zeros((3, 8), np.float32), np.zeros((3, 2), np.int64)
        )
        learner.local_update()
        weights.append(learner.estimators.parameters()[0].copy())
    moved = [not np.array_equal(a, b) for a, b in itertools.pairwise(weights)]
    assert moved == [False, False, True, False]


@pytest.mark.parametrize(
    "config",
    [
        PardConfig(),
        PardConfig(public_sample=1.0, ir_loss="uniform"),
        PardConfig(lambda_re=0.0),
        PardConfig(lambda_ir=0.0, clip=0.5),
    ],
    ids=["defaults", "all-rows-uniform", "ir-only", "re-only-tight-clip"],
)
@pytest.mark.parametrize("public_rows", [0, 30])
def test_the_compiled_estimators_train_as_the_numpy_ones(config: PardConfig, public_rows: int) -> None:
    """learning/pard_fused.py against the numpy reference: the same draws, the same weights and
    momenta after several fits (to float32 precision), the same loss and gradients of eq. 38's
    privacy part, for one user's row and for several."""
    dim, classes = 6, (2, 3, 5)
    rng = np.random.default_rng(5)
    public = PublicSet(
        rng.normal(size=(public_rows, 2 * dim)).astype(np.float32) * 3,
        rng.normal(size=(public_rows, dim)).astype(np.float32),
        np.stack([rng.integers(0, c, public_rows) for c in classes], axis=1).reshape(public_rows, 3),
    )
    own = (rng.normal(size=2 * dim).astype(np.float32), rng.normal(size=dim).astype(np.float32))
    labels = np.array([1, 2, 4])
    reference = replace(config, fused=False)
    compiled, numpy_ = Estimators(dim, classes, seed=7), Estimators(dim, classes, seed=7)
    for seed in range(4):
        compiled.fit(public, *own, labels, config, seed)
        numpy_.fit(public, *own, labels, reference, seed)
    a, b = compiled.state(), numpy_.state()
    assert a.keys() == b.keys()  # the same momenta exist: the same estimators were stepped
    moved = Estimators(dim, classes, seed=7).state()
    assert any(not np.array_equal(a[k], moved[k]) for k in moved)  # the fits changed something
    for key in a:
        np.testing.assert_allclose(a[key], b[key], rtol=1e-5, atol=1e-6, err_msg=key)
    feats = np.stack((own[0], own[0] * 0.5))
    user_re = np.stack((own[1], -own[1]))
    rows = np.stack((labels, np.array([0, 1, 3])))
    for args in ((own[0], own[1], labels), (feats, user_re, rows)):
        got = compiled.encoders(*args, config)
        want = compiled.encoders(*args, reference)
        assert got[0] == pytest.approx(want[0], rel=1e-5, abs=1e-7)
        for g, w in zip(got[1:], want[1:], strict=True):
            assert g.shape == w.shape and g.dtype == np.float32
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize("model", ["gmf", "ncf"])
@pytest.mark.parametrize("combine", ["concat", "sum"])
def test_an_observer_scores_what_pard_shares_with_its_own_head_and_z_re_at_zero(
    model: str, combine: str
) -> None:
    """adversary.models.OwnHead: a received (z^ir, item rows) scored with the observer's head is
    the observer's own model's score with the sender's z^ir in place of its own and z^re at 0."""
    from adversary.models import OwnHead, attack_model

    observer = _learner(model, PardConfig(lambda_ir=0.0, lambda_re=0.0), user=1, combine=combine)
    sender = _learner(model, PardConfig(lambda_ir=0.0, lambda_re=0.0), user=2, combine=combine)
    for learner in (observer, sender):
        learner.local_update()
    observer.local_update()  # the two heads differ
    attack = OwnHead(attack_model(model))
    with pytest.raises(RuntimeError, match="borrowed"):
        attack.relevance({}, np.zeros(8, np.float32), slice(None))
    attack.borrow(observer.params)
    shared = sender.snapshot()
    assert set(shared) == {gmf.USER, gmf.ITEM}  # what PARD sends: no head, no z^re
    items = np.arange(40)
    got = attack.relevance(attack.keep(shared, items), attack.user_of(shared), slice(None))
    # a fictive user (Share less's e_A) trained through the borrowed head likes its targets
    targets = np.arange(10, 20)
    rows = observer.params[gmf.ITEM] * 30  # item rows of a trained scale, the targets alike
    rows[targets] += np.linspace(-0.5, 0.5, rows.shape[1], dtype=np.float32)
    own = {**observer.params, gmf.ITEM: rows}
    e_a = attack.fit_user(own, targets, np.random.default_rng(0), None)
    assert e_a.shape == (8,) and np.isfinite(e_a).all() and np.abs(e_a).max() > 0.1
    if model == "gmf":  # (this NCF's 4 hidden units all die as e_A pushes the negatives down)
        liked = attack.relevance(attack.keep(own, np.arange(200)), e_a, slice(None))
        assert liked[targets].mean() > np.delete(liked, targets).mean() + 0.05
    observer.params[gmf.USER][...] = shared[gmf.USER]
    observer.params[gmf.ITEM][...] = shared[gmf.ITEM]
    observer.params[USER_RE][...] = 0.0
    want = observer._scores(observer.params, items, 0.0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
