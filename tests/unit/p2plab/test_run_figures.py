"""The run report's figures stay readable at any size of run: attribute inference's observers
are drawn as a mean and a range, one colour per attribute, with a legend that does not grow
with the observers (p2plab/run_report.py)."""

from __future__ import annotations

import random
from typing import Any

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.colors import to_hex

from p2plab.run_report import ATTRIBUTE_COLOURS, draw_inference


def evaluations(observers: int, rounds: tuple[int, ...] = (5, 10, 15, 20)) -> list[dict[str, Any]]:
    """Made-up AIA evaluations: the omniscient observer and ``observers`` placed ones."""
    rng = random.Random(1)

    def scores(rnd: int) -> dict[str, Any]:
        return {
            "round": rnd,
            "attributes": {
                "gender": {"auc": rng.random(), "majority": {"auc": 0.5}},
                "age": {"micro_f1": rng.random(), "majority": {"micro_f1": 0.4}},
                "occupation": {"micro_f1": rng.random(), "majority": {"micro_f1": 0.04}},
            },
        }

    return [
        {
            "round": r,
            "aia": {"omniscient": scores(r), **{f"colluders {k}": scores(r) for k in range(observers)}},
        }
        for r in rounds
    ]


def test_the_aia_legend_does_not_grow_with_the_observers_and_each_attribute_keeps_its_colour() -> None:
    for observers in (0, 1, 12, 60):
        fig, ax = plt.subplots()
        draw_inference(ax, evaluations(observers), "test")
        legend = ax.get_legend()
        assert legend is not None
        labels = [t.get_text() for t in legend.get_texts()]
        placed = 3 if observers else 0  # one "placed (mean)" entry an attribute (was 2 per observer)
        assert len(labels) == 6 + placed and len(set(labels)) == len(labels), labels
        assert "gender AUC, omniscient" in labels and "occupation majority class" in labels
        for line in ax.get_lines():  # the attribute decides the colour, in every figure
            name = str(line.get_label()).split(" ")[0]
            assert to_hex(line.get_color()) == to_hex(ATTRIBUTE_COLOURS[name]), line.get_label()
        bands = len(ax.collections)
        assert bands == (3 if observers > 1 else 0)  # the range of two or more placed observers
        if observers:
            assert f"{observers} placed observers' mean" in ax.get_title()
        plt.close(fig)


def test_a_single_evaluation_has_its_round_as_the_one_tick() -> None:
    fig, ax = plt.subplots()
    draw_inference(ax, evaluations(0, rounds=(4,)), "test")
    assert list(ax.get_xticks()) == [4]  # not 3.80, 3.85, ...
    plt.close(fig)


def test_the_knn_figure_shows_data_usage_against_tau_with_the_mae() -> None:
    from p2plab.run_report import draw_knn

    knn = {"strategy": "expect", "k": 10, "tau": 89.1, "vulnerable": 0.45, "mae": 0.9114, "done": 1317,
           "queries": 1317, "data_usage": {"median": 80.0}}  # fmt: skip
    fig, ax = plt.subplots()
    draw_knn(ax, knn, [12, 40, 80, 90, 300, 571], "test")
    legend = ax.get_legend()
    assert legend is not None
    assert [t.get_text() for t in legend.get_texts()] == ["nodes", "τ = 89.1 (45.0% past it)", "median 80"]
    assert ax.get_title().startswith("KNN expect (k 10): MAE 0.9114 over 1317 of 1317 queries")
    plt.close(fig)


def test_the_follow_table_has_knn_columns_read_from_the_knn_gauges() -> None:
    from p2plab.follow import render, summarize

    page = "\n".join(
        [
            "# TYPE p2pnode_round gauge",
            'p2pnode_round{node="0"} 3',
            'p2pnode_round{node="1"} 3',
            "# TYPE p2pnode_knn gauge",
            'p2pnode_knn{node="0",figure="queries"} 5',
            'p2pnode_knn{node="1",figure="queries"} 7',
            'p2pnode_knn{node="0",figure="data_usage"} 10',
            'p2pnode_knn{node="1",figure="data_usage"} 30',
            'p2pnode_knn{node="1",figure="epsilon"} 2',
            "",
        ]
    )
    row = summarize(page)
    assert (row["nodes"], row["KNN q"], row["usage"]) == (2, 12, 20)
    table = render({"a:1": row}).splitlines()
    assert "KNN q" in table[0] and "usage" in table[0]
    plain = summarize('# TYPE p2pnode_round gauge\np2pnode_round{node="0"} 3\n')
    assert render({"a:1": plain}).splitlines()[1].split()[3:7] == [
        "-",
        "-",
        "-",
        "-",
    ]  # HR, CIA, KNN q, usage


def test_every_panel_is_one_an_earlier_run_is_cleared_of() -> None:
    """--out into a folder holding an earlier run removes that run's figures by name
    (``PANEL_FILES``): a panel missing from the list would be left beside the new run's."""
    import re
    from pathlib import Path

    import p2plab.run_report as rr

    drawn = set(re.findall(r'out\.append\(\("([a-z_]+\.png)"', Path(rr.__file__).read_text()))
    assert drawn == set(rr.PANEL_FILES), drawn ^ set(rr.PANEL_FILES)


@pytest.mark.slow
def test_every_figure_of_a_run_has_a_title_and_a_legend_that_fits() -> None:
    from p2plab.run_report import panels, run_size
    from p2pnode.config import RunConfig
    from p2pnode.runners.sim import simulate

    config = RunConfig(nodes=24, rounds=3, seed=1).replace(
        **{"learning.lr": 0.01, "attack.kind": "cia", "attack.target_k": 3, "attack.mia": True,
           "attack.colluders": 0.25, "attack.mia_holdout": 3, "knn.strategy": "expect"}
    )  # fmt: skip
    result = simulate(config)
    drawn = panels(result, config, run_size(result, config))
    assert {name for name, _ in drawn} == {"utility.png", "cia.png", "mia_roc.png", "knn.png"}
    for name, draw in drawn:
        fig, ax = plt.subplots(figsize=(6.4, 4.4))
        draw(ax)
        legend = ax.get_legend()
        assert legend is not None, name
        labels = [t.get_text() for t in legend.get_texts()]
        assert 1 <= len(labels) <= 9 and len(set(labels)) == len(labels) and all(labels), (name, labels)
        assert ax.get_title().strip() and ax.get_xlabel() and ax.get_ylabel(), name
        plt.close(fig)
