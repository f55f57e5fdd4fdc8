"""PeerBytesLog: a peer's bad HTTP is counted and said once per interval per kind; our bugs keep
their tracebacks (p2pnode/transport/peer_bytes.py)."""

from __future__ import annotations

import logging

import pytest
from aiohttp.http_exceptions import BadHttpMessage, BadHttpMethod, LineTooLong

from p2pnode.transport.peer_bytes import PeerBytesLog


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _log(caplog: pytest.LogCaptureFixture) -> tuple[PeerBytesLog, list[str], Clock]:
    kinds: list[str] = []
    clock = Clock()
    logger = logging.getLogger("test.peer_bytes")
    caplog.set_level(logging.DEBUG, logger="test.peer_bytes")
    return PeerBytesLog(kinds.append, logger=logger, clock=clock, interval_s=60.0), kinds, clock


def test_parse_errors_are_counted_each_and_said_once_per_interval_per_kind(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log, kinds, clock = _log(caplog)
    for _ in range(1000):
        log.exception("Error handling request from %s", "127.0.0.2", exc_info=BadHttpMessage("bad length"))
    log.exception("Error handling request from %s", "127.0.0.2", exc_info=LineTooLong("x" * 5000, "8190"))
    log.debug("Error handling request from %s", "127.0.0.2", exc_info=BadHttpMethod("\x00\x01"))
    assert kinds == ["BadHttpMessage"] * 1000 + ["LineTooLong", "BadHttpMethod"]
    records = caplog.records
    assert [r.levelno for r in records] == [logging.WARNING] * 3  # one per kind
    assert all(r.exc_info is None for r in records)  # no traceback for a peer's bytes
    assert "1 request(s)" in records[0].getMessage() and "127.0.0.2" in records[0].getMessage()
    assert all(len(r.getMessage()) < 400 for r in records)  # the peer's own words are cut short
    assert "\x00" not in records[2].getMessage()
    clock.now += 59.0
    log.exception("Error handling request from %s", "127.0.0.2", exc_info=BadHttpMessage("again"))
    assert len(caplog.records) == 3  # within the interval: counted, not said
    clock.now += 2.0
    log.exception("Error handling request from %s", "127.0.0.2", exc_info=BadHttpMessage("again"))
    assert len(caplog.records) == 4
    # the 999 after the first line, the one within the interval, and this one
    assert "1001 request(s) in the last 61 s" in caplog.records[3].getMessage()
    assert kinds.count("BadHttpMessage") == 1002


def test_an_exception_of_ours_keeps_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    log, kinds, _clock = _log(caplog)
    try:
        raise KeyError("a bug in a handler")
    except KeyError as exc:
        log.exception("Unhandled exception", exc_info=exc)
    log.debug("a debug line")
    assert kinds == []
    assert [r.levelno for r in caplog.records] == [logging.ERROR, logging.DEBUG]
    assert caplog.records[0].exc_info is not None
    assert log.isEnabledFor(logging.DEBUG)  # the rest of a logger is the logger's
