"""Every flag is declared once: the same flag means the same thing in every command, and a
process's settings and load limits are flags and TOML keys beside their fields."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from p2plab.cli import _as_typed, _experiment_words, commands
from p2pnode.cli import build_parser, config_from_args, settings_from_args
from p2pnode.config import ConfigError, config_fields
from p2pnode.runners.settings import ProcessConfig
from p2pnode.trust.limits import Limits

#: flags whose meaning differs by command, and why they may
DIFFERENT = {
    "--users": {"data synth": "a count of users to generate, where run and keys take node ids"},
}


def _declarations() -> dict[str, dict[str, object]]:
    """Per flag, per command: what it is (a configuration field's path, or its own declaration)."""
    out: dict[str, dict[str, object]] = {}

    def walk(parser: argparse.ArgumentParser, name: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, p in action.choices.items():
                    walk(p, f"{name} {sub}".strip())
                continue
            if action.dest.startswith(("cfg__", "set__")):
                what: object = action.dest  # a field of the run's or the process's configuration
            else:
                what = (action.dest, action.help, action.type, action.default, type(action).__name__)
            for option in action.option_strings:
                out.setdefault(option, {})[name] = what

    walk(build_parser(commands()), "")
    return out


def test_a_flag_means_one_thing_in_every_command() -> None:
    declarations = _declarations()
    assert {"--nodes", "--no-memory-check", "--cluster-key-file", "--min-interactions", "--out"} <= set(
        declarations
    )
    for flag, by_command in declarations.items():
        allowed = DIFFERENT.get(flag, {})
        kinds = {repr(what) for command, what in by_command.items() if command not in allowed}
        assert len(kinds) <= 1, f"{flag} is declared {len(kinds)} ways: {sorted(by_command)}"
    # the flags that were restated: now the configuration's own
    assert declarations["--nodes"]["experiment run"] == "cfg__nodes"
    assert declarations["--min-item-users"]["data describe"] == "cfg__min_item_users"
    assert declarations["--no-memory-check"]["simulate"] == "set__memory_check"
    assert declarations["--cluster-key-file"]["launch"] == declarations["--cluster-key-file"]["run"]


def test_every_process_setting_and_limit_has_a_flag_and_a_toml_key(tmp_path: Path) -> None:
    fields = dict(config_fields(ProcessConfig))
    assert {f"limits.{f.name}" for f in dataclasses.fields(Limits)} <= set(fields)
    for path, f in fields.items():
        assert f.metadata["flag"].commands, f"{path} is offered by no command"
    config = tmp_path / "node.toml"
    config.write_text(
        'rounds = 3\n[process]\nlisten = "127.0.0.1:7999"\nstate_dir = "st"\ncheckpoint_every = 2\n'
        "[limits]\nmax_inflight = 8\nrate_per_s = 5.0\n"
    )
    args = build_parser().parse_args(["run", "--config", str(config), "--burst", "7", "--max-inflight", "9"])
    settings = settings_from_args(args, "run")
    assert (settings.listen, settings.state_dir, settings.checkpoint_every) == ("127.0.0.1:7999", "st", 2)
    assert settings.limits == Limits(max_inflight=9, rate_per_s=5.0, burst=7.0)  # flags over the file
    assert config_from_args(args).rounds == 3  # the run's own keys beside the process's tables


def test_a_setting_a_command_does_not_take_is_refused_naming_the_one_that_does(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[process]\nlisten = "127.0.0.1:7999"\n')
    args = build_parser(commands()).parse_args(["launch", "--config", str(config)])
    with pytest.raises(ConfigError, match="listen is a setting of p2pnode run, not of launch"):
        settings_from_args(args, "launch")
    config.write_text("[limits]\nburst = 0.5\n")
    args = build_parser().parse_args(["run", "--config", str(config)])
    with pytest.raises(ConfigError, match="burst must be >= 1"):
        settings_from_args(args, "run")
    config.write_text("[limits]\nmax_inflihgt = 3\n")
    with pytest.raises(ConfigError, match=r"did you mean limits\.max_inflight"):
        settings_from_args(args, "run")


def test_experiment_is_split_by_subcommand_and_its_short_form_is_kept() -> None:
    assert _experiment_words(["experiment", "table3", "--quiet"]) == [
        "experiment",
        "run",
        "table3",
        "--quiet",
    ]
    assert _experiment_words(["-v", "experiment", "--report-only", "x"])[2] == "run"
    for kept in (["experiment", "list"], ["experiment", "summary"], ["experiment", "run", "t"], ["simulate"]):
        assert _experiment_words(kept) == kept
    assert _as_typed(["experiment", "run", "table3", "--seeds", "0"]) == [
        "experiment",
        "table3",
        "--seeds",
        "0",
    ]
    parser = build_parser(commands())
    args = parser.parse_args(["experiment", "run", "table3", "--nodes", "50", "--set", "learning.lr=0.05"])
    assert (args.cfg__nodes, args.set) == (50, [("learning.lr", 0.05)])
    with pytest.raises(SystemExit):
        parser.parse_args(["experiment", "run", "table3", "--workers", "0"])
