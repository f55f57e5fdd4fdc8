"""``p2pnode experiment NAME``: run a reproduced table or figure, resumably, and report it.

An experiment is a TOML file in ``experiments/`` (format: experiments/README.md): a base
configuration (the keys of a ``--config`` file), rows that change it, the seeds, and columns that
say which figure of a run's summary to report and what the paper printed. Every (row, seed) is one
run; its summary is written atomically to ``OUT/runs/`` as soon as it ends, so an interrupted
experiment resumes where it stopped. At the end the runs are aggregated into ``results.json``,
``results.csv``, ``report.md`` (paper | ours, mean ± spread over seeds | ours as a multiple of the
random bound) and PNG plots.
"""

from __future__ import annotations

import asyncio
import copy
import csv
import dataclasses
import hashlib
import io
import json
import math
import shlex
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from p2plab.fanout import Footprint
from p2plab.figures import save_figure
from p2plab.mixing import MixingSpec
from p2pnode.atomic import write_text
from p2pnode.config import ConfigError, RunConfig, from_mapping

EXPERIMENTS_DIR = Path(__file__).resolve().parent.parent / "experiments"


@dataclass(frozen=True)
class Column:
    """One reported figure: where it is in a run's summary and how to print it."""

    key: str
    label: str
    path: str  #: dotted path into the summary, list indices as numbers: "cia.mia_proxy.max_aac.0"
    percent: bool = True  #: stored as a fraction, printed in percent
    vs_random: bool = False  #: also print ours ÷ the run's random bound
    at_max_of: str = ""  #: path is a list: take it where this list (same length) is largest
    optional: bool = False  #: some rows have no such figure (ε spent where no DP runs)


#: the CIA paper's data sets (Table I); an experiment row may carry each one's numbers
PAPER_DATASETS = ("ml-100k", "foursquare-nyc", "gowalla-nyc")


@dataclass(frozen=True)
class Row:
    label: str
    changes: dict[str, Any]
    paper: dict[str, float]  #: the paper's numbers on the data set the row runs on
    paths: dict[str, str] = field(default_factory=dict)  #: per-column path overrides
    #: the paper's numbers on its other data sets (``papers.foursquare-nyc`` in the file)
    papers: dict[str, dict[str, float]] = field(default_factory=dict)


def paper_dataset_of(path: str) -> str | None:
    """Which of the paper's data sets a file is, by its name as distributed (None: not known)."""
    name = Path(path).name.lower()
    if "tsmc2014" in name or "foursquare" in name or "fsq" in name:
        return "foursquare-nyc"
    if "gowalla" in name:
        return "gowalla-nyc"
    if "ml-100k" in name or name == "u.data":
        return "ml-100k"
    return None


@dataclass(frozen=True)
class Experiment:
    name: str
    title: str
    source: str
    seeds: tuple[int, ...]
    base: dict[str, Any]
    rows: tuple[Row, ...]
    columns: tuple[Column, ...]
    plot: str = "bars"  #: bars | tradeoff
    x: str = ""  #: tradeoff: column key on the x axis
    y: str = ""  #: tradeoff: column key on the y axis
    notes: str = ""
    kind: str = "runs"  #: runs (gossip runs per row and seed) | mixing (002 §4 computation)
    curve_x: str = ""  #: optional per-round trade-off curve: list path on the x axis
    curve_y: str = ""  #: ... and on the y axis (same length), e.g. "mia.accuracy"
    curve_labels: tuple[str, str] = ("", "")
    mixing: MixingSpec | None = None

    def config(self, row: Row, seed: int, overrides: Mapping[str, Any]) -> RunConfig:
        raw = _merge(_merge(self.base, row.changes), dict(overrides))
        raw["seed"] = seed
        return from_mapping(raw, RunConfig(), source=f"experiment {self.name}, row {row.label!r}")

    def path(self, row: Row, column: Column) -> str:
        return row.paths.get(column.key, column.path)

    def on_dataset(self, path: str, paper: str | None) -> Experiment:
        """This experiment on a data file: every row's paper numbers become those the paper gives
        for ``paper`` (none where it gives none, or where ``paper`` is None), and the title says
        which file and which of the paper's columns."""
        if paper is not None and paper not in PAPER_DATASETS:
            raise ConfigError(f"--paper {paper!r}: one of {', '.join(PAPER_DATASETS)}")
        rows = tuple(
            dataclasses.replace(
                r, paper=r.paper if paper == "ml-100k" else dict(r.papers.get(paper or "", {}))
            )
            for r in self.rows
        )
        said = f"paper: {paper}" if paper else "no paper numbers (--paper names the data set)"
        title = self.title.replace("ML-100k", Path(path).name)
        return dataclasses.replace(self, rows=rows, title=f"{title} [{said}]")


