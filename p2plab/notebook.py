"""The lab from Python: ``p2pnode.simulate(...)`` and ``p2pnode.launch(...)``, for notebooks.

Keyword arguments are the command line's flags (``lr=0.01`` is ``--lr 0.01``, ``target_k=10``
is ``--target-k 10``, ``share_less=True`` is ``--share-less``). They go through the same parser
and the same ``RunConfig`` checks as ``p2pnode simulate`` and ``p2pnode launch``, so a wrong value
is refused with the command line's message, as a :class:`~p2pnode.config.ConfigError`; a dataset
file without ``nodes`` runs every user of the file. A configuration field without a flag is
given by its dotted key: ``p2pnode.simulate(**{"learning.batch_size": 32})``.

The result is the summary the command line writes to ``result.json`` (a dict, same keys), with
``history`` and ``nodes`` as pandas DataFrames and ``plot()`` drawing the report's figures
(p2plab/run_report.py) side by side. A run shows a tqdm progress bar (a widget in Jupyter).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import difflib
import inspect
import json
import textwrap
from collections.abc import Coroutine, Mapping
from pathlib import Path
from typing import Any, NoReturn

from p2pnode.config import ConfigError, RunConfig, from_mapping

#: the command line's output flags, which a Python call has no use for (``progress`` instead)
_NOT_HERE = {"json": "the result is returned", "quiet": "progress=False turns the bar off"}


class _Parser(argparse.ArgumentParser):
    """The command's flags, with errors raised (ConfigError) instead of printed and exited."""

    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)


def _parser(command: str) -> _Parser:
    from p2plab.cli import commands

    parser = _Parser(prog=f"p2pnode.{command}()", add_help=False)
    next(c for c in commands() if c.name == command).flags(parser)
    return parser


