"""A user's mistakes on the command line are one line each, never a traceback: the
config file a directory, JSON, binary or missing; `run` on a port in use; `run --peers` to a
peer that never answers, which says who is missing while it waits and gives up after
`--peer-wait` seconds."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from p2pnode.cli import main
from tests.functional.helpers import free_ports, run_p2pnode

pytestmark = pytest.mark.functional


def _fails_in_one_line(*args: str, timeout: float = 60) -> tuple[int, str]:
    proc = run_p2pnode(*args)
    _out, err = proc.communicate(timeout=timeout)
    assert proc.returncode not in (0, None), err
    assert "Traceback" not in err, err
    errors = [line for line in err.splitlines() if line.startswith("p2pnode: error:")]
    assert len(errors) == 1, err
    return proc.returncode, errors[0]


def test_config_files_that_are_not_toml_say_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "run.json").write_text('{"nodes": 5}')
    (tmp_path / "bin.toml").write_bytes(b"\xff\xfe\x00")
    cases = {
        str(tmp_path): "is a directory",
        str(
            tmp_path / "run.json"
        ): "is not valid TOML: Invalid statement (at line 1, column 1) (a JSON file?",
        str(tmp_path / "bin.toml"): "is not text: --config reads TOML",
        str(tmp_path / "none.toml"): "does not exist",
    }
    for path, said in cases.items():
        assert main(["simulate", "--config", path, "--rounds", "1"]) == 2
        err = capsys.readouterr().err
        assert err.count("p2pnode: error:") == 1 and said in err and "Traceback" not in err, err


def test_run_on_a_port_in_use_and_a_peer_that_never_answers() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        rc, line = _fails_in_one_line(
            "run", "--listen", f"127.0.0.1:{port}", "--users", "0-4", "--nodes", "5"
        )
        assert rc == 1 and f"cannot listen on 127.0.0.1:{port}" in line and "in use" in line, line
    listen, dead = free_ports(2)
    proc = run_p2pnode(
        "run", "--listen", f"127.0.0.1:{listen}", "--users", "0-4", "--nodes", "10",
        "--peers", f"127.0.0.1:{dead}", "--peer-wait", "11",
    )  # fmt: skip
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "Traceback" not in err, err
    assert err.count("no cluster key") == 1 and "without authentication" not in err, err  # said once
    assert f"waiting for peers: 127.0.0.1:{dead} not reachable yet (10 s of 11)" in err, err
    assert f"peers not reachable after 11 s: 127.0.0.1:{dead} (--peer-wait" in err.splitlines()[-1], err
