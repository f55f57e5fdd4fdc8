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
from p2pnode.config import ConfigError


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
    launch.add_argument("--processes", type=int, default=2, help="OS processes (default 2)")
    launch.add_argument(
        "--cluster-key-file", type=Path, help="keyring file for all processes (default: a fresh one)"
    )
    launch.add_argument("--open", action="store_true", help="no authentication at all (not recommended)")
    launch.add_argument(
        "--no-memory-check",
        dest="memory_check",
        action="store_false",
        help="start even where the estimate says the processes will not fit in free memory",
    )


def _metrics_flags(metrics: argparse.ArgumentParser) -> None:
    metrics.add_argument("urls", nargs="+", help="HOST:PORT or http://HOST:PORT/metrics")
    metrics.add_argument("--follow", action="store_true", help="refresh until interrupted")
    metrics.add_argument("--interval", type=float, default=2.0, help="seconds between refreshes")
    metrics.add_argument("--count", type=int, default=0, help="stop after N refreshes")


def _experiment_flags(exp: argparse.ArgumentParser) -> None:
    exp.add_argument(
        "name",
        help="experiment name, a TOML file, 'list', 'summary' (every finished experiment against "
        "the paper), or (with --report-only) the --out folder of a finished simulate or launch run",
    )
    exp.add_argument(
        "folder",
        nargs="?",
        type=Path,
        help="summary: the folder of finished experiments (default results)",
    )
    exp.add_argument("--out", type=Path, help="output directory (default results/NAME)")
    exp.add_argument(
        "--write",
        type=Path,
        metavar="FILE",
        help="summary: put it into FILE's summary block (experiments/REPRODUCTION.md) instead of printing it",
    )
    exp.add_argument("--seeds", help="seeds '0,1,2' (default: the experiment's)")
    exp.add_argument("--nodes", type=int, help="override the number of nodes (e.g. a quick look)")
    exp.add_argument("--rounds", type=int, help="override the number of rounds")
    exp.add_argument(
        "--dataset",
        metavar="PATH",
        help="run every row on this data file (Foursquare's TSMC2014 file, Gowalla's SNAP file, a "
        "CSV; preprocessing with --set bbox=nyc, min_interactions=N, ...); every user is a node "
        "unless --nodes",
    )
    exp.add_argument(
        "--paper",
        metavar="DATASET",
        help="with --dataset: whose paper numbers stand beside ours (ml-100k, foursquare-nyc, "
        "gowalla-nyc; default: from the file's name as distributed, e.g. dataset_TSMC2014_NYC.txt)",
    )
    exp.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a config key, e.g. learning.lr=0.05",
    )
    exp.add_argument(
        "--real", action="store_true", help="real HTTP nodes on this machine instead of the simulator"
    )
    exp.add_argument("--processes", type=int, default=2, help="--real: OS processes (default 2)")
    exp.add_argument(
        "--rows",
        action="append",
        default=[],
        metavar="LABEL",
        help="only this row (repeat the flag for more)",
    )
    exp.add_argument(
        "--report-only", action="store_true", help="run nothing: report the finished runs in --out"
    )
    exp.add_argument("--quiet", action="store_true", help="no progress lines")
    exp.add_argument(
        "--workers",
        type=int,
        default=None,
        help="simulations run in this many processes at once, if they fit in free memory (default 1; "
        "with --ray: at most this many on the cluster, default its CPUs)",
    )
    exp.add_argument(
        "--no-memory-check",
        dest="memory_check",
        action="store_false",
        help="start a simulation even where its estimate is above the free memory (cap it from "
        "outside, e.g. a memory cgroup: the estimate errs high, and an uncapped run that does not "
        "fit is OOM-killed or takes the machine down)",
    )
    exp.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run the simulations on this Ray cluster (host:port of its head, or auto); "
        "needs the cluster extra and this checkout on every machine",
    )


def _deploy_flags(dep: argparse.ArgumentParser) -> None:
    dep.add_argument("action", choices=DEPLOY_ACTIONS)
    dep.add_argument("-i", "--inventory", type=Path, required=True, help="Ansible inventory (deploy/)")
    dep.add_argument("--out", type=Path, help="controller work folder (default deploy-runs/CLUSTER)")
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
    dep.add_argument("--interval", type=float, default=2.0, help="watch: seconds between refreshes")
    dep.add_argument("--count", type=int, default=0, help="watch: stop after N refreshes")


