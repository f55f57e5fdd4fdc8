"""User-supplied interaction files and the synthetic planted-community generator."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from learning.interactions import DataError
from learning.synthetic import SyntheticConfig, planted_communities
from p2pnode.data.datasets import load_table


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_csv_with_header_and_timestamps(tmp_path: Path) -> None:
    rows = "user_id,item_id,timestamp\n" + "".join(
        f"u{u},i{i},{u * 10 + i}\n" for u in range(3) for i in range(6)
    )
    data = load_table(write(tmp_path, "d.csv", rows), min_interactions=5)
    assert (data.n_users, data.n_items, len(data)) == (3, 6, 18)
    assert data.raw_user_ids == ("u0", "u1", "u2")


def test_tsv_without_header_or_timestamps_uses_row_order(tmp_path: Path) -> None:
    rows = "".join(f"{u}\t{i}\n" for u in range(4) for i in range(5))
    data = load_table(write(tmp_path, "d.tsv", rows), min_interactions=2)
    assert len(data) == 20
    first_user = data.timestamps[data.users == 0]
    assert list(first_user) == sorted(first_user)


def test_min_interactions_drops_light_users(tmp_path: Path) -> None:
    rows = "".join(f"a,{i}\n" for i in range(6)) + "".join(f"b,{i}\n" for i in range(3))
    rows += "".join(f"c,{i}\n" for i in range(7))
    data = load_table(write(tmp_path, "d.csv", rows), min_interactions=5)
    assert data.raw_user_ids == ("a", "c")
    assert set(np.unique(data.users)) == {0, 1}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1,2,3\n1,2\n", r"d.csv:2: 2 fields where earlier rows have 3"),
        ("1,2,3\n1,2,yesterday\n", r"d.csv:2: field time 'yesterday' is not a timestamp in epoch"),
        ("1,2\n1\n", r"d.csv:2: 1 fields where earlier rows have 2"),
        ("1,2,3,4\n", r"d.csv:1: cannot tell the columns of its 4-field rows \(split at ','\): name them"),
        ("1,2,noon\n", r"d.csv:1: field time 'noon' is not a timestamp .*if this line is a header"),
        (",2\n", r"d.csv:1: field user is empty"),
        ("", "empty"),
    ],
)
def test_bad_rows_name_the_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(DataError, match=message):
        load_table(write(tmp_path, "d.csv", text), min_interactions=2)


def test_missing_file_and_too_strict_filter(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="does not exist"):
        load_table(tmp_path / "nope.csv")
    with pytest.raises(DataError, match="give --min-interactions at most 2 to keep 2 users or more"):
        load_table(write(tmp_path, "d.csv", "a,1\na,2\na,3\nb,1\nb,2\n"), min_interactions=3)
    # one user with 30 items: no minimum helps, and the line says what a network needs instead
    # (it used to say "lower --min-interactions")
    one = "".join(f"a,{i}\n" for i in range(30))
    with pytest.raises(
        DataError, match=r"1 user\(s\), 1 of them with 2 items or more: a network needs at least 2"
    ):
        load_table(write(tmp_path, "one.csv", one), min_interactions=5)


def test_synthetic_is_seeded_and_returns_its_ground_truth() -> None:
    cfg = SyntheticConfig(users=60, items=300, communities=3, pool_size=30, pool_overlap=5, per_user=20)
    a, planted = planted_communities(cfg)
    b, _ = planted_communities(cfg)
    c, _ = planted_communities(SyntheticConfig(**{**cfg.__dict__, "seed": 1}))
    assert np.array_equal(a.items, b.items) and not np.array_equal(a.items, c.items)
    assert (a.n_users, a.n_items, len(a)) == (60, 300, 1200)
    assert sorted(u for g in planted.communities for u in g) == list(range(60))
    assert len(set(planted.pools[0]) & set(planted.pools[1])) == 5
    for community, pool in zip(planted.communities, planted.pools, strict=True):
        for u in community:
            items = set(a.items[a.users == u].tolist())
            assert len(items) == 20
            assert len(items & set(pool)) >= 10  # 80% expected from the pool
    assert planted.community_of(planted.communities[2][0]) == 2


def test_synthetic_in_pool_share_controls_separation() -> None:
    def share(p: float) -> float:
        cfg = SyntheticConfig(users=50, items=400, communities=2, in_pool_share=p)
        data, planted = planted_communities(cfg)
        hits = [
            len(set(data.items[data.users == u].tolist()) & set(planted.pools[c])) / cfg.per_user
            for c, members in enumerate(planted.communities)
            for u in members
        ]
        return float(np.mean(hits))

    assert share(0.9) > 0.85 and share(0.1) < 0.3


def test_synthetic_rejects_impossible_sizes() -> None:
    with pytest.raises(DataError, match="pools need"):
        SyntheticConfig(items=100, communities=10, pool_size=40).validate()


def test_a_small_catalogue_needs_fewer_test_negatives_and_says_so(tmp_path: Path) -> None:
    from p2pnode.config import RunConfig
    from p2pnode.nodes.prepare import prepare
    from p2pnode.runners.report import metric_for

    rows = [f"u{u},movie_{(u * 7 + j) % 40},{j}" for u in range(12) for j in range(8)]
    path = write(tmp_path, "small.csv", "user,item,ts\n" + "\n".join(rows) + "\n")
    config = RunConfig(nodes=12, dataset=str(path))
    with pytest.raises(DataError, match="give --test-negatives at most"):
        prepare(config)  # 40 items: 100 negatives cannot be drawn
    small = config.replace(**{"learning.test_negatives": 20})
    prep = prepare(small)
    assert all(len(u.test_negatives) == 20 for u in prep.users)
    assert metric_for(small).random == pytest.approx(20 / 21)  # K = 20 of 21 items: say so honestly


def test_the_summary_lists_predicted_communities_by_the_files_own_user_ids() -> None:
    """The README said an explicit target makes the summary list the predicted communities with
    scores; only --json had them."""
    from p2pnode.runners.report import cia_line

    cia = {
        "max_aac": 0.2, "round_of_max": 3, "best10_aac": 0.3, "upper_bound": 0.5, "random_bound": 0.1,
        "adversaries": 5,
        "predictions": [
            {"adversary": 0, "adversary_user": "alice", "community": [4, 2],
             "community_users": ["eve", "bob"], "scores": [0.9, 0.8]},
            {"adversary": 1, "adversary_user": "bob", "community": [], "community_users": [], "scores": []},
            *({"adversary": k, "community": [1], "scores": [0.5]} for k in range(2, 5)),
        ],
    }  # fmt: skip
    text = cia_line(cia)
    assert "adversary 0 (user alice): eve 0.900, bob 0.800" in text
    assert "adversary 1 (user bob): nobody yet" in text and "and 2 more adversaries" in text


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        # the bound every user allows, said once (it used to name the first user's: 13, then 12, ...)
        ({}, "has only 6 items it never touched to draw 100 test negatives from (a small "
         "catalogue): give --test-negatives at most 6 and --top-k at most 6 (below the 7 candidates)"),
        ({"learning.test_negatives": 6}, "HR@20 ranks the held-out item among 7 candidates "
         "(--test-negatives 6 and itself): every model would hit; give --top-k at most 6"),
        ({"learning.test_negatives": 3, "learning.top_k": 5},
         "give --top-k at most 3 or --test-negatives up to 6"),
        ({"learning.evaluation": "full"}, "among as few as 7 items here (--eval full, 12 items): "
         "every model would hit; give --top-k at most 6"),
    ],
)  # fmt: skip
def test_an_evaluation_the_data_cannot_back_is_refused_at_start_with_the_bound_that_works(
    tmp_path: Path, flags: dict[str, object], said: str
) -> None:
    from p2pnode.config import RunConfig
    from p2pnode.nodes.prepare import prepare

    # 12 items; user a touched 6 of them, b 4, c 3: a has the fewest untouched (6)
    rows = [("a", i) for i in range(6)] + [("b", i) for i in range(4, 8)] + [("c", i) for i in range(8, 11)]
    rows += [("d", 11), ("d", 0)]
    f = write(tmp_path, "d.csv", "".join(f"{u},{i}\n" for u, i in rows))
    config = RunConfig(dataset=str(f), nodes=4, rounds=1).replace(**{"min_interactions": 2, **flags})
    with pytest.raises(DataError) as refused:
        prepare(config)
    assert said in str(refused.value)
    ok = config.replace(
        **{"learning.test_negatives": 6, "learning.top_k": 3, "learning.evaluation": "sampled"}
    )
    assert len(prepare(ok).users) == 4  # the settings the line gave run
