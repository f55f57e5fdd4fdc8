"""``launch`` under churn: the simulator's schedule applied to real processes, which
leave (SIGTERM), crash (SIGKILL) and come back from their checkpoints while the others run."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path

import pytest

from p2pcore.churn import schedule
from p2plab.launch import launch
from p2pnode.config import RunConfig

pytestmark = pytest.mark.functional
PROCESSES = 4
ROUNDS = 18
SETTLE = 4  #: rounds (1 s each) a process is given to start before its next event


def _config(seed: int) -> RunConfig:
    return (
        RunConfig(nodes=16, rounds=ROUNDS, seed=seed, sampling="cyclon", tick_seconds=0.01)
        .replace(**{"learning.lr": 0.01, "churn.model": "exp", "churn.uptime": 6.0, "churn.downtime": 4.0})
        .validate()
    )


def _a_seed_with_every_event() -> int:
    """A seed whose schedule has a leave, a crash and a return, each departure at least SETTLE
    rounds after the process started (a process takes seconds to start), all before the end."""
    for seed in range(200):
        cfg = _config(seed)
        plan = schedule(
            cfg.churn.schedule_model(), range(1, PROCESSES), ROUNDS, random.Random(f"churn-{seed}")
        )
        last = dict.fromkeys(range(1, PROCESSES), 0.0)
        spaced = True
        for e in plan.events:  # a process is stopped only once it had time to start
            spaced &= e.kind == "join" or e.at - last[e.node] >= SETTLE
            spaced &= e.at <= ROUNDS - SETTLE
            last[e.node] = e.at
        returns = {e.node for e in plan.events if e.kind == "join" and e.node not in plan.absent}
        if spaced and {e.kind for e in plan.events} == {"join", "leave", "crash"} and returns:
            return seed
    raise AssertionError("no seed below 200 gives every kind of event")


def test_processes_leave_crash_and_come_back_from_their_checkpoints(tmp_path: Path) -> None:
    lines: list[str] = []
    seed = _a_seed_with_every_event()
    total = asyncio.run(launch(_config(seed), PROCESSES, tmp_path, lines.append))
    churn = total["churn"]
    assert churn["leaves"] >= 1 and churn["crashes"] >= 1 and churn["joins"] >= 1, churn
    assert any("churn: process" in line and "crashed" in line for line in lines)
    assert any("processes up" in line for line in lines)  # the round lines say who is up
    # a process that came back resumed from its checkpoints (its summary records the resume)
    summaries = [json.loads(p.read_text()) for p in tmp_path.glob("proc*/result.json")]
    assert any(s["resumes"] for s in summaries), [s["resumes"] for s in summaries]
    assert total["hit_ratio_at_20"] > 0.2  # the network learned through it
    assert churn["live_processes_at_end"] >= 1