def _launch(args: argparse.Namespace) -> int:
    from p2plab.launch import check_launch, launch
    from p2pnode.process import tune_process

    tune_process()
    config = cli.config_from_args(args)
    check_launch(config, args.processes, args.cluster_key_file, args.open, args.memory_check)
    result = cli.run_async(
        launch(config, args.processes, args.out, cli.progress_printer(args), args.cluster_key_file, args.open)
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


def _experiment(args: argparse.Namespace) -> int:
    """Run an experiment (p2plab/experiment.py), or with ``--report-only`` report its finished
    runs (p2plab/experiment_report.py, which loads neither the runner nor the simulator)."""
    from p2plab import experiment_spec as ex
    from p2plab.run_report import report_run, run_file

    if args.name == "list":
        for name in ex.names():
            print(f"{name:20s} {ex.load(name).title}")
        return 0
    if args.name == "summary":
        from p2plab.experiment_summary import render, summarize, write_into

        folder = args.folder or args.out or Path("results")
        if not folder.is_dir():
            raise ConfigError(f"{folder}: no such folder (the experiments' --out parent, default results)")
        text = render(summarize(folder))
        if args.write is not None:
            write_into(args.write, text)
            print(f"summary of {folder} written into {args.write}", file=sys.stderr)
        else:
            print(text, end="", flush=True)
        return 0
    if args.folder is not None:
        raise ConfigError(f"experiment {args.name}: a second argument ({args.folder}) is only for summary")
    if args.write is not None:
        raise ConfigError("--write is only for summary")
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
    overrides: dict[str, Any] = {}
    for item in args.set:
        key, parsed = parse_set(item)
        node = overrides
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = parsed
    if args.nodes is not None:
        overrides["nodes"] = args.nodes
    if args.rounds is not None:
        overrides["rounds"] = args.rounds
    if args.paper and not args.dataset:
        raise ConfigError("--paper has no effect without --dataset (the bundled runs are ML-100k)")
    if args.dataset:
        if not Path(args.dataset).is_file():
            raise ConfigError(
                f"--dataset {args.dataset}: no such file (p2pnode data list says where to get one)"
            )
        overrides["dataset"] = str(args.dataset)
        if args.nodes is None and exp.rows:  # every user of the file, as simulate --dataset does
            from p2pnode.cli import _nodes_from_dataset

            probe = exp.config(exp.rows[0], exp.seeds[0], overrides)
            overrides["nodes"] = _nodes_from_dataset(probe).nodes
        exp = exp.on_dataset(args.dataset, args.paper or ex.paper_dataset_of(args.dataset))
    seeds = None
    if args.seeds:
        try:
            seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
        except ValueError:
            raise ConfigError(f"--seeds {args.seeds!r}: expected integers '0,1,2'") from None
    if args.real and args.processes < 1:
        raise ConfigError("--processes must be at least 1")
    if args.workers is not None and args.workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {args.workers}")
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
    if args.nodes is not None and exp.rows:  # a quick look at a smaller size: is K still small?
        first = exp.config(exp.rows[0], (seeds or list(exp.seeds))[0], overrides)
        if first.attack.kind and first.attack.target_k * 5 > first.nodes:
            print(
                f"p2pnode: note: K = {first.attack.target_k} of {first.nodes} nodes: communities that "
                "large tell little (random guessing scores K/N); for a quick look at this size add "
                f"--set attack.target_k={max(1, first.nodes // 10)}",
                file=sys.stderr,
                flush=True,
            )
    progress = None if args.quiet else (lambda line: print(line, flush=True))
    command = ex.command_line(sys.argv[1:])
    if args.report_only:
        from p2plab.experiment_report import report_finished

        doc = report_finished(exp, out, overrides, seeds, mode, command, progress)
    else:
        from p2plab import experiment as runs
        from p2pnode.process import tune_process

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
            args.memory_check,
        )
    if progress:
        progress(
            f"{exp.name}: {len(doc['rows'])} rows in {doc['seconds']:.0f} s; report in {out / 'report.md'}"
        )
    return 0


def _mixing(args: argparse.Namespace, exp: Any) -> int:
    """The mixing experiment is a computation, not gossip runs: only --out and --seeds apply."""
    from p2plab import experiment_spec as ex
    from p2plab.mixing import run_mixing
    from p2pnode.process import tune_process

    tune_process()

    given = (("--set", args.set), ("--nodes", args.nodes), ("--rounds", args.rounds), ("--rows", args.rows))
    ignored = [f for f, v in given if v]
    if args.real:
        ignored.append("--real")
    if ignored:
        raise ConfigError(
            f"experiment {exp.name}: {', '.join(ignored)} do not apply (edit the [mixing] table)"
        )
    seed = exp.seeds[0]
    if args.seeds:
        try:
            seed = int(args.seeds.split(",")[0])
        except ValueError:
            raise ConfigError(f"--seeds {args.seeds!r}: expected an integer") from None
    out = args.out or Path("results") / exp.name
    doc = run_mixing(exp.title, exp.mixing, out, seed, ex.command_line(sys.argv[1:]), exp.notes)
    if not args.quiet:
        print(f"{exp.name}: {doc['seconds']:.0f} s; report in {out / 'report.md'}", flush=True)
    return 0


def commands() -> tuple[cli.Command, ...]:
    """Every command of ``p2pnode``, in the order its help lists them."""
    daemon = {c.name: c for c in cli.DAEMON_COMMANDS}
    return (
        daemon["run"],
        cli.Command("launch", "start a local cluster of N nodes, print a report", _launch_flags, _launch),
        daemon["simulate"],
        cli.Command("metrics", "tail node metrics endpoints", _metrics_flags, _metrics),
        cli.Command(
            "experiment",
            "reproduce a table or figure of the papers (experiments/)",
            _experiment_flags,
            _experiment,
        ),
        daemon["keys"],
        cli.Command(
            "deploy",
            "LAN testbed through Ansible: install, start, watch, stop, collect",
            _deploy_flags,
            _deploy,
        ),
        daemon["data"],
    )


def main(argv: Sequence[str] | None = None) -> int:
    return cli.main(argv, commands())