def names(directory: Path = EXPERIMENTS_DIR) -> list[str]:
    return sorted(p.stem for p in directory.glob("*.toml"))


def load(name: str, directory: Path = EXPERIMENTS_DIR) -> Experiment:
    """A bundled experiment by name, or any experiment file by its path (``mine.toml``)."""
    path = directory / f"{name}.toml"
    if name.endswith(".toml") or "/" in name:
        path = Path(name)
        if not path.is_file():
            raise ConfigError(f"no experiment file {name} (give a path to a .toml file, or a bundled name)")
        name = path.stem
    elif not path.is_file():
        known = ", ".join(names(directory)) or "none"
        raise ConfigError(f"no experiment {name!r} (known: {known}; or give a path to a .toml file)")
    try:
        raw = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: {exc}") from None
    kind = raw.get("kind", "runs")
    if kind == "mixing":
        return Experiment(
            name=name,
            title=str(raw.get("title", name)),
            source=str(raw.get("source", "")),
            seeds=tuple(int(s) for s in raw.get("seeds", [0])),
            base={},
            rows=(),
            columns=(),
            notes=str(raw.get("notes", "")),
            kind="mixing",
            mixing=MixingSpec.from_mapping(raw.get("mixing", {}), str(path)),
        )
    if kind != "runs":
        raise ConfigError(f"{path}: unknown experiment kind {kind!r} (runs or mixing)")
    try:
        columns = tuple(Column(**c) for c in raw["columns"])
        rows = tuple(
            Row(
                r["label"],
                dict(r.get("set", {})),
                dict(r.get("paper", {})),
                dict(r.get("paths", {})),
                {str(d): dict(v) for d, v in r.get("papers", {}).items()},
            )
            for r in raw["rows"]
        )
        exp = Experiment(
            name=name,
            title=raw["title"],
            source=raw.get("source", ""),
            seeds=tuple(int(s) for s in raw.get("seeds", [0, 1, 2])),
            base=dict(raw.get("base", {})),
            rows=rows,
            columns=columns,
            plot=raw.get("plot", "bars"),
            x=raw.get("x", ""),
            y=raw.get("y", ""),
            notes=raw.get("notes", ""),
            curve_x=raw.get("curve", {}).get("x", ""),
            curve_y=raw.get("curve", {}).get("y", ""),
            curve_labels=(raw.get("curve", {}).get("x_label", ""), raw.get("curve", {}).get("y_label", "")),
        )
    except (KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"{path}: malformed experiment ({exc})") from None
    keys = {c.key for c in exp.columns}
    for row in exp.rows:
        unknown = (set(row.paper) | set(row.paths) | {k for v in row.papers.values() for k in v}) - keys
        if set(row.papers) - set(PAPER_DATASETS):
            raise ConfigError(
                f"{path}: row {row.label!r}: papers for {sorted(set(row.papers) - set(PAPER_DATASETS))}; "
                f"the paper's data sets are {', '.join(PAPER_DATASETS)}"
            )
        if unknown:
            raise ConfigError(f"{path}: row {row.label!r} names unknown columns {sorted(unknown)}")
    for row in exp.rows:  # every configuration must validate before anything runs
        exp.config(row, exp.seeds[0], {})
    return exp


def _merge(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(a))
    for k, v in b.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = _merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _number(node: Any) -> float | None:
    return float(node) if isinstance(node, (int, float)) and not isinstance(node, bool) else None


def lookup_list(summary: Mapping[str, Any], path: str) -> list[float] | None:
    """The numbers at ``path``, where ``*`` stands for every element of a list (one level).

    ``per_round.*.hit_ratio_at_20`` is the HR@K of every evaluated round; ``mia.accuracy`` (a list
    of numbers) is read as it is. None where the path is missing or holds anything but numbers.
    """
    nodes: list[Any] = [summary]
    for part in path.split("."):
        nxt: list[Any] = []
        for node in nodes:
            if part == "*" and isinstance(node, list):
                nxt.extend(node)
            elif isinstance(node, Mapping) and part in node:
                nxt.append(node[part])
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                nxt.append(node[int(part)])
            else:
                return None
        nodes = nxt
    if len(nodes) == 1 and isinstance(nodes[0], list):
        nodes = nodes[0]
    values = [_number(n) for n in nodes]
    return None if any(v is None for v in values) else [v for v in values if v is not None]


