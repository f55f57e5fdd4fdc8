"""A peer process that stops answering is said so once, and once when it answers again."""

from __future__ import annotations

import logging

import pytest

from p2pnode.transport.base import UNREACHABLE, Outcome
from p2pnode.transport.http import SILENT_AFTER, HttpTransport, _ids


async def test_a_gone_peer_is_said_once_and_its_return_once(caplog: pytest.LogCaptureFixture) -> None:
    transport = HttpTransport({3: "h:1", 4: "h:1", 5: "h:1", 9: "other:2"})
    try:
        with caplog.at_level(logging.WARNING, logger="p2pnode.http"):
            for _ in range(3 * SILENT_AFTER):
                transport._note_answer("h:1", Outcome(UNREACHABLE, "ClientConnectorError"))
            transport._note_answer("other:2", Outcome(200, ""))
            gone = [r.getMessage() for r in caplog.records]
            assert len(gone) == 1 and "h:1 stopped answering" in gone[0] and "node(s) 3-5" in gone[0]
            transport._note_answer("h:1", Outcome(503, "busy"))  # an answer, even a refusal
            assert [r.getMessage() for r in caplog.records][1:] == ["h:1 answers again"]
    finally:
        await transport.close()


def test_node_ids_fold_into_runs() -> None:
    assert _ids([0, 1, 2, 3, 7, 9, 10]) == "0-3, 7, 9-10"
    assert _ids([]) == "(none known)"
    assert _ids(list(range(0, 40, 2))).endswith(", ...")
