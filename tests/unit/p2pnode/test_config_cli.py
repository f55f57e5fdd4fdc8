"""Config validation and the CLI's one-line errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from p2plab.cli import main as lab_main
from p2pnode.cli import build_parser, config_from_args
from p2pnode.config import ConfigError, Flag, RunConfig, config_fields, load_toml
from p2pnode.config import defaults as start_of
from p2pnode.runners.real import parse_users, split_users


def test_flags_override_file_and_preset(tmp_path: Path) -> None:
    f = tmp_path / "c.toml"
    f.write_text('rounds = 7\nprotocol = "samo"\n[learning]\nlr = 0.05\n')
    args = build_parser().parse_args(["simulate", "--config", str(f), "--rounds", "9"])
    cfg = config_from_args(args)
    assert (cfg.rounds, cfg.protocol, cfg.learning.lr) == (9, "samo", 0.05)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("rounds = 0", "c.toml: rounds must be >= 1, got 0"),
        ("bogus = 1", "unknown key"),
        ("[learning]\nlr = 'x'", "learning.lr must be a number"),
        ("rounds = [", "c.toml"),
    ],
)
def test_bad_config_files_name_the_problem(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "c.toml"
    f.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_toml(f)


def test_attack_variant_flags_reach_the_config_and_bad_values_are_refused(tmp_path: Path) -> None:
    args = build_parser().parse_args(
        [
            "simulate",
            "--attack",
            "cia",
            "--colluders",
            "0.1",
            "--multicast",
            "v",
            "--fictive-user",
            "--momentum-estimator",
            "first",
        ]
    )
    cfg = config_from_args(args)
    a = cfg.attack
    assert (a.multicast, a.fictive_user, a.momentum_estimator) == ("v", True, "first")
    plain = config_from_args(build_parser().parse_args(["simulate", "--attack", "cia"]))
    assert (plain.attack.multicast, plain.attack.fictive_user) == ("theta", False)
    assert plain.attack.momentum_estimator == "debiased"  # chosen by measurement (docs/design.md)
    bad_values = (('multicast = "everything"', "multicast"), ('momentum_estimator = "median"', "estimator"))
    for bad, field in bad_values:
        f = tmp_path / "c.toml"
        f.write_text(f'[attack]\nkind = "cia"\n{bad}\n')
        with pytest.raises(ConfigError, match=field):
            load_toml(f).validate()
    with pytest.raises(SystemExit):
        build_parser().parse_args(["simulate", "--momentum-estimator", "median"])


def test_validation_rejects_view_larger_than_network() -> None:
    with pytest.raises(ConfigError, match="view-size"):
        RunConfig(nodes=3, view_size=3).validate()


@pytest.mark.parametrize(
    "argv",
    [
        ["simulate", "--nodes", "1"],
        ["simulate", "--protocol", "gossip"],
        ["simulate", "--rounds", "x"],
        ["simulate", "--drop", "1.5"],
        ["run", "--listen", "nohost"],
        ["run", "--users", "5-2"],
        ["simulate", "--config", "/nonexistent.toml"],
        ["simulate", "--dp-noise", "1", "--dp-epsilon", "5"],
        ["simulate", "--attack", "cia", "--momentum", "1"],
        ["simulate", "--attack", "cia", "--target-k", "0"],
        ["simulate", "--attack", "cia", "--colluders", "0.6", "--colluder-groups", "2"],
        ["simulate", "--attack", "cia", "--target-genre", "Nope", "--nodes", "20", "--rounds", "1"],
        ["simulate", "--attack", "cia", "--attackers", "5,x", "--nodes", "20", "--rounds", "1"],
        ["simulate", "--dp-noise", "1", "--dp-clip", "0"],
        ["simulate", "--dp-epsilon", "4", "--dp-delta", "2"],
        ["simulate", "--mia-proxy"],
        ["simulate", "--mia-holdout", "5"],
        ["simulate", "--canaries", "5"],
        ["simulate", "--mia", "--canaries", "-1"],
        ["experiment", "nope"],
        ["experiment", "table2", "--seeds", "a,b"],
        ["experiment", "table2", "--set", "protocol=gossip"],
        ["experiment", "table3", "--rows", "Rand-Gossip GMF", "--rows", "nope"],
        ["experiment", "mixing", "--nodes", "50"],
        ["experiment", "mixing", "--real"],
        ["simulate", "--attack", "cia", "--mia-proxy", "0.2,x"],
        ["simulate", "--attack", "cia", "--mia-proxy", "0.2,-1"],
        ["simulate", "--attack", "cia", "--model", "prme", "--mia-proxy"],
        ["simulate", "--target-k", "5"],
        ["simulate", "--attack", "cia", "--multicast", "v"],
        ["simulate", "--fraction", "0.5"],
        ["simulate", "--model", "prme", "--factors", "8"],
        ["simulate", "--bbox", "nyc"],
        ["simulate", "--dataset", "x.csv", "--bbox", "1,2,3"],
        ["simulate", "--dataset", "x.csv", "--columns", "user=a"],
        ["simulate", "--dataset", "x.csv", "--min-item-users", "0"],
    ],
)
def test_bad_flags_give_one_error_line_and_no_traceback(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = lab_main(argv)
    except SystemExit as exc:  # argparse's own refusals
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("p2pnode"), err
    assert "Traceback" not in err


@pytest.mark.slow
def test_a_bad_flag_through_the_real_entry_point_is_one_line() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "p2plab", "simulate", "--nodes", "1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("p2pnode: error:") and len(proc.stderr.strip().splitlines()) == 1


def test_users_ranges_and_split() -> None:
    assert parse_users("0-2,5,7-8") == (0, 1, 2, 5, 7, 8)
    with pytest.raises(ValueError):
        parse_users("1,1")
    parts = split_users(10, 3)
    assert [len(p) for p in parts] == [3, 4, 3] and sum(parts, ()) == tuple(range(10))


def test_delta_bases_follow_the_memory_budget() -> None:
    from p2pnode.config import WireConfig

    assert WireConfig().bases(215_688) == 3  # GMF, ML-100k, 32 factors
    assert WireConfig().bases(807_360) == 1  # PRME, ML-100k, dimension 60
    assert WireConfig(delta_peers=5).bases(807_360) == 5  # an explicit count wins


@pytest.mark.slow
def test_daemon_command_line_names_where_the_lab_commands_are() -> None:
    """``python -m p2pnode`` is the daemon alone; its help says where launch and experiment live."""
    daemon = subprocess.run(
        [sys.executable, "-m", "p2pnode", "--help"], capture_output=True, text=True, timeout=60
    )
    assert daemon.returncode == 0
    text = " ".join(daemon.stdout.split())
    assert "python -m p2plab" in text and "{run,simulate,keys,data,config}" in text
    lab = subprocess.run(
        [sys.executable, "-m", "p2plab", "--help"], capture_output=True, text=True, timeout=60
    )
    assert "{run,launch,simulate,metrics,experiment,keys,deploy,data,config}" in lab.stdout
    version = subprocess.run(
        [sys.executable, "-m", "p2plab", "--version"], capture_output=True, text=True, timeout=60
    )
    assert version.returncode == 0 and version.stdout.startswith("p2pnode 0.")


def _other_value(f: Any, flag: Flag, default: Any) -> tuple[list[str], Any]:
    """Command-line words that set the field to a value other than its default, and that value."""
    name = flag.flag_name(f.name)
    if flag.switch is not None:
        return [name], flag.switch
    if flag.choices:
        value = next(c for c in flag.choices if c != default)
        return [name, value], value
    if f.name in VALID:
        return [name, VALID[f.name]], VALID[f.name]
    if f.type == "str":
        return [name, "3"], "3"
    value = default + 1 if f.type == "int" else (default / 2 if default else 0.1)
    return [name, str(value)], value


VALID = {"columns": "user=1,item=2", "bbox": "nyc", "age_cuts": "20,40"}  #: values of strings with a syntax
NEEDS = {  #: rules across fields
    "attack.mia_holdout": ["--mia"],
    "attack.canaries": ["--mia"],
    "attack.mia_reference": ["--mia"],
    "attack.mia_proxy": ["--attack", "cia"],
    "churn.model": ["--sampling", "cyclon"],
    "churn.late": ["--sampling", "cyclon"],
    "learning.optimizer": ["--protocol", "fedavg"],  # sgd's item rate: FedAvg's mean
}
#: the words that give what a flag's ``needs`` names
BRINGS = {
    "--attack cia": ["--attack", "cia"],
    "--attack aia": ["--attack", "aia"],
    "--attack cia or aia, or --mia, with --colluders F": ["--attack", "cia", "--colluders", "0.2"],
    "--dp-noise or --dp-epsilon": ["--dp-noise", "1"],
    "--share-less": ["--share-less"],
    "--model gmf": [],
    "--model gmf or --defence pard or uc-fedrec": [],
    "--model prme": ["--model", "prme"],
    "--model ncf": ["--model", "ncf"],
    "--model ncf --optimizer sgd": ["--model", "ncf", "--optimizer", "sgd", "--protocol", "fedavg"],
    "--protocol fedavg": ["--protocol", "fedavg"],
    "--protocol samo": ["--protocol", "samo"],
    "--protocol samo or fedavg": ["--protocol", "samo"],
    "a gossip protocol (FedAvg has --merge)": [],
    "--sampling peerswap": [],
    "a gossip protocol (FedAvg clients talk to the server)": [],
    "--sampling pers": ["--sampling", "pers"],
    "--churn exp|weibull": ["--churn", "exp", "--sampling", "cyclon"],
    "--churn weibull": ["--churn", "weibull", "--sampling", "cyclon"],
    "--dataset FILE": ["--dataset", "mine.csv"],
    "--defence pard or uc-fedrec": ["--defence", "pard"],
    "--eval sampled": [],
    "--protocol samo or fedavg, and no --merge-plugin": ["--protocol", "samo"],
    "--attack cia or aia, --mia, or --attack-plugin": ["--attack", "cia"],
    "--knn userknn|reuse|expect|gain": ["--knn", "gain"],
    "--knn with --knn-dp tau": ["--knn", "gain"],
    "--attack cia on --model gmf with --share-less or --fictive-user": ["--attack", "cia", "--share-less"],
}


@pytest.mark.parametrize("command", ["simulate", "run"])
def test_every_flag_is_generated_from_its_field_and_reaches_it(command: str) -> None:
    """Each configuration field that declares a flag has it, with its help and default, and the
    value given on the command line lands in that field (nothing else maps flags)."""
    daemon = command == "run"
    defaults = start_of(daemon)
    parser = build_parser()
    helptext = parser._subparsers._group_actions[0].choices[command].format_help()  # type: ignore[union-attr]
    seen = 0
    for path, f in config_fields():
        flag = f.metadata.get("flag")
        if flag is None or not flag.offered(command == "run", False):
            continue
        argv, value = _other_value(f, flag, defaults.get(path))
        assert flag.flag_name(f.name) in helptext
        context = [*NEEDS.get(path, []), *(BRINGS[flag.needs[1]] if flag.needs else [])]
        got = config_from_args(parser.parse_args([command, *argv, *context]), daemon=daemon).get(path)
        if flag.needs is not None and context:  # without what it needs, the flag is refused
            with pytest.raises(ConfigError, match="has no effect without"):
                config_from_args(parser.parse_args([command, *argv]), daemon=daemon)
        assert got == value, (path, got, value)
        seen += 1
    assert seen >= 60  # the loop ran over every flagged field (simulate 76, run 67 today)


def test_quiet_prints_the_summary_line_only(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["simulate", "--nodes", "20", "--rounds", "2", "--dataset", "synthetic"]
    assert lab_main([*argv, "--quiet"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("done: 20 nodes, 2 rounds")
    assert lab_main(argv) == 0
    assert len(capsys.readouterr().out.strip().splitlines()) == 3  # two rounds, then the summary


def test_nodes_follow_a_dataset_file_unless_given(tmp_path: Path) -> None:
    rows = [f"u{u},movie_{(u * 5 + j) % 150}" for u in range(40) for j in range(10)]
    data = tmp_path / "mine.csv"
    data.write_text("user,item\n" + "\n".join(rows) + "\n")
    parse = build_parser().parse_args
    assert config_from_args(parse(["simulate", "--dataset", str(data)])).nodes == 40  # every user
    assert config_from_args(parse(["simulate", "--dataset", str(data), "--nodes", "12"])).nodes == 12
    assert config_from_args(parse(["simulate"])).nodes == 943  # ml-100k: its 943 users


def test_a_lab_command_given_to_the_daemon_names_where_it_lives(capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m p2pnode launch`` (the daemon's command line) answered argparse's "invalid
    choice"; it now says which command to run instead."""
    from p2pnode.cli import main

    for command in ("launch", "experiment"):
        assert main([command, "--nodes", "10"]) == 2
        err = capsys.readouterr().err
        assert f"`p2pnode {command} ...`" in err and f"python -m p2plab {command}" in err