_REDUCERS: dict[str, Callable[[list[float]], float]] = {"max": max, "min": min, "last": lambda v: v[-1]}


def lookup(summary: Mapping[str, Any], path: str) -> float | None:
    """The number at ``path`` in a run's summary, or None where the run has none.

    ``PATH|max`` (or ``|min``, ``|last``) reduces the list at PATH (see :func:`lookup_list`).
    """
    path, bar, reducer = path.partition("|")
    if bar:
        if reducer not in _REDUCERS:
            return None
        values = lookup_list(summary, path)
        return _REDUCERS[reducer](values) if values else None
    node: Any = summary
    for part in path.split("."):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return _number(node)


def lookup_at_max(summary: Mapping[str, Any], path: str, of: str) -> float | None:
    """The value of the list at ``path`` at the position where the list at ``of`` is largest.

    E.g. the MIA vulnerability at the round of best utility (002 §3.3 reports the pair).
    """
    values, key = lookup_list(summary, path), lookup_list(summary, of)
    if not values or not key or len(values) != len(key):
        return None
    return values[max(range(len(key)), key=key.__getitem__)]


#: Learning settings a model never reads (``build.prepare`` and ``build.make_learner`` are the
#: only readers): a run's key leaves them out, so experiment files that differ only there share
#: their runs (a GMF row of table3, which sets prme_lr for its PRME rows, is fig3's GMF row).
UNUSED_BY_MODEL: dict[str, tuple[str, ...]] = {
    "gmf": ("prme_dim", "prme_lr", "prme_reg"),
    "prme": ("factors", "lr", "negatives"),
}


def run_key(config: RunConfig) -> str:
    """Runs with the same configuration (seed included) are run once and shared between rows.

    Settings the run's model never reads (:data:`UNUSED_BY_MODEL`) are not part of the key, nor
    are the attack settings that cannot act: what colluders send where there are none, and the
    reading of eq. 4 where there is no attack or β = 0; nor the churn settings of a run without churn.
    """
    identity = config.to_dict()
    if not config.churn.active:  # runs from before churn existed keep their keys
        identity.pop("churn")
    for name in UNUSED_BY_MODEL.get(config.model, ()):
        identity["learning"].pop(name, None)
    attack = identity["attack"]
    if not attack["colluders"]:  # what colluders send each other
        attack.pop("multicast", None)
    if not attack["kind"] or attack["momentum"] == 0:  # with β = 0 every reading of eq. 4 is Θ_u
        attack.pop("momentum_estimator", None)
    if config.dataset not in ("ml-100k", "synthetic") and Path(config.dataset).is_file():
        identity["dataset_sha256"] = _file_digest(config.dataset)  # a new file at the same path is new data
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


_DIGESTS: dict[tuple[str, int, int], str] = {}


def _file_digest(path: str) -> str:
    """SHA-256 of a data file's bytes (remembered per path, size and modification time)."""
    st = Path(path).stat()
    key = (str(Path(path).resolve()), st.st_size, st.st_mtime_ns)
    if key not in _DIGESTS:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        _DIGESTS[key] = h.hexdigest()
    return _DIGESTS[key]


def _older_runs(runs_dir: Path, mode: str, wanted: set[str]) -> dict[str, Path]:
    """Run files written before the configuration gained keys, matched to today's run keys.

    A run recorded without a key (an older p2pnode) counts as having that key's default: its
    stored configuration is read over today's defaults and keyed again. Finished runs survive an
    upgrade that adds settings; any recorded value that differs still makes a different run.
    """
    found: dict[str, Path] = {}
    for path in sorted(runs_dir.glob(f"{mode}-*.json")):
        if path.stem.removeprefix(f"{mode}-") in wanted:
            continue
        try:
            stored = _with_legacy_defaults(json.loads(path.read_text()).get("config"))
            config = from_mapping(stored, RunConfig(), source=str(path))
            if config.dataset not in ("ml-100k", "synthetic"):
                continue  # ran on a file whose contents then are not known: not matched again
            key = run_key(config)
        except (OSError, ValueError, AttributeError, ConfigError):
            continue  # unreadable or from an incompatible version: not reused
        if key in wanted:
            found.setdefault(key, path)
    return found


