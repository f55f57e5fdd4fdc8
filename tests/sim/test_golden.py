"""Golden runs: small simulations whose whole summary must not move when code is reorganised.

Each case is a small ML-100k simulation with every setting that matters written out (the defaults
may change; these runs may not). Its summary, without wall-clock times and the echoed config, is
compared byte for byte with ``tests/golden/NAME.json``. A change of numbers is a change of
behaviour: explain it in the commit and rewrite the files with

    P2PNODE_WRITE_GOLDEN=1 .venv/bin/python -m pytest tests/sim/test_golden.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from p2pnode.config import RunConfig
from p2pnode.runners.sim import simulate

GOLDEN = Path(__file__).resolve().parent.parent / "golden"

_BASE = RunConfig(nodes=40, rounds=4, seed=11).replace(
    **{
        "learning.lr": 0.01,
        "learning.backend": "numpy",
        "attack.momentum": 0.99,
        "attack.momentum_estimator": "first",
        "attack.multicast": "v",
    }
)
_CIA = {"attack.kind": "cia", "attack.target_k": 5}

CASES: dict[str, dict[str, Any]] = {
    "base-peerswap": {},
    "samo-static": {"protocol": "samo", "sampling": "static"},
    "base-cyclon": {"sampling": "cyclon"},
    "base-pers": {"sampling": "pers"},
    "fedavg-cia": {"protocol": "fedavg", **_CIA},
    "gossip-cia": {**_CIA},
    "colluders-v": {**_CIA, "attack.colluders": 0.2, "attack.colluder_groups": 2},
    "colluders-theta-debiased": {
        **_CIA,
        "attack.colluders": 0.2,
        "attack.colluder_groups": 2,
        "attack.multicast": "theta",
        "attack.momentum_estimator": "debiased",
    },
    "share-less-colluders": {
        **_CIA,
        "learning.share_less": True,
        "attack.colluders": 0.2,
        "attack.colluder_groups": 2,
        "attack.fictive_backend": "numpy",
    },
    "dp-gossip": {"learning.dp_noise": 0.5, "learning.dp_backend": "numpy"},
    # DP-SGD's fused step and ziggurat noise (learning/gmf_dp_fused.py): other noise of
    # the same law, so its own file; the DP cases around it pin the numpy step and torch's noise
    "fused-dp-gossip": {"learning.dp_noise": 0.5, "learning.dp_backend": "fused"},
    "prme-gossip-cia": {"model": "prme", "learning.prme_lr": 0.2, "learning.prme_backend": "numpy", **_CIA},
    "fedavg-mia": {"protocol": "fedavg", "attack.mia": True},
    # an explicit target puts the predicted communities with their scores into the summary
    "colluders-target-debiased": {
        **_CIA,
        "attack.colluders": 0.2,
        "attack.colluder_groups": 2,
        "attack.multicast": "theta",
        "attack.momentum_estimator": "debiased",
        "attack.target_items": "50,172,181,1,100,258",
    },
    # the default training code (learning/gmf_fused.py); the cases above pin the numpy one
    "fused-base-peerswap": {"learning.backend": "fused"},
    "fused-samo-static": {"protocol": "samo", "sampling": "static", "learning.backend": "fused"},
    "fused-share-less-colluders": {
        **_CIA,
        "learning.share_less": True,
        "learning.backend": "fused",
        "attack.colluders": 0.2,
        "attack.colluder_groups": 2,
        "attack.fictive_backend": "numpy",
    },
    "gossip-target-init": {**_CIA, "attack.momentum_estimator": "init", "attack.target_items": "50,172,181"},
    # the FedAvg server scores every update with each target's e_A (a many-target fictive user)
    "fedavg-share-less": {
        "protocol": "fedavg",
        **_CIA,
        "learning.share_less": True,
        "attack.fictive_backend": "numpy",
    },
    # the fictive users fitted and scored in compiled calls (adversary/fictive_fused.py)
    "fused-fictive-fedavg-share-less": {
        "protocol": "fedavg",
        **_CIA,
        "learning.share_less": True,
        "attack.fictive_backend": "fused",
    },
    "fused-fictive-share-less-colluders": {
        **_CIA,
        "learning.share_less": True,
        "attack.colluders": 0.2,
        "attack.colluder_groups": 2,
        "attack.fictive_backend": "fused",
    },
    # the clients' shared tables (learning/workbench.py): every model and trainer FedAvg runs,
    # half the clients a round (a parked client is evaluated on its last turn), DP-SGD; written by
    # the code before the workbench
    "fedavg-prme-cia": {
        "protocol": "fedavg",
        "model": "prme",
        "learning.prme_lr": 0.2,
        "learning.prme_backend": "numpy",
        **_CIA,
    },
    "fedavg-prme-share-less": {
        "protocol": "fedavg",
        "model": "prme",
        "learning.prme_lr": 0.2,
        "learning.prme_backend": "numpy",
        "learning.share_less": True,
        **_CIA,
    },
    # PRME's fused epoch (learning/prme_fused.py); the PRME cases above pin the numpy one
    "fused-prme-gossip-cia": {
        "model": "prme",
        "learning.prme_lr": 0.2,
        "learning.prme_backend": "fused",
        **_CIA,
    },
    "fused-fedavg-prme-share-less": {
        "protocol": "fedavg",
        "model": "prme",
        "learning.prme_lr": 0.2,
        "learning.prme_backend": "fused",
        "learning.share_less": True,
        **_CIA,
    },
    "fedavg-half-fused": {"protocol": "fedavg", "fraction": 0.5, "learning.backend": "fused", **_CIA},
    "fedavg-dp": {
        "protocol": "fedavg",
        "fraction": 0.5,
        "learning.dp_epsilon": 10.0,
        "learning.dp_backend": "numpy",
    },
    "fedavg-target-zero": {
        "protocol": "fedavg",
        **_CIA,
        "attack.momentum_estimator": "zero",
        "attack.target_items": "50,172,181",
    },
}

_VOLATILE = ("seconds", "config")


def _stable(node: Any) -> Any:
    """The summary without wall-clock times and the echoed configuration."""
    if isinstance(node, dict):
        return {k: _stable(v) for k, v in node.items() if k not in _VOLATILE}
    if isinstance(node, list):
        return [_stable(v) for v in node]
    return node


def _render(name: str, **extra: Any) -> str:
    config = _BASE.replace(**CASES[name], **extra).validate()
    return json.dumps(_stable(simulate(config)), sort_keys=True, indent=1) + "\n"


@pytest.mark.parametrize("name", sorted(CASES))
def test_small_runs_give_the_committed_summary(name: str) -> None:
    path = GOLDEN / f"{name}.json"
    text = _render(name)
    if os.environ.get("P2PNODE_WRITE_GOLDEN") == "1":
        path.write_text(text)
    assert path.is_file(), f"no golden file {path}: write it with P2PNODE_WRITE_GOLDEN=1"
    expected = path.read_text()
    if text != expected:
        got, want = [*text.splitlines(), "<end>"], [*expected.splitlines(), "<end>"]
        at = next(i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b)
        pytest.fail(f"{name}: the summary moved at line {at + 1}: {want[at]!r} -> {got[at]!r}")


def test_the_allocators_mmap_threshold_moves_no_number() -> None:
    """``--mmap-threshold-mib`` (p2pnode.runners.process.set_mmap_threshold) changes where glibc puts
    blocks, never a figure: FedAvg runs, where it matters, give their golden summaries with it.
    In a child process, since the setting holds for the whole process."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    code = (
        "import sys\n"
        "from tests.sim.test_golden import GOLDEN, _render\n"
        "for name in ('fedavg-prme-share-less', 'fedavg-half-fused'):\n"
        "    text = _render(name, **{'sim.mmap_threshold_mib': 1.0})\n"
        "    print(name, text == (GOLDEN / f'{name}.json').read_text())\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["fedavg-prme-share-less", "True", "fedavg-half-fused", "True"]


