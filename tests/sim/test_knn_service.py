"""The peer-to-peer KNN service (protocols/knn.py) in the simulator, tied to the central module
(learning/reuseknn.py): with every node a candidate and the queries one after another, the
nodes' neighbourhoods, DataUsage, randomized answers and estimates are the central module's with
per-user generators, bit for bit; with candidates from peer sampling they move, and the run says
by how much."""

from __future__ import annotations

import math

import numpy as np
import pytest

from learning import reuseknn as rk
from p2pnode.config import RunConfig
from p2pnode.nodes.knn import knn_plan, knn_summary
from p2pnode.runners.sim import Simulation
from protocols.knn import KnnService

NODES = 40


def run(strategy: str, **knn: object) -> tuple[Simulation, dict[int, KnnService]]:
    cfg = RunConfig(nodes=NODES, rounds=2, view_size=10, seed=3).replace(
        **{"knn.strategy": strategy, **{f"knn.{k}": v for k, v in knn.items()}}
    )
    sim = Simulation(cfg)
    sim.run_round()
    sim.run_round()
    services = {i: r.node.knn for i, r in sim.host.nodes.items() if r.node.knn is not None}
    return sim, services


def central(sim: Simulation, strategy: str, k: int, cut: float, dp: bool) -> rk.QueryRun:
    plan = knn_plan(sim.prep)
    r = plan.ratings
    nb = rk.Neighbourhoods.fit(r.subset(plan.train))
    gens: dict[tuple[int, str], np.random.Generator] = {}

    def stream(u: int, role: str) -> np.random.Generator:
        return gens.setdefault((u, role), rk.user_stream(sim.config.seed, u, role))

    queries = (r.users[plan.test], r.items[plan.test])
    return rk.answer(nb, strategy, k, queries, cut, dp, np.random.default_rng(0), streams=stream)


@pytest.mark.parametrize("strategy", rk.STRATEGIES)
def test_full_candidates_give_the_central_modules_run_bit_for_bit(strategy: str) -> None:
    """τ = 3 so that most neighbours answer through randomized response: the noise each node
    draws is the central module's per-user draw."""
    sim, services = run(strategy, k=5, tau=3.0)
    plan = knn_plan(sim.prep)
    want = central(sim, strategy, 5, 3.0, True)
    r = plan.ratings
    users = r.users[plan.test]
    assert sum(len(s.done) for s in services.values()) == plan.queries > 500
    estimates = np.empty(plan.queries)
    for u, s in services.items():
        mine = np.flatnonzero(users == u)
        assert [d[:2] for d in s.done] == list(enumerate(r.items[plan.test[mine]].tolist()))
        estimates[mine] = [d[2] for d in s.done]
        assert s.stats.usage == want.data_usage[u]
        assert s.stats.real == want.privacy_risk[u]
        assert s.stats.randomized == want.dp_uses[u]
        assert s.at_q == want.neighbours_at_q.get(u, [])
        assert s.co_q == want.coratings_at_q.get(u, [])
    assert np.array_equal(estimates, want.estimates)
    assert sum(s.stats.randomized for s in services.values()) > 1000  # the noise was exercised
    truth = r.values[plan.test]
    summary = knn_summary(services.values(), plan)
    assert summary["mae"] == rk.mae(want.estimates, truth)
    assert summary["done"] == plan.queries and summary["pending"] == 0 and summary["timeouts"] == 0
    if strategy == "gain":  # each node's own counts and ε on /metrics, read at scrape time
        registry = sim.metrics.registry
        for u in (0, 7):
            s = services[u]
            for figure, want_value in (
                ("data_usage", s.stats.usage),
                ("randomized", s.stats.randomized),
                ("epsilon", s.epsilon),
            ):
                got = registry.get_sample_value("p2pnode_knn", {"node": str(u), "figure": figure})
                assert got == want_value
        assert math.log(3) < services[0].epsilon < math.inf


def test_view_candidates_move_exposure_and_mae_and_the_summary_says_how_far() -> None:
    """Candidates from PeerSwap's views (a few probed each wake-up over two rounds) instead of
    everyone: each node knows fewer users, so its neighbours are fewer and its answers worse."""
    sim, view = run("userknn", k=5, dp="off", candidates="view")
    plan = knn_plan(sim.prep)
    v = knn_summary(view.values(), plan)
    everyone = central(sim, "userknn", 5, math.inf, False)  # what full candidates give (above)
    truth = plan.ratings.values[plan.test]
    f = {"done": plan.queries, "mae": rk.mae(everyone.estimates, truth)}
    f["data_usage"] = {"max": float(everyone.data_usage.max())}
    known = [s.profiles_held for s in view.values()]
    assert 0 < np.mean(known) < NODES - 1  # fewer than everyone, more than none
    assert v["done"] == f["done"] == plan.queries
    assert v["mae"] != f["mae"]
    assert v["data_usage"]["max"] < f["data_usage"]["max"]
    # a node's checkpoint through the node runtime carries its service (p2pnode/nodes/node.py)
    runtime = sim.host.nodes[0]
    state = runtime.checkpoint_state()
    before = view[0].stats
    runtime.restore_state(state)
    assert "knn" in state and view[0].stats == before and view[0].stats.usage > 0
    # without randomized response every node that answered once has spent ε = ∞ (eq. 26)
    assert all(math.isinf(s.epsilon) == (s.stats.usage > 0) for s in view.values())
    assert v["unprotected"] == sum(s.stats.usage > 0 for s in view.values())
