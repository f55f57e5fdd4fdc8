"""Round-trip times a node's requests took, in ticks: a histogram that merges across nodes and
processes, and the smoothed estimate a protocol stretches its timeouts with.

Pure: the caller passes the times (ticks on whatever clock it runs). A real network's messages
take the time the machines take to carry and handle them; the simulator's take the delays it is
configured with. Both are measured the same way, so a real run's figures can be set against a
simulation with the delays the real run met (``p2plab.selfcheck``).

The estimate follows TCP's retransmission timer (Jacobson 1988; RFC 6298 §2): a smoothed mean
``srtt`` and mean deviation ``rttvar`` with gains 1/8 and 1/4, and ``srtt + 4 rttvar`` as the time
within which nearly every answer comes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

#: upper edges of the histogram's bins in ticks (powers of two); one more bin holds the rest
EDGES: tuple[float, ...] = tuple(2.0**k for k in range(-3, 11))  # 0.125 .. 1024


class RoundTrips:
    """Round trips seen: counts per bin of :data:`EDGES`, their sum, and the smoothed estimate."""

    __slots__ = ("counts", "rttvar", "srtt", "total")

    def __init__(self) -> None:
        self.counts = [0] * (len(EDGES) + 1)
        self.total = 0.0
        self.srtt: float | None = None
        self.rttvar = 0.0

    @property
    def samples(self) -> int:
        return sum(self.counts)

    def add(self, ticks: float) -> None:
        """One request answered ``ticks`` after it was sent."""
        ticks = max(0.0, ticks)
        k = 0
        while k < len(EDGES) and ticks > EDGES[k]:
            k += 1
        self.counts[k] += 1
        self.total += ticks
        if self.srtt is None:
            self.srtt, self.rttvar = ticks, ticks / 2
        else:
            self.rttvar += (abs(self.srtt - ticks) - self.rttvar) / 4
            self.srtt += (ticks - self.srtt) / 8

    def bound(self) -> float:
        """The time within which nearly every answer comes (``srtt + 4 rttvar``; 0 with no sample)."""
        return 0.0 if self.srtt is None else self.srtt + 4 * self.rttvar

    def to_dict(self) -> dict[str, Any]:
        return {"edges": list(EDGES), "counts": list(self.counts), "total": self.total}


def merge(parts: Iterable[Mapping[str, Any] | None]) -> dict[str, Any] | None:
    """The histograms of several nodes or processes (``RoundTrips.to_dict``) summed; None if
    none had one. Histograms with other edges (another version's) are left out."""
    counts = [0] * (len(EDGES) + 1)
    total, seen = 0.0, False
    for part in parts:
        if not part or list(part.get("edges", ())) != list(EDGES):
            continue
        got = part.get("counts", ())
        if len(got) != len(counts):
            continue
        seen = True
        counts = [a + int(b) for a, b in zip(counts, got, strict=True)]
        total += float(part.get("total", 0.0))
    return {"edges": list(EDGES), "counts": counts, "total": total} if seen else None


def quantile(hist: Mapping[str, Any], q: float) -> float:
    """The ``q``-quantile of a merged histogram, in ticks, interpolated inside its bin on a log
    scale (the first bin from 0, the last taken at twice its lower edge); 0 with no sample."""
    counts: Sequence[int] = hist.get("counts", ())
    n = sum(counts)
    if n == 0:
        return 0.0
    rank = min(max(q, 0.0), 1.0) * n
    seen = 0
    for k, c in enumerate(counts):
        if c and seen + c >= rank:
            share = (rank - seen) / c
            if k == 0:
                return EDGES[0] * share
            lo = EDGES[k - 1]
            hi = EDGES[k] if k < len(EDGES) else 2 * lo
            return float(lo * (hi / lo) ** share)
        seen += c
    return float(2 * EDGES[-1])


def mean(hist: Mapping[str, Any]) -> float:
    n = sum(hist.get("counts", ()))
    return float(hist.get("total", 0.0)) / n if n else 0.0
