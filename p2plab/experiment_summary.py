"""``p2pnode experiment summary [DIR]``: every finished experiment under ``DIR`` against the paper,
row by row, and how far the reproduction is from it on average.

It reads what the reports left (``DIR/NAME/results.json``) and the runs beside them
(``DIR/NAME/runs/``): per row and column with a paper number, the paper's value, ours (mean ± sd
over the seeds that ran), the absolute difference in the column's unit (points for percentages),
the reading the runs ran under (eq. 4's estimator, what colluders send, the GMF backend) and the
digest of the code that ran them. A difference above :data:`CLOSE` points counts as explained
where the experiment file's row names the finding of experiments/REPRODUCTION.md that explains it
(``finding = "2"``), else as unexplained. Nothing is run, and no runner is imported.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from p2plab.experiment_spec import Experiment, load, plan_of, run_key, stored_runs
from p2pnode.config import ConfigError

#: a row within this many points (or units) of the paper counts as reproduced
CLOSE = 5.0


@dataclass(frozen=True)
class Line:
    """One reported figure of one row, beside the paper's."""

    experiment: str
    row: str
    column: str
    paper: float
    mean: float
    std: float
    seeds: int
    percent: bool
    reading: str
    code: str
    finding: str

    @property
    def ours(self) -> float:
        return 100 * self.mean if self.percent else self.mean

    @property
    def difference(self) -> float:
        return abs(self.ours - self.paper)

    @property
    def status(self) -> str:
        if self.difference <= CLOSE:
            return "within 5 points"
        if self.finding:
            return f"differs, explained (finding {self.finding})"
        return "differs, unexplained"


def summarize(folder: Path) -> list[Line]:
    """Every (row, column) with a paper number in the reports under ``folder``, by experiment."""
    lines: list[Line] = []
    for results in sorted(folder.glob("*/results.json")):
        try:
            doc = json.loads(results.read_text())
        except (OSError, ValueError):
            continue  # a report being written, or not one of ours
        if not isinstance(doc, dict) or "rows" not in doc or "columns" not in doc:
            continue
        lines += _lines(results.parent, doc)
    return lines


def _lines(out: Path, doc: Mapping[str, Any]) -> list[Line]:
    exp = _experiment(str(doc.get("experiment", out.name)))
    runs = _runs_by_row(out, doc, exp)
    findings = {r.label: r.finding for r in exp.rows} if exp is not None else {}
    columns = {c["key"]: c for c in doc["columns"]}
    lines = []
    for row in doc["rows"]:
        label = row["label"]
        configs = [r.get("config") or {} for r in runs.get(label, [])]
        reading = _reading(configs)
        code = ", ".join(sorted({str(r.get("_code", "?")) for r in runs.get(label, [])})) or "?"
        for key, cell in row["cells"].items():
            col = columns.get(key)
            if col is None or cell.get("paper") is None or "mean" not in cell:
                continue
            lines.append(
                Line(
                    experiment=str(doc.get("experiment", out.name)),
                    row=label,
                    column=str(col.get("label", key)),
                    paper=float(cell["paper"]),
                    mean=float(cell["mean"]),
                    std=float(cell.get("std", 0.0)),
                    seeds=len(cell.get("values", [])),
                    percent=bool(col.get("percent", True)),
                    reading=reading,
                    code=code,
                    finding=str(row.get("finding") or findings.get(label, "")),
                )
            )
    return lines


def _experiment(name: str) -> Experiment | None:
    try:
        return load(name)
    except ConfigError:  # a renamed, removed or custom experiment file: its report still counts
        return None


def _runs_by_row(
    out: Path, doc: Mapping[str, Any], exp: Experiment | None
) -> dict[str, list[dict[str, Any]]]:
    """The run files of each row: by the experiment's plan (its run keys) where the file still
    loads, else by the label each run recorded (``_row``)."""
    mode = str(doc.get("mode", "simulate"))
    runs_dir = out / "runs"
    by_row: dict[str, list[dict[str, Any]]] = {}
    if exp is not None:
        try:
            plan = plan_of(exp, [int(s) for s in doc.get("seeds", [])], doc.get("overrides") or {})
        except ConfigError:  # overrides an older file does not take: fall back to the labels
            plan = []
        stored, _ = stored_runs(plan, runs_dir, mode)  # today's keys, and older runs matched to them
        for row, _seed, config in plan:
            run = stored.get(run_key(config))
            if run is not None:
                by_row.setdefault(row.label, []).append(run)
    if not by_row and runs_dir.is_dir():
        for path in sorted(runs_dir.glob(f"{mode}-*.json")):
            try:
                run = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            by_row.setdefault(str(run.get("_row", "")), []).append(run)
    return by_row


def _reading(configs: Sequence[Mapping[str, Any]]) -> str:
    """The settings that decide how a row's numbers were obtained: eq. 4's reading (where the
    CIA ran with momentum), what colluders send (where there are colluders), the GMF backend."""
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


def render(lines: Sequence[Line]) -> str:
    """The summary as a markdown table and its totals (REPRODUCTION.md's summary is this text)."""
    out = [
        "| experiment | row | figure | paper | ours (mean ± sd) | seeds | abs. difference | reading | code "
        "| status |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for ln in lines:
        scale = 100.0 if ln.percent else 1.0
        ours = f"{ln.ours:.1f}" + (f" ± {scale * ln.std:.1f}" if ln.seeds > 1 else "")
        out.append(
            f"| {ln.experiment} | {ln.row} | {ln.column} | {ln.paper:g} | {ours} | {ln.seeds} | "
            f"{ln.difference:.1f} | {ln.reading} | {ln.code} | {ln.status} |"
        )
    out += ["", *totals(lines)]
    return "\n".join(out) + "\n"


def totals(lines: Sequence[Line]) -> list[str]:
    """The mean absolute difference over every figure with a paper number, and its split."""
    if not lines:
        return ["No finished experiment with a paper number in this folder."]
    mean = sum(ln.difference for ln in lines) / len(lines)
    groups: dict[str, list[Line]] = {}
    for ln in lines:
        key = "differs, explained" if ln.status.startswith("differs, explained") else ln.status
        groups.setdefault(key, []).append(ln)
    out = [f"Mean absolute difference over {len(lines)} figures with a paper number: {mean:.1f} points."]
    for key in ("within 5 points", "differs, explained", "differs, unexplained"):
        group = groups.get(key, [])
        part = sum(ln.difference for ln in group) / len(group) if group else math.nan
        out.append(f"- {key}: {len(group)}" + (f" (mean difference {part:.1f})" if group else ""))
    return out
