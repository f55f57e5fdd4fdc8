"""``p2pnode`` with one more counter: the models a process's nodes take, by which process of the
bench's cluster sent them (A 0-19, B 20-39, C 40-59). ``bench.hostile_members`` runs A's process
(and C's, with three) as ``python -m bench._tally run ...`` in every row, so that their intake
from every process but the member's is measured, not inferred (the member's own nodes'
models are its to withhold). The counter is ``bench_models_taken_total{sender="a"|"b"|"c"|"other"}``
on the process's ``/metrics``; nothing else changes.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import Counter

from p2pnode.cli import main
from p2pnode.nodes.node import NodeRuntime
from p2pnode.telemetry.metrics import Metrics
from p2pnode.transport.base import Outcome
from protocols.messages import ModelMessage

_counters: list[Counter] = []
_init = Metrics.__init__
_accept = NodeRuntime.accept


def _group(sender: int) -> str:
    return "abc"[sender // 20] if 0 <= sender < 60 else "other"


def _metrics_with_tally(self: Metrics, *args: Any, **kwargs: Any) -> None:
    _init(self, *args, **kwargs)
    _counters.append(
        Counter(
            "bench_models_taken", "Models taken, by the sender's process", ["sender"], registry=self.registry
        )
    )


def _accept_and_tally(self: NodeRuntime, sender: int, message: object, nbytes: int) -> Outcome:
    if isinstance(message, ModelMessage) and _counters:
        _counters[-1].labels(_group(sender)).inc()
    return _accept(self, sender, message, nbytes)


if __name__ == "__main__":
    Metrics.__init__ = _metrics_with_tally  # type: ignore[method-assign]
    NodeRuntime.accept = _accept_and_tally  # type: ignore[method-assign]
    raise SystemExit(main())
