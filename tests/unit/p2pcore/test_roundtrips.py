"""Round-trip histograms: binning, merging, quantiles, and the smoothed bound (RFC 6298 §2)."""

from __future__ import annotations

import pytest

from p2pcore import roundtrips
from p2pcore.roundtrips import EDGES, RoundTrips


def test_round_trips_fall_in_power_of_two_bins_and_the_rest_in_the_last() -> None:
    trips = RoundTrips()
    for t in (0.0, 0.1, 0.3, 1.0, 1.5, 5000.0):
        trips.add(t)
    assert trips.samples == 6 and trips.total == pytest.approx(5002.9)
    counts = trips.counts
    assert counts[0] == 2  # <= 0.125
    assert counts[EDGES.index(0.5)] == 1 and counts[EDGES.index(1.0)] == 1 and counts[EDGES.index(2.0)] == 1
    assert counts[-1] == 1


def test_the_bound_follows_the_smoothed_mean_and_deviation() -> None:
    trips = RoundTrips()
    assert trips.bound() == 0.0
    trips.add(4.0)
    assert trips.bound() == pytest.approx(4.0 + 4 * 2.0)  # first sample: rttvar = rtt / 2
    for _ in range(200):
        trips.add(4.0)
    assert trips.bound() == pytest.approx(4.0, abs=1e-6)  # steady answers: the deviation fades


def test_merged_histograms_add_up_and_other_edges_are_left_out() -> None:
    a, b = RoundTrips(), RoundTrips()
    a.add(0.2)
    b.add(3.0)
    b.add(3.0)
    merged = roundtrips.merge([a.to_dict(), None, b.to_dict(), {"edges": [1.0], "counts": [5, 5]}])
    assert merged is not None and sum(merged["counts"]) == 3
    assert roundtrips.mean(merged) == pytest.approx(6.2 / 3)
    assert roundtrips.merge([None, {}]) is None


def test_quantiles_interpolate_inside_their_bin_and_are_monotone() -> None:
    trips = RoundTrips()
    for _ in range(50):
        trips.add(0.3)  # bin (0.25, 0.5]
    for _ in range(50):
        trips.add(3.0)  # bin (2, 4]
    h = trips.to_dict()
    assert 0.25 <= roundtrips.quantile(h, 0.25) <= 0.5
    assert 2.0 <= roundtrips.quantile(h, 0.75) <= 4.0
    qs = [roundtrips.quantile(h, k / 20) for k in range(21)]
    assert qs == sorted(qs)
    assert roundtrips.quantile({"counts": []}, 0.5) == 0.0


def test_a_simulated_link_draws_its_delays_between_the_quantiles_it_is_given() -> None:
    import random

    from p2pnode.transport.memory import LinkConfig

    link = LinkConfig(delays=(0.0, 1.0, 10.0))
    rng = random.Random(0)
    draws = [link.draw(rng) for _ in range(2000)]
    assert min(draws) >= 0.0 and max(draws) <= 10.0
    assert 0.4 < sum(d <= 1.0 for d in draws) / len(draws) < 0.6  # half between each pair
    assert LinkConfig(delay_min=1.0, delay_max=2.0).draw(rng) >= 1.0 and LinkConfig().draw(rng) == 0.0
    for bad in ((1.0,), (2.0, 1.0), (-1.0, 1.0)):
        with pytest.raises(ValueError, match="quantiles"):
            LinkConfig(delays=bad)
