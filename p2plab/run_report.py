"""The report of one finished run: ``p2pnode experiment --report-only DIR`` on the folder that
``simulate --out DIR`` (``result.json``) or ``launch --out DIR`` (``summary.json``) wrote.

It writes ``report.md`` (the run's figures, its settings and the command to re-run it) and, per
evaluated round, ``utility.png`` (HR@K or F1@K with the random ranking's value), ``cia.png``
(the adversaries' mean accuracy and upper bound with the random bound K/N, when they attacked)
``churn.png`` (nodes online, when nodes came and went) and ``mia_roc.png`` (the membership
attack's ROC curve on log axes at the last round, when ``--mia`` ran).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from p2plab.figures import save_figure
from p2pnode.config import ConfigError, RunConfig, from_mapping
from p2pnode.runners.report import metric_for, summary

RUN_FILES = ("result.json", "summary.json")
#: every figure :func:`panels` may draw, by file name
PANEL_FILES = ("utility.png", "cia.png", "churn.png", "aia.png", "mia_roc.png", "knn.png")
#: what a simulate or launch run writes into its ``--out`` besides the panels (a launch's
#: per-process folders and logs are ``proc<k>`` and ``proc<k>.log``)
OUT_FILES = (*RUN_FILES, "report.md", "config.toml", "config.json")
OUT_FOLDERS = ("monitoring",)


def clear_earlier_run(folder: Path) -> list[str]:
    """Remove what an earlier simulate or launch run wrote into ``folder`` (its summary, report,
    figures, configuration and a launch's per-process folders), so that nothing of it is left
    beside the new run's or read as the new run's; only when ``folder`` holds a finished run, and
    only the names such a run writes (a user's own files stay). Returns the names removed."""
    import re
    import shutil

    if not folder.is_dir() or run_file(folder) is None:
        return []
    removed = []
    for entry in sorted(folder.iterdir()):
        name = entry.name
        if entry.is_file() and (
            name in OUT_FILES or name in PANEL_FILES or re.fullmatch(r"proc\d+\.log", name)
        ):
            entry.unlink()
        elif entry.is_dir() and (name in OUT_FOLDERS or re.fullmatch(r"proc\d+", name)):
            shutil.rmtree(entry)
        else:
            continue
        removed.append(name)
    return removed


def run_file(folder: Path) -> Path | None:
    """The summary a finished simulate or launch run left in ``folder`` (None: not a run's)."""
    for name in RUN_FILES:
        if (folder / name).is_file():
            return folder / name
    return None


def report_run(folder: Path) -> list[str]:
    """Write the report and plots of the run in ``folder``; returns the files written."""
    path = run_file(folder)
    if path is None:
        raise ConfigError(f"{folder}: no {' or '.join(RUN_FILES)} (not the --out of simulate or launch)")
    try:
        result = json.loads(path.read_text())
        config = from_mapping(result["config"], RunConfig(), source=str(path))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: not a run summary ({exc})") from None
    metric = metric_for(config)
    size = run_size(result, config)
    written = _plots(folder, result, config, size)
    lines = [
        f"# {config.protocol} over {config.sampling}, {config.model}: {size}",
        "",
        "```",
        summary(result, metric),
        "```",
        "",
        f"Settings: `{json.dumps(_changed(config), sort_keys=True)}` (the rest are the defaults).",
        "",
        *(f"![{name}]({name})" for name in written),
        "",
    ]
    (folder / "report.md").write_text("\n".join(lines))
    return ["report.md", *written]


def run_size(result: Mapping[str, Any], config: RunConfig) -> str:
    """The line under each figure's title: nodes, rounds, seed and how it ran."""
    mode = result.get("mode", "simulate")
    return f"{config.nodes} nodes, {result.get('round', config.rounds)} rounds, seed {config.seed} ({mode})"


def _changed(config: RunConfig) -> dict[str, Any]:
    """The settings that differ from the defaults (dotted keys)."""
    out: dict[str, Any] = {}
    base = RunConfig().to_dict()
    for section, value in config.to_dict().items():
        if isinstance(value, dict):
            out.update({f"{section}.{k}": v for k, v in value.items() if base[section].get(k) != v})
        elif base.get(section) != value:
            out[section] = value
    return out


def _plots(folder: Path, result: dict[str, Any], config: RunConfig, size: str) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written: list[str] = []
    for name, draw in panels(result, config, size):
        fig, ax = plt.subplots(figsize=(6.4, 4.4))
        draw(ax)
        written.append(save_figure(fig, folder / name))
    return written


Draw = Callable[[Any], None]


def panels(result: Mapping[str, Any], config: RunConfig, size: str) -> list[tuple[str, Draw]]:
    """The run's figures, each as its file name and a function that draws it on a matplotlib
    axes: utility per round (always, when evaluated), the CIA's accuracy and bounds (when
    adversaries attacked), nodes online (under churn), attribute inference's scores per observer
    and attribute beside their majority-class baselines (``--attack aia``). The report writes
    each to its own file; ``p2pnode.simulate(...).plot()`` draws them side by side."""
    from matplotlib.ticker import MaxNLocator

    metric = metric_for(config)
    out: list[tuple[str, Draw]] = []
    history = [h for h in result.get("history", []) if metric.key in h]  # the evaluated rounds
    rounds = [h["round"] for h in history]

    chance = float(result.get(f"{metric.key}_random", metric.random))  # --eval full: measured

    def utility(ax: Any) -> None:
        ax.plot(rounds, [100 * h[metric.key] for h in history], "o-", ms=3, label=f"mean {metric.label}")
        if all(metric.ndcg_key in h for h in history):
            ndcg = [100 * h[metric.ndcg_key] for h in history]
            ax.plot(rounds, ndcg, "^:", ms=3, color="tab:green", label=f"mean NDCG@{metric.k}")
        ax.axhline(
            100 * chance,
            color="tab:red",
            linestyle="--",
            label=f"random ranking ({100 * chance:.1f})",
        )
        popular = [100 * h[f"{metric.key}_popularity"] for h in history if f"{metric.key}_popularity" in h]
        if popular:  # the training split's item counts: what a model has to beat
            ax.axhline(
                popular[-1],
                color="tab:purple",
                linestyle=":",
                label=f"popularity ranking ({popular[-1]:.1f})",
            )
        ax.set_xlabel("round")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # no round 2.5
        ax.set_ylabel(f"{metric.label}, NDCG@{metric.k} (%)")
        ax.set_ylim(bottom=0)  # the random ranking's line inside the plot, not on its lower edge
        among = "every untouched item" if metric.full else "sampled candidates"
        ax.set_title(f"{metric.label} per round, among {among}\n{size}", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)

    if history:
        out.append(("utility.png", utility))
    cia = result.get("cia")

    def attack(ax: Any) -> None:
        assert isinstance(cia, Mapping)
        ax.plot(cia["rounds"], [100 * v for v in cia["aac"]], "o-", ms=3, label="mean accuracy (AAC)")
        if cia.get("upper_bounds"):
            ax.plot(
                cia["rounds"],
                [100 * v for v in cia["upper_bounds"]],
                "s--",
                ms=3,
                label="upper bound (heard from)",
            )
        rnd = 100 * cia["random_bound"]
        ax.axhline(rnd, color="tab:red", linestyle="--", label=f"random bound K/N ({rnd:.1f})")
        top = max([rnd, *(100 * v for v in cia["aac"]), *(100 * v for v in cia.get("upper_bounds") or [])])
        ax.set_ylim(0, 1.12 * top)  # the random line inside the plot, on neither edge
        ax.set_xlabel("round")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # no round 2.5
        ax.set_ylabel("%")
        ax.set_title(
            f"CIA, {cia['adversaries']} adversaries, K = {cia.get('k', config.attack.target_k)}: "
            f"Max AAC {100 * cia['max_aac']:.1f}% at round {cia['round_of_max']}\n{size}",
            fontsize=10,
        )
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)

    if isinstance(cia, Mapping) and cia.get("aac") and cia.get("rounds"):
        out.append(("cia.png", attack))
    live = [(h["round"], h["churn"]["live"]) for h in result.get("history", []) if "churn" in h]

    def churn(ax: Any) -> None:
        ax.plot([r for r, _ in live], [n for _, n in live], "o-", ms=3)
        ax.axhline(config.nodes, color="tab:gray", linestyle=":", label=f"all nodes ({config.nodes})")
        ax.set_xlabel("round")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # no round 2.5
        ax.set_ylabel("nodes online")
        ax.set_ylim(bottom=0)
        ax.set_title(f"Churn ({config.churn.model}): nodes online per round\n{size}", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)

    if live:
        out.append(("churn.png", churn))
    evaluated = [h for h in result.get("history", []) if isinstance(h.get("aia"), Mapping)]

    def inference(ax: Any) -> None:
        draw_inference(ax, evaluated, size)

    if evaluated:
        out.append(("aia.png", inference))
    pooled = (result.get("mia") or {}).get("pooled")

    def membership(ax: Any) -> None:
        assert isinstance(pooled, Mapping)
        points = [(f, t) for f, t in pooled["final_roc"] if f > 0]
        floor = 1.0 / max(pooled["non_members"], 1)  # below one false positive the FPR is not measured
        ax.loglog(
            [f for f, _ in points],
            [max(t, 1e-5) for _, t in points],
            "o-",
            ms=3,
            label="MPE, one threshold (omniscient)",
        )
        observers = (result.get("mia") or {}).get("observers") or {}
        for name, o in list(observers.items())[:6]:  # placed observers: on the models they received
            if o.get("final_roc"):
                seen = [(f, t) for f, t in o["final_roc"] if f > 0]
                ax.loglog(
                    [f for f, _ in seen],
                    [max(t, 1e-5) for _, t in seen],
                    ".--",
                    ms=3,
                    label=f"{name} (AUC {o['final_auc']:.3f}, {o['observed'][-1]} users)",
                )
        grid = [f for f, _ in points]
        ax.loglog(grid, grid, ":", color="tab:gray", label="guessing (TPR = FPR)")
        ax.axvspan(
            min(grid),
            floor,
            color="tab:gray",
            alpha=0.15,
            label=f"< 1 false positive ({pooled['non_members']} non-members)",
        )
        ax.set_xlabel("false-positive rate")
        ax.set_ylabel("true-positive rate")
        auc = [a for a in pooled["auc"] if a is not None][-1]
        ax.set_title(f"Membership inference, last round: ROC on log axes, AUC {auc:.3f}\n{size}", fontsize=10)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8)

    if isinstance(pooled, Mapping) and pooled.get("final_roc"):
        out.append(("mia_roc.png", membership))
    knn = result.get("knn")
    usage = [int(r["knn_usage"]) for r in result.get("per_node", []) if isinstance(r.get("knn_usage"), int)]

    def neighbourhoods(ax: Any) -> None:
        assert isinstance(knn, Mapping)
        draw_knn(ax, knn, usage, size)

    if isinstance(knn, Mapping) and usage:
        out.append(("knn.png", neighbourhoods))
    return out


