"""``p2pnode`` as a member that keeps its nodes' models from every other process: the
``freeride`` row of ``bench.hostile_members`` runs B's process as ``python -m bench._freeride run
...``. Its nodes swap, take models and train as any node, but a model they would send to an id
outside the member's own (``FREERIDE_FIRST`` .. ``FREERIDE_LAST``, 20-39) is not sent.

This is the member's share, which no defence can make it give: what A loses here is what a member
withholding its own nodes' models costs, the line beside which the ``takeover-keep`` row's intake
is read.
"""

from __future__ import annotations

import os
import random

from p2pcore.effects import Effect, Send
from p2pnode.cli import main
from protocols.base_gl import BaseGossip

_OWN = range(int(os.environ.get("FREERIDE_FIRST", "20")), int(os.environ.get("FREERIDE_LAST", "39")) + 1)
_wake = BaseGossip.wake


def _keep_to_itself(self: BaseGossip, now: float, rng: random.Random) -> list[Effect]:
    effects = _wake(self, now, rng)
    return [e for e in effects if not isinstance(e, Send) or e.to in _OWN]


if __name__ == "__main__":
    BaseGossip.wake = _keep_to_itself  # type: ignore[method-assign]
    raise SystemExit(main())
