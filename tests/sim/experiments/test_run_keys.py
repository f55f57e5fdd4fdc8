"""Which settings make a run its own, and which runs a changed setting reuses (p2plab/experiment_spec.py)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from p2plab import experiment as ex
from p2pnode.config import ConfigError, RunConfig
from p2pnode.runners.sim import simulate
from tests.sim.experiments.helpers import TINY


def test_lookup_and_bad_experiment_files(tmp_path: Path) -> None:
    summary = {"cia": {"max_aac": 0.25, "mia_proxy": {"precision": [0.5, 0.1]}}, "flag": True}
    assert ex.lookup(summary, "cia.max_aac") == 0.25
    assert ex.lookup(summary, "cia.mia_proxy.precision.1") == 0.1
    assert ex.lookup(summary, "cia.mia_proxy.precision.7") is None
    assert ex.lookup(summary, "flag") is None and ex.lookup(summary, "nope.x") is None
    with pytest.raises(ConfigError, match="no experiment 'nope'"):
        ex.load("nope")
    (tmp_path / "bad.toml").write_text('title = "x"\n[[rows]]\nlabel = "a"\n')
    with pytest.raises(ConfigError, match="malformed"):
        ex.load("bad", tmp_path)
    (tmp_path / "badkey.toml").write_text(
        'title = "x"\n[[columns]]\nkey = "m"\nlabel = "M"\npath = "cia.max_aac"\n'
        '[[rows]]\nlabel = "a"\nset = { protocol = "gossip" }\n'
    )
    with pytest.raises(ConfigError, match="protocol"):
        ex.load("badkey", tmp_path)
    # any experiment file by its path, not only the bundled folder's
    mine = tmp_path / "mine.toml"
    mine.write_text((ex.EXPERIMENTS_DIR / "table2.toml").read_text())
    assert ex.load(str(mine)).name == "mine" and ex.load(str(mine)).rows
    with pytest.raises(ConfigError, match="no experiment file"):
        ex.load(str(tmp_path / "missing.toml"))


def test_list_paths_reducers_and_the_value_at_the_best_round() -> None:
    summary = {
        "history": [{"hr": 0.2}, {"hr": 0.5}, {"hr": 0.4}],
        "mia": {"accuracy": [0.9, 0.7, 0.8]},
        "bad": [{"hr": "x"}],
    }
    assert ex.lookup_list(summary, "history.*.hr") == [0.2, 0.5, 0.4]
    assert ex.lookup(summary, "history.*.hr|max") == 0.5
    assert ex.lookup(summary, "history.*.hr|min") == 0.2
    assert ex.lookup(summary, "mia.accuracy|last") == 0.8
    assert ex.lookup(summary, "history.*.hr|median") is None  # unknown reducer
    assert ex.lookup(summary, "bad.*.hr|max") is None  # not numbers
    assert ex.lookup_at_max(summary, "mia.accuracy", "history.*.hr") == 0.7  # MIA at the best-HR round
    assert ex.lookup_at_max(summary, "mia.accuracy", "history.*.nope") is None


def test_long_runs_pass_on_throttled_progress() -> None:
    lines: list[str] = []
    quiet = ex.throttled(lines.append, seconds=3600)
    quiet("round 1/9")
    assert lines == []
    loud = ex.throttled(lines.append, seconds=0)
    loud("round 2/9")
    assert lines == ["    round 2/9"]


def test_runs_recorded_before_a_setting_existed_are_reused(tmp_path: Path) -> None:
    """A run file whose config lacks a key (older p2pnode) counts as that key's default."""
    exp = ex.load("table2")
    ex.run_experiment(exp, tmp_path, TINY, seeds=[0])
    files = sorted((tmp_path / "runs").glob("simulate-*.json"))
    for f in files:  # pretend they were written before attack.mia_holdout existed
        doc = json.loads(f.read_text())
        del doc["config"]["attack"]["mia_holdout"]
        f.rename(f.with_name("simulate-0000older" + f.name[-10:]))
        (f.with_name("simulate-0000older" + f.name[-10:])).write_text(json.dumps(doc))
    calls: list[int] = []

    def counting(config: RunConfig, progress: Any = None) -> dict[str, Any]:
        calls.append(config.seed)
        return simulate(config)

    ex.run_experiment(exp, tmp_path, TINY, seeds=[0], runner=counting)
    assert calls == []  # nothing reran
    changed = {**TINY, "learning": {"batch_size": 128}}  # both models read it
    ex.run_experiment(exp, tmp_path, changed, seeds=[0], runner=counting)
    assert len(calls) == 2  # a recorded value that differs is a different run


