"""``p2pnode`` as a member that answers every frame it would take with a refusal whose reason is
new each time (2 kB): the ``label-blowup`` row of ``bench.hostile_members`` runs B's process as
``python -m bench._made_up_reasons run ...``. What A's ``/metrics`` does with those reasons is the
figure (a peer-chosen string is no label)."""

from __future__ import annotations

import itertools

from aiohttp import web

from p2pnode.cli import main
from p2pnode.transport import http
from p2pnode.transport.base import Outcome

_made_up = (f"{i:06d}-" + "x" * 2000 for i in itertools.count())
_answer = http._answer


def _refuse_with_a_new_reason(outcome: Outcome, close: bool = False) -> web.Response:
    if outcome.ok:
        return _answer(Outcome(403, next(_made_up)), close)
    return _answer(outcome, close)


http._answer = _refuse_with_a_new_reason

if __name__ == "__main__":
    raise SystemExit(main())
