"""The Python API (p2plab/notebook.py): ``p2pnode.simulate(**flags)`` takes the command
line's flags, checks them with its messages, and returns the command's summary with tables."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

import p2pnode
from p2plab.notebook import Result, _argv, _config, _parser
from p2pnode.cli import main as daemon_main
from p2pnode.config import ConfigError
from p2pnode.runners.sim import simulate as run_sim


def test_keyword_arguments_are_the_command_lines_flags() -> None:
    argv, keys = _argv(
        _parser("simulate"),
        {
            "lr": 0.01,
            "target_k": 10,
            "share_less": True,
            "float16": False,
            "attackers": [3, 17],
            "seed": None,
            "learning.batch_size": 32,
        },
    )
    assert argv == ["--lr=0.01", "--target-k=10", "--share-less", "--attackers=3,17"]
    assert keys == {"learning.batch_size": 32}
    _, config = _config("simulate", {"nodes": 50, "lr": 0.05, "learning.batch_size": 32, "seed": 4})
    assert (config.nodes, config.learning.lr, config.learning.batch_size, config.seed) == (50, 0.05, 32, 4)


@pytest.mark.parametrize(
    ("flags", "argv"),
    [
        ({"attack": "ciaa"}, ["--attack", "ciaa"]),
        ({"nodes": "many"}, ["--nodes", "many"]),
        ({"nodes": 1}, ["--nodes", "1"]),
        (
            {"colluders": 0.2, "colluder_groups": 50, "attack": "cia", "nodes": 100},
            ["--colluders", "0.2", "--colluder-groups", "50", "--attack", "cia", "--nodes", "100"],
        ),
    ],
)
def test_a_bad_value_is_refused_with_the_command_lines_message(
    flags: dict[str, object], argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ConfigError) as raised:
        _config("simulate", flags)
    try:
        code = daemon_main(["simulate", *argv, "--rounds", "1"])
    except SystemExit as exc:  # argparse's own refusals exit
        code = int(str(exc.code))
    assert code == 2
    assert str(raised.value) in capsys.readouterr().err


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        ({"lrr": 0.1}, "unknown argument 'lrr' (did you mean lr?)"),
        ({"learning.lrr": 0.1}, "unknown key learning.lrr (did you mean learning.lr?)"),
        ({"learning.lr": "fast"}, "learning.lr must be a number"),
        ({"share_less": 3}, "share_less is a switch (--share-less): True or False, not 3"),
        ({"nodes": True}, "nodes takes a value (--nodes NODES), not True"),
        ({"json": True}, "json: not an argument here"),
    ],
)
def test_a_wrong_argument_is_named(flags: dict[str, object], says: str) -> None:
    with pytest.raises(ConfigError, match=None) as raised:
        p2pnode.simulate(progress=False, **flags)  # type: ignore[attr-defined]
    assert says in str(raised.value)


def test_a_dataset_file_without_nodes_runs_every_user_of_the_file(tmp_path: Path) -> None:
    path = tmp_path / "mine.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["user", "item"])
        for u in range(1, 31):
            for i in range(12):
                w.writerow([u, (u * 7 + i * 13) % 150])
    _, config = _config("simulate", {"dataset": str(path)})
    assert config.nodes == 30
    # the checks that depend on nodes run against the file's users (the command line's rule)
    _, config = _config(
        "simulate",
        {"dataset": str(path), "attack": "cia", "colluders": 0.2, "colluder_groups": 5, "target_k": 5},
    )
    assert config.nodes == 30


def test_the_result_is_the_command_lines_summary_with_tables(tmp_path: Path) -> None:
    flags = {"nodes": 30, "rounds": 3, "lr": 0.01, "attack": "cia", "target_k": 10, "seed": 2}
    r = p2pnode.simulate(progress=False, out=tmp_path, **flags)  # type: ignore[attr-defined]
    assert isinstance(r, Result)
    _, config = _config("simulate", flags)
    plain = run_sim(config)
    assert set(r) == set(plain)
    assert r["hit_ratio_at_20"] == plain["hit_ratio_at_20"]
    assert r["cia"]["max_aac"] == plain["cia"]["max_aac"]
    assert json.loads((tmp_path / "result.json").read_text())["per_node"] == r["per_node"]

    history = r.history
    assert list(history["round"]) == [1, 2, 3]
    assert list(history["hit_ratio_at_20"]) == [h["hit_ratio_at_20"] for h in r["history"]]
    assert list(history["cia.aac"]) == [h["cia"]["aac"] for h in r["history"]]

    nodes = r.nodes
    assert list(nodes.index) == list(range(30))
    assert nodes["hit_ratio_at_20"].mean() == pytest.approx(r["hit_ratio_at_20"])
    assert int(nodes["models_sent"].sum()) == r["model_messages"]
    assert bool(nodes["adversary"].all())  # --attack cia alone: every node attacks
    assert nodes["cia_accuracy"].mean() == pytest.approx(r["cia"]["aac"][-1])
    assert list(nodes["user"][:3]) == ["1", "2", "3"]  # ML-100k's own user ids

    fig = r.plot()
    titles = [ax.get_title() for ax in fig.axes]
    assert len(titles) == 2 and titles[0].startswith("HR@20 per round") and titles[1].startswith("CIA")
    assert fig._repr_png_()[:8] == b"\x89PNG\r\n\x1a\n"

    again = Result.load(tmp_path)
    assert again.config == config
    assert list(again.history["round"]) == [1, 2, 3]


def test_progress_bar_counts_every_round(capsys: pytest.CaptureFixture[str]) -> None:
    r = p2pnode.simulate(nodes=20, rounds=4, seed=1)  # type: ignore[attr-defined]
    err = capsys.readouterr().err
    assert "4/4" in err and "round" in err and "HR@20=" in err
    assert r.history["round"].tolist() == [1, 2, 3, 4]


def test_the_progress_bar_draws_the_figures_of_the_round_it_counts() -> None:
    from p2plab.notebook import _Bar
    from p2pnode.config import RunConfig

    class Drawn:  # tqdm's side: update() draws the bar with the postfix set so far
        def __init__(self) -> None:
            self.postfix: dict[str, str] = {}
            self.draws: list[dict[str, str]] = []

        def set_postfix(self, post: dict[str, str], refresh: bool = True) -> None:
            self.postfix = dict(post)

        def update(self, n: int) -> None:
            self.draws.append(self.postfix)

    bar = _Bar(RunConfig(nodes=20, rounds=2), enabled=False)
    bar.bar = drawn = Drawn()
    bar.update(1, {"hit_ratio_at_20": 0.5})
    bar.update(2, {"hit_ratio_at_20": 0.6, "cia": {"aac": 0.25}})
    assert drawn.draws == [{"HR@20": "0.500"}, {"HR@20": "0.600", "CIA AAC": "0.250"}]


def test_the_daemon_package_loads_the_lab_only_when_the_api_is_used() -> None:
    import subprocess
    import sys

    code = (
        "import sys, p2pnode, p2pnode.cli; assert 'p2plab' not in sys.modules; "
        "f = p2pnode.simulate; assert 'p2plab.notebook' in sys.modules; "
        "import p2pnode as p; print(p.launch.__module__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "p2plab.notebook"
    import p2plab

    assert p2pnode.simulate is p2plab.simulate and p2pnode.Result is p2plab.Result  # type: ignore[attr-defined]
    assert {"simulate", "launch", "Result"} <= set(dir(p2pnode)) and set(p2plab.__all__) <= set(dir(p2plab))
    assert p2pnode.__all__ == ["simulate", "launch", "Result", "__version__"]
    with pytest.raises(AttributeError, match="no attribute 'simulat'"):
        p2pnode.simulat  # type: ignore[attr-defined]  # noqa: B018


def test_attribute_inference_is_a_column_of_the_history_per_observer_and_attribute() -> None:
    r = p2pnode.simulate(  # type: ignore[attr-defined]
        nodes=60, rounds=2, seed=1, dataset="synthetic", protocol="fedavg", attack="aia", aia_every=1,
        aia_epochs=10, progress=False,
    )  # fmt: skip
    history = r.history
    assert list(history["aia.server.round"]) == [1, 2]
    assert history["aia.omniscient.attributes.planted.auc"].between(0, 1).all()
    assert "aia.server.attributes.planted.majority.auc" in history


def test_a_run_with_attribute_inference_plots_it() -> None:
    r = p2pnode.simulate(  # type: ignore[attr-defined]
        nodes=60, rounds=2, seed=1, dataset="synthetic", protocol="fedavg", attack="aia", aia_every=1,
        aia_epochs=10, progress=False,
    )  # fmt: skip
    fig = r.plot()
    titles = [ax.get_title() for ax in fig.axes]
    assert any(t.startswith("Attribute inference (004)") for t in titles)
    aia_axes = next(ax for ax in fig.axes if ax.get_title().startswith("Attribute inference"))
    labels = {line.get_label() for line in aia_axes.get_lines()}
    # one colour an attribute: the omniscient bound, the placed observers' mean, the majority
    assert {"planted AUC, omniscient", "planted AUC, placed (mean)", "planted majority class"} <= labels


def test_help_lists_every_argument_with_its_default_and_help() -> None:
    """``help(p2pnode.simulate)`` shows every keyword argument, with its
    default in the signature and its help in the docstring, generated from the flags (so from
    the configuration tree); ``launch`` shows the daemon's defaults."""
    import inspect

    import p2pnode
    from p2pnode.config import config_fields

    for function, clip in ((p2pnode.simulate, 0.0), (p2pnode.launch, 1.0)):
        params = inspect.signature(function).parameters
        doc = function.__doc__ or ""
        for _path, f in config_fields():
            flag = f.metadata.get("flag")
            if flag is None or not flag.offered(real=function is p2pnode.launch, network=True):
                continue
            name = flag.flag_name(f.name)[2:].replace("-", "_")
            assert name in params and f"\n    {name}: " in doc, name
        assert params["lr"].default == 0.001 and params["clip_factor"].default == clip
        assert "progress" in params and "json" not in params
