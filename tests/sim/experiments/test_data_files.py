"""Experiments on a data file: the paper beside it, its settings per data shape, synthetic files said so."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from p2plab import experiment as ex
from p2pnode.config import ConfigError


def test_an_experiment_runs_on_a_poi_file_beside_the_papers_numbers_for_it(tmp_path: Path) -> None:
    """``--dataset FILE``: every user of the file is a node, the paper's numbers are those of the
    data set the file's name says it is, and new contents at the same path are new runs."""
    from learning import synthetic
    from p2plab.cli import main as lab_main

    small = synthetic.POIConfig(users=30, venues=300, checkins=1500, neighbourhoods=6)
    path = tmp_path / "dataset_TSMC2014_NYC.txt"
    path.write_text("".join(synthetic.tsmc_lines(synthetic.poi_checkins(small))))
    out = tmp_path / "t3"
    argv = ["experiment", "table3", "--dataset", str(path), "--rows", "Rand-Gossip GMF", "--rounds", "2"]
    argv += ["--seeds", "0", "--set", "attack.target_k=3", "--out", str(out), "--quiet"]
    assert lab_main(argv) == 0
    report = (out / "report.md").read_text()
    assert "dataset_TSMC2014_NYC.txt" in report and "[paper: foursquare-nyc]" in report
    assert "| Rand-Gossip GMF | 7.12 |" in report  # the paper's Foursquare-NYC Max AAC
    runs = sorted((out / "runs").glob("simulate-*.json"))
    assert len(runs) == 1
    assert json.loads(runs[0].read_text())["config"]["nodes"] == 30
    path.write_text("".join(synthetic.tsmc_lines(synthetic.poi_checkins(dataclasses.replace(small, seed=1)))))
    assert lab_main(argv) == 0
    assert len(list((out / "runs").glob("simulate-*.json"))) == 2
    assert lab_main([*argv[:-3], "--paper", "gowalla-nyc", "--out", str(tmp_path / "g"), "--quiet"]) == 0
    assert "| Rand-Gossip GMF | 11 |" in (tmp_path / "g" / "report.md").read_text()
    assert lab_main(["experiment", "table3", "--paper", "gowalla-nyc", "--quiet"]) == 2  # no --dataset


def test_a_file_changes_its_settings_on_one_data_shape_and_the_report_says_why(tmp_path: Path) -> None:
    """``[on.foursquare-nyc]``: table3's PRME rows step at lr 0.1 on a file of a POI shape (at 0.2
    heavy users diverge there, REPRODUCTION finding 11) and at 0.2 on ML-100k; GMF runs keep their
    keys; the report and the summary's reading say so, and a file without a reason is refused."""
    from learning import synthetic
    from p2plab.cli import main as lab_main
    from p2plab.experiment_summary import summarize

    exp = ex.load("table3")
    assert exp.config(exp.rows[1], 0, {}).learning.prme_lr == 0.2
    for shape in ("foursquare-nyc", "gowalla-nyc"):
        on = exp.on_dataset("x.txt", shape)
        assert on.applied == shape and on.applied_settings() == ["learning.prme_lr = 0.1"]
        assert on.config(on.rows[1], 0, {}).learning.prme_lr == 0.1
        gmf = (exp.config(exp.rows[0], 0, {}), on.config(on.rows[0], 0, {}))
        assert ex.run_key(gmf[0]) == ex.run_key(gmf[1])  # GMF does not read prme_lr
    assert exp.on_dataset("u.data", "ml-100k").applied == ""
    small = synthetic.POIConfig(users=30, venues=300, checkins=1500, neighbourhoods=6)
    path = tmp_path / "dataset_TSMC2014_NYC.txt"
    path.write_text("".join(synthetic.tsmc_lines(synthetic.poi_checkins(small))))
    argv = ["experiment", "table3", "--dataset", str(path), "--rows", "Rand-Gossip PRME", "--rounds", "2"]
    argv += ["--seeds", "0", "--set", "attack.target_k=3", "--out", str(tmp_path / "r" / "t3"), "--quiet"]
    assert lab_main(argv) == 0
    run = json.loads(next((tmp_path / "r" / "t3" / "runs").glob("simulate-*.json")).read_text())
    assert run["config"]["learning"]["prme_lr"] == 0.1
    report = (tmp_path / "r" / "t3" / "report.md").read_text()
    assert "**On the foursquare-nyc shape** the experiment file sets `learning.prme_lr = 0.1`: PRME" in report
    assert {ln.reading for ln in summarize(tmp_path / "r")} == {
        "debiased; learning.prme_lr = 0.1 (on the foursquare-nyc shape)"
    }
    text = (ex.EXPERIMENTS_DIR / "table3.toml").read_text()
    (tmp_path / "why.toml").write_text(text.replace('why = "PRME at lr 0.2', 'why = " "\nx = "'))
    with pytest.raises(ConfigError, match="must say why"):
        ex.load("why", tmp_path)
    (tmp_path / "shape.toml").write_text(text.replace("[on.gowalla-nyc]", "[on.gowalla]"))
    with pytest.raises(ConfigError, match=r"settings on \['gowalla'\]"):
        ex.load("shape", tmp_path)
    (tmp_path / "bad.toml").write_text(text.replace("prme_lr = 0.1 }", "prme_lr = -1 }"))
    with pytest.raises(ConfigError, match=r"learning\.prme_lr must be > 0, got -1\.0") as refused:
        ex.load("bad", tmp_path)
    # the refusal names the file, the first row it fails for and the table that set the value
    named = f"{tmp_path / 'bad.toml'}: row 'Rand-Gossip GMF' under [on.gowalla-nyc]: "
    assert str(refused.value).startswith(named)
    (tmp_path / "base.toml").write_text(text.replace("rounds = 400", "rounds = 0", 1))
    with pytest.raises(ConfigError, match="rounds") as refused:
        ex.load("base", tmp_path)
    assert str(refused.value).startswith(f"{tmp_path / 'base.toml'}: row 'Rand-Gossip GMF': ")
    # a key a file needs left out, or a field misspelt, is refused in the file's terms
    pathless = text.replace('path = "cia.max_aac"\n', "", 1)
    assert pathless != text
    malformed = {
        "cols": (text.replace("[[columns]]", "[[figures]]"), r"no 'columns' \(a file needs"),
        "label": (text.replace('label = "Rand-Gossip GMF"', 'name = "Rand-Gossip GMF"', 1), r"no 'label' "),
        "path": (pathless, r"\[\[columns\]\] 'max_aac' has no 'path' \(a column needs key, label and path"),
        "field": (
            text.replace('key = "max_aac"', 'key = "max_aac"\npercnt = true', 1),
            r"\[\[columns\]\] 'max_aac' has unknown field\(s\) 'percnt' \(known: key, label",
        ),
        "whyless": (
            text.replace('why = "PRME at lr 0.2', 'reason = "PRME at lr 0.2', 1),
            r"\[on.gowalla-nyc\] has no 'why' \(it needs set = ",
        ),
    }
    for name, (changed, refusal) in malformed.items():
        (tmp_path / f"{name}.toml").write_text(changed)
        with pytest.raises(ConfigError, match=rf"{name}.toml: malformed experiment: {refusal}"):
            ex.load(name, tmp_path)