@pytest.mark.parametrize("name", ["fedavg-prme-cia", "colluders-theta-debiased", "gossip-cia"])
def test_frames_kept_in_a_spill_folder_move_no_number(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--spill-dir`` (p2pnode/transport/spill.py) carries every model frame as a map of a file
    instead of bytes in memory: the receivers decode the same bytes, so the golden summaries hold
    (a FedAvg round's updates, gossip, and colluders' multicasts with their shared decode). On the
    golden runs' network, without delay, the FedAvg server's updates come in client order and each
    goes into the sum as it comes (protocols/fedavg.py), so none is kept. The files are unlinked:
    nothing is left in the folder."""
    made = _counted_spills(monkeypatch)
    text = _render(name, **{"sim.spill_dir": str(tmp_path)})
    assert len(made) == 1 and made[0].frames > 100, [s.frames for s in made]
    assert made[0].bytes >= made[0].frames * 64 * 1024
    assert made[0].models == 0
    assert text == (GOLDEN / f"{name}.json").read_text()
    assert list(tmp_path.iterdir()) == []


def test_updates_that_come_out_of_order_wait_in_the_spill_and_move_no_number(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a random one-way delay (within a round) the FedAvg server's updates come out of
    client order. One that comes before a client with a smaller id answered is held until then
    (protocols/fedavg.py), and with ``--spill-dir`` it waits in the file (p2pnode/nodes/host.py). The
    sum is made in client order whatever the arrival order, so the run is the golden one."""
    made = _counted_spills(monkeypatch)
    delayed = {"sim.delay_min": 0.0, "sim.delay_max": 5.0, "sim.spill_dir": str(tmp_path)}
    text = _render("fedavg-prme-cia", **delayed)
    assert len(made) == 1 and made[0].models > 0  # some came early and were held
    assert text == (GOLDEN / "fedavg-prme-cia.json").read_text()
    assert list(tmp_path.iterdir()) == []


def _counted_spills(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The simulator's spills from now on, each keeping frames and models of 64 kB and more."""
    import p2pnode.runners.sim
    from p2pnode.transport.spill import Spill

    made: list[Spill] = []

    class Counted(Spill):
        def __init__(self, folder: str | Path) -> None:
            super().__init__(folder, min_bytes=64 * 1024)  # ML-100k's 216 kB models, not control frames
            made.append(self)

    monkeypatch.setattr(p2pnode.runners.sim, "Spill", Counted)
    return made
