"""Finding a plug-in by name, and the wrappers that name a plug-in's own errors (issue #63)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from adversary.plugin import AttackContext, PluginObserver
from p2pcore.plugin import PluginError
from p2pnode import plugins
from p2pnode.config import ConfigError
from protocols.merging import PluginMerger

ATTACK = """
class Counting:
    def __init__(self, context):
        self.context = context
        self.seen = []

    def observe(self, sender, params, now):
        self.seen.append((sender, sorted(params), now))

    def result(self):
        return {"seen": len(self.seen)}
"""


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder on sys.path with module ``plugtest_mod`` and an installed distribution whose
    entry point names its class in group p2pnode.attacks."""
    (tmp_path / "plugtest_mod.py").write_text(ATTACK)
    info = tmp_path / "plugtest_dist-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: plugtest-dist\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[p2pnode.attacks]\ncounting = plugtest_mod:Counting\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    plugins._load.cache_clear()
    yield tmp_path
    plugins._load.cache_clear()
    sys.modules.pop("plugtest_mod", None)


def test_a_plugin_is_found_by_import_path_and_by_entry_point(site: Path) -> None:
    by_path = plugins.load("attack", "plugtest_mod:Counting")
    by_entry = plugins.load("attack", "counting")
    assert by_path is by_entry and by_path.__name__ == "Counting"


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("nosuch_mod_x:Thing", "no module 'nosuch_mod_x' on the Python path"),
        ("plugtest_mod:Missing", "plugtest_mod has no 'Missing'"),
        ("plugtest_mod:", "plugtest_mod has no ''"),
        ("uncounted", "no entry point of that name in group p2pnode.attacks (installed: counting)"),
    ],
)
def test_a_plugin_that_cannot_be_found_is_one_line_naming_the_flag(site: Path, name: str, says: str) -> None:
    with pytest.raises(ConfigError, match=r"^--attack-plugin ") as err:
        plugins.load("attack", name)
    assert says in str(err.value)


def test_the_observer_sees_read_only_arrays_and_names_the_plugins_errors(site: Path) -> None:
    made = plugins.load("attack", "counting")(AttackContext(0, 4, 3, "gmf", "base", 0))
    observer = PluginObserver("counting", made)
    table = np.ones((3, 2), np.float32)
    observer.observe(2, {"item": table}, 150.0)
    assert made.seen == [(2, ["item"], 150.0)] and observer.result() == {"observed": 1, "seen": 1}
    assert table.flags.writeable  # the node's own array is untouched

    class Writes:
        def observe(self, sender: int, params: dict[str, np.ndarray], now: float) -> None:
            params["item"][0, 0] = 5.0

        def result(self) -> dict[str, int]:
            return {}

    with pytest.raises(PluginError, match=r"attack plugin w: observe\(\) raised ValueError") as err:
        PluginObserver("w", Writes()).observe(1, {"item": table}, 0.0)
    assert isinstance(err.value.__cause__, ValueError) and table[0, 0] == 1.0
    with pytest.raises(PluginError, match=r"its object has no observe\(\)"):
        PluginObserver("x", object())


def test_a_merge_plugins_scores_are_a_mapping_or_none() -> None:
    class Returns:
        def __init__(self, value: object) -> None:
            self.value = value

        def merge(self, received: object) -> object:
            return self.value

    assert PluginMerger("n", Returns(None)).merge([]) == {}  # type: ignore[arg-type]
    assert PluginMerger("s", Returns({3: 1})).merge([]) == {3: 1.0}  # type: ignore[arg-type]
    with pytest.raises(PluginError, match="returned list, not a mapping"):
        PluginMerger("l", Returns([1, 2])).merge([])  # type: ignore[arg-type]


KEEPS = """
class Keeps:
    def __init__(self, context):
        self.seen = 0

    def observe(self, sender, params, now):
        self.seen += 1

    def result(self):
        return {"seen": self.seen}

    def state(self):
        return {"seen": self.seen}

    def restore(self, state):
        self.seen = state["seen"]
"""


def test_an_observers_state_rides_in_the_nodes_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from p2pnode.config import RunConfig
    from p2pnode.sim import Simulation

    (tmp_path / "plugtest_keeps.py").write_text(KEEPS)
    monkeypatch.syspath_prepend(str(tmp_path))
    config = RunConfig(nodes=8, rounds=2, seed=3, dataset="synthetic").replace(
        **{"attack.plugin": "plugtest_keeps:Keeps"}
    )
    sim = Simulation(config)  # started: every node's first timer set
    sim.run_round()
    node = sim.host.nodes[0].node
    assert node.attack_plugin is not None
    seen = node.attack_plugin.result()["seen"]
    saved = node.state()
    assert saved["attack_plugin"] == {"observed": seen, "plugin": {"seen": seen}} and seen > 0
    fresh = Simulation(config).host.nodes[0].node
    assert fresh.attack_plugin is not None and fresh.attack_plugin.result() == {"observed": 0, "seen": 0}
    fresh.restore(saved)
    assert fresh.attack_plugin.result() == {"observed": seen, "seen": seen}
    sys.modules.pop("plugtest_keeps", None)