def test_launch_refuses_more_processes_than_nodes_and_says_which_flag(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``launch --nodes 100 --processes 200`` started 100 one-node processes and failed 260 s later
    ; it is refused at once, and a launch too big for memory names
     --processes."""
    assert lab_main(["launch", "--nodes", "10", "--processes", "20"]) == 2
    assert "--processes 20 is more than --nodes 10" in capsys.readouterr().err
    from p2pnode.runners.footprint import too_big

    line = too_big(RunConfig(nodes=100), 46 * 2**30, 22 * 2**30, processes=100)
    assert "in 100 processes" in line and "fewer --processes" in line


def test_checks_that_depend_on_nodes_use_the_users_of_a_dataset_file(tmp_path: Path) -> None:
    """With a dataset file and no --nodes, the colluder and target-k checks ran against the
    default 943 nodes: 5 groups of 20% were refused for a 400-user file."""
    rows = "\n".join(f"{u},{(u * 7 + k) % 300}" for u in range(1, 401) for k in range(8))
    data = tmp_path / "u400.csv"
    data.write_text("user,item\n" + rows + "\n")
    base = ["simulate", "--dataset", str(data), "--attack", "cia"]
    cfg = config_from_args(build_parser().parse_args([*base, "--colluders", "0.2", "--colluder-groups", "5"]))
    assert cfg.nodes == 400 and cfg.attack.colluder_groups == 5
    with pytest.raises(ConfigError, match=r"4 groups of 120 colluders \(0.3 of 400 nodes\)"):
        config_from_args(build_parser().parse_args([*base, "--colluders", "0.3", "--colluder-groups", "4"]))
    with pytest.raises(ConfigError, match="got 500 with nodes 400"):
        config_from_args(build_parser().parse_args([*base, "--target-k", "500"]))


def test_the_daemon_clips_by_default_and_the_lab_keeps_the_papers_merge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``run``, ``launch`` and ``deploy`` start from the safe defaults (ClippedGossip at
    C = 1); ``simulate`` and the Python API from the papers' plain merge; ``--preset paper`` and
    ``--preset safe`` cross over; a config file that does not name the clip keeps the command's."""
    import p2plab.launch
    import p2pnode.runners.real
    from p2plab.deploy_plan import plan_from_inventory

    parser = build_parser()

    def cfg(*argv: str) -> RunConfig:
        return config_from_args(parser.parse_args(list(argv)), daemon=argv[0] == "run")

    assert cfg("run").clip_factor == 1.0
    assert cfg("run", "--preset", "paper").clip_factor == 0.0
    assert cfg("run", "--clip-factor", "0").clip_factor == 0.0
    assert cfg("run", "--preset", "quick").clip_factor == 1.0  # a preset that does not name it
    assert cfg("simulate").clip_factor == 0.0
    assert cfg("simulate", "--preset", "safe").clip_factor == 1.0
    assert (cfg("run").norm_band, cfg("simulate").norm_band, cfg("run", "--preset", "paper").norm_band) == (
        0.05,
        0.0,
        0.0,
    )  # the norm band is the daemon's too, and the papers' merge has none
    pulls = (cfg("run").steady_pull, cfg("simulate").steady_pull, cfg("run", "--preset", "paper").steady_pull)
    assert pulls == (0.7, 0.0, 0.0)  # so is the steady-pull memory
    with pytest.raises(ConfigError, match="--steady-pull must be in"):
        cfg("run", "--steady-pull", "1")
    f = tmp_path / "c.toml"
    f.write_text("rounds = 3\n")
    assert cfg("run", "--config", str(f)).clip_factor == 1.0
    assert cfg("simulate", "--config", str(f)).clip_factor == 0.0
    assert "default: 1.0" in parser._subparsers._group_actions[0].choices["run"].format_help()  # type: ignore[union-attr]

    # the commands themselves pass the daemon's defaults on (what they hand to the runner)
    seen: list[RunConfig] = []

    async def fake_run(config: RunConfig, *rest: Any, **kw: Any) -> dict[str, Any]:
        seen.append(config)
        return {}

    monkeypatch.setattr(p2pnode.runners.real, "run_process", fake_run)
    monkeypatch.setattr(p2plab.launch, "launch", fake_run)
    monkeypatch.setattr(p2plab.launch, "check_launch", lambda *a, **k: None)
    monkeypatch.setenv("HOME", str(tmp_path))
    from p2pnode.cli import main

    assert main(["run", "--rounds", "1"]) == 0
    assert lab_main(["launch", "--rounds", "1", "--processes", "1"]) == 0
    assert [c.clip_factor for c in seen] == [1.0, 1.0]

    # a deployed cluster's hosts run `p2pnode run --config` with the inventory's settings only
    hosts = {"_meta": {"hostvars": {"a": {"p2pnode_nodes": 4}}}, "p2pnode": {"hosts": ["a"]}}
    assert plan_from_inventory(hosts).config.clip_factor == 1.0


@pytest.mark.parametrize(
    "argv",
    [
        ["--protocol", "fedavg", "--sampling", "pers"],
        ["--protocol", "fedavg", "--sampling", "cyclon", "--view-size", "7"],
        ["--protocol", "fedavg", "--view-size", "7"],
    ],
)
def test_sampling_flags_without_effect_under_fedavg_are_refused(argv: list[str]) -> None:
    """A FedAvg client's one peer is the server, so a sampler or a view size
    given with ``--protocol fedavg`` would change nothing: refused, naming what it needs."""
    with pytest.raises(ConfigError, match="has no effect without a gossip protocol"):
        config_from_args(build_parser().parse_args(["simulate", *argv]))


def test_config_show_prints_the_whole_tree_as_toml_that_reads_back(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``p2pnode config show`` prints every field, each with its flag and help
    as a comment, as TOML that ``--config`` reads back to the same configuration; ``--daemon``
    gives the daemon's defaults, ``--preset`` applies one."""
    import tomllib

    from p2pnode.cli import main
    from p2pnode.config import defaults as start
    from p2pnode.config import from_mapping

    def show(*argv: str) -> tuple[str, RunConfig]:
        assert main(["config", "show", *argv]) == 0
        text = capsys.readouterr().out
        return text, from_mapping(tomllib.loads(text), RunConfig())

    text, cfg = show()
    assert cfg == RunConfig()
    assert "# --lr: " in text and "[learning]\n" in text and "lr = 0.001\n" in text
    assert all(f"\n{path.rpartition('.')[2]} = " in text for path, _ in config_fields())
    assert show("--daemon")[1] == start(daemon=True) and start(daemon=True).clip_factor == 1.0
    assert show("--preset", "quick")[1].nodes == 100


def test_a_simulation_writes_a_config_toml_that_gives_the_same_run_key(tmp_path: Path) -> None:
    """``simulate --out`` writes ``config.toml`` beside ``result.json``, and
    ``--config`` reads it back to the same configuration, so the same run key."""
    from p2plab.experiment_spec import run_key
    from p2pnode.cli import main

    argv = ["simulate", "--nodes", "12", "--rounds", "1", "--lr", "0.05", "--sampling", "static"]
    assert main([*argv, "--out", str(tmp_path), "--quiet"]) == 0
    given = config_from_args(build_parser().parse_args(argv))
    back = load_toml(tmp_path / "config.toml")
    assert back == given and run_key(back) == run_key(given)
    written = str(tmp_path / "config.toml")
    again = config_from_args(build_parser().parse_args(["simulate", "--config", written]))
    assert again == given


def test_the_example_config_in_docs_is_the_readmes_main_job() -> None:
    """docs/example-config.toml reads (as --config), and is the README's main job."""
    root = Path(__file__).resolve().parents[3]
    cfg = config_from_args(
        build_parser().parse_args(["simulate", "--config", str(root / "docs/example-config.toml")])
    )
    main_job = (
        "--nodes 100 --rounds 20 --lr 0.01 --attack cia --target-k 10 --colluders 0.2 --colluder-groups 5"
    )
    assert cfg == config_from_args(
        build_parser().parse_args(["simulate", *main_job.split(), "--fictive-user"])
    )


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--dp-epsilon", "0"], "--dp-epsilon 0 means no DP-SGD"),  # used to run without DP
        (["--dp-noise", "0"], "--dp-noise 0 means no DP-SGD"),
        (["--lr", "inf"], "argument --lr: expected a finite number, got 'inf'"),
        (["--lr", "nan"], "argument --lr: expected a finite number, got 'nan'"),
        (["--lr", "1e308"], "--lr must be > 0 and at most 3.4e+38 (the models' float32), got 1e+308"),
        (["--seed", "-1"], "--seed must be >= 0, got -1"),  # used to say only "expected non-negative integer"
    ],
)
def test_values_that_would_run_a_silently_wrong_job_are_refused_naming_the_flag(
    argv: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = lab_main(["simulate", "--nodes", "10", "--rounds", "1", *argv])
    except SystemExit as exc:  # argparse's own refusals
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2 and said in err, err


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("rounds = -3", "c.toml: rounds must be >= 1, got -3"),  # used to say "--rounds must be >= 1"
        ("[learning]\nlr = -0.5", "c.toml: learning.lr must be > 0"),
        ("[learning]\nlr = inf", "c.toml: learning.lr must be a finite number, got inf"),
        ('protocol = "gossip"', "c.toml: protocol must be one of base, samo, fedavg, got 'gossip'"),
    ],
)
def test_a_files_bad_value_is_named_by_its_key_in_the_file(tmp_path: Path, text: str, said: str) -> None:
    f = tmp_path / "c.toml"
    f.write_text(text)
    with pytest.raises(ConfigError) as refused:
        load_toml(f)
    assert str(refused.value).startswith(str(f)) and said.split(": ", 1)[1] in str(refused.value)


