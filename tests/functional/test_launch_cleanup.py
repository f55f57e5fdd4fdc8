"""``launch`` leaves no key behind: the keyring, authority and identities it generated are removed
when its processes end, and a temporary work folder is removed whole."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import pytest

from p2plab.launch import launch
from p2pnode.config import RunConfig

pytestmark = pytest.mark.functional

CONFIG = RunConfig(nodes=12, rounds=2, seed=1, tick_seconds=0.004).replace(**{"learning.lr": 0.01})


def _recorded(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The temporary folders the launches of this test make (the other xdist worker's tests may
    launch too, so a glob of the temporary directory would see theirs)."""
    made: list[Path] = []
    mkdtemp = tempfile.mkdtemp

    def recording(*args: object, **kw: object) -> str:
        path = mkdtemp(*args, **kw)  # type: ignore[call-overload]
        made.append(Path(path))
        return str(path)

    monkeypatch.setattr(tempfile, "mkdtemp", recording)
    return made


@pytest.mark.untimed  # two launches of 2 rounds whose files are checked, not their timings
def test_launch_removes_the_keys_it_made_and_its_temporary_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made = _recorded(monkeypatch)
    total = asyncio.run(launch(CONFIG, 2, None))
    assert total["round"] == 2 and total["out"] is None
    assert len(made) == 1 and not made[0].exists()

    kept = asyncio.run(launch(CONFIG, 2, tmp_path / "run"))
    files = {p.name for p in (tmp_path / "run").rglob("*")}
    assert kept["out"] == str(tmp_path / "run") and "result.json" in files and "summary.json" in files
    assert not files & {"cluster.key", "authority.key", "proc0.identity", "proc1.identity"}


def test_a_launch_cancelled_midway_removes_its_temporary_folder_stops_its_processes_and_sums_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made = _recorded(monkeypatch)
    long_run = CONFIG.replace(rounds=1000)
    lines: list[str] = []

    async def cancelled() -> None:  # Ctrl-C and SIGTERM cancel the launch (p2plab.launch)
        task = asyncio.create_task(launch(long_run, 2, None, lines.append))
        for _ in range(600):  # the processes started and are running rounds: a round was shown
            # a round with the time left: the second evaluated one (the first has no pace to read)
            if any(line.startswith("round ") and "s left)" in line for line in lines) or task.done():
                break
            await asyncio.sleep(0.1)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return
        raise AssertionError("the launch ended before it was cancelled")

    asyncio.run(cancelled())
    assert len(made) == 1 and not made[0].exists()  # it used to stay, with the processes' logs in it
    # it ends with the summary of the rounds it ran (it used to print nothing)
    assert lines[-1].startswith("interrupted at round ") and " of 1000: " in lines[-1], lines[-3:]
    assert "HR@20" in lines[-1] and "12 nodes" in lines[-1]
    assert any(line.startswith("round ") and "s left)" in line for line in lines), lines