#: Settings whose default changed after they were added: a run recorded before the setting
#: existed ran with the old behaviour, which this value names (not with today's default).
LEGACY_DEFAULTS: dict[str, dict[str, Any]] = {
    "attack": {"momentum_estimator": "first"},  # eq. 4 as v_u^0 = Θ_u^0 until the default became debiased
    "learning": {"backend": "numpy"},  # GMF trained by numpy calls until the fused kernel (#22)
}


def _with_legacy_defaults(stored: Any) -> Any:
    """A recorded configuration with the settings it predates filled in with what it ran under."""
    if not isinstance(stored, dict):
        return stored
    out = dict(stored)
    for section, values in LEGACY_DEFAULTS.items():
        sub = out.get(section)
        if isinstance(sub, dict):
            out[section] = {**values, **sub}
    return out


def _slim(result: dict[str, Any]) -> dict[str, Any]:
    """What a run file keeps: the summary without per-adversary lists (they can be large)."""
    out = dict(result)
    cia = out.get("cia")
    if isinstance(cia, dict):
        out["cia"] = {k: v for k, v in cia.items() if k not in ("per_round", "per_round_bounds")}
        proxy = cia.get("mia_proxy")
        if isinstance(proxy, dict):
            out["cia"]["mia_proxy"] = {k: v for k, v in proxy.items() if k != "per_round"}
    return out


Progress = Callable[[str], None]
Runner = Callable[[RunConfig, Progress | None], dict[str, Any]]


def simulator(config: RunConfig, progress: Progress | None = None) -> dict[str, Any]:
    from p2pnode.process import release_memory
    from p2pnode.sim import simulate

    try:  # checked for memory with the experiment's other runs (run_experiment), not alone
        return simulate(config, progress, memory_check=False)
    finally:
        release_memory()  # the next run of this process starts on an empty heap


def real_network(processes: int) -> Runner:
    def run(config: RunConfig, progress: Progress | None = None) -> dict[str, Any]:
        from p2plab.launch import launch

        return asyncio.run(launch(config, processes, None, progress))

    return run


def throttled(progress: Progress, seconds: float = 15.0) -> Progress:
    """Pass on a run's per-round lines at most every ``seconds`` (long runs are never silent)."""
    last = [time.perf_counter()]

    def out(line: str) -> None:
        now = time.perf_counter()
        if now - last[0] >= seconds:
            last[0] = now
            progress("    " + line.strip())

    return out


#: model bytes per model and data: an experiment's rows and seeds share them (a prepare is ~0.4 s)
_FOOTPRINTS: dict[tuple[object, ...], Footprint] = {}


def footprint(config: RunConfig) -> Footprint:
    """What one run of ``config`` holds per node and per observer (p2pnode.footprint), prepared
    once per model and data: an experiment's rows and seeds share them."""
    from p2pnode.footprint import footprint_of
    from p2pnode.prepare import prepare

    lc = config.learning
    key = (config.model, config.dataset, config.data_dir, config.table_options(), config.nodes,
           lc.factors, lc.prme_dim, config.synthetic, config.seed, config.attack, config.protocol,
           config.fraction)  # fmt: skip
    if key not in _FOOTPRINTS:
        _FOOTPRINTS[key] = footprint_of(config, prepare(config))
    return _FOOTPRINTS[key]


