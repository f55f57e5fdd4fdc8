"""``--eval full``: the held-out item ranked among every item a user never touched, against the
papers' 100 sampled negatives, on one simulated network (learning/metrics.py)."""

from __future__ import annotations

import p2pnode


def test_full_ranking_reports_every_figure_below_the_sampled_one_and_its_own_random_baseline() -> None:
    common = {"nodes": 30, "rounds": 3, "seed": 4, "learning.lr": 0.01}
    sampled = p2pnode.simulate(**common)
    full = p2pnode.simulate(**common, **{"learning.evaluation": "full"})
    for key in ("hit_ratio_at_20", "ndcg_at_20", "recall_at_20", "mrr"):
        assert key in sampled and key in full
        # the same models (evaluation changes no training); more candidates rank the item no higher
        assert full[key] <= sampled[key]
    assert full["mrr"] < sampled["mrr"]
    assert full["recall_at_20"] == full["hit_ratio_at_20"]  # one held-out item: Recall@K is HR@K
    assert full["local_steps"] == sampled["local_steps"] and full["bytes"] == sampled["bytes"]
    # a random ranking among ~1,600 items: K / (untouched + 1) averaged over the users
    assert 0.01 < full["hit_ratio_at_20_random"] < 0.02 and "hit_ratio_at_20_random" not in sampled
    history = full.history
    assert {"ndcg_at_20", "recall_at_20", "mrr", "hit_ratio_at_20_random"} <= set(history.columns)
    assert len(history) == 3
