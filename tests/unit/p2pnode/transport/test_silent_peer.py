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


async def test_addresses_nobody_serves_are_kept_up_to_a_bound_and_said_up_to_another(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A member's relayed entries can name any number of dead addresses: the table of runs of
    unanswered sends keeps the most recent SILENT_KEPT, and at most SILENT_LINES lines a minute
    are said, the next with how many went unsaid."""
    import p2pnode.transport.http as http

    monkeypatch.setattr(http, "SILENT_KEPT", 50)
    transport = HttpTransport({})
    try:
        with caplog.at_level(logging.WARNING, logger="p2pnode.http"):
            for n in range(300):
                for _ in range(SILENT_AFTER):
                    transport._note_answer(f"10.0.{n // 250}.{n % 250}:1", Outcome(UNREACHABLE, "x"))
            assert transport.sizes()["peer-silence"] == 50
            assert "10.0.1.49:1" in transport._silent and "10.0.0.0:1" not in transport._silent
            assert len(caplog.records) == http.SILENT_LINES  # a minute's lines, the rest counted
    finally:
        await transport.close()


async def test_a_first_hand_address_waits_until_the_nodes_address_stops_answering() -> None:
    """A member holding the cluster key can sign a node's own entry: it names the member's (or
    nobody's) address, and the node keeps the address that answers; a node that really moved
    leaves an address that does not, and is found at its new one after SILENT_AFTER sends."""
    transport = HttpTransport({5: "b:1", 6: "b:1"})
    try:
        assert transport.move(7, "c:1") and transport.addresses[7] == "c:1"  # none known: taken
        assert not transport.move(5, "fake:9")  # b:1 answers: kept
        transport._note_answer("b:1", Outcome(200, ""))
        assert transport.addresses[5] == "b:1" and transport.sizes()["pending-moves"] == 1
        for _ in range(SILENT_AFTER - 1):
            transport._note_answer("b:1", Outcome(UNREACHABLE, "x"))
        assert transport.addresses[5] == "b:1"
        transport._note_answer("b:1", Outcome(UNREACHABLE, "x"))  # b:1 is gone: 5 moved
        assert transport.addresses == {5: "fake:9", 6: "b:1", 7: "c:1"}
        assert transport.move(6, "d:2") and transport.addresses[6] == "d:2"  # its address is silent
        assert transport.sizes()["pending-moves"] == 0
    finally:
        await transport.close()