def test_a_run_recorded_before_the_estimator_existed_is_a_first_reading_run(tmp_path: Path) -> None:
    """Runs written before ``attack.momentum_estimator`` existed used v_u^0 = Θ_u^0: they are
    reused for ``first`` and never passed off as runs of today's default (debiased)."""
    exp = ex.load("table2")
    first = {**TINY, "attack": {**TINY["attack"], "momentum_estimator": "first"}}
    ex.run_experiment(exp, tmp_path, first, seeds=[0])
    for f in sorted((tmp_path / "runs").glob("simulate-*.json")):
        doc = json.loads(f.read_text())
        del doc["config"]["attack"]["momentum_estimator"]
        f.unlink()
        f.with_name("simulate-0000older" + f.name[-10:]).write_text(json.dumps(doc))
    calls: list[str] = []

    def counting(config: RunConfig, progress: Any = None) -> dict[str, Any]:
        calls.append(config.attack.momentum_estimator)
        return simulate(config)

    ex.run_experiment(exp, tmp_path, first, seeds=[0], runner=counting)
    assert calls == []  # reused as the 'first' runs they were
    ex.run_experiment(exp, tmp_path, TINY, seeds=[0], runner=counting)
    assert calls == ["debiased", "debiased"]  # today's default is a different run


def test_settings_only_real_processes_read_do_not_split_simulated_runs(tmp_path: Path) -> None:
    """The simulator reads neither ``tick_seconds`` nor ``wire.local_delivery``: a simulated run's
    key leaves them out, a real run's keeps them; simulated runs filed under a key that still held
    them (before this) are found again, so a changed default of either reruns nothing."""
    base = RunConfig()
    for change in ({"tick_seconds": 0.03}, {"wire.local_delivery": False}):
        assert ex.run_key(base.replace(**change)) == ex.run_key(base)
        assert ex.run_key(base.replace(**change), "real") != ex.run_key(base, "real")
    exp = dataclasses.replace(ex.load("table2"), rows=ex.load("table2").rows[:1])
    old_default = {**TINY, "wire": {"local_delivery": False}}
    ex.run_experiment(exp, tmp_path, old_default, seeds=[0])
    (f,) = sorted((tmp_path / "runs").glob("simulate-*.json"))
    f.rename(f.with_name("simulate-" + ex.run_key(exp.config(exp.rows[0], 0, old_default), "real") + ".json"))
    calls: list[int] = []

    def counting(config: RunConfig, progress: Any = None) -> dict[str, Any]:
        calls.append(config.seed)
        return simulate(config)

    doc = ex.run_experiment(exp, tmp_path, TINY, seeds=[0], runner=counting)
    assert calls == [] and doc["rows"][0]["cells"]["max_aac"]["values"]  # found, reported, not rerun


def test_attack_settings_that_cannot_act_do_not_split_runs() -> None:
    fed = RunConfig(protocol="fedavg").replace(**{"attack.kind": "cia"})
    assert ex.run_key(fed.replace(**{"attack.multicast": "v"})) == ex.run_key(fed)  # no colluders
    assert ex.run_key(fed.replace(**{"attack.momentum_estimator": "first"})) != ex.run_key(fed)
    flat = fed.replace(**{"attack.momentum": 0.0})
    assert ex.run_key(flat.replace(**{"attack.momentum_estimator": "first"})) == ex.run_key(flat)
    honest = RunConfig()
    assert ex.run_key(honest.replace(**{"attack.momentum_estimator": "zero"})) == ex.run_key(honest)
    group = RunConfig().replace(**{"attack.kind": "cia", "attack.colluders": 0.1})
    assert ex.run_key(group.replace(**{"attack.multicast": "v"})) != ex.run_key(group)


