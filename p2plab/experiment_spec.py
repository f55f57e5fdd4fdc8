"""What an experiment is: its TOML file, its runs' keys, and the runs a folder holds.

An experiment is a TOML file in ``experiments/`` (format: experiments/README.md): a base
configuration (the keys of a ``--config`` file), rows that change it, the seeds, and columns that
say which figure of a run's summary to report and what the paper printed. Every (row, seed) is one
run, stored as ``OUT/runs/MODE-KEY.json``. Running the runs is p2plab/experiment.py's job;
aggregating and writing the report is p2plab/experiment_report.py's, which needs only this module.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import shlex
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from p2plab.mixing import MixingSpec
from p2plab.reuseknn_lab import ReuseSpec
from p2pnode.config import PARD_ONLY, AttackConfig, ConfigError, RunConfig, from_mapping

EXPERIMENTS_DIR = Path(__file__).resolve().parent.parent / "experiments"

#: a (row, seed) of an experiment and the configuration it runs
Plan = list[tuple["Row", int, RunConfig]]


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
    #: the finding of experiments/REPRODUCTION.md that explains where the row differs from the
    #: paper (``finding = "2"`` in the file; p2plab/experiment_summary.py reads it)
    finding: str = ""
    #: why this row is a probe beside the table the file reproduces (``probe = "..."`` on the row):
    #: the summary lists its figures with the probes and leaves them out of the means, saying why;
    #: "" for a row the summary counts
    probe: str = ""


@dataclass(frozen=True)
class OnDataset:
    """Settings an experiment file changes when it runs on a file of one of the paper's data sets
    (``[on.gowalla-nyc]`` with ``set`` and ``why``): a setting the paper's own would break on
    data of that shape, said in the report with the reason."""

    changes: dict[str, Any]
    why: str


#: the papers an experiment can reproduce (``reproduces = "000"`` in the file), by the number
#: ../shared/papers and the docs give them; the summary splits its totals by paper
PAPERS = {
    "000": "the CIA paper",
    "002": "Base GL, SAMO, PeerSwap and MPE",
    "003": "ReuseKNN",
    "004": "PARD",
}


@dataclass(frozen=True)
class Reading:
    """The reading of the paper a table's counted rows run under (``[reading]`` in the file): a
    short name, the paper's own text that supports it (section, equation or table note, quoted or
    paraphrased with where it is), and, where that text leaves another reading open, why this one
    is counted (the rows of the other reading are then probes or labelled as such)."""

    name: str
    text: str
    why: str = ""


_READING_FIELDS = ("name", "text", "why")


def _reading(raw: Any, path: Path) -> Reading:
    """The ``[reading]`` table, or a refusal that says what it needs."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: malformed experiment: [reading] must be a table, not {raw!r}")
    unknown = sorted(set(raw) - set(_READING_FIELDS))
    if unknown:
        raise ConfigError(
            f"{path}: malformed experiment: [reading] has unknown field(s) {', '.join(map(repr, unknown))} "
            f"(known: {', '.join(_READING_FIELDS)})"
        )
    for key in ("name", "text"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise ConfigError(
                f'{path}: malformed experiment: [reading] needs {key} = "..." (the reading\'s name, and '
                f"text: the paper's sentence, section or equation that supports it)"
            )
    if not isinstance(raw.get("why", ""), str):
        raise ConfigError(f"{path}: malformed experiment: [reading] why must be a string")
    why = " ".join(str(raw.get("why", "")).split())
    return Reading(raw["name"].strip(), " ".join(raw["text"].split()), why)


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
    #: runs (gossip runs per row and seed) | mixing (002 §4 computation) | reuseknn (003's KNN)
    kind: str = "runs"
    curve_x: str = ""  #: optional per-round trade-off curve: list path on the x axis
    curve_y: str = ""  #: ... and on the y axis (same length), e.g. "mia.accuracy"
    curve_labels: tuple[str, str] = ("", "")
    curve_x_percent: bool = True  #: the x values are fractions, drawn in percent (False: rounds)
    mixing: MixingSpec | None = None
    reuseknn: ReuseSpec | None = None  #: kind reuseknn: paper 003's evaluation (p2plab/reuseknn_lab.py)
    #: its rows test readings or settings beside the paper's tables (``probe = true`` in the file):
    #: the summary lists them apart and leaves them out of its means (p2plab/experiment_summary.py)
    probe: bool = False
    #: per data set of the paper, the settings the file changes on a file of that shape
    on: dict[str, OnDataset] = field(default_factory=dict)
    #: which of ``on`` this experiment runs under (set by :meth:`on_dataset`; "" for none)
    applied: str = ""
    #: which paper's figures its rows carry (a key of :data:`PAPERS`; "" for none)
    reproduces: str = ""
    #: the reading of the paper its counted rows run under, with the text that supports it
    reading: Reading | None = None

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
        exp = dataclasses.replace(self, rows=rows, title=f"{title} [{said}]")
        if paper in self.on:
            exp = dataclasses.replace(exp, base=_merge(self.base, self.on[paper].changes), applied=paper)
        return exp

    def applied_settings(self, model: str | None = None) -> list[str]:
        """``name = value`` for each setting :meth:`on_dataset` changed (dotted names); with
        ``model``, only those that model reads (:data:`UNUSED_BY_MODEL`)."""
        if not self.applied:
            return []
        unused = {f"learning.{n}" for n in UNUSED_BY_MODEL.get(model or "", ())}
        return [f"{k} = {json.dumps(v)}" for k, v in _flat(self.on[self.applied].changes) if k not in unused]


def names(directory: Path = EXPERIMENTS_DIR) -> list[str]:
    return sorted(p.stem for p in directory.glob("*.toml"))


_COLUMN_FIELDS = tuple(f.name for f in dataclasses.fields(Column))
_COLUMN_REQUIRED = ("key", "label", "path")


def _column(raw: Any, path: Path) -> Column:
    """One ``[[columns]]`` entry, or a refusal that names the entry and the field in the file's terms."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: malformed experiment: [[columns]] must be tables, not {raw!r}")
    which = f"[[columns]] {raw['key']!r}" if isinstance(raw.get("key"), str) else "a [[columns]] entry"
    missing = [k for k in _COLUMN_REQUIRED if k not in raw]
    if missing:
        raise ConfigError(
            f"{path}: malformed experiment: {which} has no {', '.join(repr(k) for k in missing)} "
            f"(a column needs key, label and path)"
        )
    unknown = sorted(set(raw) - set(_COLUMN_FIELDS))
    if unknown:
        raise ConfigError(
            f"{path}: malformed experiment: {which} has unknown field(s) {', '.join(map(repr, unknown))} "
            f"(known: {', '.join(_COLUMN_FIELDS)})"
        )
    return Column(**raw)


def _row_probe(raw: Mapping[str, Any], path: Path) -> str:
    """A row's ``probe = "why"``: the reason it is a probe, never a bare flag (the summary prints it)."""
    probe = raw.get("probe", "")
    if not isinstance(probe, str) or (probe == "" and "probe" in raw) or (probe and not probe.strip()):
        raise ConfigError(
            f"{path}: row {raw.get('label')!r}: probe must say why the row is a probe "
            f'(probe = "the 400-round run: below the coverage the paper\'s bound implies"), not {probe!r}'
        )
    return " ".join(probe.split())


def _on_dataset(shape: str, raw: Any, path: Path) -> OnDataset:
    """One ``[on.SHAPE]`` table: the settings it changes (``set``) and the reason (``why``)."""
    missing = [k for k in ("set", "why") if not isinstance(raw, dict) or k not in raw]
    if missing:
        raise ConfigError(
            f"{path}: malformed experiment: [on.{shape}] has no {', '.join(repr(k) for k in missing)} "
            f'(it needs set = {{ ... }}, the settings it changes, and why = "...", the reason)'
        )
    return OnDataset(dict(raw["set"]), str(raw["why"]))


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
    if kind in ("mixing", "reuseknn"):  # a computation, not gossip runs: no rows or columns
        mixing = MixingSpec.from_mapping(raw.get("mixing", {}), str(path)) if kind == "mixing" else None
        reuse = ReuseSpec.from_mapping(raw.get("reuseknn", {}), str(path)) if kind == "reuseknn" else None
        return Experiment(
            name=name,
            title=str(raw.get("title", name)),
            source=str(raw.get("source", "")),
            seeds=(reuse.seed,) if reuse is not None else tuple(int(s) for s in raw.get("seeds", [0])),
            base={},
            rows=(),
            columns=(),
            notes=str(raw.get("notes", "")),
            kind=kind,
            mixing=mixing,
            reuseknn=reuse,
        )
    if kind != "runs":
        raise ConfigError(f"{path}: unknown experiment kind {kind!r} (runs, mixing or reuseknn)")
    try:
        columns = tuple(_column(c, path) for c in raw["columns"])
        rows = tuple(
            Row(
                r["label"],
                dict(r.get("set", {})),
                dict(r.get("paper", {})),
                dict(r.get("paths", {})),
                {str(d): dict(v) for d, v in r.get("papers", {}).items()},
                str(r.get("finding", "")),
                _row_probe(r, path),
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
            curve_x_percent=bool(raw.get("curve", {}).get("x_percent", True)),
            probe=bool(raw.get("probe", False)),
            on={str(d): _on_dataset(str(d), v, path) for d, v in raw.get("on", {}).items()},
            reproduces=str(raw.get("reproduces", "")),
            reading=_reading(raw["reading"], path) if "reading" in raw else None,
        )
    except KeyError as exc:  # a required key left out: say which, and what a file needs
        raise ConfigError(
            f"{path}: malformed experiment: no {exc.args[0]!r} (a file needs title, [[rows]] each with a "
            f"label, and [[columns]] each with key, label and path)"
        ) from None
    except (TypeError, AttributeError) as exc:
        raise ConfigError(f"{path}: malformed experiment ({exc})") from None
    if exp.reproduces and exp.reproduces not in PAPERS:
        raise ConfigError(
            f"{path}: reproduces = {exp.reproduces!r}: one of {', '.join(map(repr, PAPERS))} "
            "(the papers' numbers)"
        )
    if not exp.reproduces and any(r.paper or r.papers for r in exp.rows):
        raise ConfigError(
            f"{path}: rows carry a paper's numbers, so the file must say whose: reproduces = "
            f"{' | '.join(map(repr, PAPERS))}"
        )
    keys = {c.key for c in exp.columns}
    for row in exp.rows:
        named = set(row.paths) - ({"curve_x", "curve_y"} if exp.curve_x else set())  # a row's own curve
        unknown = (set(row.paper) | named | {k for v in row.papers.values() for k in v}) - keys
        if set(row.papers) - set(PAPER_DATASETS):
            raise ConfigError(
                f"{path}: row {row.label!r}: papers for {sorted(set(row.papers) - set(PAPER_DATASETS))}; "
                f"the paper's data sets are {', '.join(PAPER_DATASETS)}"
            )
        if unknown:
            raise ConfigError(f"{path}: row {row.label!r} names unknown columns {sorted(unknown)}")
    if set(exp.on) - set(PAPER_DATASETS):
        raise ConfigError(
            f"{path}: settings on {sorted(set(exp.on) - set(PAPER_DATASETS))}; "
            f"the paper's data sets are {', '.join(PAPER_DATASETS)}"
        )
    for shape, on in exp.on.items():
        if not on.why.strip():
            raise ConfigError(f"{path}: [on.{shape}] must say why it changes the file's settings (why = ...)")
    for where, shaped in [("", exp), *((f" under [on.{d}]", exp.on_dataset(f"{d}.txt", d)) for d in exp.on)]:
        for row in shaped.rows:  # every configuration must validate before anything runs
            try:
                shaped.config(row, exp.seeds[0], {})
            except ConfigError as exc:  # the config's own message, with the file and row it is in
                raise ConfigError(f"{path}: row {row.label!r}{where}: {exc}") from None
    return exp


def _flat(tree: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for k, v in tree.items():
        if isinstance(v, Mapping):
            out += _flat(v, f"{prefix}{k}.")
        else:
            out.append((f"{prefix}{k}", v))
    return out


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
    of numbers) is read as it is. ``*?`` stands for the elements that hold the rest of the path
    (``history.*?.aia.omniscient.coverage``: the rounds that evaluated attribute inference). None
    where the path is missing or holds anything but numbers.
    """
    nodes: list[Any] = [summary]
    parts = path.split(".")
    for i, part in enumerate(parts):
        if part == "*?":
            rest = ".".join(parts[i + 1 :])
            elements = [e for node in nodes if isinstance(node, list) for e in node if isinstance(e, Mapping)]
            found = [v for e in elements for v in (lookup_list(e, rest) or [])]
            return found or None
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
    "gmf": ("prme_dim", "prme_lr", "prme_reg", "prme_backend", "ncf_dim", "ncf_hidden"),
    "prme": ("factors", "lr", "negatives", "ncf_dim", "ncf_hidden"),
    "ncf": ("factors", "backend", "prme_dim", "prme_lr", "prme_reg", "prme_backend"),
}


#: settings only real processes read: the simulator's virtual clock has no tick length, and its
#: nodes share one process whatever ``local_delivery`` says (a simulated run's key leaves them out,
#: so that a changed default of one of them does not make every finished simulation run again)
REAL_ONLY: dict[str, tuple[str, ...]] = {"": ("tick_seconds", "max_lag_ticks"), "wire": ("local_delivery",)}


#: the attack settings only attribute inference reads (paper 004; p2pnode/config.py)
AIA_ONLY = tuple(f.name for f in dataclasses.fields(AttackConfig) if f.name.startswith("aia_"))


def run_key(config: RunConfig, mode: str = "simulate") -> str:
    """Runs with the same configuration (seed included) are run once and shared between rows.

    Settings the run's model never reads (:data:`UNUSED_BY_MODEL`) are not part of the key, nor
    are the attack settings that cannot act: what colluders send where there are none, and the
    reading of eq. 4 where there is no attack or β = 0; nor the churn settings of a run without
    churn; nor whether FedAvg's clients share their tables; nor, in a simulated run (``mode``), the
    settings only real processes read (:data:`REAL_ONLY`); nor where this machine keeps things (the
    data directory, the spill folder): a data file is known by its bytes, not by its path, so a
    run keeps its key on every machine that holds the same file.
    """
    return _digest(_identity(config, mode, by_path=False))


def _legacy_file_key(config: RunConfig, mode: str) -> str:
    """A run's key as p2pnode made it until a data file was known by its bytes alone: its path
    as given and its bytes (the file must be there now); runs of a results folder made then are
    matched to today's keys with it (:func:`_older_runs`)."""
    return _digest(_identity(config, mode, by_path=True))


def _digest(identity: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


_DEFAULT_LAG = RunConfig().max_lag_ticks
#: settings that came with 004's training (learning/sgd_groups.py): at these values a run is keyed
#: as it was before they existed
_TRAINING_DEFAULTS = {
    "optimizer": "adam",
    "lr_eta": RunConfig().learning.lr_eta,
    "ncf_init_std": RunConfig().learning.ncf_init_std,
    "pard_warmup_lr": 0.0,
    "pard_warmup_lr_eta": 0.0,
    "eval_model": "own",
    "negative_pool": "untouched",
}


def _identity(config: RunConfig, mode: str, by_path: bool) -> dict[str, Any]:
    identity = config.to_dict()
    if mode == "simulate":
        for section, names in REAL_ONLY.items():
            where = identity[section] if section else identity
            for name in names:
                where.pop(name, None)
    if config.max_lag_ticks == _DEFAULT_LAG:  # the clock's slack at its default: keyed as before
        identity.pop("max_lag_ticks", None)  # it existed (the code that ran is in the code digest)
    if not config.churn.active:  # runs from before churn existed keep their keys
        identity.pop("churn")
    if not config.knn.active:  # runs from before the KNN service existed keep their keys
        identity.pop("knn")
    if not config.sep:  # told from the file, as before the setting existed: the keys of then
        identity.pop("sep")
    # whether FedAvg's clients share their tables, where the allocator puts blocks and where
    # frames wait change no number (learning/workbench.py, p2pnode/runners/process.py set_mmap_threshold)
    identity["sim"].pop("shared_tables", None)
    identity["sim"].pop("mmap_threshold_mib", None)
    identity["sim"].pop("spill_dir", None)  # where frames wait: the same bytes (transport/spill.py)
    for name in UNUSED_BY_MODEL.get(config.model, ()):
        identity["learning"].pop(name, None)
    for name in ("personal_user", "local_head"):  # off: runs from before they existed keep their keys
        if not identity["learning"][name]:
            identity["learning"].pop(name)
    if config.learning.defence == "none":  # runs from before PARD existed keep their keys
        for name in PARD_ONLY:
            identity["learning"].pop(name, None)
    if config.learning.evaluation == "sampled":  # nor from before the full-catalogue ranking
        identity["learning"].pop("evaluation")
    if config.learning.prme_backend == "numpy":  # nor from before the fused PRME epoch
        identity["learning"].pop("prme_backend", None)
    if config.learning.dp_backend == "numpy" or not config.learning.dp:  # nor from before the fused
        identity["learning"].pop("dp_backend", None)  # DP-SGD step (a run without DP never reads it)
    fictive = config.model == "gmf" and (config.learning.share_less or config.attack.fictive_user)
    if config.attack.fictive_backend == "numpy" or not (config.attack.cia and fictive):  # nor from
        identity["attack"].pop("fictive_backend", None)  # before the fused fictive user
    if not config.learning.dp_past:  # nor from before selective DP-SGD
        identity["learning"].pop("dp_past", None)
    if not config.learning.upload_noise:  # nor from before upload noise or the early stop
        identity["learning"].pop("upload_noise", None)
    if not config.stop_at:
        identity.pop("stop_at", None)
    if not config.stop_patience:  # nor from before the early stop on a validation item
        identity.pop("stop_patience", None)
    learning = identity["learning"]
    for name, default in _TRAINING_DEFAULTS.items():  # nor from before 004's training (sgd)
        if name in learning and learning[name] == default:
            learning.pop(name)
    if not config.norm_band:  # nor from before the norm band
        identity.pop("norm_band", None)
    if not config.steady_pull:  # nor from before the steady-pull memory
        identity.pop("steady_pull", None)
    attack = identity["attack"]
    if not attack.get("plugin"):  # runs from before plug-ins existed keep their keys
        attack.pop("plugin", None)
    if not attack.get("canaries"):  # nor from before the ε audit's canaries
        attack.pop("canaries", None)
    if not attack.get("mia_reference"):  # nor from before the calibrated membership attack
        attack.pop("mia_reference", None)
    for name in ("merge_plugin", "model_plugin"):
        if not identity.get(name):
            identity.pop(name, None)
    if not attack["colluders"]:  # what colluders send each other
        attack.pop("multicast", None)
    if not attack["kind"] or attack["momentum"] == 0:  # with β = 0 every reading of eq. 4 is Θ_u
        attack.pop("momentum_estimator", None)
    if not config.attack.aia:  # runs from before attribute inference existed keep their keys
        for name in AIA_ONLY:
            attack.pop(name, None)
        for name in ("attributes", "attribute_bins", "age_cuts"):
            identity.pop(name, None)
        identity["synthetic"].pop("attribute_strength", None)
    identity["data_dir"] = ""  # where ML-100k lives: the same file (keyed as the default, as ever)
    if config.dataset not in ("ml-100k", "synthetic") and Path(config.dataset).is_file():
        identity["dataset_sha256"] = file_digest(config.dataset)  # a new file at the same path is new data
        if not by_path:
            identity.pop("dataset")  # the same bytes at another path (or name) are the same data
    return identity


_DIGESTS: dict[tuple[str, int, int], str] = {}


def file_digest(path: str) -> str:
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
    upgrade that adds settings, or one that changes how keys are made (a simulated run's file
    named by a key that still held :data:`REAL_ONLY` settings, a run on a data file keyed by its
    path, matched while that path holds the same bytes); any recorded value that differs still
    makes a different run.
    """
    found: dict[str, Path] = {}
    for path in sorted(runs_dir.glob(f"{mode}-*.json")):
        stem = path.stem.removeprefix(f"{mode}-")
        if stem in wanted:
            continue
        try:
            stored = _with_legacy_defaults(json.loads(path.read_text()).get("config"))
            config = from_mapping(stored, RunConfig(), source=str(path))
            if config.dataset in ("ml-100k", "synthetic"):
                key = run_key(config, mode)
            elif Path(config.dataset).is_file() and _legacy_file_key(config, mode) == stem:
                key = run_key(config, mode)  # keyed by the file's path and bytes: the same bytes now
            else:
                continue  # ran on a file whose contents then are not known here: not matched again
        except (OSError, ValueError, AttributeError, ConfigError):
            continue  # unreadable or from an incompatible version: not reused
        if key in wanted:
            found.setdefault(key, path)
    return found


#: Settings whose default changed after they were added: a run recorded before the setting
#: existed ran with the old behaviour, which this value names (not with today's default).
LEGACY_DEFAULTS: dict[str, dict[str, Any]] = {
    "attack": {"momentum_estimator": "first"},  # eq. 4 as v_u^0 = Θ_u^0 until the default became debiased
    "learning": {"backend": "numpy"},  # GMF trained by numpy calls until the fused kernel was the default
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


def reading_of(configs: Sequence[Mapping[str, Any]]) -> str:
    """The settings that decide how a row's numbers were obtained, from its runs' recorded
    configurations: eq. 4's reading (where the CIA ran with momentum), what colluders send (where
    there are colluders), the fictive user, the GMF backend. Runs recorded before a setting
    existed ran under its old default (``first``, ``numpy``)."""
    found = set()
    for c in configs:
        attack, learning = c.get("attack", {}), c.get("learning", {})
        parts = []
        if attack.get("kind") == "cia":
            if attack.get("momentum", 0):
                parts.append(str(attack.get("momentum_estimator", "first")))  # before the setting: first
            else:
                parts.append("β = 0")
            if attack.get("colluders"):
                parts.append("multicast v_u" if attack.get("multicast") == "v" else "forwarding")
            if attack.get("fictive_user"):
                parts.append("fictive user")
        if c.get("model", "gmf") == "gmf":
            parts.append(str(learning.get("backend", "numpy")))  # before the setting: numpy
        found.add(", ".join(parts) or "–")
    return " / ".join(sorted(found)) or "?"


def plan_of(exp: Experiment, seeds: Sequence[int], overrides: Mapping[str, Any]) -> Plan:
    """Every (row, seed) of ``exp`` with the configuration it runs."""
    return [(row, seed, exp.config(row, seed, overrides)) for row in exp.rows for seed in seeds]


def stored_runs(
    plan: Plan, runs_dir: Path, mode: str, progress: Callable[[str], None] | None = None
) -> tuple[dict[str, dict[str, Any]], dict[str, tuple[Row, int, RunConfig, Path]]]:
    """The runs of ``plan`` already in ``runs_dir`` (by run key, read), and those still missing
    with the file each would be written to. Runs recorded before the configuration gained keys
    are matched to today's keys (:func:`_older_runs`)."""
    keys = {run_key(c, mode) for _, _, c in plan}
    older = _older_runs(runs_dir, mode, keys) if runs_dir.is_dir() else {}
    results: dict[str, dict[str, Any]] = {}
    missing: dict[str, tuple[Row, int, RunConfig, Path]] = {}
    for row, seed, config in plan:
        key = run_key(config, mode)
        path = runs_dir / f"{mode}-{key}.json"
        if key in results or key in missing:
            continue
        if not path.is_file() and key in older:
            path = older[key]
        if path.is_file():
            results[key] = json.loads(path.read_text())
            if progress:
                progress(f"[{len(results)}/{len(keys)}] {row.label}, seed {seed}: already done, kept")
        else:
            missing[key] = (row, seed, config, path)
    return results, missing


def reusable_runs(
    keys: Sequence[str], folders: Sequence[Path], mode: str, here: Path
) -> dict[str, tuple[dict[str, Any], Path]]:
    """Finished runs of other experiments with these run keys: ``FOLDER/*/runs/MODE-KEY.json``
    for each folder given (``results``: every experiment ``reproduce.sh`` wrote there).

    A run file is taken only when the configuration it records keys to the same run key again
    (a file copied or renamed by hand is not trusted by its name); an unreadable one is passed
    over and the run runs. ``here`` (this experiment's own runs folder) is never a source.
    """
    wanted = set(keys)
    found: dict[str, tuple[dict[str, Any], Path]] = {}
    if not wanted:
        return found
    for folder in folders:
        for runs in sorted(folder.glob("*/runs")):
            if runs.resolve() == here.resolve():
                continue
            for key in sorted(wanted - found.keys()):
                path = runs / f"{mode}-{key}.json"
                if not path.is_file():
                    continue
                try:
                    stored = json.loads(path.read_text())
                    config = from_mapping(
                        _with_legacy_defaults(stored.get("config")), RunConfig(), source=str(path)
                    )
                    if run_key(config, mode) != key:
                        continue
                except (OSError, ValueError, AttributeError, ConfigError):
                    continue
                found[key] = (stored, path)
    return found


def command_line(argv: Sequence[str]) -> str:
    """The command a report records: as typed, but portable (p2plab/portable.py): the data file
    by its name, without the settings that say where this machine keeps things."""
    from p2plab.portable import portable_argv

    return "p2pnode " + " ".join(shlex.quote(a) for a in portable_argv(argv))


_CODE: list[str] = []


def code_digest() -> str:
    """A digest of the code that runs: SHA-256 over the project's Python sources (path and
    bytes, in order), 12 hex digits; a run records it (``_code``) so that a summary can tell
    runs of different code apart, with or without git."""
    if not _CODE:
        root = Path(__file__).resolve().parents[1]
        h = hashlib.sha256()
        for pkg in ("p2pcore", "p2pnode", "p2plab", "peer_sampling", "protocols", "adversary", "learning"):
            for path in sorted((root / pkg).rglob("*.py")):
                h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
        _CODE.append(h.hexdigest()[:12])
    return _CODE[0]
