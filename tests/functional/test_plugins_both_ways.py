"""A user's own attack, merge rule and model, from a temporary package of their own, by import
path: the same module runs in the simulator and in real processes over HTTP.

The package is docs/examples/myplugins.py (the worked example of docs/plugins.md) copied into a
folder on the Python path, plus a merge rule that leaves a mark per process it ran in.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import p2pnode
from p2pcore.plugin import PluginError

pytestmark = pytest.mark.functional

ROOT = Path(__file__).resolve().parents[2]

MARKING = '''
import os
from pathlib import Path

from userlab.myplugins import CloserWeighs


class Marked(CloserWeighs):
    """CloserWeighs, leaving a file named after its process in $USERLAB_MARKS at its first merge."""

    def merge(self, received):
        folder = Path(os.environ["USERLAB_MARKS"])
        (folder / str(os.getpid())).touch()
        return super().merge(received)


class Boom:
    """An attack with a bug."""

    def __init__(self, context):
        self.context = context

    def observe(self, sender, params, now):
        return 1 / 0

    def result(self):
        return {}
'''


@pytest.fixture
def userlab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A package ``userlab`` in a folder on this process's path and the launched processes'."""
    home = tmp_path / "site"
    package = home / "userlab"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    shutil.copy(ROOT / "docs" / "examples" / "myplugins.py", package / "myplugins.py")
    (package / "marking.py").write_text(MARKING)
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.syspath_prepend(str(home))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(home), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("USERLAB_MARKS", str(marks))
    yield marks
    for name in [m for m in sys.modules if m == "userlab" or m.startswith("userlab.")]:
        del sys.modules[name]


PLUGINS = {
    "attack.plugin": "userlab.myplugins:ChangedRows",
    "merge_plugin": "userlab.marking:Marked",
    "model_plugin": "userlab.myplugins:BiasedMF",
}
SMALL = {"nodes": 16, "rounds": 3, "seed": 2, "learning.lr": 0.01}


def _check(result: p2pnode.Result) -> None:
    plugged = result["attack_plugin"]
    assert plugged["name"] == PLUGINS["attack.plugin"]
    observers = plugged["observers"]
    assert set(observers) == {str(n) for n in range(16)}  # --attackers all: every node observes
    merges = {str(row["node"]): row["merges"] for row in result["per_node"]}
    # Base GL merges every model it receives, once: the attack saw each of them before the merge
    assert all(observers[n]["observed"] == merges[n] for n in observers)
    assert sum(o["observed"] for o in observers.values()) > 16
    assert any(o["guesses"] > 0 for o in observers.values())
    assert all(o["precision"] is None or 0.0 <= o["precision"] <= 1.0 for o in observers.values())
    # the user's model trained and was evaluated (a model plug-in is ranked as the built-in ones)
    assert result["local_steps"] > 0 and 0.0 <= result["hit_ratio_at_20"] <= 1.0 and result["mrr"] > 0


def test_a_user_attack_merge_rule_and_model_run_in_the_simulator(userlab: Path) -> None:
    plain = p2pnode.simulate(progress=False, **SMALL)
    plugged = p2pnode.simulate(progress=False, **SMALL, **PLUGINS)
    _check(plugged)
    assert len(list(userlab.iterdir())) == 1  # one process: this one
    assert plugged["mrr"] != plain["mrr"]  # the models merged otherwise
    assert "attack_plugin" not in plain


def test_the_same_plugins_run_in_real_processes_over_http(userlab: Path) -> None:
    # (no self-check: its simulation in this process would merge with the rule too)
    result = p2pnode.launch(
        progress=False, processes=2, tick_seconds=0.004, no_self_check=True, **SMALL, **PLUGINS
    )
    _check(result)
    assert "self_check" not in result  # no_self_check (--no-self-check) skipped it
    marks = {int(m.name) for m in userlab.iterdir()}
    assert len(marks) == 2 and os.getpid() not in marks  # each node process merged with the rule


def test_a_plugin_that_fails_ends_the_run_with_its_error_both_ways(userlab: Path) -> None:
    broken = {"attack.plugin": "userlab.marking:Boom"}
    with pytest.raises(PluginError, match=r"attack plugin userlab.marking:Boom: observe\(\) raised ZeroDiv"):
        p2pnode.simulate(progress=False, **SMALL, **broken)
    # a real process stops at once rather than answer 500s and end with a summary of nothing
    with pytest.raises(RuntimeError, match=r"exited with 1:[\s\S]*observe\(\) raised ZeroDivisionError"):
        p2pnode.launch(progress=False, processes=1, tick_seconds=0.004, no_self_check=True, **SMALL, **broken)


def test_the_plugin_docs_commands_run_as_written_from_the_examples_folder(tmp_path: Path) -> None:
    """docs/plugins.md's first bash block, line by line, in a copy of docs/examples with nothing
    on PYTHONPATH: the working directory is where the module is found (it used to say "no
    module 'myplugins' on the Python path")."""
    import re
    import subprocess

    text = (ROOT / "docs" / "plugins.md").read_text()
    block = re.search(r"```bash\n(.*?)```", text, re.S)
    assert block is not None
    lines = [line.split("#")[0].strip() for line in block.group(1).splitlines()]
    assert lines[0] == "cd docs/examples"
    commands = [line for line in lines[1:] if line]
    assert len(commands) == 3 and all(c.startswith("p2pnode ") for c in commands)
    here = tmp_path / "examples"
    shutil.copytree(ROOT / "docs" / "examples", here, ignore=shutil.ignore_patterns("__pycache__"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    for command in commands:
        done = subprocess.run(command.split(), cwd=here, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, (command, done.stderr[-2000:])
        assert "Traceback" not in done.stderr
    assert (here / "run1" / "report.md").exists()  # the launch's --out, where the docs put it
