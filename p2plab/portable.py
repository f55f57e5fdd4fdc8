"""What a run's or a report's record says of the machine that made it: nothing.

A report and its runs are kept in the repository (experiments/keep.sh) and rebuilt on other
machines, so what they record must mean the same everywhere. A data file is recorded by its name
(the report's ``data`` section adds its SHA-256, and a run's key is made from its bytes:
p2plab/experiment_spec.py ``run_key``), never by the folder it sat in on one machine; the
settings that say only where this machine keeps things and change no number (the data directory,
the spill folder) are left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: named data sets, not files
NAMED_DATASETS = frozenset({"ml-100k", "synthetic"})

#: settings that say where this machine keeps things: (section or "" for the top level, name)
MACHINE_LOCAL: tuple[tuple[str, str], ...] = (("", "data_dir"), ("sim", "spill_dir"))

#: the command-line flags of those settings, and the ``--set`` keys
_LOCAL_FLAGS = frozenset({"--data-dir", "--spill-dir"})
_LOCAL_SET_KEYS = frozenset(f"{s}.{n}" if s else n for s, n in MACHINE_LOCAL)


def data_name(dataset: str) -> str:
    """A data set as a record names it: a named one as it is, a file by its name alone."""
    return dataset if dataset in NAMED_DATASETS else Path(dataset).name


def portable_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A run's configuration (``RunConfig.to_dict()``) as its record keeps it."""
    out = dict(config)
    if isinstance(out.get("dataset"), str):
        out["dataset"] = data_name(out["dataset"])
    for section, name in MACHINE_LOCAL:
        where = out.get(section) if section else out
        if isinstance(where, dict) and name in where:
            if section:
                out[section] = where = dict(where)
            where[name] = ""
    return out


def portable_overrides(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """An experiment's overrides as its report keeps them: machine-local settings left out."""
    out: dict[str, Any] = {}
    for key, value in overrides.items():
        if isinstance(value, Mapping):
            kept = {k: v for k, v in value.items() if (key, k) not in MACHINE_LOCAL}
            if kept:
                out[key] = kept
        elif ("", key) in MACHINE_LOCAL:
            continue
        elif key == "dataset" and isinstance(value, str):
            out[key] = data_name(value)
        else:
            out[key] = value
    return out


def portable_argv(argv: Sequence[str]) -> list[str]:
    """A command line as a report keeps it: ``--dataset`` by the file's name, without the flags
    and ``--set`` entries of machine-local settings."""
    out: list[str] = []
    args = list(argv)
    k = 0
    while k < len(args):
        arg = args[k]
        flag, eq, value = arg.partition("=")
        if flag in _LOCAL_FLAGS:
            k += 1 if eq else 2
            continue
        if flag == "--set":
            entry = value if eq else (args[k + 1] if k + 1 < len(args) else "")
            if entry.partition("=")[0].strip() in _LOCAL_SET_KEYS:
                k += 1 if eq else 2
                continue
        if flag == "--dataset":
            if eq:
                out.append(f"--dataset={data_name(value)}")
            else:
                out.append(arg)
                if k + 1 < len(args):
                    out.append(data_name(args[k + 1]))
                    k += 1
            k += 1
            continue
        out.append(arg)
        k += 1
    return out
