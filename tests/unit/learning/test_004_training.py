"""Paper 004's training of FedNCF as its code runs it: SGD in three rate groups (learning/
sgd_groups.py) against torch's SGD, the early stop on a validation item (learning/early_stop.py),
and the popularity baseline (learning/metrics.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from learning import ncf
from learning.early_stop import EarlyStop, validation_figure
from learning.metrics import item_counts, popularity_hit
from learning.ncf_learner import NCFConfig, NCFLearner
from learning.pard import PardConfig
from learning.pard_learner import PardLearner, PardTrain, init_user_re
from learning.sgd_groups import SGDGroups
from learning.split import hold_out_validation, leave_one_out
from learning.synthetic import SyntheticConfig, planted_communities


def test_the_rates_are_the_codes_lr_client_scaled_by_eta_the_fraction_and_the_items() -> None:
    g = SGDGroups.of(0.5, 80.0, 1682, 1.0)  # 004's ML-100k pre-training (trainer.py lines 366-371)
    assert (g.head, g.user, g.item) == (0.5, 40.0, 0.5 * 1682 * 80)
    assert SGDGroups.of(0.1, 1.0, 1682, 0.8).user == pytest.approx(0.125)
    assert (g.rate("w1"), g.rate("b2"), g.rate("user"), g.rate("user_re"), g.rate("item")) == (
        0.5,
        0.5,
        40.0,
        40.0,
        0.5 * 1682 * 80,
    )
    with pytest.raises(ValueError):
        SGDGroups.of(0.5, 80.0, 1682, 0.0)


def _users(n_items: int = 200) -> list:  # type: ignore[type-arg]
    data, _ = planted_communities(SyntheticConfig(users=6, items=n_items, per_user=20))
    return leave_one_out(data, 0, 20)


def test_one_local_update_is_torchs_sgd_with_three_parameter_groups() -> None:
    """The code's optimiser (``torch.optim.SGD`` over the MLP, the user row and the item table at
    their own rates) on the same batches moves every tensor as the learner does."""
    users = _users()
    init = ncf.init_params(200, 8, 4, seed=3, std=1.0)
    groups = SGDGroups.of(0.5, 80.0, 200, 1.0)
    cfg = NCFConfig(dim=8, hidden=4, lr=0.5, negatives=5, batch_size=16, sgd=groups)
    learner = NCFLearner(users[0], init, cfg, np.random.default_rng(4))
    batches = NCFLearner(users[0], init, cfg, np.random.default_rng(4)).examples()  # the same draw
    t = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in init.items()}
    opt = torch.optim.SGD(
        [
            {"params": [t[ncf.W1], t[ncf.B1], t[ncf.W2], t[ncf.B2]], "lr": groups.head},
            {"params": [t[ncf.USER]], "lr": groups.user},
            {"params": [t[ncf.ITEM]], "lr": groups.item},
        ]
    )
    items, labels = batches
    for start in range(0, len(items), 16):
        idx = torch.from_numpy(items[start : start + 16])
        y = torch.from_numpy(labels[start : start + 16]).double()
        h = torch.cat((t[ncf.USER].expand(len(idx), -1), t[ncf.ITEM][idx]), dim=1)
        logit = torch.relu(h @ t[ncf.W1] + t[ncf.B1]) @ t[ncf.W2] + t[ncf.B2]
        opt.zero_grad()
        torch.nn.functional.binary_cross_entropy_with_logits(logit, y).backward()
        opt.step()
    learner.local_update()
    for name, tensor in t.items():
        np.testing.assert_allclose(
            learner.params[name], tensor.detach().numpy(), rtol=2e-3, atol=2e-3, err_msg=name
        )
    assert not np.allclose(learner.params[ncf.ITEM], init[ncf.ITEM])  # it moved


def test_pards_warmup_takes_its_own_rates_then_the_fine_tuning_ones() -> None:
    users = _users()
    init = init_user_re(ncf.init_params(200, 8, 4, seed=3), 3, "sum")
    fine = SGDGroups.of(0.1, 1.0, 200, 1.0)
    warm = SGDGroups.of(0.5, 80.0, 200, 1.0)
    pard = PardConfig(0.5, 0.3, warmup=1)
    labels, classes = np.array([1]), (2,)

    def run(train: PardTrain) -> PardLearner:
        shared = (ncf.USER, ncf.ITEM)
        learner = PardLearner(
            users[0], init, train, pard, labels, classes, np.random.default_rng(1), shared, 9
        )
        learner.local_update()  # the warm-up's update: recommendation loss alone
        return learner

    both = run(PardTrain("ncf", 0.1, negatives=5, sgd=fine, warmup_sgd=warm))
    warm_only = run(PardTrain("ncf", 0.5, negatives=5, sgd=warm))
    fine_only = run(PardTrain("ncf", 0.1, negatives=5, sgd=fine))
    np.testing.assert_array_equal(both.params[ncf.ITEM], warm_only.params[ncf.ITEM])
    assert not np.array_equal(both.params[ncf.ITEM], fine_only.params[ncf.ITEM])


def test_the_early_stop_keeps_the_latest_best_and_ends_after_patience_evaluations_below() -> None:
    stop = EarlyStop(2)
    assert stop.observe(1, 0.3)
    assert not stop.observe(2, 0.2)
    assert stop.observe(3, 0.3)  # a tie is the new best, as 004's code's ">="
    assert stop.best_round == 3 and not stop.done
    assert not stop.observe(4, 0.29)
    assert not stop.done
    assert not stop.observe(5, 0.1)
    assert stop.done and stop.best_round == 3 and stop.best == 0.3
    with pytest.raises(ValueError):
        EarlyStop(0)


def test_the_validation_figure_is_the_mean_hr_at_k_and_2k_of_users_with_a_validation_item() -> None:
    ranks: list[list[int | None]] = [[0], [15], [25], [None], []]
    assert validation_figure(ranks, 10) == (0.25, 0.5, 4)
    assert validation_figure([[], []], 10) == (0.0, 0.0, 0)


def test_the_validation_item_is_the_second_latest_and_ranked_among_its_own_negatives() -> None:
    users = _users()
    held = hold_out_validation(users, 0, 20)
    u, h = users[0], held[0]
    assert h.validation_items[0] == u.train_items[-1] and h.test_item == u.test_item
    assert len(h.validation_negatives) == 20 and not h.interacted[h.validation_negatives].any()
    learner = NCFLearner(
        h, ncf.init_params(200, 8, 4, seed=0), NCFConfig(dim=8, hidden=4), np.random.default_rng(0)
    )
    (rank,) = learner.validation_ranks()
    s = learner._scores(
        learner.params, np.concatenate(([h.validation_items[0]], h.validation_negatives)), 0.0
    )
    assert rank == int(np.count_nonzero(s[1:] >= s[0]))
    assert (
        NCFLearner(u, learner.params, NCFConfig(dim=8, hidden=4), np.random.default_rng(0)).validation_ranks()
        == []
    )


def test_popularity_ranks_by_the_training_counts_with_ties_in_random_order() -> None:
    counts = np.array([5, 9, 5, 5, 1, 7])
    # the held-out item 0 (count 5) against 1..5: 2 above it (9, 7), 2 tied (5, 5)
    cands = np.array([0, 1, 2, 3, 4, 5])
    assert popularity_hit(counts, cands, 2) == 0.0
    assert popularity_hit(counts, cands, 3) == pytest.approx(1 / 3)  # first of the three tied
    assert popularity_hit(counts, cands, 4) == pytest.approx(2 / 3)
    assert popularity_hit(counts, cands, 5) == 1.0
    assert popularity_hit(counts, np.array([1, 0, 4]), 1) == 1.0  # the most popular wins at K = 1
    trained = [np.array([0, 1, 1]), np.array([1, 2])]
    np.testing.assert_array_equal(item_counts(trained, 4), [1, 3, 1, 0])
    # against a brute force over random tie orders
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 4, 30)
    cands = rng.choice(30, 12, replace=False)
    hits = 0
    for _ in range(4000):
        jitter = counts[cands] + rng.random(12) * 0.5
        hits += int(np.count_nonzero(jitter[1:] > jitter[0])) < 4
    assert popularity_hit(counts, cands, 4) == pytest.approx(hits / 4000, abs=0.03)


def test_the_codes_negative_pool_holds_the_held_out_items_and_the_default_never_does() -> None:
    users = hold_out_validation(_users(), 0, 20)
    data = users[0]
    held = {data.test_item, int(data.validation_items[0])}
    init = ncf.init_params(200, 8, 4, seed=0)
    cfg = NCFConfig(dim=8, hidden=4, negatives=5)
    plain = NCFLearner(data, init, cfg, np.random.default_rng(0))
    code = NCFLearner(data, init, cfg, np.random.default_rng(0))
    code.negatives_outside_training()
    drawn_plain: set[int] = set()
    drawn_code: set[int] = set()
    for _ in range(60):
        for learner, drawn in ((plain, drawn_plain), (code, drawn_code)):
            items, labels = learner.examples()
            drawn.update(int(i) for i in items[labels == 0])
    assert not drawn_plain & held and not drawn_plain & set(data.train_items.tolist())
    assert drawn_code & held  # 004's code trains on its held-out items as negatives now and then
    assert not drawn_code & set(data.train_items.tolist())
