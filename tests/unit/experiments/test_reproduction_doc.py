"""What experiments/REPRODUCTION.md and the README state is what the project's commands produce."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]


def test_reproduction_md_summary_is_the_summary_of_the_committed_reports() -> None:
    """REPRODUCTION.md's summary is ``p2pnode experiment summary experiments/reports``
    written into its block, not typed by hand; a report changed without regenerating it fails."""
    from p2plab.experiment_summary import BEGIN, END, readings, render, summarize

    doc = (ROOT / "experiments" / "REPRODUCTION.md").read_text(encoding="utf-8")
    assert doc.count(BEGIN) == 1 and doc.count(END) == 1
    block = doc.split(BEGIN)[1].split(END)[0]
    reports = ROOT / "experiments" / "reports"
    expected = render(summarize(reports), readings(reports))
    assert block.strip() == expected.strip(), (
        "REPRODUCTION.md's summary is stale: run "
        "`p2pnode experiment summary experiments/reports --write experiments/REPRODUCTION.md`"
    )
    # the headline row is there: Table III at the rounds its upper bound implies, counted; the
    # 400-round row listed with the probes, saying why
    assert "| table3-bound | Rand-Gossip GMF, 3,000 rounds | Max AAC | 14.6 |" in block
    assert "| table3 (this row: 400 rounds" in block.split("### Probes")[1]


def test_every_experiment_with_a_gossip_row_states_the_papers_plain_merge() -> None:
    """The daemon clips by default, the lab does not; an experiment file does not lean
    on that difference but says ``clip_factor`` itself wherever one of its rows gossips, so a
    change of either default moves no reproduced number."""
    from p2plab.experiment_spec import load, names

    gossip = []
    for name in names():
        exp = load(name)
        rows = [(row, exp.config(row, exp.seeds[0], {})) for row in exp.rows] if exp.rows else []
        if any(cfg.protocol != "fedavg" for _, cfg in rows):
            gossip.append(name)
            assert "clip_factor" in exp.base, f"{name}: a gossip row and no clip_factor in [base]"
    assert len(gossip) >= 15  # the loop saw the gossip files (17 today)


def test_the_main_job_spread_script_runs_the_readmes_own_command() -> None:
    """experiments/main_job_spread.py measures the README's first command, read from the README,
    so the spread the README quotes cannot drift from the command it quotes it for."""
    from p2plab.notebook import _parser
    from p2pnode.cli import config_from_args

    script = runpy.run_path(str(ROOT / "experiments" / "main_job_spread.py"))
    flags = script["readme_main_job"]()
    first = (ROOT / "README.md").read_text(encoding="utf-8").split("```bash\n")[1].splitlines()[0]
    assert first.endswith("p2pnode launch " + " ".join(flags))
    config = config_from_args(_parser("launch").parse_args(flags), {})  # as the command takes them
    assert config.nodes == 100 and config.attack.kind == "cia" and config.attack.fictive_user
    # its simulator leg runs the launch's configuration (the daemon's defaults clip, the lab's not)
    launched = config_from_args(_parser("launch").parse_args(flags), {}, daemon=True)
    simulated = config_from_args(_parser("simulate").parse_args(script["simulator_flags"](flags)), {})
    assert launched.clip_factor == 1.0 and launched.norm_band == 0.05 and launched.steady_pull == 0.7
    assert simulated.to_dict() == launched.to_dict()
    assert script["spread"]([24.0, 38.0, 28.0]) == "30.0 ± 7.2 (24–38)"


def test_reproduce_sh_goes_on_past_a_failed_experiment_and_ends_with_the_summary(tmp_path: Path) -> None:
    """An unattended reproduction must not lose hours to one refusal: the other experiments run,
    the failure is named with its exit code, the summary is printed, and the script exits 1."""
    import os
    import re
    import subprocess

    fake = tmp_path / "p2pnode"
    calls = tmp_path / "calls"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n[ "$2" = "table3" ] && exit 2\nexit 0\n')
    fake.chmod(0o755)
    env = {**os.environ, "P2PNODE": str(fake), "SEEDS": "0"}
    done = subprocess.run(
        ["bash", str(ROOT / "experiments" / "reproduce.sh"), "table2", "table3", "mixing"],
        env=env, capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    ran = calls.read_text().splitlines()
    names = ["table2", "table3", "mixing", "summary"]
    assert [line.split()[:2] for line in ran] == [["experiment", n] for n in names]
    assert "--seeds 0" in ran[0] and "--out results/table2" in ran[0]
    assert re.search(r"table3 +0h00m\d\ds, FAILED \(exit 2\)", done.stdout)
    assert "failed: table3 (rerun them: bash experiments/reproduce.sh table3)" in done.stderr


def test_the_reproduction_time_bench_projects_what_reproduce_sh_runs() -> None:
    """bench.reproduction_time's list is reproduce.sh's default list, in its order."""
    import re

    from bench.reproduction_time import EXPERIMENTS

    text = (ROOT / "experiments" / "reproduce.sh").read_text()
    listed = re.search(r"\n  names=\((.*?)\)", text, re.S)
    assert listed is not None
    assert tuple(listed.group(1).split()) == EXPERIMENTS


def test_keep_sh_keeps_a_report_with_its_runs_and_restores_them(tmp_path: Path) -> None:
    """results/ is not committed: experiments/keep.sh commits a finished report's runs with it, so
    a later checkout rebuilds the report or resumes the experiment (--restore), and it regenerates
    the summary; a folder without a finished report or runs is refused and nothing is copied."""
    import os
    import subprocess

    fake = tmp_path / "p2pnode"
    calls = tmp_path / "calls"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {calls}\n')
    fake.chmod(0o755)
    reports, doc, part = tmp_path / "reports", tmp_path / "REPRODUCTION.md", tmp_path / "unfinished"
    env = {
        **os.environ,
        "P2PNODE": str(fake),
        "REPORTS": str(reports),
        "DOC": str(doc),
        "UNFINISHED": str(part),
    }

    def keep(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(ROOT / "experiments" / "keep.sh"), *args],
            env=env, capture_output=True, text=True, check=False, timeout=60,
        )  # fmt: skip

    done = tmp_path / "results" / "table3"
    (done / "runs").mkdir(parents=True)
    unfinished = keep("table3", str(done))  # runs but no report yet
    assert unfinished.returncode == 1 and "no finished report" in unfinished.stderr
    assert not reports.exists() and not calls.exists()
    assert keep("--unfinished", "table3", str(done)).returncode == 1  # no run finished yet
    (done / "runs" / "simulate-aa.json").write_text("{}")
    stopped = keep("--unfinished", "table3", str(done))  # stopped part way: its runs, no report
    assert stopped.returncode == 0, stopped.stderr
    assert [p.name for p in (part / "table3" / "runs").iterdir()] == ["simulate-aa.json"]
    assert not reports.exists() and not calls.exists()
    for name in ("report.md", "results.json", "results.csv", "max_aac.png"):
        (done / name).write_text(name)
    (done / "runs" / "simulate-aa.json").write_text("{}")
    (done / "runs" / "simulate-bb.json").write_text("{}")
    kept = keep("table3", str(done))
    assert kept.returncode == 0, kept.stderr
    assert sorted(p.name for p in (reports / "table3").iterdir()) == [
        "max_aac.png", "report.md", "results.csv", "results.json", "runs",
    ]  # fmt: skip
    runs = ["simulate-aa.json", "simulate-bb.json"]
    assert sorted(p.name for p in (reports / "table3" / "runs").iterdir()) == runs
    assert calls.read_text().split() == ["experiment", "summary", str(reports), "--write", str(doc)]
    assert not (part / "table3").exists()  # finished: its runs went with the report

    (part / "table3" / "runs").mkdir(parents=True)
    (part / "table3" / "runs" / "simulate-cc.json").write_text("{}")  # a later, unfinished sitting
    fresh = tmp_path / "elsewhere" / "table3"
    back = keep("--restore", "table3", str(fresh))
    assert back.returncode == 0, back.stderr
    assert sorted(p.name for p in (fresh / "runs").iterdir()) == [*runs, "simulate-cc.json"]
    assert keep("--restore", "fig5", str(fresh)).returncode == 1  # nothing kept under that name
    assert keep("../etc", str(done)).returncode == 2  # a name, not a path


def test_kept_runs_are_committed_and_keep_sh_refuses_a_destination_git_ignores(tmp_path: Path) -> None:
    """Keeping runs is for committing them: the project's .gitignore lets experiments/reports/*/runs
    and experiments/unfinished/*/runs through (while other runs/ folders stay ignored), and keep.sh
    refuses, copying nothing, to keep runs where git would ignore them (the repository's `runs/`
    rule once left every kept run out of the commits without a word)."""
    import os
    import subprocess

    def ignored(path: str, repo: Path = ROOT) -> bool:
        return (
            subprocess.run(
                ["git", "-C", str(repo), "check-ignore", "-q", "--no-index", path], check=False
            ).returncode
            == 0
        )

    assert not ignored("experiments/reports/table3/runs/simulate-0123abcd.json")
    assert not ignored("experiments/unfinished/fig5/runs/simulate-0123abcd.json")
    assert ignored("results/table3/runs/simulate-0123abcd.json")
    assert ignored("runs/simulate-0123abcd.json")

    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".gitignore").write_text("runs/\n")
    done = tmp_path / "results" / "table3"
    (done / "runs").mkdir(parents=True)
    (done / "runs" / "simulate-aa.json").write_text("{}")
    for name in ("report.md", "results.json"):
        (done / name).write_text(name)
    env = {
        **os.environ,
        "P2PNODE": "/bin/false",
        "REPORTS": str(repo / "reports"),
        "DOC": str(repo / "REPRODUCTION.md"),
        "UNFINISHED": str(repo / "unfinished"),
    }
    for args in (["table3", str(done)], ["--unfinished", "table3", str(done)]):
        refused = subprocess.run(
            ["bash", str(ROOT / "experiments" / "keep.sh"), *args],
            env=env, capture_output=True, text=True, check=False, timeout=60,
        )  # fmt: skip
        assert refused.returncode == 1 and "git ignores" in refused.stderr, refused.stderr
    assert sorted(p.name for p in repo.iterdir()) == [".git", ".gitignore"]  # nothing copied


def test_every_kept_report_is_rebuilt_from_its_kept_runs_figure_for_figure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A report kept with its runs (experiments/keep.sh) is what those runs give: rebuilding it
    from them alone (`--report-only`, in-process here) yields the committed rows exactly, every
    seed's value, mean, sd, paper number, reading and code digest. A report on a data file that
    `p2pnode data synth` made is rebuilt from the file made again here, in this test's folder
    (its bytes must be the recorded ones: runs are keyed by them), never from a path of the
    machine that ran it. The plots are left out (two thirds of the time; tests of
    p2plab/figures.py draw them)."""
    import dataclasses
    import json

    from p2plab import experiment_report
    from p2plab import experiment_spec as ex
    from p2plab.experiment_report import report_finished

    monkeypatch.setattr(experiment_report, "write_plots", lambda *args: [])

    kept = sorted(p.parent for p in (ROOT / "experiments" / "reports").glob("*/runs"))
    assert len(kept) >= 11  # churn, the probes, the POI-shaped tables (more as they are kept)
    remade: dict[str, Path] = {}
    for report in kept:
        doc = json.loads((report / "results.json").read_text())
        exp = ex.load(doc["experiment"])
        overrides = doc["overrides"]
        if overrides.get("dataset"):  # as `--dataset FILE` without --paper: the paper's columns by the name
            path = _remade_data_file(doc["data"], tmp_path / "data", remade)
            overrides = {**overrides, "dataset": str(path)}
            exp = exp.on_dataset(str(path), ex.paper_dataset_of(str(path)))
        labels = [r["label"] for r in doc["rows"]]
        exp = dataclasses.replace(exp, rows=tuple(r for r in exp.rows if r.label in labels))
        out = tmp_path / report.name
        out.mkdir()
        (out / "runs").symlink_to(report / "runs")
        rebuilt = report_finished(exp, out, overrides, doc["seeds"], doc["mode"], doc["command"])
        assert rebuilt["rows"] == doc["rows"], report.name
        on_disk = {p.stem.split("-", 1)[1] for p in (report / "runs").glob("*.json")}
        keys = {k for row in rebuilt["rows"] for k in row.get("runs", [])}
        assert keys and keys <= on_disk, f"{report.name}: runs found under other keys than their files' names"
        assert rebuilt["overrides"] == doc["overrides"] and rebuilt["command"] == doc["command"], report.name
    assert remade, "no kept report on a data file: the POI-shaped tables are kept"