def _argv(parser: argparse.ArgumentParser, flags: Mapping[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """The command line that keyword arguments name, and the dotted configuration keys apart."""
    options = {o: a for a in parser._actions for o in a.option_strings if o.startswith("--")}
    argv: list[str] = []
    keys: dict[str, Any] = {}
    for name, value in flags.items():
        if "." in name:
            keys[name] = value
            continue
        if name in _NOT_HERE:
            raise ConfigError(f"{name}: not an argument here ({_NOT_HERE[name]})")
        flag = "--" + name.replace("_", "-")
        action = options.get(flag)
        if action is None:
            known = [o[2:].replace("-", "_") for o in options if o[2:] not in _NOT_HERE]
            close = difflib.get_close_matches(name, known, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(f"unknown argument {name!r}{hint}: the arguments are the command line's flags")
        if value is None:
            continue
        if action.nargs == 0:  # a switch: --share-less, --no-memory-check
            if not isinstance(value, bool):
                raise ConfigError(f"{name} is a switch ({flag}): True or False, not {value!r}")
            if value:
                argv.append(flag)
            continue
        if isinstance(value, bool):
            if action.nargs == "?" and value:  # a flag with an optional value: --mia-proxy
                argv.append(flag)
                continue
            raise ConfigError(f"{name} takes a value ({flag} {action.metavar or 'VALUE'}), not {value}")
        if isinstance(value, list | tuple | set | frozenset):
            value = ",".join(str(v) for v in value)  # --attackers 3,17
        argv.append(f"{flag}={value}")  # '=': a value that starts with '-' stays a value
    return argv, keys


def _config(command: str, flags: Mapping[str, Any]) -> tuple[argparse.Namespace, RunConfig]:
    from p2pnode import cli

    parser = _parser(command)
    argv, keys = _argv(parser, flags)
    args = parser.parse_args(argv)
    # launch starts from the daemon's safe defaults, as `p2pnode launch` does (THREAT_MODEL.md)
    return args, cli.config_from_args(args, keys, daemon=command == "launch")


def simulate(*, progress: bool = True, **flags: Any) -> Result:
    """Run a network in this process on the virtual clock, as ``p2pnode simulate`` does.

    ``p2pnode.simulate(nodes=100, rounds=10, lr=0.01, attack="cia", dataset="mine.csv")``.
    Like the command, it runs with one torch thread (``torch.set_num_threads(1)``: the numbers
    are the command line's) and first refuses a run that will not fit in free memory
    (``no_memory_check=True`` runs it anyway). ``out=DIR`` also writes ``DIR/result.json`` and
    ``DIR/config.toml`` (which ``config=`` or ``--config`` reads back).
    """
    from p2pnode import cli
    from p2pnode.cli import settings_from_args
    from p2pnode.runners.process import tune_process
    from p2pnode.runners.sim import simulate as run

    args, config = _config("simulate", flags)
    settings = settings_from_args(args, "simulate")
    tune_process()
    with _Bar(config, progress) as bar:
        result = run(config, None, memory_check=settings.memory_check, on_round=bar.update)
    if args.out is not None:
        cli.write_config(args.out, config)
        (args.out / "result.json").write_text(json.dumps(result, indent=1))
    return Result(result)


def launch(*, progress: bool = True, **flags: Any) -> Result:
    """Run the network as real node processes over HTTP on this machine, as ``p2pnode launch``
    does (``processes=2`` by default; a fresh keyring and identities unless ``open=True`` or
    ``cluster_key_file``). Works inside Jupyter's own event loop (the launch runs in a thread)."""
    from p2plab.launch import check_launch
    from p2plab.launch import launch as run
    from p2pnode import cli
    from p2pnode.cli import settings_from_args

    args, config = _config("launch", flags)
    settings = settings_from_args(args, "launch")
    key_file = settings.path(settings.cluster_key_file)
    check_launch(config, args.processes, key_file, args.open, settings.memory_check)
    if args.out is not None:
        cli.write_config(args.out, config)
    with _Bar(config, progress) as bar:
        result = _run_async(
            run(
                config,
                args.processes,
                args.out,
                None,
                key_file,
                args.open,
                bar.update,
                self_check=settings.self_check,
            )
        )
    return Result(result)


def _arguments(command: str) -> list[tuple[str, Any, str]]:
    """The keyword arguments of ``p2pnode.<command>()``: each flag of the command (as a Python
    name), its default (the configuration's, for a run's field) and its help."""
    from p2pnode.config import defaults, get_path

    start = defaults(daemon=command == "launch")
    out = []
    for action in _parser(command)._actions:
        flag = next((o for o in action.option_strings if o.startswith("--")), None)
        if flag is None or action.help == argparse.SUPPRESS:
            continue
        name = flag[2:].replace("-", "_")
        if name in _NOT_HERE:
            continue
        default = action.default
        if action.dest.startswith("cfg__"):
            default = get_path(start, action.dest[5:].replace("__", "."))
        out.append((name, default, " ".join((action.help or "").split())))
    return out


def _document(function: Any, command: str) -> None:
    """Give ``function`` a signature and a docstring that list every keyword argument, generated
    from the command's flags (so from the configuration tree: they cannot drift apart)."""
    arguments = _arguments(command)
    params = [inspect.Parameter("progress", inspect.Parameter.KEYWORD_ONLY, default=True)]
    params += [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=d) for n, d, _ in arguments]
    params.append(inspect.Parameter("keys", inspect.Parameter.VAR_KEYWORD))
    function.__signature__ = inspect.Signature(params, return_annotation="Result")
    lines = [(function.__doc__ or "").rstrip(), "", "Keyword arguments (the command's flags):", ""]
    for name, _default, text in arguments:
        lines += textwrap.wrap(f"{name}: {text}", 96, initial_indent="    ", subsequent_indent="        ")
    function.__doc__ = "\n".join(lines) + "\n"


def _run_async(coro: Coroutine[Any, Any, dict[str, Any]]) -> dict[str, Any]:
    """``asyncio.run``, or in a thread of its own where a loop already runs (Jupyter's)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coro).result()


class _Bar:
    """A tqdm bar over the run's rounds (tqdm.auto: a widget in Jupyter, text in a terminal),
    with the latest evaluation as its postfix; nothing when ``enabled`` is false."""

    def __init__(self, config: RunConfig, enabled: bool) -> None:
        from p2pnode.runners.report import metric_for

        self.metric = metric_for(config)
        self.bar: Any = None
        if enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=config.rounds, unit="round", desc=f"{config.nodes} nodes")
        self.done = 0

    def update(self, round_no: int, latest: Mapping[str, Any]) -> None:
        if self.bar is None:
            return
        post = {}
        if self.metric.key in latest:
            post[self.metric.label] = f"{latest[self.metric.key]:.3f}"
        aac = (latest.get("cia") or {}).get("aac")
        if aac is not None:
            post["CIA AAC"] = f"{aac:.3f}"
        if post:  # before the update that draws the bar: it shows this round's figures, not the last's
            self.bar.set_postfix(post, refresh=False)
        self.bar.update(round_no - self.done)
        self.done = round_no

    def __enter__(self) -> _Bar:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.close()


class Result(dict[str, Any]):
    """A run's summary (the keys of ``result.json``) with tables and figures for a notebook.

    ``r["hit_ratio_at_20"]``, ``r["cia"]["max_aac"]``, ... as before; ``r.history`` (a row per
    evaluated round), ``r.nodes`` (a row per node), ``r.config`` (the ``RunConfig`` it ran) and
    ``r.plot()``. Loaded back from a run's folder with :meth:`load`.
    """

    @classmethod
    def load(cls, path: str | Path) -> Result:
        """The result a run wrote: its ``result.json`` / ``summary.json``, or the folder of one."""
        from p2plab.run_report import run_file

        p = Path(path)
        if p.is_dir():
            found = run_file(p)
            if found is None:
                raise ConfigError(f"{p}: no result.json or summary.json")
            p = found
        try:
            return cls(json.loads(p.read_text()))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{p}: not a run's result ({exc})") from None

    @property
    def config(self) -> RunConfig:
        return from_mapping(self["config"], RunConfig(), source="result")

    @property
    def history(self) -> Any:
        """A pandas DataFrame, a row per evaluated round: the utility, traffic, refusals, and
        nested figures flattened with dots (``cia.aac``, ``cia.upper_bound``, ``view_swaps.committed``)."""
        pd = _pandas()
        return pd.json_normalize(self.get("history", []))

    @property
    def nodes(self) -> Any:
        """A pandas DataFrame, a row per node (indexed by node id): the file's user id, its role
        and whether it attacked, its utility at the end, traffic, refusals, merges, local steps,
        ε under DP-SGD, and an adversary's CIA accuracy and upper bound."""
        pd = _pandas()
        frame = pd.DataFrame(self.get("per_node", []))
        return frame.set_index("node") if "node" in frame else frame

    def plot(self) -> Any:
        """The report's figures (utility per round; the CIA's accuracy and bounds; nodes online
        under churn) side by side in one matplotlib Figure, which Jupyter shows inline."""
        from p2plab.figures import wrap_titles
        from p2plab.run_report import panels, run_size

        config = self.config
        drawn = panels(self, config, run_size(self, config))
        if not drawn:
            raise ConfigError("nothing to plot: the run evaluated no round")
        fig = _figure_class()(figsize=(5.2 * len(drawn), 4.0), layout="constrained")
        for ax, (_, draw) in zip(fig.subplots(1, len(drawn), squeeze=False)[0], drawn, strict=True):
            draw(ax)
        wrap_titles(fig)
        return fig

    def __repr__(self) -> str:
        from p2pnode.runners.report import metric_for, summary

        try:
            return f"<p2pnode result>\n{summary(self, metric_for(self.config))}"
        except (KeyError, ConfigError, TypeError):
            return dict.__repr__(self)


def _figure_class() -> type:
    """A matplotlib Figure that Jupyter shows as a PNG when it is a cell's value, whatever the
    session's backend (a Figure made without pyplot has no display of its own otherwise)."""
    import io

    from matplotlib.figure import Figure

    class ReportFigure(Figure):
        def _repr_png_(self) -> bytes:
            buf = io.BytesIO()
            self.savefig(buf, format="png", dpi=100)
            return buf.getvalue()

    return ReportFigure


def _pandas() -> Any:
    try:
        import pandas
    except ImportError:
        raise ImportError(
            "tables of a result need pandas: pip install 'p2pnode[notebook]' (or pandas)"
        ) from None
    return pandas


_document(simulate, "simulate")
_document(launch, "launch")
