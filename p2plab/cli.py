"""The ``p2pnode`` command: the daemon's commands and the lab's (launch, metrics, experiment, deploy).

The daemon's own command line (``python -m p2pnode``) knows run, simulate, keys and data; this
module adds the commands that drive many nodes, and maps their flags the same way.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from p2plab.deploy import ACTIONS as DEPLOY_ACTIONS
from p2pnode import cli
from p2pnode.config import ConfigError, nested


def parse_set(item: str) -> tuple[str, Any]:
    """One ``--set KEY=VALUE``: the dotted key and its value, read as TOML (a bare word is a
    string); raises ConfigError when it is not KEY=VALUE."""
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise ConfigError(f"--set {item!r}: expected KEY=VALUE")
    try:
        return key, tomllib.loads(f"v = {value}")["v"]
    except tomllib.TOMLDecodeError:
        return key, value


def _launch_flags(launch: argparse.ArgumentParser) -> None:
    cli.experiment_flags(launch, real=True, network=True)
    cli.settings_flags(launch, "launch")
    _processes_flag(launch)
    launch.add_argument("--open", action="store_true", help="no authentication at all (not recommended)")


def _processes_flag(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--processes``, as launch and ``experiment run --real`` have it."""
    p.add_argument(
        "--processes", type=_at_least_one, default=2, help="real runs: OS processes here (default 2)"
    )


def _at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _seeds(text: str) -> list[int]:
    try:
        seeds = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected integers '0,1,2'") from None
    if not seeds:
        raise argparse.ArgumentTypeError(f"{text!r}: expected integers '0,1,2'")
    return seeds


def _set(text: str) -> tuple[str, Any]:
    try:
        return parse_set(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _metrics_flags(metrics: argparse.ArgumentParser) -> None:
    metrics.add_argument("urls", nargs="+", help="HOST:PORT or http://HOST:PORT/metrics")
    metrics.add_argument("--follow", action="store_true", help="refresh until interrupted")
    _refresh_flags(metrics)


def _refresh_flags(p: argparse.ArgumentParser) -> None:
    """How often a live table is redrawn, as metrics and deploy watch have it."""
    p.add_argument(
        "--interval", type=float, default=2.0, help="metrics, deploy watch: seconds between refreshes"
    )
    p.add_argument("--count", type=int, default=0, help="metrics, deploy watch: stop after N refreshes")


def _experiment_flags(exp: argparse.ArgumentParser) -> None:
    """``experiment list``, ``experiment summary`` and ``experiment run`` (``experiment NAME ...``
    is short for ``experiment run NAME ...``)."""
    sub = exp.add_subparsers(dest="experiment_command", required=True, parser_class=cli.Parser)
    sub.add_parser("list", help="the experiments and their titles").set_defaults(handler=_experiment_list)
    summary = sub.add_parser("summary", help="every finished experiment against the paper")
    summary.add_argument(
        "folder",
        nargs="?",
        type=Path,
        default=Path("results"),
        help="the experiments' folder (default results)",
    )
    summary.add_argument(
        "--write",
        type=Path,
        metavar="FILE",
        help="put it into FILE's summary block (experiments/REPRODUCTION.md) instead of printing it",
    )
    summary.set_defaults(handler=_experiment_summary)
    run = sub.add_parser(
        "run", help="run an experiment (or report its runs), or report a finished simulate or launch run"
    )
    _experiment_run_flags(run)
    run.set_defaults(handler=_experiment_run)


def _experiment_run_flags(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "name",
        help="experiment name or TOML file, or (with --report-only) the --out folder of a finished "
        "simulate or launch run",
    )
    cli.output_flags(run, json=False)
    run.add_argument("--seeds", type=_seeds, help="seeds '0,1,2' (default: the experiment's)")
    run.add_argument(
        "--rows",
        action="append",
        default=[],
        metavar="LABEL",
        help="only this row (repeat the flag for more)",
    )
    size = run.add_argument_group("every row's configuration (as simulate has these flags)")
    for path in ("nodes", "rounds", "dataset"):
        cli.config_flag(size, path, shown=False)  # an experiment's own values stand unless given
    size.add_argument(
        "--set",
        type=_set,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, e.g. learning.lr=0.05 (a TOML value; a bare word is a string)",
    )
    size.add_argument(
        "--paper",
        metavar="DATASET",
        help="with --dataset FILE: whose paper numbers stand beside ours (ml-100k, foursquare-nyc, "
        "gowalla-nyc; default: from the file's name as distributed, e.g. dataset_TSMC2014_NYC.txt)",
    )
    where = run.add_argument_group("where the runs go")
    where.add_argument(
        "--real", action="store_true", help="real HTTP nodes on this machine instead of the simulator"
    )
    _processes_flag(where)
    where.add_argument(
        "--workers",
        type=_at_least_one,
        default=None,
        help="simulations run in this many processes at once, if they fit in free memory (default 1; "
        "with --ray: at most this many on the cluster, default its CPUs)",
    )
    where.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run the simulations on this Ray cluster (host:port of its head, or auto); "
        "needs the cluster extra and this checkout on every machine",
    )
    where.add_argument(
        "--reuse-runs",
        type=Path,
        action="append",
        default=[],
        metavar="DIR",
        help="take a run another experiment finished with the same configuration from DIR/*/runs/ "
        "instead of running it again (reproduce.sh: --reuse-runs results); repeatable",
    )
    where.add_argument(
        "--report-only", action="store_true", help="run nothing: report the finished runs in --out"
    )
    cli.settings_flags(run, "experiment")


