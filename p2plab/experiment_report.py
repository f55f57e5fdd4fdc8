"""An experiment's report: its runs aggregated per row and column (mean ± spread over seeds,
the paper's number, ours ÷ random) and written as ``results.json``, ``results.csv``, ``report.md``
and PNG plots.

It reads the runs a folder holds and never imports the runner (p2plab/experiment.py), so that
``p2pnode experiment NAME --report-only`` on a finished folder loads no simulator.
"""

from __future__ import annotations

import csv
import io
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from p2plab.experiment_spec import (
    Column,
    Experiment,
    Plan,
    file_digest,
    lookup,
    lookup_at_max,
    lookup_list,
    plan_of,
    reading_of,
    run_key,
    stored_runs,
)
from p2plab.figures import save_figure
from p2plab.machine import machines_of
from p2plab.portable import portable_overrides
from p2pnode.config import RunConfig
from p2pnode.data.atomic import write_text
from p2pnode.runners.report import metric_for


def report_finished(
    exp: Experiment,
    out: Path,
    overrides: Mapping[str, Any] | None = None,
    seeds: Sequence[int] | None = None,
    mode: str = "simulate",
    command: str = "",
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Report the runs of ``exp`` already in ``out/runs`` (rows may have fewer seeds); run nothing."""
    t0 = time.perf_counter()
    overrides = dict(overrides or {})
    seeds = tuple(seeds) if seeds is not None else exp.seeds
    plan = plan_of(exp, seeds, overrides)
    results, _ = stored_runs(plan, out / "runs", mode, progress)
    return write_report(exp, out, plan, results, overrides, seeds, mode, command, True, t0)


def _sha256_of(path: str) -> str | None:
    """The data file's SHA-256 (what its runs' keys are made from), None where it is not here."""
    return file_digest(path) if Path(path).is_file() else None


def _users_of(plan: Plan) -> int | None:
    """How many users the runs' data file has after its filters (None: it cannot be read now), so
    that the summary can tell a run on every user of a file from a smaller look at it."""
    from learning.interactions import DataError
    from p2pnode.nodes.prepare import load_data

    if not plan:
        return None
    try:  # read once per process: a run that just finished read it already
        data, _ = load_data(plan[0][2])
    except (DataError, OSError, ValueError):
        return None
    return data.n_users


def write_report(
    exp: Experiment,
    out: Path,
    plan: Plan,
    results: Mapping[str, dict[str, Any]],
    overrides: Mapping[str, Any],
    seeds: Sequence[int],
    mode: str,
    command: str,
    report_only: bool,
    started: float,
) -> dict[str, Any]:
    """Aggregate ``results`` (by run key) over ``plan`` and write ``results.json``, ``results.csv``,
    the plots and ``report.md`` into ``out``, with the runs of the other mode (simulator or real
    HTTP) beside them where ``out/runs`` has them. ``started``: ``time.perf_counter()`` at the start."""
    out.mkdir(parents=True, exist_ok=True)
    table = aggregate(exp, plan, results, partial=report_only, mode=mode)
    other = "real" if mode == "simulate" else "simulate"
    other_results, _ = stored_runs(plan, out / "runs", other)
    meta = {
        "experiment": exp.name,
        "title": exp.title,
        "source": exp.source,
        "mode": mode,
        "seeds": list(seeds),
        "overrides": portable_overrides(overrides),
        "probe": exp.probe,
        "command": command.replace(" --report-only", "") if report_only else command,
        "report_only": report_only,
        "seconds": time.perf_counter() - started,
    }
    if overrides.get("dataset"):  # the data file, and whether `p2pnode data synth` made it
        from p2pnode.data.datasets import synthetic_origin

        meta["data"] = {
            "file": Path(str(overrides["dataset"])).name,
            "sha256": _sha256_of(str(overrides["dataset"])),
            "synthetic": synthetic_origin(overrides["dataset"]),
            "users": _users_of(plan),
        }
    ran_on = {mode: machines_of(results.values())}
    if other_results:
        ran_on[other] = machines_of(other_results.values())
    meta["machines"] = {m: [{"machine": name, "runs": n} for name, n in ms] for m, ms in ran_on.items()}
    document = {**meta, "columns": [c.__dict__ for c in exp.columns], "rows": table}
    if other_results:  # the same configurations run the other way: report both side by side
        document["other"] = {
            "mode": other,
            "rows": aggregate(exp, plan, other_results, partial=True, mode=other),
        }
    write_text(out / "results.json", json.dumps(document, indent=2))
    write_csv(out / "results.csv", exp, table)
    sizes = sorted({(c.nodes, c.rounds) for _row, _seed, c in plan})
    size = "; ".join(f"{n} nodes, {r} rounds" for n, r in sizes) if len(sizes) <= 2 else "sizes vary by row"
    size = f"{size}; {len(seeds)} seed{'s' if len(seeds) != 1 else ''}" + _changed_note(overrides)
    plots = write_plots(out, exp, table, size)
    write_text(out / "report.md", report(exp, document, plots))
    return document


def _changed_note(overrides: Mapping[str, Any]) -> str:
    """The plots' line under the title when the runs are not the file's setting: what changed,
    and that the title and the paper's bars describe the file's setting."""
    if not overrides:
        return ""
    flat: list[str] = []
    for key, value in overrides.items():
        if isinstance(value, Mapping):
            flat += [f"{key}.{k}={v}" for k, v in value.items()]
        elif key not in ("nodes", "rounds"):  # the line above names them already
            flat.append(f"{key}={Path(value).name if key == 'dataset' else value}")
    changed = f"changed: {', '.join(flat)}; " if flat else ""
    return f"\n{changed}the title and the paper's bars are the file's setting, not that of these runs"


def aggregate(
    exp: Experiment,
    plan: Plan,
    results: Mapping[str, dict[str, Any]],
    partial: bool = False,
    mode: str = "simulate",
) -> list[dict[str, Any]]:
    """Per row and column: the values over seeds, mean, spread, the paper's, ours ÷ random.

    ``partial``: some runs of the plan may be missing (the other mode's runs, done for fewer
    rows or seeds); rows aggregate what there is.
    """
    table = []
    for row in exp.rows:
        configs = [c for r, _, c in plan if r is row]
        keys = [run_key(c, mode) for c in configs]
        runs = [results[k] for k in keys if not partial or k in results]
        cells: dict[str, Any] = {}
        for col in exp.columns:
            values = [v for v in (_value(s, exp.path(row, col), col) for s in runs) if v is not None]
            randoms = [v for v in (lookup(s, "cia.random_bound") for s in runs) if v is not None]
            cell: dict[str, Any] = {
                "values": values,
                "paper": row.paper.get(col.key),
                "path": exp.path(row, col),
            }
            ranking = _random_ranking(exp.path(row, col), configs)
            if ranking is not None:
                cell["random_ranking"] = ranking
                popular = [
                    v for v in (lookup(s, exp.path(row, col) + "_popularity") for s in runs) if v is not None
                ]
                if popular:  # runs from before the popularity baseline have none
                    cell["popularity"] = sum(popular) / len(popular)
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
        if row.finding:
            entry["finding"] = row.finding  # what explains its difference (experiment_summary)
        if runs:  # how the runs were obtained, by which code, and which they are (experiment_summary)
            entry["reading"] = reading_of([s.get("config") or {} for s in runs])
            changed = exp.applied_settings(configs[0].model) if configs else []
            if changed:  # the file's settings for data of this shape that the row's model reads
                entry["reading"] += "; " + ", ".join(changed) + f" (on the {exp.applied} shape)"
            entry["code"] = sorted({str(s.get("_code", "?")) for s in runs})
            entry["runs"] = sorted({k for k in keys if k in results})
        diverged = {
            str(r["_seed"]): r["recoveries"] for r in runs if (r.get("recoveries") or {}).get("events")
        }
        if diverged:  # a run whose learners kept going non-finite is not the paper's run
            entry["recoveries"] = diverged
        if exp.curve_x and exp.curve_y:  # a row's paths may name its own (its observer's)
            x_path = row.paths.get("curve_x", exp.curve_x)
            y_path = row.paths.get("curve_y", exp.curve_y)
            entry["curve"] = _mean_curve(runs, x_path, y_path, by_x=not exp.curve_x_percent)
        table.append(entry)
    return table


def _random_ranking(path: str, configs: Sequence[RunConfig]) -> float | None:
    """A utility column's value under a random ranking (HR@K or F1@K of the row's model), for
    the line its plot draws; None for other columns."""
    if not configs:
        return None
    metric = metric_for(configs[0])
    return metric.random if path == metric.key else None


def _mean_curve(
    runs: Sequence[Mapping[str, Any]], x_path: str, y_path: str, by_x: bool = False
) -> dict[str, list[float]]:
    """Per evaluated round, the mean over seeds of (x, y); rounds all seeds share. ``by_x``: x is
    the round itself, and the points are the rounds every seed has, each the mean of their y."""
    pairs = []
    for s in runs:
        xs, ys = _paired(s, x_path, y_path)
        if xs and ys and len(xs) == len(ys):
            pairs.append((xs, ys))
    if not pairs:
        return {"x": [], "y": []}
    if by_x:
        maps = [dict(zip(xs, ys, strict=True)) for xs, ys in pairs]
        shared = sorted(set.intersection(*(set(m) for m in maps)))
        return {"x": shared, "y": [sum(m[x] for m in maps) / len(maps) for x in shared]}
    n = min(len(xs) for xs, _ in pairs)
    return {
        "x": [sum(xs[i] for xs, _ in pairs) / len(pairs) for i in range(n)],
        "y": [sum(ys[i] for _, ys in pairs) / len(pairs) for i in range(n)],
    }


def _paired(
    summary: Mapping[str, Any], x_path: str, y_path: str
) -> tuple[list[float] | None, list[float] | None]:
    """The x and y lists of a curve. Paths through the same ``*?`` list (``history.*?.aia...``)
    are read element by element, keeping the elements that hold both (an attribute may be left
    out of an evaluation that had too few users for it)."""
    x_head, x_sep, x_rest = x_path.partition(".*?.")
    y_head, y_sep, y_rest = y_path.partition(".*?.")
    if not (x_sep and y_sep and x_head == y_head):
        return lookup_list(summary, x_path), lookup_list(summary, y_path)
    elements = _elements(summary, x_head)
    xs, ys = [], []
    for element in elements:
        x, y = lookup_list(element, x_rest), lookup_list(element, y_rest)
        if x and y and len(x) == len(y) == 1:
            xs.append(x[0])
            ys.append(y[0])
    return xs, ys


def _elements(summary: Mapping[str, Any], path: str) -> list[Mapping[str, Any]]:
    """The mappings of the list at ``path`` (a dotted path without wildcards)."""
    node: Any = summary
    for part in path.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return [e for e in node if isinstance(e, Mapping)] if isinstance(node, list) else []


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
    if exp.applied:  # the file's own settings for data of this shape (experiment_spec.OnDataset)
        settings = ", ".join(f"`{x}`" for x in exp.applied_settings())
        lines += [
            f"**On the {exp.applied} shape** the experiment file sets {settings}: {exp.on[exp.applied].why}",
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
    lines += _popularity_lines(exp, doc)
    lines += _diverged(doc)
    if "other" in doc:
        lines += ["", *_side_by_side(exp, doc)]
    lines += ["", "Command:", "", "```", doc["command"] or f"p2pnode experiment {exp.name}", "```", ""]
    if doc.get("report_only"):
        lines += ["(This report was rebuilt with `--report-only` from the runs on disk.)", ""]
    lines += _ran_on(doc)
    if doc["overrides"]:
        lines += [f"Overrides of the experiment file: `{json.dumps(doc['overrides'])}`.", ""]
    if exp.notes:
        lines += [exp.notes.strip(), ""]
    for p in plots:
        lines += [f"![{p}]({p})", ""]
    return "\n".join(lines)


def _popularity_lines(exp: Experiment, doc: Mapping[str, Any]) -> list[str]:
    """Each utility column's popularity baseline (the training split's item counts ranking the
    same candidates), and the rows whose mean ranks below it."""
    lines = []
    for col in exp.columns:
        cells = [(r["label"], r["cells"][col.key]) for r in doc["rows"]]
        popular = [(label, c) for label, c in cells if "popularity" in c]
        if not popular:
            continue
        scale = 100.0 if col.percent else 1.0
        values = sorted({round(scale * c["popularity"], 1) for _, c in popular})
        below = [label for label, c in popular if "mean" in c and c["mean"] < c["popularity"]]
        text = " / ".join(f"{v:.1f}" for v in values)
        lines.append(
            f"- {col.label}{' %' if col.percent else ''} of a ranking by popularity on the same "
            f"candidates: {text}"
            + (f"; below it: {', '.join(below)}" if below else "; every row ranks above it")
        )
    return ["", *lines] if lines else []


def _diverged(doc: Mapping[str, Any]) -> list[str]:
    """Rows whose runs had models go non-finite (each went back to its last good model, see
    ``recoveries`` in a run's summary): their learning is not the paper's, so the row says so."""
    lines = []
    for row in doc["rows"]:
        for seed, r in sorted((row.get("recoveries") or {}).items()):
            lines.append(
                f"- {row['label']}, seed {seed}: {r['events']} non-finite models recovered at "
                f"{r['nodes']} nodes"
            )
    if not lines:
        return []
    return [
        "",
        "**Learning diverged** in these runs (a node whose model went non-finite went back "
        "to its last good one; its figures are not the paper's setting):",
        *lines,
    ]


def _ran_on(doc: Mapping[str, Any]) -> list[str]:
    """Where the runs ran (p2plab/machine.py): a real-HTTP run's figures depend on its cores."""
    names = {"simulate": "Simulator runs", "real": "Real-HTTP runs"}
    lines = []
    for mode, machines in (doc.get("machines") or {}).items():
        if machines:
            runs = [f"{m['machine']} ({m['runs']} run{'s' if m['runs'] != 1 else ''})" for m in machines]
            where = "; ".join(runs)
            lines.append(f"{names.get(mode, mode)} ran on: {where}.")
    return [*lines, ""] if lines else []


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

    one_seed = size.split("\n")[0].endswith("; 1 seed")
    spread = "one seed" if one_seed else "mean ± sd over seeds"
    sub = f"\n{size}" if size else ""
    written = []
    if exp.curve_x and exp.curve_y:
        fig, ax = plt.subplots(figsize=(6.4, 4.8))
        for row in table:
            curve = row.get("curve", {})
            if curve.get("x"):
                scale_x = 100 if exp.curve_x_percent else 1
                xs_, ys_ = [scale_x * v for v in curve["x"]], [100 * v for v in curve["y"]]
                (line,) = ax.plot(xs_, ys_, "o-", ms=3, label=row["label"])
                ax.plot(xs_[:1], ys_[:1], "o", ms=9, mfc="none", color=line.get_color())  # round 1
        ax.set_xlabel(exp.curve_labels[0] or exp.curve_x)
        ax.set_ylabel(exp.curve_labels[1] or exp.curve_y)
        ax.set_title(
            f"{exp.title}\none point per evaluated round ({spread}); the ringed point is the first{sub}",
            fontsize=9,
        )
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:  # no row had a point: nothing to name
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
        if ax.get_legend_handles_labels()[0]:  # an optional column may have no point yet
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
        _draw_random_ranking(ax, col, table)
        _draw_popularity(ax, col, table)
        ax.set_xticks(list(xs), labels, rotation=20, ha="right", fontsize=8)
        ax.set_ylabel(col.label + (" (%)" if col.percent else ""))
        ax.set_title(f"{exp.title}: {col.label}{sub}", fontsize=10)
        # room above the tallest bar, error bar or line for the legend, set in one row across the
        # top, so that it covers no bar
        lines = [
            r["cells"][col.key].get(k) for r in table for k in ("random", "random_ranking", "popularity")
        ]
        heights = [h + e for h, e in zip(ours, err, strict=True)] + [p for p in paper if p is not None]
        heights += [scale * v for v in lines if v is not None]
        top = max([0.0, *(h for h in heights if math.isfinite(h))])
        if top > 0:
            ax.set_ylim(0, 1.3 * top)
        entries = len(ax.get_legend_handles_labels()[0])
        ax.legend(fontsize=8, loc="upper center", ncol=max(1, entries), frameon=False)
        written.append(save_figure(fig, out / f"{col.key}.png"))
    return written


def _draw_random_bound(ax: Any, col: Column, table: Sequence[dict[str, Any]]) -> None:
    """A dashed line at the random bound K/N for a column reported against it."""
    randoms = [r["cells"][col.key].get("random") for r in table]
    if col.vs_random and any(v is not None for v in randoms):
        rnd = (100.0 if col.percent else 1.0) * next(v for v in randoms if v is not None)
        ax.axhline(rnd, color="tab:red", linestyle="--", label=f"random bound K/N ({rnd:.1f})")


def _draw_popularity(ax: Any, col: Column, table: Sequence[dict[str, Any]]) -> None:
    """A utility column's value under a ranking by popularity: a dash over each row's bar."""
    scale = 100.0 if col.percent else 1.0
    values = [r["cells"][col.key].get("popularity") for r in table]
    known = {round(scale * v, 1) for v in values if v is not None}
    label: str | None = f"popularity ranking ({known.pop():.1f})" if len(known) == 1 else "popularity ranking"
    for x, v in enumerate(values):
        if v is not None:
            ax.hlines(scale * v, x - 0.45, x + 0.45, color="tab:purple", linestyle=":", label=label)
            label = None


def _draw_random_ranking(ax: Any, col: Column, table: Sequence[dict[str, Any]]) -> None:
    """A utility column's value under a random ranking: one dashed line where every row shares
    it, else a dash over each row's bar (GMF's HR@K beside PRME's F1@K)."""
    values = [r["cells"][col.key].get("random_ranking") for r in table]
    if not any(v is not None for v in values):
        return
    scale = 100.0 if col.percent else 1.0
    known = {v for v in values if v is not None}
    if len(known) == 1 and None not in values:
        rnd = scale * known.pop()
        ax.axhline(rnd, color="tab:red", linestyle="--", label=f"random ranking ({rnd:.1f})")
        return
    label: str | None = "random ranking"
    for x, v in enumerate(values):
        if v is not None:
            ax.hlines(scale * v, x - 0.45, x + 0.45, color="tab:red", linestyle="--", label=label)
            label = None  # one legend entry for them all