def draw_knn(ax: Any, knn: Mapping[str, Any], usage: Sequence[int], size: str) -> None:
    """The KNN service (paper 003): how often each node's data was used as a neighbour
    (DataUsage, one bar a range of counts) against τ, the count past which a node answers with
    randomized response under ``--knn-dp tau``; the title carries the MAE over the queries done."""
    tau = float(knn["tau"])
    ax.hist(usage, bins=min(30, max(5, len(set(usage)))), color="C0", alpha=0.8, label="nodes")
    ax.axvline(
        tau, color="tab:red", linestyle="--", label=f"τ = {tau:.1f} ({100 * knn['vulnerable']:.1f}% past it)"
    )
    median = float(knn["data_usage"]["median"])
    ax.axvline(median, color="tab:gray", linestyle=":", label=f"median {median:.0f}")
    ax.set_xlabel("DataUsage: times a node's data was used as a neighbour")
    ax.set_ylabel("nodes")
    mae = "no query done" if knn.get("mae") is None else f"MAE {knn['mae']:.4f}"
    ax.set_title(
        f"KNN {knn['strategy']} (k {knn['k']}): {mae} over {knn['done']} of {knn['queries']} queries\n{size}",
        fontsize=10,
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)


#: one colour per attribute, the same in every figure (004's three first)
ATTRIBUTE_COLOURS = {"gender": "C0", "age": "C1", "occupation": "C2"}