def _deploy_flags(dep: argparse.ArgumentParser) -> None:
    dep.add_argument("action", choices=DEPLOY_ACTIONS)
    dep.add_argument("-i", "--inventory", type=Path, required=True, help="Ansible inventory (deploy/)")
    cli.out_flag(dep)
    dep.add_argument("--fresh", action="store_true", help="start: forget checkpoints and results first")
    dep.add_argument("--faults", type=Path, help="collect: a fault log (JSON lines) for the timeline")
    dep.add_argument("--wait", type=float, default=0.0, help="collect: wait up to S seconds for runs to end")
    dep.add_argument("--key-file", type=Path, help="install: cluster keyring (default: generated in --out)")
    dep.add_argument(
        "--authority",
        type=Path,
        help="install: the cluster authority that issues each process its identity, when --key-file "
        "trusts one (default: the one generated in --out)",
    )
    _refresh_flags(dep)


def _launch(args: argparse.Namespace) -> int:
    from p2plab.launch import check_launch, launch
    from p2pnode.runners.process import tune_process

    tune_process()
    config = cli.config_from_args(args, daemon=True)
    settings = cli.settings_from_args(args, "launch")
    if args.out is not None:
        cli.write_config(args.out, config)
    key_file = settings.path(settings.cluster_key_file)
    check_launch(config, args.processes, key_file, args.open, settings.memory_check)
    result = cli.run_async(
        launch(
            config,
            args.processes,
            args.out,
            cli.progress_printer(args),
            key_file,
            args.open,
            self_check=settings.self_check,
        )
    )
    cli.print_result(args, config, result)
    return 0


def _metrics(args: argparse.Namespace) -> int:
    from p2plab.follow import follow

    redraw = args.follow and sys.stdout.isatty()

    def say(text: str) -> None:
        print(text, flush=True)

    return follow(args.urls, args.interval, not args.follow, say, args.count, redraw)


def _deploy(args: argparse.Namespace) -> int:
    from p2plab.deploy import run_action

    return run_action(
        args.action,
        args.inventory,
        args.out,
        fresh=args.fresh,
        faults=args.faults,
        wait=args.wait,
        key_file=args.key_file,
        authority_file=args.authority,
        interval=args.interval,
        count=args.count,
    )


def _experiment_list(args: argparse.Namespace) -> int:
    from p2plab import experiment_spec as ex

    for name in ex.names():
        print(f"{name:20s} {ex.load(name).title}")
    return 0