def _remade_data_file(data: dict[str, object], folder: Path, remade: dict[str, Path]) -> Path:
    """The data file of a kept report, written again by `p2pnode data synth` from what its report
    records, with the recorded SHA-256 (a real file cannot be remade: its report says so here)."""
    import hashlib

    from learning.synthetic import POI_SHAPES
    from p2pnode.cli import main

    name, digest, origin = str(data["file"]), str(data.get("sha256")), data.get("synthetic")
    assert isinstance(origin, dict), f"{name}: not made by `p2pnode data synth`, cannot be remade here"
    assert origin["sha256"] == digest, name
    if digest not in remade:
        path = folder / digest[:12] / name
        path.parent.mkdir(parents=True)
        argv = ["data", "synth", str(origin["shape"]), str(path), "--seed", str(origin["seed"])]
        argv += ["--format", str(origin["format"])]
        if origin["users"] != POI_SHAPES[str(origin["shape"])].users:
            argv += ["--users", str(origin["users"])]
        assert main(argv) == 0
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, f"{name}: remade with other bytes"
        remade[digest] = path
    return remade[digest]


def test_no_kept_report_names_a_path_of_the_machine_that_made_it() -> None:
    """A kept report and its runs record a data file by its name (its SHA-256 beside it)
    and leave out the folders of the machine that ran them (data directory, spill folder), so
    that a fresh clone rebuilds them anywhere. Every string they hold is looked at."""
    import json
    import re

    absolute = re.compile(r"(^|[\s='\"])(/(tmp|var|home|root|usr|opt|mnt|srv|work|Users)\b|[A-Za-z]:\\)")
    found = []
    for path in sorted((ROOT / "experiments" / "reports").rglob("*")):
        if path.suffix not in (".json", ".md", ".csv"):
            continue
        text = path.read_text(encoding="utf-8")
        strings = _strings(json.loads(text)) if path.suffix == ".json" else text.splitlines()
        found += [f"{path.relative_to(ROOT)}: {s[:120]!r}" for s in strings if absolute.search(s)]
    assert not found, "kept reports name paths of a machine:\n" + "\n".join(found[:10])


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [str(k), *_strings(v)]]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_ci_runs_the_readmes_test_command_in_a_fresh_home_temporary_folder_and_data_cache() -> None:
    """CI runs the README's test command (its second line) with HOME, TMPDIR and the data
    cache pointed at folders made for the run, so that a green CI cannot lean on what the
    machine it runs on holds."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8").split("```bash\n")[1].splitlines()
    test_command = readme[1]
    lines = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert test_command in lines
    before = lines[: lines.index(test_command)]
    made = [ln for ln in before if ln.startswith("ci_root=$(mktemp -d")]
    exported = [ln for ln in before if ln.startswith("export ")]
    assert made and exported
    for name in ("HOME", "TMPDIR", "P2PNODE_DATA"):
        assert any(f'{name}="$ci_root/' in ln for ln in exported), name


def test_the_readme_opens_with_what_p2pnode_is_the_commands_a_sample_and_where_next() -> None:
    """The first screen: a few lines of what it is, the two commands, what the main job prints
    and links that resolve; the spreads and the long explanations live in docs/ (it used to be
    the commands and then a 40-line paragraph of figures, with what p2pnode is at line ~40)."""
    import re

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    first = readme[: readme.index("## Commands")]
    assert len(first.splitlines()) <= 50, len(first.splitlines())
    opening = first.split("```bash\n")[0]
    assert "p2pnode is a peer-to-peer gossip-learning node daemon" in opening
    assert len(opening.strip().splitlines()) <= 8
    sample = first.split("```\n")[2]  # the block after the commands' block
    assert "\ndone: 100 nodes, 20 rounds" in sample and "\nCIA: Max AAC" in sample and "self-check:" in sample
    links = re.findall(r"\]\(([^)#]+)\)", first)
    assert len(links) >= 6 and all((ROOT / link).exists() for link in links), links
    for moved in ("docs/main-job.md", "docs/testing.md", "docs/measured.md"):
        assert moved in links
