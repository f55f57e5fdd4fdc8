"""An experiment's per-round curve read from the runs' history, where only some rounds hold the
figure (attribute inference evaluates every --aia-every rounds, and leaves out an attribute its
observer has too few users for)."""

from __future__ import annotations

from p2plab.experiment_report import _mean_curve, _paired
from p2plab.experiment_spec import lookup_list


def _run(points: dict[int, float | None]) -> dict[str, object]:
    history: list[dict[str, object]] = []
    for r in range(1, 7):
        entry: dict[str, object] = {"round": r}
        if r in points:
            observer: dict[str, object] = {"round": r, "attributes": {}}
            if points[r] is not None:
                observer["attributes"] = {"gender": {"auc": points[r]}}
            entry["aia"] = {"node 0": observer}
        history.append(entry)
    return {"history": history}


def test_rounds_and_figures_are_paired_by_round_and_averaged_over_the_rounds_every_seed_has() -> None:
    a = _run({2: 0.6, 4: 0.7, 6: 0.8})
    b = _run({2: None, 4: 0.5, 6: 0.6})  # round 2 left the attribute out
    x, y = "history.*?.aia.node 0.round", "history.*?.aia.node 0.attributes.gender.auc"
    assert lookup_list(a, x) == [2, 4, 6] and lookup_list(b, y) == [0.5, 0.6]
    assert _paired(b, x, y) == ([4, 6], [0.5, 0.6])
    curve = _mean_curve([a, b], x, y, by_x=True)
    assert curve["x"] == [4, 6] and [round(v, 6) for v in curve["y"]] == [0.6, 0.7]
    assert lookup_list(a, "history.*?.aia.node 1.round") is None  # nobody holds it
