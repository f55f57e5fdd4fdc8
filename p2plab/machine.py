"""What machine a run ran on, in one line a report can show.

A simulation's numbers do not depend on the machine (the golden runs pin them), but its
``_seconds`` do, and a real-HTTP run's numbers do too: at 943 nodes, whether 1 s rounds keep up
depends on the cores the processes get (experiments/REPRODUCTION.md, finding 5). A run file
records :func:`machine` as ``_machine``; a report lists the machines its runs ran on.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterable, Mapping
from typing import Any


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown processor"


def _cpus() -> int:
    """The CPUs this process may run on (a ``taskset`` or cgroup cpuset counts), else all."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def machine() -> dict[str, Any]:
    """This machine: usable CPUs, processor model, memory, Python and torch versions."""
    import torch

    try:
        memory_gib = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (AttributeError, ValueError, OSError):
        memory_gib = None
    return {
        "cpus": _cpus(),
        "cpu": _cpu_model(),
        "memory_gib": memory_gib,
        "python": platform.python_version(),
        "torch": str(torch.__version__),
    }


def describe(m: Mapping[str, Any]) -> str:
    """``16 CPUs (Intel(R) Xeon(R) Processor), 125.8 GiB, Python 3.12.3, torch 2.11.0``."""
    memory = f", {m['memory_gib']} GiB" if m.get("memory_gib") is not None else ""
    return (
        f"{m.get('cpus', '?')} CPUs ({m.get('cpu', '?')}){memory}, "
        f"Python {m.get('python', '?')}, torch {m.get('torch', '?')}"
    )


def machines_of(runs: Iterable[Mapping[str, Any]]) -> list[tuple[str, int]]:
    """Each machine the runs ran on, described, with its number of runs, most runs first; runs
    made before runs recorded their machine count as ``not recorded``."""
    counts: dict[str, int] = {}
    for run in runs:
        m = run.get("_machine")
        name = describe(m) if isinstance(m, Mapping) else "not recorded"
        counts[name] = counts.get(name, 0) + 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