def run_experiment(
    exp: Experiment,
    out: Path,
    overrides: Mapping[str, Any] | None = None,
    seeds: Sequence[int] | None = None,
    runner: Runner = simulator,
    mode: str = "simulate",
    command: str = "",
    progress: Callable[[str], None] | None = None,
    report_only: bool = False,
    workers: int = 1,
    ray_address: str | None = None,
) -> dict[str, Any]:
    """Run every (row, seed) not yet on disk, then write the results and the report.

    ``report_only``: run nothing; report the runs already on disk (rows may have fewer seeds).
    ``workers``: simulations run in that many processes at once (p2plab/fanout.py).
    ``ray_address``: the simulations run on that Ray cluster instead, ``workers`` at once (0: as
    many as the cluster has CPUs).
    """
    overrides = dict(overrides or {})
    seeds = tuple(seeds) if seeds is not None else exp.seeds
    runs_dir = out / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    plan = [(row, seed, exp.config(row, seed, overrides)) for row in exp.rows for seed in seeds]
    keys = {run_key(c) for _, _, c in plan}
    older = _older_runs(runs_dir, mode, keys)
    done = 0
    t_all = time.perf_counter()
    results: dict[str, dict[str, Any]] = {}
    pending: dict[str, tuple[Row, int, RunConfig, Path]] = {}
    for row, seed, config in plan:
        key = run_key(config)
        path = runs_dir / f"{mode}-{key}.json"
        if key in results or key in pending:
            continue
        if not path.is_file() and key in older:
            path = older[key]
        if path.is_file():
            results[key] = json.loads(path.read_text())
            done += 1
            if progress:
                progress(f"[{done}/{len(keys)}] {row.label}, seed {seed}: already done, kept")
        elif not report_only:
            pending[key] = (row, seed, config, path)

    def finished(key: str, summary: dict[str, Any], seconds: float) -> None:
        nonlocal done
        row, seed, _config, path = pending[key]
        summary = _slim(summary)
        summary["_row"] = row.label
        summary["_seed"] = seed
        summary["_seconds"] = round(seconds, 1)  #: the run's own time (bench.reproduction_time reads it)
        write_text(path, json.dumps(summary))
        results[key] = summary
        done += 1
        if progress:
            progress(f"[{done}/{len(keys)}] {row.label}, seed {seed}: {seconds:.0f} s")

    if (ray_address or workers > 1) and runner is not simulator:
        raise ConfigError("--workers and --ray run simulations; real-network runs go one at a time")
    if ray_address and pending:
        from p2plab.fanout import run_on_ray

        if progress:
            progress(f"{len(pending)} runs on the Ray cluster at {ray_address}")
        tasks = [(k, v[2]) for k, v in pending.items()]
        for key, summary, seconds in run_on_ray(tasks, ray_address, workers or None, footprint):
            finished(key, summary, seconds)
    elif workers > 1 and len(pending) > 1:
        from p2plab.fanout import check_memory, run_parallel

        configs = [c for _r, _s, c, _p in pending.values()]
        check_memory(configs, workers, footprint)
        if progress:
            progress(f"{len(pending)} runs in {min(workers, len(pending))} worker processes")
        for key, summary, seconds in run_parallel([(k, v[2]) for k, v in pending.items()], workers):
            finished(key, summary, seconds)
    else:
        if runner is simulator and pending:
            from p2plab.fanout import check_memory

            one_per_row = {id(r): c for r, _s, c, _p in reversed(pending.values())}  # seeds alike
            check_memory(list(one_per_row.values()), 1, footprint)
        for key, (_row, _seed, config, _path) in pending.items():
            t0 = time.perf_counter()
            summary = runner(config, throttled(progress) if progress else None)
            finished(key, summary, time.perf_counter() - t0)
    table = aggregate(exp, plan, results, partial=report_only)
    other = "real" if mode == "simulate" else "simulate"
    other_older = _older_runs(runs_dir, other, keys)
    other_results = {}
    for key in keys:
        f = runs_dir / f"{other}-{key}.json"
        f = f if f.is_file() else other_older.get(key, f)
        if f.is_file():
            other_results[key] = json.loads(f.read_text())
    meta = {
        "experiment": exp.name,
        "title": exp.title,
        "source": exp.source,
        "mode": mode,
        "seeds": list(seeds),
        "overrides": overrides,
        "command": command.replace(" --report-only", "") if report_only else command,
        "report_only": report_only,
        "seconds": time.perf_counter() - t_all,
    }
    document = {**meta, "columns": [c.__dict__ for c in exp.columns], "rows": table}
    if other_results:  # the same configurations run the other way: report both side by side
        document["other"] = {"mode": other, "rows": aggregate(exp, plan, other_results, partial=True)}
    write_text(out / "results.json", json.dumps(document, indent=2))
    write_csv(out / "results.csv", exp, table)
    sizes = sorted({(c.nodes, c.rounds) for _row, _seed, c in plan})
    size = "; ".join(f"{n} nodes, {r} rounds" for n, r in sizes) if len(sizes) <= 2 else "sizes vary by row"
    plots = write_plots(out, exp, table, f"{size}; {len(seeds)} seed{'s' if len(seeds) != 1 else ''}")
    write_text(out / "report.md", report(exp, document, plots))
    return document


