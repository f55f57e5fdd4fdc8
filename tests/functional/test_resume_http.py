"""Real nodes checkpoint and resume: state, rounds and DP ε continue across a restart."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest

from p2pnode.data import checkpoint
from p2pnode.runners.real import NodeProcess, ProcessSpec, StartupError
from tests.functional.helpers import free_ports, get_json, run_p2pnode, wait_until
from tests.functional.test_http_nodes import cfg

pytestmark = pytest.mark.functional


async def test_a_restarted_process_resumes_from_its_checkpoints(tmp_path: Path) -> None:
    config = cfg(nodes=6, rounds=4, protocol="samo", sampling="peerswap").replace(
        **{"learning.dp_noise": 0.8}
    )
    spec = ProcessSpec(tuple(range(6)), "127.0.0.1", free_ports(1)[0], state_dir=tmp_path, checkpoint_every=2)
    first = NodeProcess(config, spec)
    await first.start()
    try:
        await first.run()
    finally:
        await first.shutdown()
    saved = {i: {k: v.copy() for k, v in n.learner.params.items()} for i, n in first.host.nodes.items()}  # type: ignore[attr-defined]
    eps = {i: n.learner.epsilon() for i, n in first.host.nodes.items()}
    views = {i: n.node.sampler.out_view() for i, n in first.host.nodes.items()}
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        *(f"node-{i}.ckpt" for i in range(6)),
        "process.json",
        "progress.json",
    ]
    first_history = [h["round"] for h in first.log.history]
    assert first_history == [1, 2, 3, 4]
    assert max(eps.values()) > 0  # type: ignore[type-var]

    second = NodeProcess(
        config.replace(rounds=8),
        ProcessSpec(tuple(range(6)), "127.0.0.1", free_ports(1)[0], state_dir=tmp_path),
    )
    await second.start()
    try:
        assert second.resumed == 6 and second.round == 4
        for i, n in second.host.nodes.items():
            for k, v in saved[i].items():
                np.testing.assert_array_equal(n.learner.params[k], v)  # type: ignore[attr-defined]
            assert n.node.sampler.out_view() == views[i]
            assert n.learner.epsilon() == eps[i]
        result = await second.run()
    finally:
        await second.shutdown()
    assert result["rounds"] == 8
    # the history before the restart is carried over, and the resume is on record
    assert [h["round"] for h in result["history"]] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert [r["round"] for r in result["resumes"]] == [4]
    for i, n in second.host.nodes.items():
        assert n.learner.epsilon() >= eps[i]  # type: ignore[operator]  # ε never goes backwards


async def test_a_progress_file_that_cannot_be_written_does_not_stop_the_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "progress.json.tmp").mkdir()  # every write of the progress file now fails
    proc = NodeProcess(
        cfg(nodes=4, rounds=3), ProcessSpec((0, 1, 2, 3), "127.0.0.1", free_ports(1)[0], state_dir=tmp_path)
    )
    await proc.start()
    try:
        result = await proc.run()
    finally:
        await proc.shutdown()
    assert result["rounds"] == 3 and [h["round"] for h in result["history"]] == [1, 2, 3]
    assert not (tmp_path / "progress.json").exists()
    warned = [r.getMessage() for r in caplog.records if "progress.json" in r.getMessage()]
    assert len(warned) == 1 and "cannot write" in warned[0]  # said once, not every round


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root")
async def test_a_full_disk_is_said_once_and_the_nodes_run_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Checkpoints on a 64 KiB tmpfs (a model is ~250 KB): every save fails with ENOSPC."""
    state = tmp_path / "small"
    state.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(state)], check=True)
    try:
        spec = ProcessSpec((0, 1, 2, 3), "127.0.0.1", free_ports(1)[0], state_dir=state, checkpoint_every=1)
        proc = NodeProcess(cfg(nodes=4, rounds=3), spec)
        await proc.start()
        try:
            result = await proc.run()
        finally:
            await proc.shutdown()
        left = sorted(p.name for p in state.iterdir())
    finally:
        subprocess.run(["umount", str(state)], check=True)
    assert result["rounds"] == 3  # the run went on
    assert not [n for n in left if n.endswith(".tmp")], left  # no half-written file left behind
    assert proc.metrics.checkpoint_failures._value.get() >= 3
    warned = [r.getMessage() for r in caplog.records if "cannot write checkpoints" in r.getMessage()]
    assert len(warned) == 1 and "No space left" in warned[0]


async def test_a_corrupt_checkpoint_stops_the_start_with_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "node-2.ckpt").write_bytes(b"garbage")
    proc = NodeProcess(
        cfg(nodes=4, rounds=2), ProcessSpec((0, 1, 2, 3), "127.0.0.1", free_ports(1)[0], state_dir=tmp_path)
    )
    with pytest.raises(StartupError, match=r"node-2\.ckpt.*bad magic"):
        await proc.start()
    await proc.shutdown()


