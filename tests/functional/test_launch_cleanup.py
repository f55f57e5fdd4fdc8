"""``launch`` leaves no key behind: the keyring, authority and identities it generated are removed
when its processes end, and a temporary work folder is removed whole (issue #34, item 8)."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from p2plab.launch import launch
from p2pnode.config import RunConfig

CONFIG = RunConfig(nodes=12, rounds=2, seed=1, tick_seconds=0.004).replace(**{"learning.lr": 0.01})


def _temporary_folders() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("p2pnode-launch-*"))


def test_launch_removes_the_keys_it_made_and_its_temporary_folder(tmp_path: Path) -> None:
    before = _temporary_folders()
    total = asyncio.run(launch(CONFIG, 2, None))
    assert total["round"] == 2 and total["out"] is None
    assert _temporary_folders() == before

    kept = asyncio.run(launch(CONFIG, 2, tmp_path / "run"))
    files = {p.name for p in (tmp_path / "run").rglob("*")}
    assert kept["out"] == str(tmp_path / "run") and "result.json" in files and "summary.json" in files
    assert not files & {"cluster.key", "authority.key", "proc0.identity", "proc1.identity"}


def test_a_launch_cancelled_midway_removes_its_temporary_folder_and_stops_its_processes() -> None:
    before = _temporary_folders()
    long_run = CONFIG.replace(rounds=1000)

    async def cancelled() -> None:  # Ctrl-C and SIGTERM cancel the launch (p2plab.launch)
        task = asyncio.create_task(launch(long_run, 2, None))
        await asyncio.sleep(8)  # the processes started and are running rounds
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return
        raise AssertionError("the launch ended before it was cancelled")

    asyncio.run(cancelled())
    assert _temporary_folders() == before  # it used to stay, with the processes' logs in it