def aggregate(
    exp: Experiment,
    plan: Sequence[tuple[Row, int, RunConfig]],
    results: Mapping[str, dict[str, Any]],
    partial: bool = False,
) -> list[dict[str, Any]]:
    """Per row and column: the values over seeds, mean, spread, the paper's, ours ÷ random.

    ``partial``: some runs of the plan may be missing (the other mode's runs, done for fewer
    rows or seeds); rows aggregate what there is.
    """
    table = []
    for row in exp.rows:
        keys = [run_key(c) for r, _, c in plan if r is row]
        runs = [results[k] for k in keys if not partial or k in results]
        cells: dict[str, Any] = {}
        for col in exp.columns:
            values = [v for v in (_value(s, exp.path(row, col), col) for s in runs) if v is not None]
            randoms = [v for v in (lookup(s, "cia.random_bound") for s in runs) if v is not None]
            cell: dict[str, Any] = {"values": values, "paper": row.paper.get(col.key)}
            if values:
                mean = sum(values) / len(values)
                cell["mean"] = mean
                cell["std"] = math.sqrt(sum((v - mean) ** 2 for v in values) / max(len(values) - 1, 1))
                if col.vs_random and randoms:
                    cell["random"] = sum(randoms) / len(randoms)
                    cell["x_random"] = mean / cell["random"] if cell["random"] else None
            cells[col.key] = cell
        entry: dict[str, Any] = {
            "label": row.label,
            "changes": row.changes,
            "seeds": [s["_seed"] for s in runs],
            "cells": cells,
        }
        if exp.curve_x and exp.curve_y:
            entry["curve"] = _mean_curve(runs, exp.curve_x, exp.curve_y)
        table.append(entry)
    return table


def _mean_curve(runs: Sequence[Mapping[str, Any]], x_path: str, y_path: str) -> dict[str, list[float]]:
    """Per evaluated round, the mean over seeds of (x, y); rounds all seeds share."""
    pairs = []
    for s in runs:
        xs, ys = lookup_list(s, x_path), lookup_list(s, y_path)
        if xs and ys and len(xs) == len(ys):
            pairs.append((xs, ys))
    if not pairs:
        return {"x": [], "y": []}
    n = min(len(xs) for xs, _ in pairs)
    return {
        "x": [sum(xs[i] for xs, _ in pairs) / len(pairs) for i in range(n)],
        "y": [sum(ys[i] for _, ys in pairs) / len(pairs) for i in range(n)],
    }


def _value(summary: Mapping[str, Any], path: str, col: Column) -> float | None:
    return lookup_at_max(summary, path, col.at_max_of) if col.at_max_of else lookup(summary, path)


def _mean_sd(mean: float, sd: float, percent: bool, n: int = 2) -> str:
    """``mean ± sd``: percentages to one decimal; other values to three significant digits of
    the mean, written out (ε = 1000, not 1e+03), the sd to the same decimals (0, not 1.7e-14).
    One value (``n`` < 2) has no spread: the value alone, not ``± 0``."""
    if percent:
        text, spread = f"{100 * mean:.1f}", f"{100 * sd:.1f}"
    elif not math.isfinite(mean) or not 1e-3 <= abs(mean) < 1e7:
        text, spread = f"{mean:.3g}", f"{sd:.3g}"
    else:
        decimals = max(0, 2 - math.floor(math.log10(abs(mean))))
        text, spread = f"{mean:.{decimals}f}", f"{sd:.{decimals}f}"
    return text if n < 2 else f"{text} ± {spread}"


def _paper(value: float | None) -> str:
    return "–" if value is None else f"{value:g}"


def write_csv(path: Path, exp: Experiment, table: Sequence[dict[str, Any]]) -> None:
    fields = ["row", "column", "paper", "mean", "std", "x_random", "values"]
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(fields)
    for row in table:
        for col in exp.columns:
            c = row["cells"][col.key]
            scale = 100.0 if col.percent else 1.0
            w.writerow(
                [
                    row["label"],
                    col.label,
                    "" if c["paper"] is None else c["paper"],
                    "" if "mean" not in c else round(scale * c["mean"], 4),
                    "" if "std" not in c else round(scale * c["std"], 4),
                    "" if c.get("x_random") is None else round(c["x_random"], 3),
                    " ".join(f"{scale * v:.4g}" for v in c["values"]),
                ]
            )
    write_text(path, buf.getvalue())