def plural(n: int, word: str) -> str:
    """``1 row``, ``3 rows``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _experiment_summary(args: argparse.Namespace) -> int:
    from p2plab.experiment_summary import readings, render, summarize, write_into

    folder = args.folder
    if not folder.is_dir():
        raise ConfigError(f"{folder}: no such folder (the experiments' --out parent, default results)")
    text = render(summarize(folder), readings(folder))
    if text.startswith("No finished experiment"):  # name the folder, and where kept reports are
        text = (
            f"No finished experiment with a paper number in {folder}/ (an experiment's --out folder "
            "goes there). The reports kept with the repository: "
            "p2pnode experiment summary experiments/reports\n"
        )
    if args.write is not None:
        write_into(args.write, text)
        print(f"summary of {folder} written into {args.write}", file=sys.stderr)
    else:
        print(text, end="", flush=True)
    return 0


def _experiment_run(args: argparse.Namespace) -> int:
    """Run an experiment (p2plab/experiment.py), or with ``--report-only`` report its finished
    runs (p2plab/experiment_report.py, which loads neither the runner nor the simulator)."""
    from p2plab import experiment_spec as ex
    from p2plab.run_report import report_run, run_file

    folder = Path(args.name)
    if folder.is_dir() and run_file(folder) is not None:  # one finished simulate/launch run
        if not args.report_only:
            raise ConfigError(f"{folder} holds a finished run: add --report-only to report it")
        written = report_run(folder)
        if not args.quiet:
            print(f"{folder}: wrote {', '.join(written)}", flush=True)
        return 0
    exp = ex.load(args.name)
    if exp.mixing is not None:
        return _mixing(args, exp)
    if exp.reuseknn is not None:
        return _reuseknn(args, exp)
    given = cli.given_config(args)  # --nodes, --rounds, --dataset
    overrides: dict[str, Any] = nested({**dict(args.set), **given})
    dataset = given.get("dataset")
    if args.paper and not dataset:
        raise ConfigError("--paper has no effect without --dataset (the bundled runs are ML-100k)")
    if dataset:
        if not Path(dataset).is_file():
            raise ConfigError(f"--dataset {dataset}: no such file (p2pnode data list says where to get one)")
        if "nodes" not in given and exp.rows:  # every user of the file, as simulate --dataset does
            from p2pnode.nodes.prepare import nodes_of_dataset

            probe = exp.config(exp.rows[0], exp.seeds[0], overrides)
            overrides["nodes"] = nodes_of_dataset(probe).nodes
        exp = exp.on_dataset(dataset, args.paper or ex.paper_dataset_of(dataset))
    seeds = args.seeds
    if args.ray and args.real:
        raise ConfigError("--ray runs simulations; --real runs go one at a time on this machine")
    mode = "real" if args.real else "simulate"
    if args.rows:
        wanted = [w.strip() for w in args.rows if w.strip()]
        labels = {r.label.lower(): r for r in exp.rows}
        missing = [w for w in wanted if w.lower() not in labels]
        if missing:
            known = "; ".join(r.label for r in exp.rows)
            raise ConfigError(f"--rows: no row {', '.join(map(repr, missing))} in {exp.name} (rows: {known})")
        exp = dataclasses.replace(exp, rows=tuple(labels[w.lower()] for w in wanted))
    out = args.out or Path("results") / exp.name
    if "nodes" in given and exp.rows:  # a quick look at a smaller size: is K still small?
        first = exp.config(exp.rows[0], (seeds or list(exp.seeds))[0], overrides)
        if first.attack.cia and first.attack.target_k * 5 > first.nodes:
            print(
                f"p2pnode: note: K = {first.attack.target_k} of {first.nodes} nodes: communities that "
                "large tell little (random guessing scores K/N); for a quick look at this size add "
                f"--set attack.target_k={max(1, first.nodes // 10)}",
                file=sys.stderr,
                flush=True,
            )
    progress = None if args.quiet else (lambda line: print(line, flush=True))
    command = ex.command_line(_as_typed(sys.argv[1:]))
    settings = cli.settings_from_args(args, "experiment")
    if args.report_only:
        from p2plab.experiment_report import report_finished

        doc = report_finished(exp, out, overrides, seeds, mode, command, progress)
    else:
        from p2plab import experiment as runs
        from p2pnode.runners.process import tune_process

        tune_process()
        runner = runs.real_network(args.processes) if args.real else runs.simulator
        doc = runs.run_experiment(
            exp,
            out,
            overrides,
            seeds,
            runner,
            mode,
            command,
            progress,
            False,
            args.workers or (0 if args.ray else 1),
            args.ray,
            settings.memory_check,
            reuse=args.reuse_runs,
        )
    if progress:
        for line in report_table(out / "report.md"):  # the numbers, not only where they are
            progress(line)
        progress(
            f"{exp.name}: {plural(len(doc['rows']), 'row')} in {doc['seconds']:.0f} s; "
            f"report in {out / 'report.md'}"
        )
    return 0


def report_table(report: Path) -> list[str]:
    """The first table of a written report (its rows against the paper), as printed lines."""
    lines = report.read_text().splitlines() if report.is_file() else []
    start = next((i for i, line in enumerate(lines) if line.startswith("| setting |")), None)
    if start is None:
        return []
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return ["", *lines[start:end], ""]


def _as_typed(argv: Sequence[str]) -> list[str]:
    """A command line as a report records it: ``experiment run NAME`` as ``experiment NAME``,
    its short form, so that a run's record does not depend on which of the two was typed."""
    words = list(argv)
    if len(words) >= 2 and words[0] == "experiment" and words[1] == "run":
        del words[1]
    return words


