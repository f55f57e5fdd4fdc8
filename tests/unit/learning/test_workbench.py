"""FedAvg clients sharing one copy of the item tables (learning/workbench.py): the same numbers as
clients with tables of their own, and no answer from a client that does not hold them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from learning import gmf, prme
from learning.interactions import Interactions
from learning.learner import BaseLearner, GMFLearner, TrainConfig
from learning.prme_learner import PRMEConfig, PRMELearner
from learning.split import leave_one_out
from learning.workbench import Workbench, WorkbenchError
from p2pnode.wire.delta import DeltaEncoder


def data() -> Interactions:
    users, items, times = [], [], []
    for u in range(4):
        for j in range(40):
            users.append(f"u{u}")
            items.append(str(40 * u + (7 * j) % 40))
            times.append(j)
    return Interactions.from_raw(users, items, times)


def learners(model: str, bench: bool) -> tuple[list[BaseLearner], dict[str, np.ndarray], Workbench | None]:
    split = leave_one_out(data(), seed=0)
    n_items = data().n_items
    made: list[BaseLearner] = []
    if model == "prme":
        init = prme.init_params(n_items, 8, seed=1)
        for u in split:
            cfg = PRMEConfig(dim=8, lr=0.2, batch_size=16)
            made.append(PRMELearner(u, init, cfg, np.random.default_rng(u.user)))
        names: tuple[str, ...] = (prme.ITEM_P, prme.ITEM_S)
    else:
        init = gmf.init_params(n_items, 8, seed=1)
        for u in split:
            made.append(GMFLearner(u, init, TrainConfig(factors=8, lr=0.05), np.random.default_rng(u.user)))
        names = (gmf.ITEM,)
    wb = Workbench(init, names) if bench else None
    if wb is not None:
        for lrn in made:
            lrn.use_workbench(wb)
    return made, init, wb


def fed_rounds(model: str, bench: bool, rounds: int = 3) -> list[Any]:
    """FedAvg by hand: each round every client but one (in turn) loads the mean of the last
    round's snapshots and trains; after the round every client is evaluated and its norm read."""
    clients, init, _ = learners(model, bench)
    global_model = {k: v.copy() for k, v in init.items()}
    seen: list[Any] = []
    for r in range(rounds):
        snaps = []
        for i, lrn in enumerate(clients):
            if i == r % len(clients):  # not selected: keeps its last model
                continue
            seen.append(("norm", i, lrn.norm(lrn.shared_names)))  # what vet reads before the load
            lrn.load(global_model)
            lrn.local_update()
            assert lrn.finite()
            snaps.append(lrn.snapshot())
        global_model = {k: np.mean([s[k] for s in snaps], axis=0, dtype=np.float32) for k in snaps[0]}
        seen.append(("utility", r, [lrn.evaluate() for lrn in clients]))
        seen.append(("global", r, {k: v.tobytes() for k, v in global_model.items()}))
    return seen


@pytest.mark.parametrize("model", ["gmf", "prme"])
def test_clients_on_the_workbench_give_the_numbers_of_clients_with_their_own_tables(model: str) -> None:
    own = fed_rounds(model, bench=False)
    shared = fed_rounds(model, bench=True)
    assert shared == own
    assert any(kind == "global" for kind, *_ in own)


def test_a_parked_client_answers_its_utility_and_norm_and_nothing_else() -> None:
    (a, b, *_), init, wb = learners("gmf", bench=True)
    assert wb is not None and wb.holder is None
    at_init = (a.evaluate(), a.norm(a.shared_names), a.ranking())  # before any turn: θ_0's tables
    a.load(init)
    a.local_update()
    mine = (a.evaluate(), a.norm(a.shared_names), a.ranking())
    b.load(init)
    b.local_update()  # b's turn writes the shared tables
    assert wb.holder is b
    assert (a.evaluate(), a.norm(a.shared_names), a.ranking()) == mine != at_init
    for what in (a.snapshot, a.local_update, a.test_rank, a.catalogue_scores, a.state, a.recover):
        with pytest.raises(WorkbenchError):
            what()
    with pytest.raises(WorkbenchError):
        a.merge([init])
    with pytest.raises(ValueError, match="of a parked client"):
        a.norm(("item",))


def test_a_client_that_never_had_a_turn_is_read_at_theta_0() -> None:
    (a, b, *_), init, _ = learners("gmf", bench=True)
    (own_a, *_), _, _ = learners("gmf", bench=False)
    b.load(init)
    b.local_update()
    assert a.evaluate() == own_a.evaluate()
    assert a.norm(a.shared_names) == own_a.norm(own_a.shared_names)


def test_parking_closes_the_bases_on_tables_others_will_write() -> None:
    (a, b, *_), init, _ = learners("gmf", bench=True)
    enc = DeltaEncoder(history=a.history)
    a.load(init)
    a.local_update()
    sent = enc.encode(9, 1, a.snapshot())
    enc.acknowledged(9, 1, None)
    enc.settled(sent)
    assert enc.base_for(1) is not None  # open on a's live model
    b.load(init)  # a is parked: b writes the tables a's base would read
    assert enc.base_for(1) is None


def test_only_a_fresh_learner_moves_to_the_workbench_and_only_its_shared_tables() -> None:
    _, init, wb = learners("gmf", bench=True)
    (fresh, *_), _, _ = learners("gmf", bench=False)
    assert wb is not None
    fresh.local_update()
    with pytest.raises(ValueError, match="before it trains"):
        fresh.use_workbench(wb)
    with pytest.raises(ValueError, match="not a shared table"):
        learners("gmf", bench=False)[0][1].use_workbench(Workbench({"nope": init["item"]}, ("nope",)))