def test_runs_on_a_file_data_synth_wrote_are_said_synthetic_in_the_summary(tmp_path: Path) -> None:
    """A file named as the paper's data set but made by ``p2pnode data synth`` carries a marker
    beside it (its generator and SHA-256); the report records it and the summary labels those
    figures synthetic, and stops doing so once the file's bytes are no longer the ones marked."""
    from p2plab.cli import main as lab_main
    from p2plab.experiment_summary import summarize
    from p2pnode.data import datasets

    path = tmp_path / "dataset_TSMC2014_NYC.txt"
    synth = ["data", "synth", "foursquare-nyc", str(path), "--users", "30", "--venues", "300"]
    assert lab_main(synth) == 0
    about = datasets.synthetic_origin(path)
    assert about is not None and about["shape"] == "foursquare-nyc" and about["users"] == 30
    argv = ["experiment", "table3", "--dataset", str(path), "--rows", "Rand-Gossip GMF", "--rounds", "2"]
    argv += ["--seeds", "0", "--set", "attack.target_k=3", "--out", str(tmp_path / "r" / "t3"), "--quiet"]
    assert lab_main(argv) == 0
    doc = json.loads((tmp_path / "r" / "t3" / "results.json").read_text())
    users = doc["overrides"]["nodes"]
    assert doc["data"] == {"file": path.name, "sha256": about["sha256"], "synthetic": about, "users": users}
    for record in (tmp_path / "r" / "t3").rglob("*.json"):  # nothing of this machine's folders
        assert str(tmp_path) not in record.read_text(), record.name
    assert doc["overrides"]["dataset"] == path.name  # the command: sys.argv here (pytest's)
    lines = summarize(tmp_path / "r")
    assert lines and {ln.group for ln in lines} == {"probe"}  # 2 rounds, K = 3: not the table's setting
    assert lines[0].experiment == (  # a probe says what its command changed
        "t3 (table3), data dataset_TSMC2014_NYC.txt, synthetic, of foursquare-nyc's shape; "
        "set attack.target_k = 3, rounds = 2"
    )  # fmt: skip
    path.write_text(path.read_text() + path.read_text().splitlines(keepends=True)[0])  # changed since
    assert datasets.synthetic_origin(path) is None
