"""004's baselines on a node (§IV-A-4): APM-like Laplace noise on what a node sends, and
UC-FedRec's adversarial term on the shared user row alone."""

from __future__ import annotations

import numpy as np
import pytest

from learning import gmf, ncf
from learning.learner import GMFLearner, TrainConfig
from learning.pard import USER_RE, PardConfig, PublicSet
from learning.pard_learner import PardLearner, PardTrain, init_user_re
from learning.split import leave_one_out
from learning.synthetic import SyntheticConfig, planted_communities


def _users() -> list:  # type: ignore[type-arg]
    data, _ = planted_communities(SyntheticConfig(users=12, items=200, per_user=25))
    return leave_one_out(data, 0, 50)


def test_upload_noise_is_laplace_on_every_sent_value_the_same_for_the_same_model() -> None:
    users = _users()
    learner = GMFLearner(
        users[0], gmf.init_params(200, 8, 0), TrainConfig(), np.random.default_rng(0), gmf.PARAM_NAMES
    )
    learner.local_update()
    clean = learner.snapshot()
    learner.upload_noise = (0.05, 7)
    noisy, again = learner.snapshot(), learner.snapshot()
    assert noisy.stamp == -1  # sent whole: a receiver's base is never a noisy copy's rows
    noise = np.concatenate([(noisy[k] - clean[k]).ravel() for k in clean])
    assert all(np.array_equal(noisy[k], again[k]) for k in clean)  # one model, one upload
    # Laplace(0, b): |x| exponential of mean b and median b·ln 2 (a Gaussian of deviation b
    # would give 0.80b and 0.67b), signs even
    assert float(np.mean(np.abs(noise))) == pytest.approx(0.05, rel=0.1)
    assert float(np.median(np.abs(noise))) == pytest.approx(0.05 * np.log(2), rel=0.15)
    assert abs(float(np.mean(noise > 0)) - 0.5) < 0.05
    before = learner.rng.bit_generator.state
    learner.snapshot()
    assert learner.rng.bit_generator.state == before  # reading draws from no training stream
    learner.local_update()
    moved = learner.snapshot()
    assert not np.array_equal(moved[gmf.ITEM] - learner.params[gmf.ITEM], noisy[gmf.ITEM] - clean[gmf.ITEM])


def test_uc_fedrec_has_one_user_row_and_hides_the_attributes_from_it_alone() -> None:
    users = _users()
    base = ncf.init_params(200, 8, 4, seed=0)
    init = init_user_re(base, 0, "sum", one_row=True)
    assert not init[USER_RE].any() and init[ncf.W1].shape == base[ncf.W1].shape
    pard = PardConfig(lambda_ir=5.0, lambda_re=0.0, one_row=True)

    def learner(p: PardConfig) -> PardLearner:
        return PardLearner(
            users[0],
            init,
            PardTrain("ncf", lr=0.05),
            p,
            np.array([1]),
            (2,),
            np.random.default_rng(0),
            (gmf.USER, gmf.ITEM),
            seed=3,
        )

    uc, plain = learner(pard), learner(PardConfig(lambda_ir=0.0, lambda_re=0.0, one_row=True))
    rows = np.random.default_rng(1)
    public = PublicSet(
        rows.normal(size=(6, 16)).astype(np.float32),
        np.zeros((6, 8), np.float32),
        rows.integers(0, 2, (6, 1)),
    )
    uc.public = public
    for _ in range(3):
        uc.local_update()
    assert not uc.params[USER_RE].any()  # z^re stays 0: the backbone's single row
    assert not uc.features()[8:].any()  # g^ir reads the user row alone
    # one step from the same state: the adversarial term moves the user row and no item row
    plain.restore(uc.state())
    idx, y = np.arange(10), (np.arange(10) % 2).astype(np.float32)
    uc._step(idx, y)
    plain._private = True
    plain._step(idx, y)
    assert not np.allclose(uc.params[gmf.USER], plain.params[gmf.USER])
    np.testing.assert_array_equal(uc.params[ncf.ITEM], plain.params[ncf.ITEM])
    np.testing.assert_array_equal(uc.params[ncf.W1], plain.params[ncf.W1])