async def _half_saved(state_dir: Path) -> NodeProcess:
    """Run 4 nodes 2 rounds with checkpoints, take nodes 1 and 3's away: the next start's process."""
    users = (0, 1, 2, 3)
    first = NodeProcess(
        cfg(nodes=4, rounds=2), ProcessSpec(users, "127.0.0.1", free_ports(1)[0], state_dir=state_dir)
    )
    await first.start()
    try:
        await first.run()
    finally:
        await first.shutdown()
    for node in (1, 3):
        (state_dir / f"node-{node}.ckpt").unlink()
    return NodeProcess(
        cfg(nodes=4, rounds=4), ProcessSpec(users, "127.0.0.1", free_ports(1)[0], state_dir=state_dir)
    )


async def test_checkpoints_of_only_some_nodes_stop_the_start_and_say_which(tmp_path: Path) -> None:
    """A save cut short by a full disk leaves some nodes' checkpoints and not the others'."""
    again = await _half_saved(tmp_path)
    with pytest.raises(StartupError, match=r"2 of 4 hosted nodes have a checkpoint \(round 2\), 2 have none"):
        await again.start()
    await again.shutdown()


async def test_a_first_checkpoint_cut_short_starts_every_node_afresh(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A crash (or a full disk) during the very first save leaves some nodes' files and no
    process state: no save ever completed, so nothing mixes rounds by starting all afresh."""
    again = await _half_saved(tmp_path)
    (tmp_path / "process.json").unlink()  # the save's last file: it never got there
    try:
        await again.start()
        assert again.resumed == 0 and all(n.round == 0 for n in again.host.nodes.values())
    finally:
        await again.shutdown()
    assert any("first checkpoint was cut short (2 of 4 nodes saved" in r.getMessage() for r in caplog.records)


def past_round_one(port: int) -> bool:
    with contextlib.suppress(ValueError):  # a page cut short: ask again
        return int(get_json(f"127.0.0.1:{port}", "/status", timeout=2)["round"]) >= 1
    return False


def test_sigterm_writes_a_checkpoint_of_every_node(tmp_path: Path) -> None:
    port = free_ports(1)[0]
    proc = run_p2pnode(
        "run", "--listen", f"127.0.0.1:{port}", "--users", "0-4", "--nodes", "5",
        "--rounds", "100000", "--dataset", "synthetic", "--state-dir", str(tmp_path),
        "--checkpoint-every", "1000", "--quiet",
    )  # fmt: skip
    # a loaded machine takes a while to import torch
    wait_until(lambda: past_round_one(port), 60, "the process getting to round 1", every=0.2, alive=proc)
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    states = [checkpoint.load(tmp_path / f"node-{i}.ckpt") for i in range(5)]
    assert all(s is not None and s["round"] > 0 for s in states), err


def test_a_process_that_falls_behind_its_rounds_says_so_once(capsys: pytest.CaptureFixture[str]) -> None:
    proc = NodeProcess(cfg(nodes=4, rounds=2), ProcessSpec((0, 1, 2, 3), "127.0.0.1", free_ports(1)[0]))
    proc._check_pace(0.1, 0.4)  # on time (less than half a round late)
    for _ in range(5):
        proc._check_pace(0.9, 0.4)
    assert proc.late_rounds == 5
    err = capsys.readouterr().err
    assert err.count("cannot keep up") == 1 and "--tick-seconds" in err


async def test_a_process_killed_after_its_last_round_finishes_at_once_without_its_peers(
    tmp_path: Path,
) -> None:
    config = cfg(nodes=4, rounds=3, sampling="peerswap")
    users = (0, 1, 2, 3)
    first = NodeProcess(config, ProcessSpec(users, "127.0.0.1", free_ports(1)[0], state_dir=tmp_path))
    await first.start()
    try:
        await first.run()
    finally:
        await first.shutdown()
    # back after the end (a kill during shutdown): its peers are gone, there is nothing to run
    gone = ("127.0.0.1:9",)  # the discard port: nobody answers
    again = NodeProcess(
        config,
        ProcessSpec(
            users, "127.0.0.1", free_ports(1)[0], peers=gone, state_dir=tmp_path, bootstrap_timeout_s=1.0
        ),
    )
    await again.start()
    try:
        result = await again.run()
    finally:
        await again.shutdown()
    assert result["rounds"] == 3 and [h["round"] for h in result["history"]] == [1, 2, 3]
    assert [r["round"] for r in result["resumes"]] == [3]


async def test_a_process_stopped_while_waiting_for_its_peers_ends_at_once(tmp_path: Path) -> None:
    # launch's churn stops a process it just restarted when the run ends: the stop must end the
    # wait for peers (it did not: the process waited the whole bootstrap timeout and exited 1)
    config = cfg(nodes=4, rounds=3, sampling="cyclon")
    gone = ("127.0.0.1:9",)  # the discard port: nobody answers
    proc = NodeProcess(
        config,
        ProcessSpec((0, 1), "127.0.0.1", free_ports(1)[0], peers=gone, bootstrap_timeout_s=60.0),
    )
    loop = asyncio.get_running_loop()
    loop.call_later(0.5, proc.stop)
    t0 = loop.time()
    try:
        await proc.start()
        result = await proc.run()
    finally:
        await proc.shutdown()
    assert loop.time() - t0 < 10
    assert result["history"] == [] or result["rounds"] == 0, result["rounds"]