def test_users_outside_the_network_are_the_users_mistake_said_before_the_data_is_read() -> None:
    from p2pnode.runners.real import NodeProcess, ProcessSpec

    config = RunConfig(nodes=50, rounds=1, dataset="synthetic")
    with pytest.raises(ConfigError, match=r"--users: user 50 is outside the network's 0..49"):
        NodeProcess(config, ProcessSpec(tuple(range(100)), "127.0.0.1", 1, ()))
    assert lab_main(["run", "--users", "0-99", "--nodes", "50", "--listen", "127.0.0.1:1"]) == 2  # was 1


def test_the_time_left_is_read_from_the_rounds_after_the_first_and_a_daemon_has_none() -> None:
    from p2pnode.runners.report import time_left

    # round 1 took 10 s with the start-up, each later one 1 s: at round 2, 18 rounds at 1 s remain
    assert time_left(1, 20, 10.0, (1, 10.0)) == ""  # nothing to read a pace from yet
    assert time_left(2, 20, 11.0, (1, 10.0)) == " (~18s left)"  # was "~99s left"
    assert time_left(20, 20, 29.0, (1, 10.0)) == ""
    assert time_left(21, None, 30.0, (1, 10.0)) == ""  # `run` without --rounds: no total to count to


def test_a_daemons_round_line_counts_up_without_a_total() -> None:
    from p2pnode.runners.report import metric_for, progress_line

    stats = {
        "round": 21,
        "hit_ratio_at_20": 0.5,
        "model_messages": 9,
        "delta_messages": 0,
        "bytes": 1e6,
        "merges": 9,
    }
    metric = metric_for(RunConfig())
    assert progress_line(stats, metric, None, 30.0, (1, 10.0)).startswith(
        "round   21  HR@20 0.500"
    )  # was "21/20"
    assert progress_line(stats, metric, 40, 30.0, (1, 10.0)).startswith("round   21/40  HR@20")
    assert "(~19s left)" in progress_line(stats, metric, 40, 30.0, (1, 10.0))