def test_settings_a_model_never_reads_do_not_split_runs() -> None:
    """GMF ignores the PRME settings and PRME the GMF ones; anything a model reads keys the run."""
    gmf = RunConfig()
    assert gmf.model == "gmf"
    prme = dataclasses.replace(gmf, model="prme")

    def learning(config: RunConfig, **changes: Any) -> RunConfig:
        return dataclasses.replace(config, learning=dataclasses.replace(config.learning, **changes))

    assert ex.run_key(learning(gmf, prme_lr=0.2, prme_dim=8, prme_backend="fused")) == ex.run_key(gmf)
    assert ex.run_key(learning(prme, prme_backend="fused")) != ex.run_key(prme)  # it rounds otherwise
    assert ex.run_key(learning(gmf, lr=0.02)) != ex.run_key(gmf)
    # DP-SGD's backend: no key where nothing is private; the fused one's other noise keys its runs
    assert ex.run_key(learning(gmf, dp_backend="fused")) == ex.run_key(gmf)
    private = learning(gmf, dp_epsilon=10.0)
    assert ex.run_key(learning(private, dp_backend="fused")) != ex.run_key(private)
    # the fictive users' backend: no key where no GMF observer scores with e_A
    cia = gmf.replace(**{"attack.kind": "cia"})
    fictive = cia.replace(**{"learning.share_less": True})
    assert ex.run_key(cia.replace(**{"attack.fictive_backend": "fused"})) == ex.run_key(cia)
    assert ex.run_key(fictive.replace(**{"attack.fictive_backend": "fused"})) != ex.run_key(fictive)
    prme_fictive = dataclasses.replace(fictive, model="prme")
    assert ex.run_key(prme_fictive.replace(**{"attack.fictive_backend": "fused"})) == ex.run_key(prme_fictive)
    assert ex.run_key(learning(prme, lr=0.02, factors=8, negatives=2)) == ex.run_key(prme)
    assert ex.run_key(learning(prme, prme_lr=0.2)) != ex.run_key(prme)
    assert ex.run_key(prme) != ex.run_key(gmf)
    for config in (gmf, prme):  # every name left out is a real learning setting
        assert set(ex.UNUSED_BY_MODEL[config.model]) <= set(config.to_dict()["learning"])


def test_a_run_another_experiment_finished_is_reused_and_a_renamed_file_is_not(tmp_path: Path) -> None:
    """``--reuse-runs results``: a run of the same key in another experiment's folder is copied in,
    not run again, with the same figures; a file whose recorded configuration keys otherwise (one
    renamed or edited by hand) is not taken by its name, and the run runs."""
    table2 = ex.load("table2")
    one = dataclasses.replace(table2, rows=table2.rows[:1])
    ex.run_experiment(one, tmp_path / "table2", TINY, seeds=[0, 1])
    first = {f.name: json.loads(f.read_text()) for f in (tmp_path / "table2" / "runs").glob("*.json")}
    calls: list[int] = []

    def counting(config: RunConfig, progress: Any = None) -> dict[str, Any]:
        calls.append(config.seed)
        return simulate(config)

    doc = ex.run_experiment(
        dataclasses.replace(one, name="other"), tmp_path / "other", TINY, seeds=[0, 1], runner=counting,
        reuse=[tmp_path],
    )  # fmt: skip
    assert calls == []
    copied = {f.name: json.loads(f.read_text()) for f in (tmp_path / "other" / "runs").glob("*.json")}
    assert copied.keys() == first.keys()
    for name, run in copied.items():
        assert run.pop("_reused_from") == "table2"
        assert run == first[name]  # the same figures, its own seconds (where it ran)
    assert len(doc["rows"][0]["cells"]["max_aac"]["values"]) == 2

    # a file under a key its configuration does not make is not trusted by its name
    for seed0 in [f for f in tmp_path.glob("*/runs/*.json") if json.loads(f.read_text())["_seed"] == 0]:
        edited = json.loads(seed0.read_text())
        edited["config"]["learning"]["lr"] = 0.5
        seed0.write_text(json.dumps(edited))
    calls.clear()
    ex.run_experiment(
        dataclasses.replace(one, name="third"), tmp_path / "third", TINY, seeds=[0, 1], runner=counting,
        reuse=[tmp_path / "missing", tmp_path],
    )  # fmt: skip
    assert calls == [0]
