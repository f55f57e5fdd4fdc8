"""What aiohttp logs about a peer's bytes that do not parse as HTTP, counted and bounded.

aiohttp answers a request it cannot parse (a Content-Length of 2^64 or below zero, a header line
past 8,190 bytes, too many headers, a request line that is not HTTP) with 400 and logs it through
its server logger with ``logger.exception``: an ERROR and a ~600-byte traceback per request,
before any key is checked. A stranger with no key could so write a disk full of log lines. The
server takes its logger as an argument (``web.AppRunner(..., logger=...)``): :class:`PeerBytesLog`
is that logger. A parse error is a peer's bad bytes, not our bug: it is counted (``on_malformed``,
which the daemon maps to ``p2pnode_rejected_messages_total{reason="malformed-http"}``) and said
in one WARNING line per kind of error per :data:`INTERVAL_S`, with how many there were, without a
traceback. Anything else aiohttp reports (an exception in one of our handlers) is logged as
aiohttp logs it, traceback included: that one is ours to fix.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from aiohttp.http_exceptions import HttpProcessingError

#: at most one line per kind of malformed request in this many seconds
INTERVAL_S = 60.0


class PeerBytesLog:
    """The logger aiohttp's server writes to: parse errors counted and rate-limited, the rest passed on.

    ``clock`` is a monotonic clock in seconds (a test gives its own); ``on_malformed`` is called
    with the error's kind (its class name) once per malformed request."""

    def __init__(
        self,
        on_malformed: Callable[[str], None] = lambda _kind: None,
        logger: logging.Logger | None = None,
        clock: Callable[[], float] = time.monotonic,
        interval_s: float = INTERVAL_S,
    ) -> None:
        self._on_malformed = on_malformed
        self._logger = logger or logging.getLogger("aiohttp.server")
        self._clock = clock
        self._interval_s = interval_s
        self._last: dict[str, float] = {}  #: per kind, when its last line was written
        self._unsaid: dict[str, int] = {}  #: per kind, how many since that line

    def _peer_error(self, kw: dict[str, Any]) -> HttpProcessingError | None:
        exc = kw.get("exc_info")
        return exc if isinstance(exc, HttpProcessingError) else None

    def _malformed(self, exc: HttpProcessingError, remote: object) -> None:
        kind = type(exc).__name__
        self._on_malformed(kind)
        self._unsaid[kind] = self._unsaid.get(kind, 0) + 1
        now = self._clock()
        last = self._last.get(kind)
        if last is not None and now - last < self._interval_s:
            return
        count, self._unsaid[kind] = self._unsaid[kind], 0
        self._last[kind] = now
        since = "" if last is None else f" in the last {now - last:.0f} s"
        # the peer's own words are cut short: the line is bounded whatever the peer sent
        said = "".join(c if c.isprintable() else "?" for c in str(getattr(exc, "message", "") or exc)[:120])
        self._logger.warning(
            "malformed HTTP (%s) from %s: %d request(s)%s, answered 400 and counted as malformed-http "
            "(at most one line per %.0f s per kind): %s",
            kind,
            remote,
            count,
            since,
            self._interval_s,
            said,
        )

    def _route(self, write: Callable[..., None], msg: str, args: tuple[Any, ...], kw: dict[str, Any]) -> None:
        """A peer's parse error counted and said at most once per interval; anything else written."""
        exc = self._peer_error(kw)
        if exc is None:
            write(msg, *args, **kw)
        else:
            self._malformed(exc, args[0] if args else "?")

    def exception(self, msg: str, *args: Any, **kw: Any) -> None:
        self._route(self._logger.exception, msg, args, kw)

    def debug(self, msg: str, *args: Any, **kw: Any) -> None:
        # aiohttp says a first request that is not HTTP at all (BadHttpMethod) at debug level:
        # counted like the others, and said at most once per interval too
        self._route(self._logger.debug, msg, args, kw)

    def __getattr__(self, name: str) -> Any:  # info, warning, error, isEnabledFor, ...
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._logger, name)