def _experiment_words(words: list[str]) -> list[str]:
    """``experiment NAME ...`` (the form every report and document gives) is ``experiment run NAME ...``."""
    at = next((k for k, w in enumerate(words) if not w.startswith("-")), None)
    if at is None or words[at] != "experiment" or at + 1 >= len(words):
        return words
    following = words[at + 1]
    if following in ("run", "list", "summary", "-h", "--help"):
        return words
    return [*words[: at + 1], "run", *words[at + 1 :]]


def _mixing(args: argparse.Namespace, exp: Any) -> int:
    """The mixing experiment is a computation, not gossip runs: only --out and --seeds apply."""
    from p2plab import experiment_spec as ex
    from p2plab.mixing import run_mixing
    from p2pnode.runners.process import tune_process

    tune_process()

    given = cli.given_config(args)
    flags = (("--set", args.set), ("--nodes", "nodes" in given), ("--rounds", "rounds" in given))
    ignored = [f for f, v in (*flags, ("--dataset", "dataset" in given), ("--rows", args.rows)) if v]
    if args.real:
        ignored.append("--real")
    if ignored:
        raise ConfigError(
            f"experiment {exp.name}: {', '.join(ignored)} do not apply (edit the [mixing] table)"
        )
    seed = args.seeds[0] if args.seeds else exp.seeds[0]
    out = args.out or Path("results") / exp.name
    doc = run_mixing(exp.title, exp.mixing, out, seed, ex.command_line(_as_typed(sys.argv[1:])), exp.notes)
    if not args.quiet:
        print(f"{exp.name}: {doc['seconds']:.0f} s; report in {out / 'report.md'}", flush=True)
    return 0