def report(exp: Experiment, doc: Mapping[str, Any], plots: Sequence[str]) -> str:
    lines = [f"# {exp.title}", ""]
    if doc["overrides"]:  # the title and the paper's columns are the file's setting, not these runs'
        lines += [
            f"**Run with overrides** `{json.dumps(doc['overrides'])}`: the title and the paper's "
            "columns describe the experiment file's setting (the paper's at its own network size), "
            "not these runs.",
            "",
        ]
    if exp.source:
        lines += [
            f"Source: {exp.source}. Mode: {doc['mode']}. Seeds: {', '.join(map(str, doc['seeds']))}.",
            "",
        ]
    head = ["setting"]
    for col in exp.columns:
        unit = " %" if col.percent else ""
        head += [f"{col.label}{unit}: paper", "ours (mean ± sd)"] + (
            ["ours ÷ random"] if col.vs_random else []
        )
    head.append("runs")
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for row in doc["rows"]:
        cells = [row["label"]]
        for col in exp.columns:
            c = row["cells"][col.key]
            ours = "–" if "mean" not in c else _mean_sd(c["mean"], c["std"], col.percent, len(c["values"]))
            cells += [_paper(c["paper"]), ours]
            if col.vs_random:
                x = c.get("x_random")
                cells.append("–" if x is None else f"{x:.1f}x")
        cells.append(str(len(row["seeds"])))
        lines.append("| " + " | ".join(cells) + " |")
    if "other" in doc:
        lines += ["", *_side_by_side(exp, doc)]
    lines += ["", "Command:", "", "```", doc["command"] or f"p2pnode experiment {exp.name}", "```", ""]
    if doc.get("report_only"):
        lines += ["(This report was rebuilt with `--report-only` from the runs on disk.)", ""]
    if doc["overrides"]:
        lines += [f"Overrides of the experiment file: `{json.dumps(doc['overrides'])}`.", ""]
    if exp.notes:
        lines += [exp.notes.strip(), ""]
    for p in plots:
        lines += [f"![{p}]({p})", ""]
    return "\n".join(lines)


