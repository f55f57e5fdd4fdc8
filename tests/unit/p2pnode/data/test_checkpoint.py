"""Checkpoint files: exact round trip, corruption detected, and kill -9 never leaves a torn file."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from p2pnode.data import checkpoint
from p2pnode.data.checkpoint import CheckpointError


def sample_state() -> dict[str, object]:
    return {
        "round": 7,
        "params": {"item": np.arange(12, dtype=np.float32).reshape(3, 4), "b": np.float32(0.5)},
        "scores": {3: np.array([0.25, 0.5])},
        "rng": {"state": 2**100 + 7, "inc": -(2**70)},
        "history": [[1.1, 0.5, 10]],
        "noise": b"\x00\x01\x02",
        "none": None,
    }


def test_round_trip_is_exact() -> None:
    back = checkpoint.loads(checkpoint.dumps(sample_state()))  # type: ignore[arg-type]
    np.testing.assert_array_equal(back["params"]["item"], np.arange(12, dtype=np.float32).reshape(3, 4))
    assert back["params"]["item"].dtype == np.float32 and back["params"]["b"] == 0.5
    np.testing.assert_array_equal(back["scores"][3], [0.25, 0.5])
    assert back["rng"] == {"state": 2**100 + 7, "inc": -(2**70)}
    assert back["history"] == [[1.1, 0.5, 10]] and back["noise"] == b"\x00\x01\x02" and back["none"] is None


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d[:-5],  # torn
        lambda d: d[:40] + bytes([d[40] ^ 1]) + d[41:],  # one bit flipped in the digest
        lambda d: d[:-1] + bytes([d[-1] ^ 0xFF]),  # one byte of the payload
        lambda d: b"XXXX" + d[4:],  # not a checkpoint
        lambda d: b"",
    ],
)
def test_damaged_files_are_errors_not_resets(damage, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "node-1.ckpt"
    checkpoint.save(path, sample_state())  # type: ignore[arg-type]
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(CheckpointError, match=r"node-1\.ckpt"):
        checkpoint.load(path)


def test_missing_file_means_no_checkpoint(tmp_path: Path) -> None:
    assert checkpoint.load(tmp_path / "node-9.ckpt") is None


def test_unsupported_arrays_are_refused() -> None:
    with pytest.raises(TypeError):
        checkpoint.dumps({"x": np.array(["a"])})


WRITER = """
import sys
import numpy as np
from pathlib import Path
from p2pnode.data import checkpoint
path = Path(sys.argv[1])
big = np.random.default_rng(0).random(1_500_000).astype(np.float32)  # 6 MB per write
i = 0
print("ready", flush=True)
while True:
    i += 1
    big[0] = i
    checkpoint.save(path, {"i": i, "big": big})
"""


@pytest.mark.slow
def test_kill_9_during_writes_never_leaves_a_corrupt_checkpoint(tmp_path: Path) -> None:
    """A writer saves in a loop; we SIGKILL it at random moments and reload every time."""
    path = tmp_path / "node-0.ckpt"
    rng = random.Random(5)
    seen = []
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[4]))
    for _ in range(12):
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path)], stdout=subprocess.PIPE, text=True, env=env
        )
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.02, 0.4))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        state = checkpoint.load(path)  # never raises: the old or the new file, whole
        if state is not None:
            assert state["big"][0] == state["i"] and state["big"].shape == (1_500_000,)
            seen.append(state["i"])
    assert seen and seen[-1] >= 1  # writes did land between kills