def test_a_head_kept_home_refuses_only_what_the_readme_says_it_refuses() -> None:
    """README: in gossip the CIA and a fictive user score with the observer's own head; only the
    FedAvg server's CIA (no head at the server) and the AIA's head-bound options are refused.
    The README used to say the CIA and a fictive user were refused with --local-head."""
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text()
    bullet = readme[readme.index("`--local-head`: the model's head") :].split("\n- ")[0]
    assert "--attack cia` with `--protocol fedavg` is\n  refused" in bullet

    def config(*argv: str) -> RunConfig:
        return config_from_args(
            build_parser().parse_args(["simulate", "--nodes", "60", "--local-head", *argv])
        )

    assert config("--attack", "cia", "--fictive-user").attack.fictive_user  # gossip: the own head
    for refused in (
        ("--attack", "cia", "--protocol", "fedavg"),
        ("--attack", "aia", "--aia-items", "inferred"),
        ("--attack", "aia", "--aia-items", "oracle", "--aia-user", "fictive"),
    ):
        with pytest.raises(ConfigError):
            config(*refused)


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["--defence", "pard", "--model", "ncf"],
            " under PARD (λ_ir 0.5, λ_re 0.3), ",
        ),  # used to read as a plain run
        (["--share-less", "--local-head"], " under Share less + the head kept home, "),
        (["--dp-epsilon", "10"], " under DP-SGD (target ε 10, C 2.0), "),
        ([], "1 rounds, HR@20"),
    ],
)
def test_the_summary_line_names_the_defence_the_run_had(argv: list[str], said: str) -> None:
    from p2pnode.runners.report import metric_for, summary

    config = config_from_args(
        build_parser().parse_args(["simulate", "--nodes", "12", "--rounds", "1", *argv])
    )
    metric = metric_for(config)
    stats = {"nodes": 12, "round": 1, metric.key: 0.5, "messages": 4, "model_messages": 2,
             "delta_messages": 0, "bytes": 1000, "config": config.to_dict()}  # fmt: skip
    line = summary(stats, metric)  # the line a run's summary (its ``config`` included) gives
    assert line.startswith("done: 12 nodes, 1 rounds") and said in line, line


