"""What a member's answers can do to the processes it talks to (issue #61): a peer that answers
every frame with a reason of its own making adds no label to /metrics."""

from __future__ import annotations

import itertools

import pytest
from aiohttp import web

from p2pnode.refusals import REASONS
from p2pnode.transport import http
from p2pnode.transport.base import Outcome
from tests.functional.helpers import failed_sends
from tests.functional.test_http_nodes import cfg, finish, run_cluster

pytestmark = pytest.mark.functional


async def test_made_up_refusal_reasons_become_one_other_label(monkeypatch: pytest.MonkeyPatch) -> None:
    made_up = (f"{i:04d}-" + "x" * 2000 for i in itertools.count())  # 2 kB and new every time
    answer = http._answer

    def refuse_with_a_new_reason(outcome: Outcome, close: bool = False) -> web.Response:
        if outcome.ok:  # every frame the process would take is refused with a reason never seen before
            return answer(Outcome(403, next(made_up)), close)
        return answer(outcome, close)

    monkeypatch.setattr(http, "_answer", refuse_with_a_new_reason)
    config = cfg(nodes=12, rounds=3).replace(**{"wire.batch": False})
    procs, _ = await run_cluster(config, [tuple(range(0, 6)), tuple(range(6, 12))])
    await finish(procs)
    failed = failed_sends(procs)
    assert failed.get("other", 0) >= 10, failed  # the refusals were counted, under one label
    assert set(failed) <= set(REASONS) | {"other"}, sorted(failed)[:5]