def _reuseknn(args: argparse.Namespace, exp: Any) -> int:
    """Paper 003's evaluation is a computation over explicit ratings, not gossip runs: --out,
    --seeds (the folds' shuffle) and --dataset (a ratings file) apply."""
    from p2plab import experiment_spec as ex
    from p2plab.reuseknn_lab import run_reuseknn
    from p2pnode.runners.process import tune_process

    tune_process()
    from p2plab.reuseknn_lab import ReuseSpec

    given = cli.given_config(args)
    flags = (("--nodes", "nodes" in given), ("--rounds", "rounds" in given))
    ignored = [f for f, v in (*flags, ("--rows", args.rows), ("--real", args.real)) if v]
    if ignored:
        raise ConfigError(
            f"experiment {exp.name}: {', '.join(ignored)} do not apply (its [reuseknn] table's keys "
            f"do, with --set: {', '.join(ReuseSpec.__dataclass_fields__)})"
        )
    spec = exp.reuseknn
    if args.set:  # the [reuseknn] table's keys, e.g. --set folds=2 --set ks=[10] (checked as the file's)
        raw: dict[str, Any] = {k: getattr(spec, k) for k in ReuseSpec.__dataclass_fields__}
        for key, value in args.set:
            raw[key.removeprefix("reuseknn.")] = value
        spec = ReuseSpec.from_mapping(raw, "--set")
    if args.seeds:
        spec = dataclasses.replace(spec, seed=args.seeds[0])
    if "dataset" in given:
        spec = dataclasses.replace(spec, dataset=str(given["dataset"]))
    out = args.out or Path("results") / exp.name
    progress = None if args.quiet else (lambda line: print(line, flush=True))
    command = ex.command_line(_as_typed(sys.argv[1:]))
    doc = run_reuseknn(exp.title, spec, out, command, exp.notes, progress)
    if not args.quiet:
        print((out / "report.md").read_text().split("Command:")[0].rstrip(), flush=True)
        print(f"{exp.name}: {doc['seconds']:.0f} s; report in {out / 'report.md'}", flush=True)
    return 0


def _reporting_handler(handle: cli.Handler) -> cli.Handler:
    """``handle``, then, when it ran to the end with ``--out DIR``, the run's report and plots
    in DIR (p2plab/run_report.py: the panels ``Result.plot()`` draws, one PNG each, and
    report.md). The daemon's own ``python -m p2pnode`` draws nothing: plots are the lab's."""

    def handle_and_report(args: argparse.Namespace) -> int:
        out = getattr(args, "out", None)
        if out is not None:  # an earlier run's figures would sit beside this one's (or be read as it)
            from p2plab.run_report import clear_earlier_run

            removed = clear_earlier_run(out)
            if removed and not getattr(args, "quiet", False):
                print(
                    f"{out} held an earlier run: its {len(removed)} files and folders are replaced "
                    "by this run's",
                    file=sys.stderr,
                    flush=True,
                )
        code = handle(args)
        if code == 0 and out is not None:
            from p2plab.run_report import report_run, run_file

            if run_file(out) is not None:
                written = report_run(out)
                if not getattr(args, "quiet", False) and not getattr(args, "json", False):
                    print(f"report and plots in {out}: {', '.join(written)}", file=sys.stderr, flush=True)
        return code

    return handle_and_report


def _reporting(command: cli.Command) -> cli.Command:
    """``command`` with :func:`_reporting_handler`."""
    return dataclasses.replace(command, handle=_reporting_handler(command.handle))


def commands() -> tuple[cli.Command, ...]:
    """Every command of ``p2pnode``, in the order its help lists them."""
    daemon = {c.name: c for c in cli.DAEMON_COMMANDS}
    return (
        _reporting(daemon["run"]),
        cli.Command(
            "launch",
            "start a local cluster of N nodes, print a report",
            _launch_flags,
            _reporting_handler(_launch),
        ),
        _reporting(daemon["simulate"]),
        cli.Command("metrics", "tail node metrics endpoints", _metrics_flags, _metrics),
        cli.Command(
            "experiment",
            "reproduce a table or figure of the papers (experiments/): list, summary, run (NAME: run NAME)",
            _experiment_flags,
            _experiment_run,
        ),
        daemon["keys"],
        cli.Command(
            "deploy",
            "LAN testbed through Ansible: install, start, watch, stop, collect",
            _deploy_flags,
            _deploy,
        ),
        daemon["data"],
        daemon["config"],
    )


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    return cli.main(_experiment_words(words), commands())
