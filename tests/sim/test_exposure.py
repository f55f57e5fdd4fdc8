"""Exposure in gossip learning (p2pnode/telemetry/exposure.py): who merged whose models, counted where the
merge happens, on simulated networks."""

from __future__ import annotations

import pytest

import p2pnode


@pytest.mark.parametrize("protocol", ["base", "samo"])
def test_every_merge_counts_once_for_its_sender_and_never_for_the_receiver(protocol: str) -> None:
    r = p2pnode.simulate(
        nodes=30, rounds=4, seed=3, protocol=protocol, progress=False, **{"learning.lr": 0.01}
    )
    rows = r["per_node"]
    usage = [row["merged_by_others"] for row in rows]
    exposure = [row["exposure"] for row in rows]
    if protocol == "base":  # Base GL merges one received model at a time
        assert sum(usage) == r["merges"]
    else:  # SAMO merges a buffer of models at once: more senders than merges
        assert sum(usage) >= r["merges"] > 0
    assert all(0 <= e <= min(u, 29) for e, u in zip(exposure, usage, strict=True))
    summary = r["exposure"]
    assert summary["usage"]["mean"] == pytest.approx(sum(usage) / 30)
    assert summary["usage"]["max"] == max(usage) and summary["exposure"]["max"] == max(exposure)
    assert 0 <= summary["above_tau"] <= 1 and 0 < summary["privacy_risk"] <= summary["usage"]["mean"]


def test_fedavg_has_no_exposure_figures() -> None:
    r = p2pnode.simulate(nodes=20, rounds=2, seed=1, protocol="fedavg", progress=False)
    assert "exposure" not in r
