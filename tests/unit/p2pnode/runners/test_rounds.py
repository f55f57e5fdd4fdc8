"""The one round loop of the simulator and real processes (p2pnode.runners.rounds.RoundRunner)."""

from __future__ import annotations

import pytest


def test_the_round_runner_counts_evaluates_when_due_and_calls_hooks_in_order() -> None:
    from p2pnode.runners.rounds import RoundRunner

    evaluated: list[int] = []

    class Log:
        stopped = None

        def due(self, r: int) -> bool:
            return r % 2 == 0

        def evaluate(self, r: int, seconds: float) -> None:
            evaluated.append(r)

        def result(self, r: int, seconds: float, **fields: object) -> dict[str, object]:
            return {"round": r, **fields}

    seen: list[int] = []
    runner = RoundRunner(Log(), rounds=5, start=1, hooks=(seen.append,))  # type: ignore[arg-type]
    while (r := runner.next_round()) is not None:
        runner.end_round(r, 0.0)
    assert seen == [2, 3, 4, 5] and evaluated == [2, 4] and runner.next_round() is None
    assert runner.result(1.0, mode="x") == {"round": 5, "rounds": 5, "mode": "x"}
    with pytest.raises(ValueError, match="round 7 ended after round 5"):
        runner.end_round(7, 0.0)
