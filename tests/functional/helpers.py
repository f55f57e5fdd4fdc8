"""What the functional tests share: free loopback ports, a ``p2pnode`` process started as a user
starts it, waiting until something holds (with a deadline and a message that says what did not
happen), and a process's pages read over HTTP."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from typing import Any, TypeVar

from p2plab.launch import free_ports

__all__ = [
    "LEARNED",
    "SHED",
    "failed_sends",
    "free_ports",
    "get_json",
    "get_text",
    "run_p2pnode",
    "stop",
    "wait_until",
]

#: why a send may fail on a loaded machine without any fault of what a test checks: the receiver's
#: event loop ran late and shed a model-sized body (503, p2pnode/transport/admission.py step 2)
SHED = frozenset({"busy"})

#: how far a dozen nodes' mean test rank (the share of negatives scored above the held-out item,
#: ``learner.test_rank``) must fall over a run of 6-8 rounds to count as learning. Those runs take
#: it from 0.35 to 0.21-0.23 on an idle machine and beside two busy processes, and to 0.25 in CI
#: beside two busy processes and the other tests; their HR@20 is 0.5 before the first round and
#: after the last, so it is no test of learning.
LEARNED = 0.05

T = TypeVar("T")


def run_p2pnode(
    *args: str, stdout: int | None = subprocess.PIPE, stderr: int | None = subprocess.PIPE
) -> subprocess.Popen[str]:
    """``python -m p2pnode ARGS`` in a new process of this interpreter (text streams)."""
    return subprocess.Popen([sys.executable, "-m", "p2pnode", *args], stdout=stdout, stderr=stderr, text=True)


def get_text(address: str, path: str, timeout: float = 3.0) -> str:
    """The body of ``GET http://ADDRESS/PATH`` (``address`` is ``host:port``)."""
    with urllib.request.urlopen(f"http://{address}{path}", timeout=timeout) as response:
        return str(response.read().decode())


def get_json(address: str, path: str, timeout: float = 3.0) -> Any:
    return json.loads(get_text(address, path, timeout))


def _poll(check: Callable[[], T], every: float, give_up: Callable[[Any], str | None]) -> T:
    """``check()`` until it returns something true, which is returned; an ``OSError`` (a process
    not listening yet) counts as not yet. After each miss ``give_up(last)`` may end the wait
    with the reason it returns (raised as an AssertionError)."""
    while True:
        try:
            last = check()
        except OSError as exc:
            last = exc
        else:
            if last:
                return last
        reason = give_up(last)
        if reason is not None:
            raise AssertionError(reason)
        time.sleep(every)


def wait_until(
    check: Callable[[], T],
    timeout: float,
    what: str,
    every: float = 0.25,
    alive: subprocess.Popen[Any] | None = None,
) -> T:
    """``check()`` until it returns something true, which is returned; an ``OSError`` (a process
    not listening yet) counts as not yet. Fails after ``timeout`` seconds saying ``what`` did not
    happen and what ``check`` gave last, or at once when the process ``alive`` has exited (with
    the end of its error output)."""
    deadline = time.monotonic() + timeout

    def give_up(last: Any) -> str | None:
        if alive is not None and alive.poll() is not None:
            err = ""
            if alive.stderr is not None:
                with contextlib.suppress(OSError, ValueError):
                    out = alive.stderr.read()
                    err = (out.decode(errors="replace") if isinstance(out, bytes) else out)[-2000:]
            return f"{what}: the process exited ({alive.returncode}) first: {err}"
        if time.monotonic() >= deadline:
            return f"{what}: not within {timeout:.0f} s (last: {last!r})"
        return None

    return _poll(check, every, give_up)


def round_of(address: str) -> int:
    """The round the process at ``address`` reached (its ``/status``)."""
    return int(get_json(address, "/status")["round"])


def wait_rounds(
    check: Callable[[], T],
    address: str,
    rounds: int,
    what: str,
    every: float = 0.25,
    backstop_s: float = 600.0,
) -> T:
    """``check()`` until it returns something true, which is returned; fails once the process at
    ``address`` has run ``rounds`` more rounds without it, saying ``what`` did not happen. The
    deadline is the process's own progress, not wall time: on a busy machine rounds stretch
    (p2pnode.clock.ElasticClock) and the wait with them. ``backstop_s``: a process that stops
    making rounds fails the wait after that long."""
    start = wait_until(lambda: round_of(address) + 1, 120, f"{address} did not answer /status") - 1
    deadline = time.monotonic() + backstop_s
    reached = [start]

    def give_up(last: Any) -> str | None:
        with contextlib.suppress(OSError, ValueError, KeyError):
            reached[0] = round_of(address)
        if reached[0] - start >= rounds:
            return f"{what}: not within {rounds} rounds of {address} (last: {last!r})"
        if time.monotonic() >= deadline:
            return f"{what}: {address} ran {reached[0] - start} rounds in {backstop_s:.0f} s"
        return None

    return _poll(check, every, give_up)


def stop(proc: subprocess.Popen[str], timeout: float = 10.0) -> None:
    """End ``proc`` if it still runs: SIGTERM, then SIGKILL after ``timeout`` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)


def failed_sends(procs: Any) -> dict[str, float]:
    """The failed sends of in-process ``NodeProcess``es, by reason (``p2pnode_send_failures_total``).

    A test of what must lose no message checks that every reason is in :data:`SHED`: the suite
    runs beside other tests on a 2-core machine, and there a process's loop may run late."""
    failed: dict[str, float] = {}
    for proc in procs:
        for metric in proc.metrics.registry.collect():
            for sample in metric.samples:
                if sample.name == "p2pnode_send_failures_total" and sample.value > 0:
                    reason = sample.labels["reason"]
                    failed[reason] = failed.get(reason, 0.0) + sample.value
    return failed