@pytest.mark.parametrize("command", ["simulate", "launch"])
def test_out_naming_a_file_is_refused_before_the_run(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "run1"
    f.write_text("x")
    code = lab_main([command, "--nodes", "12", "--rounds", "1", "--out", str(f)])  # before any round
    err = capsys.readouterr().err  # (it used to end the run, after its rounds, with a traceback)
    assert code == 2 and f"{f} is a file, not a folder" in err and "Traceback" not in err


@pytest.mark.parametrize("command", ["simulate", "run", "launch"])
def test_help_lists_the_common_flags_first_under_a_one_line_usage(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from p2pnode.cli import COMMON, COMMON_TITLE

    assert lab_main([command, "--help"]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[0] == f"usage: p2pnode {command} [flags]   (the common flags come first below)"
    # (argparse's own usage listed every flag: ~80 lines before the first help line)
    sections = text.split("\n\n")
    assert sections[1].startswith("options:")
    first = sections[2]  # right after -h (and a lab command's own options)
    assert first.startswith(COMMON_TITLE + ":"), first[:80]
    for flag in ("--nodes", "--rounds", "--attack", "--out", "--config"):
        assert f"\n  {flag} " in first, flag
    assert all(f"\n  {flag}" in first for flag in COMMON if f"\n  {flag}" in text)  # none left behind
    if command == "run":
        assert "\n  --users " in first and "\n  --peers " in first
