"""Finding a plug-in by name, and the wrappers that name a plug-in's own errors."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from adversary.plugin import AttackContext, PluginObserver
from learning.plugin_model import PluginLearner, plugin_init, plugin_shared
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
    from p2pnode.runners.sim import Simulation

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


class _Model:
    """A tiny model plug-in: s(i) = u · v_i, one SGD step a call."""

    def __init__(self, replaces: bool = False, dtype: type = np.float32) -> None:
        self.replaces, self.dtype = replaces, dtype

    def init(self, n_items: int, seed: int) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(seed)
        return {
            "user": rng.normal(0, 0.1, (1, 4)).astype(self.dtype),
            "item": rng.normal(0, 0.1, (n_items, 4)).astype(self.dtype),
        }

    def scores(self, params: dict[str, np.ndarray], items: np.ndarray) -> np.ndarray:
        return params["item"][items] @ params["user"][0]

    def update(
        self, params: dict[str, np.ndarray], items: np.ndarray, labels: np.ndarray, rng: object
    ) -> int:
        if self.replaces:
            params["user"] = params["user"] * 2  # type: ignore[index]
            return 1
        params["user"][0] += 0.01 * (labels - 0.5) @ params["item"][items]
        return 1


def _learner(model: _Model) -> PluginLearner:
    from learning.split import leave_one_out
    from tests.unit.learning.test_learning import toy

    data = toy()
    init = plugin_init("m", model, data.n_items, 0)
    user = leave_one_out(data, seed=0)[0]
    return PluginLearner(
        "m", model, user, init, plugin_shared("m", model, init), np.random.default_rng(1), 10, 2
    )


def test_a_model_plugin_trains_in_place_and_is_ranked_as_a_built_in_model() -> None:
    learner = _learner(_Model())
    before = learner.params["user"].copy()
    assert learner.local_update() == 1 and learner.version == 1
    assert not np.array_equal(before, learner.params["user"])
    figures = learner.ranking()
    assert 0 <= figures.utility <= 1 and 0 < figures.rr <= 1
    assert learner.state()["model"] == "plugin:m"


def test_a_model_plugin_that_replaces_its_arrays_or_gives_float64_is_told_so() -> None:
    with pytest.raises(PluginError, match="must write its arrays in place"):
        _learner(_Model(replaces=True)).local_update()
    with pytest.raises(PluginError, match=r"init\(\) must map names to float32 arrays; 'user' is float64"):
        _learner(_Model(dtype=np.float64))