def _side_by_side(exp: Experiment, doc: Mapping[str, Any]) -> list[str]:
    """Simulator and real HTTP runs of the same configurations, one table (mean ± sd, runs)."""
    names = {"simulate": "simulator", "real": "real HTTP"}
    mine, other = names[doc["mode"]], names[doc["other"]["mode"]]
    sim_first = doc["mode"] == "simulate"
    first, second = (mine, other) if sim_first else (other, mine)
    lines = [f"## {first} and {second}, same configurations", ""]
    head = ["setting"] + [h for c in exp.columns for h in (f"{c.label}: {first}", second)]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    others = {r["label"]: r for r in doc["other"]["rows"]}
    for row in doc["rows"]:
        pair = (row, others.get(row["label"], {"cells": {}}))
        a, b = pair if sim_first else pair[::-1]
        cells = [row["label"]]
        for col in exp.columns:
            parts = []
            for side in (a, b):
                c = side["cells"].get(col.key, {})
                n = len(c.get("values", []))
                parts.append(
                    "–" if "mean" not in c else f"{_mean_sd(c['mean'], c['std'], col.percent, n)} (n={n})"
                )
            cells.append(" | ".join(parts))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def write_plots(out: Path, exp: Experiment, table: Sequence[dict[str, Any]], size: str = "") -> list[str]:
    """PNG plots with titles (and the runs' size, ``size``), labelled axes and legends
    (matplotlib, no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    one_seed = size.endswith("; 1 seed")
    spread = "one seed" if one_seed else "mean ± sd over seeds"
    sub = f"\n{size}" if size else ""
    written = []
    if exp.curve_x and exp.curve_y:
        fig, ax = plt.subplots(figsize=(6.4, 4.8))
        for row in table:
            curve = row.get("curve", {})
            if curve.get("x"):
                xs_, ys_ = [100 * v for v in curve["x"]], [100 * v for v in curve["y"]]
                (line,) = ax.plot(xs_, ys_, "o-", ms=3, label=row["label"])
                ax.plot(xs_[:1], ys_[:1], "o", ms=9, mfc="none", color=line.get_color())  # round 1
        ax.set_xlabel(exp.curve_labels[0] or exp.curve_x)
        ax.set_ylabel(exp.curve_labels[1] or exp.curve_y)
        ax.set_title(
            f"{exp.title}\none point per evaluated round ({spread}); the ringed point is round 1{sub}",
            fontsize=9,
        )
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        written.append(save_figure(fig, out / "curves.png"))
    if exp.plot == "tradeoff" and exp.x and exp.y:
        cx = next(c for c in exp.columns if c.key == exp.x)
        cy = next(c for c in exp.columns if c.key == exp.y)
        fig, ax = plt.subplots(figsize=(7.2, 5.2))
        # labels "GROUP, VARIANT" (FL, ε = 100): one marker per group, one colour per variant, so
        # the same ε has the same colour for every protocol
        groups = list(dict.fromkeys(r["label"].split(", ", 1)[0] for r in table))
        variants = list(dict.fromkeys(r["label"].split(", ", 1)[-1] for r in table))
        markers, palette = "osD^vP*X", plt.get_cmap("viridis")
        for row in table:
            x, y = row["cells"][cx.key], row["cells"][cy.key]
            if "mean" in x and "mean" in y:
                sx = 100.0 if cx.percent else 1.0
                sy = 100.0 if cy.percent else 1.0
                group, variant = row["label"].split(", ", 1)[0], row["label"].split(", ", 1)[-1]
                ax.errorbar(
                    sx * x["mean"],
                    sy * y["mean"],
                    xerr=sx * x["std"],
                    yerr=sy * y["std"],
                    fmt=markers[groups.index(group) % len(markers)],
                    ms=8,
                    mfc="none",
                    mew=1.6,
                    alpha=0.85,
                    color=palette(variants.index(variant) / max(1, len(variants) - 1)),
                    label=row["label"],
                )
        _draw_random_bound(ax, cy, table)
        ax.set_xlabel(cx.label + (" (%)" if cx.percent else ""))
        ax.set_ylabel(cy.label + (" (%)" if cy.percent else ""))
        ax.set_title(f"{exp.title}\n{spread}{sub}", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
        written.append(save_figure(fig, out / "tradeoff.png"))
    for col in exp.columns:
        fig, ax = plt.subplots(figsize=(max(6.4, 1.2 * len(table)), 4.8))
        labels = [r["label"] for r in table]
        scale = 100.0 if col.percent else 1.0
        ours = [scale * r["cells"][col.key].get("mean", math.nan) for r in table]
        err = [scale * r["cells"][col.key].get("std", 0.0) for r in table]
        paper = [r["cells"][col.key]["paper"] for r in table]
        xs = range(len(table))
        ax.bar(
            [x - 0.2 for x in xs],
            ours,
            0.4,
            yerr=None if one_seed else err,
            label=f"ours ({spread})",
            color="tab:blue",
        )
        if any(p is not None for p in paper):
            ax.bar(
                [x + 0.2 for x in xs],
                [math.nan if p is None else p for p in paper],
                0.4,
                label="paper",
                color="tab:gray",
            )
        _draw_random_bound(ax, col, table)
        ax.set_xticks(list(xs), labels, rotation=20, ha="right", fontsize=8)
        ax.set_ylabel(col.label + (" (%)" if col.percent else ""))
        ax.set_title(f"{exp.title}: {col.label}{sub}", fontsize=10)
        ax.legend(fontsize=8)
        written.append(save_figure(fig, out / f"{col.key}.png"))
    return written


def _draw_random_bound(ax: Any, col: Column, table: Sequence[dict[str, Any]]) -> None:
    """A dashed line at the random bound K/N for a column reported against it."""
    randoms = [r["cells"][col.key].get("random") for r in table]
    if col.vs_random and any(v is not None for v in randoms):
        rnd = (100.0 if col.percent else 1.0) * next(v for v in randoms if v is not None)
        ax.axhline(rnd, color="tab:red", linestyle="--", label=f"random bound K/N ({rnd:.1f})")


def command_line(argv: Sequence[str]) -> str:
    return "p2pnode " + " ".join(shlex.quote(a) for a in argv)
