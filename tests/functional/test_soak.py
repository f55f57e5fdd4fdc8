"""The soak scaled down (bench/soak.py): two keyed processes through one rotation and a half of
the stranger's and a member's floods, about a minute, sampled every 2 s.

What a minute can show: no process exits; no log grows by more than 4 kB between two samples;
every cache stays under its bound; and the member's Cyclon entries, signed as B's nodes and
naming addresses nobody serves, do not cut A from B: after that flood A still verifies B's
requests (before a first-hand entry re-pointed a node at once: A's nonce cache, which grows only
with verified requests, then stood still for the rest of the run, and so did B's). The hour and
the flatness of RSS and files are the bench's (``python -m bench.soak``), not a test's.
"""

from __future__ import annotations

import itertools

import pytest

from bench.soak import LOG_BOUND, run
from p2pnode.transport.http import SILENT_KEPT

pytestmark = pytest.mark.functional


def test_a_minute_of_rotating_floods_leaves_logs_caches_and_the_link_between_processes_bounded() -> None:
    soak = run(minutes=1.05, every=2.0, phase=7.0)  # two turns of quiet, 4 samples in the second
    rows = [(t, phase, turn, row) for t, phase, turn, row in soak.samples]
    assert {p for _, p, _, _ in rows} >= {"quiet", "member-junk", "member-cyclon"}
    for name in ("A", "B"):
        sizes = [row[f"{name} log_bytes"] for *_, row in rows]
        steps = [b - a for a, b in itertools.pairwise(sizes)]
        assert max(steps) <= LOG_BOUND, (name, steps)
        for *_, row in rows:
            assert row.get(f"{name} cache nonces", 0) <= 200_000
            assert row.get(f"{name} cache peer-silence", 0) <= SILENT_KEPT
            assert row.get(f"{name} cache credentials", 0) <= 4096
    after = [row["A cache nonces"] for t, p, turn, row in rows if p == "quiet" and turn == 1]
    assert len(after) >= 3 and len(set(after)) > 1, (
        f"A verified no request after the member's entries: {after}"
    )
    received = [row["A models_received"] for t, p, turn, row in rows if turn == 1]
    assert received[-1] > received[0], received
