"""Membership inference by a placed observer (adversary/mia_observer.py) and its figures in the
scorer (AttackLab.evaluate_mia's ``observers``)."""

from __future__ import annotations

import numpy as np

from adversary.evaluation import AttackLab, Victim
from adversary.mia_observer import MembershipWatch, views
from adversary.models import attack_model
from learning import gmf


def _model(rng: np.random.Generator, n_items: int = 30, d: int = 4) -> dict[str, np.ndarray]:
    return {
        gmf.USER: rng.normal(size=(1, d)).astype(np.float32),
        gmf.ITEM: rng.normal(size=(n_items, d)).astype(np.float32),
        gmf.H: rng.normal(size=(d,)).astype(np.float32),
        gmf.B: np.zeros(1, dtype=np.float32),
    }


def _scores(params: dict[str, np.ndarray]) -> np.ndarray:
    return np.asarray(gmf.score(params, params[gmf.USER][0], slice(None)), dtype=np.float32)


def test_a_watch_keeps_each_senders_latest_scores_and_counts_what_it_cannot_read() -> None:
    rng = np.random.default_rng(0)
    watch = MembershipWatch(attack_model("gmf"), "node 3")
    first, second = _model(rng), _model(rng)
    watch.observe(7, first, now=1.0)
    watch.observe(7, second, now=2.0)
    assert set(watch.rows) == {7}
    assert np.allclose(watch.rows[7][1], _scores(second))  # the latest model, over the catalogue
    shared_less = {k: v for k, v in first.items() if k != gmf.USER}  # Share less: no user row
    watch.observe(8, shared_less, now=3.0)
    headless = {k: v for k, v in first.items() if k not in (gmf.H, gmf.B)}  # --local-head
    watch.observe(9, headless, now=3.0)
    assert set(watch.rows) == {7} and watch.unreadable == 2
    again = MembershipWatch(attack_model("gmf"), "node 3")
    again.restore(watch.state())
    assert set(again.rows) == {7} and again.unreadable == 2
    assert np.array_equal(again.rows[7][1], watch.rows[7][1])


def test_a_groups_view_is_the_latest_row_any_member_received() -> None:
    model = attack_model("gmf")
    a, b, lone = (
        MembershipWatch(model, "colluders 0"),
        MembershipWatch(model, "colluders 0"),
        MembershipWatch(model, "node 5"),
    )
    old, new = np.zeros(3, np.float32), np.ones(3, np.float32)
    a.rows = {1: (5.0, new), 2: (1.0, old)}
    b.rows = {1: (4.0, old), 2: (2.0, new), 3: (1.0, old)}
    lone.rows = {4: (1.0, new)}
    a.unreadable, b.unreadable = 1, 2
    found = {v.name: v for v in views([a, b, lone])}
    assert sorted(found) == ["colluders 0", "node 5"]
    group = found["colluders 0"]
    assert sorted(group.scores) == [1, 2, 3] and group.unreadable == 3
    assert group.scores[1] is new and group.scores[2] is new and group.scores[3] is old
    assert list(found["node 5"].scores) == [4]


def _victims(rng: np.random.Generator, n: int = 12, n_items: int = 40) -> list[Victim]:
    out = []
    for u in range(n):
        scores = rng.uniform(0.01, 0.99, size=n_items).astype(np.float32)
        train = np.sort(rng.choice(n_items, size=8, replace=False))
        rest = np.setdiff1d(np.arange(n_items), train)
        scores[train] = np.clip(scores[train] + 0.3, 0, 0.999)  # members a little more likely
        out.append(Victim("gmf", scores, train, rest[:3], user=u, node=u))
    return out


def test_an_observer_holding_every_current_model_reads_what_the_omniscient_one_does() -> None:
    victims = _victims(np.random.default_rng(1))
    lab = AttackLab(None, mia=True)
    watch = MembershipWatch(attack_model("gmf"), "server")
    watch.rows = {v.node: (0.0, v.scores) for v in victims}
    out = lab.evaluate_mia(1, victims, views([watch]))
    assert out is not None
    seen = out["observers"]["server"]
    assert seen["observed"] == len(victims) and seen["coverage"] == 1.0
    for key in ("auc", "balanced_accuracy", "tpr_at_fpr", "members", "non_members"):
        assert seen[key] == out["pooled"][key], key
    assert seen["accuracy"] == out["accuracy"]


def test_an_observer_scores_only_the_users_it_heard_from_under_the_model_it_holds() -> None:
    rng = np.random.default_rng(2)
    victims = _victims(rng)
    lab = AttackLab(None, mia=True)
    watch = MembershipWatch(attack_model("gmf"), "node 0")
    # it heard from three users; from one of them an old model that ranks members last
    blind = victims[4].scores.copy()
    blind[victims[4].train_items] = 0.001
    watch.rows = {2: (0.0, victims[2].scores), 3: (0.0, victims[3].scores), 4: (0.0, blind)}
    seen = lab.evaluate_mia(1, victims, views([watch]))["observers"]["node 0"]  # type: ignore[index]
    assert seen["observed"] == 3 and seen["coverage"] == 3 / len(victims)
    assert seen["members"] == 24 and seen["non_members"] == 9
    omniscient = lab.evaluate_mia(2, victims[2:5])
    assert omniscient is not None and seen["auc"] < omniscient["pooled"]["auc"]
    summary = lab.mia_summary()
    assert summary is not None
    node = summary["observers"]["node 0"]
    assert node["observed"] == [3] and node["final_auc"] == seen["auc"] and node["final_roc"]


def test_an_observer_that_heard_from_nobody_has_no_curve() -> None:
    victims = _victims(np.random.default_rng(3))
    lab = AttackLab(None, mia=True)
    seen = lab.evaluate_mia(1, victims, views([MembershipWatch(attack_model("gmf"), "node 9")]))
    assert seen is not None
    row = seen["observers"]["node 9"]
    assert row["observed"] == 0 and "auc" not in row
    summary = lab.mia_summary()
    assert summary is not None and "final_auc" not in summary["observers"]["node 9"]


def test_a_groups_shared_rows_keep_the_latest_and_each_member_checkpoints_its_own() -> None:
    from adversary.mia_observer import SharedRows

    model = attack_model("gmf")
    pool = SharedRows()
    a, b = (MembershipWatch(model, "colluders 0", pool=pool, rank=r) for r in (3, 5))
    rng = np.random.default_rng(1)
    m1, m2, m3 = _model(rng), _model(rng), _model(rng)
    b.observe(7, m1, now=2.0)
    a.observe(7, m2, now=2.0)  # the same time: the lower rank's, as pooling in rank order gave
    b.observe(7, m3, now=2.0)
    assert pool.rows[7][1] == 3 and np.allclose(pool.rows[7][2], _scores(m2))
    b.observe(8, m3, now=1.0)
    a.observe(8, m1, now=0.5)  # older: b's row stays
    assert set(a.held()) == {7} and set(b.held()) == {8}
    (view,) = views([a, b])
    assert sorted(view.scores) == [7, 8]
    # a process restarted: each member's checkpoint restores its own rows into a new store
    fresh = SharedRows()
    a2, b2 = (MembershipWatch(model, "colluders 0", pool=fresh, rank=r) for r in (3, 5))
    b2.restore(b.state())
    a2.restore(a.state())
    (again,) = views([a2, b2])
    assert sorted(again.scores) == [7, 8]
    assert all(np.array_equal(again.scores[u], view.scores[u]) for u in (7, 8))