def attribute_colour(name: str, others: list[str]) -> str:
    """An attribute's colour: fixed for 004's attributes, then the next free ones in order."""
    if name in ATTRIBUTE_COLOURS:
        return ATTRIBUTE_COLOURS[name]
    return f"C{(3 + others.index(name)) % 10}" if name in others else "C9"


def draw_inference(ax: Any, evaluated: Sequence[Mapping[str, Any]], size: str) -> None:
    """Attribute inference per round, one colour per attribute: the omniscient observer's score
    (solid, the bound), the placed observers' mean with their spread (dashed, the band from the
    lowest to the highest of them) and the majority class (dotted). At most three legend entries
    an attribute, whatever the number of observers (it used to be two per observer and
    attribute: 36 entries for 12 colluding groups, over the title)."""
    from matplotlib.ticker import MaxNLocator

    def score_of(score: Mapping[str, Any]) -> tuple[str, float, float]:
        key = "auc" if "auc" in score else "micro_f1"
        return key, 100 * float(score[key]), 100 * float(score["majority"].get(key, float("nan")))

    attributes: list[str] = []
    placed: set[str] = set()
    omniscient: set[str] = set()
    for h in evaluated:
        for observer, scores in h["aia"].items():
            if observer.startswith("omniscient"):  # a launch's are "omniscient (process K)"
                omniscient.add(observer)
            else:
                placed.add(observer)
            for name in scores.get("attributes", {}):
                if name not in attributes:
                    attributes.append(name)
    others = [a for a in attributes if a not in ATTRIBUTE_COLOURS]
    for name in attributes:
        colour = attribute_colour(name, others)
        bound, spread, majority = [], [], []
        label = "AUC"
        for h in evaluated:
            rows = h["aia"]
            got = [
                (o, score_of(r["attributes"][name]))
                for o, r in rows.items()
                if name in r.get("attributes", {})
            ]
            if not got:
                continue
            rnd = int(next((r["round"] for r in rows.values() if "round" in r), h["round"]))
            label = "AUC" if got[0][1][0] == "auc" else "micro-F1"
            omni = [v for o, v in got if o.startswith("omniscient")]
            if omni:  # several: each process's own nodes (p2plab/merge.py), drawn as their mean
                bound.append((rnd, sum(v[1] for v in omni) / len(omni)))
            scores = [v[1] for o, v in got if not o.startswith("omniscient")]
            if scores:
                spread.append((rnd, sum(scores) / len(scores), min(scores), max(scores)))
            majority.append((rnd, (omni[0] if omni else got[0][1])[2]))
        if bound:
            ax.plot(*zip(*bound, strict=True), "o-", ms=3, color=colour, label=f"{name} {label}, omniscient")
        if spread:
            xs = [p[0] for p in spread]
            ax.plot(
                xs, [p[1] for p in spread], "s--", ms=3, color=colour, label=f"{name} {label}, placed (mean)"
            )
            if len(placed) > 1:
                ax.fill_between(xs, [p[2] for p in spread], [p[3] for p in spread], color=colour, alpha=0.15)
        if majority:
            ax.plot(*zip(*majority, strict=True), ":", color=colour, label=f"{name} majority class")
    ax.set_xlabel("round")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # no round 2.5
    evaluated_rounds = sorted({int(h["round"]) for h in evaluated})
    if len(evaluated_rounds) <= 10:  # few evaluations (one, often): ticks at them, not at 3.85
        ax.set_xticks(evaluated_rounds)
    ax.set_ylabel("%")
    ax.set_ylim(0, 100)
    who = f": {len(placed)} placed observers' mean" + (" and range" if len(placed) > 1 else "")
    if len(omniscient) > 1:  # each process's omniscient observer read its own nodes only
        who += f"{',' if placed else ':'} omniscient: mean of {len(omniscient)} processes' (own nodes each)"
    ax.set_title(
        f"Attribute inference (004) per round{who if placed or len(omniscient) > 1 else ''}\n{size}",
        fontsize=10,
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=max(1, len(attributes)), loc="upper center", bbox_to_anchor=(0.5, -0.17))
