"""``p2pnode experiment reuseknn``: paper 003's evaluation on explicit ratings (its Tables 4-6 and
Figures), with 5-fold cross-validation for k = 5..30 (learning/reuseknn.py does the work).

Per fold: the training ratings fitted once; per k, UserKNN's DataUsage gives τ (the code's rule
by default, 003 §5.5); then every method answers the fold's test queries in their shuffled order:
without DP UserKNN, UserKNN+Reuse, Expect, Gain (Table 4: the share of users used more than τ
times); with DP UserKNN_DP, UserKNN+Reuse_DP, Expect_DP, Gain_DP (randomized response past τ) and
UserKNN_DP^full (τ = 0) (Tables 5 and 6: PP-Corr, Coverage, MAE, PrivacyRisk). A method is marked
``**`` where a one-tailed Mann-Whitney U test (scipy) finds it lower than UserKNN_DP at α = 0.01 in
every fold, as 003 marks its tables. The paper's ML-1M numbers stand beside ours as the reference
on another data set (003's data sets are not reachable offline; ML-100k has the same 1-5 stars).
"""

from __future__ import annotations

import csv
import io
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from learning import reuseknn as rk
from p2plab.figures import save_figure
from p2pnode.config import ConfigError
from p2pnode.data.atomic import write_text

#: (label, strategy, DP: None off, "tau" past τ, "full" always)
METHODS: tuple[tuple[str, str, str | None], ...] = (
    ("UserKNN", "userknn", None),
    ("UserKNN+Reuse", "reuse", None),
    ("Expect", "expect", None),
    ("Gain", "gain", None),
    ("UserKNN_DP", "userknn", "tau"),
    ("UserKNN_DP^full", "userknn", "full"),
    ("UserKNN+Reuse_DP", "reuse", "tau"),
    ("Expect_DP", "expect", "tau"),
    ("Gain_DP", "gain", "tau"),
)
#: one colour per neighbour choice, the same in every figure and panel (with DP or without);
#: UserKNN with DP on every answer (``^full``) its own
STRATEGY_COLOURS = {"userknn": "C0", "reuse": "C1", "expect": "C2", "gain": "C3"}


def method_colour(label: str) -> str | None:
    """A method's colour by its neighbour choice (``Expect`` and ``Expect_DP`` alike)."""
    for name, strategy, how in METHODS:
        if name == label:
            return "C4" if how == "full" else STRATEGY_COLOURS[strategy]
    return None


#: 003's ML-1M numbers at k = 10 (Tables 4-6), the reference on another data set
PAPER_ML1M: dict[str, dict[str, float]] = {
    "UserKNN": {
        "vulnerable": 80.39,
        "mae": 0.80,
        "privacy_risk": 330.77,
        "pp_corr": 0.8405,
        "coverage": 87.94,
    },
    "UserKNN+Reuse": {"vulnerable": 84.64},
    "Expect": {"vulnerable": 24.13},
    "Gain": {"vulnerable": 25.09},
    "UserKNN_DP": {"mae": 0.82, "privacy_risk": 84.39, "pp_corr": 0.8742, "coverage": 88.77},
    "UserKNN_DP^full": {"mae": 0.83, "privacy_risk": 0.0, "pp_corr": 0.8800, "coverage": 89.53},
    "UserKNN+Reuse_DP": {"mae": 0.81, "privacy_risk": 87.16, "pp_corr": 0.8750, "coverage": 88.37},
    "Expect_DP": {"mae": 0.80, "privacy_risk": 31.03, "pp_corr": 0.8688, "coverage": 88.83},
    "Gain_DP": {"mae": 0.79, "privacy_risk": 35.30, "pp_corr": 0.8725, "coverage": 88.07},
}


@dataclass(frozen=True)
class ReuseSpec:
    """The ``[reuseknn]`` table of an experiment file."""

    dataset: str = "ml-100k"  #: ml-100k, or a ratings file (user, item, rating[, time])
    ks: tuple[int, ...] = (5, 10, 15, 20, 25, 30)
    folds: int = 5
    seed: int = 42
    tau: str = "code"  #: τ's rule: code (the authors') or prose (003 §5.5 as written)
    q_max: int = 100  #: Neighbors@q and CoRatings@q for q = 1..q_max
    report_k: int = 10  #: the k of Tables 4-6
    alpha: float = 0.01

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any], source: str) -> ReuseSpec:
        unknown = set(raw) - set(cls.__dataclass_fields__)
        if unknown:
            raise ConfigError(f"{source}: unknown [reuseknn] keys {sorted(unknown)}")
        try:
            spec = cls(
                dataset=str(raw.get("dataset", cls.dataset)),
                ks=tuple(int(k) for k in raw.get("ks", cls.ks)),
                folds=int(raw.get("folds", cls.folds)),
                seed=int(raw.get("seed", cls.seed)),
                tau=str(raw.get("tau", cls.tau)),
                q_max=int(raw.get("q_max", cls.q_max)),
                report_k=int(raw.get("report_k", cls.report_k)),
                alpha=float(raw.get("alpha", cls.alpha)),
            )
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{source}: malformed [reuseknn] ({exc})") from None
        if spec.folds < 2 or not spec.ks or min(spec.ks) < 1 or spec.report_k not in spec.ks:
            raise ConfigError(f"{source}: [reuseknn] needs folds >= 2, ks >= 1 and report_k among ks")
        if spec.tau not in ("code", "prose"):
            raise ConfigError(f"{source}: [reuseknn] tau must be code or prose")
        return spec


def load_ratings(dataset: str) -> rk.Ratings:
    """Explicit ratings of ML-100k or a user's file (its ``rating`` column kept)."""
    from p2pnode.data.datasets import load_ml100k, load_table

    data = load_ml100k() if dataset == "ml-100k" else load_table(dataset, min_interactions=1)
    if data.ratings is None:
        raise ConfigError(f"{dataset}: no rating column (ReuseKNN predicts explicit ratings)")
    return rk.Ratings.of(data.users, data.items, data.ratings, data.n_users, data.n_items)


def run_fold(
    data: rk.Ratings, train: rk.IntArray, test: rk.IntArray, spec: ReuseSpec, fold: int
) -> dict[str, Any]:
    """Every method at every k on one fold: the figures and the per-user / per-query samples the
    significance tests need (at ``report_k``)."""
    nb = rk.Neighbourhoods.fit(data.subset(train))
    rankings = {s: nb.ranking(s) for s in rk.STRATEGIES}
    users, items, truth = data.users[test], data.items[test], data.values[test]
    popularity = np.bincount(data.items[train], minlength=data.n_items) / data.n_users
    out: dict[str, Any] = {"fold": fold, "by_k": {}}
    for k in spec.ks:
        seed = [spec.seed, fold, k]
        base = rk.answer(nb, "userknn", k, (users, items), math.inf, False, _rng(seed, 0), spec.q_max,
                         rankings["userknn"])  # fmt: skip
        tau = rk.tau_from_usage(base.data_usage, spec.tau)
        figures: dict[str, Any] = {"tau": tau}
        samples: dict[str, Any] = {}
        for m, (label, strategy, dp) in enumerate(METHODS):
            if label == "UserKNN":
                run = base
            else:
                cut = 0.0 if dp == "full" else tau
                run = rk.answer(nb, strategy, k, (users, items), cut, dp is not None, _rng(seed, m),
                                spec.q_max, rankings[strategy])  # fmt: skip
            top = rk.top_items(users, items, run.estimates)
            errors = np.abs(truth - run.estimates)
            risk = run.privacy_risk
            figures[label] = {
                "mae": float(errors.mean()),
                "vulnerable": 100 * rk.vulnerable_share(run.data_usage, tau),
                "data_usage": float(np.median(run.data_usage)),
                "privacy_risk": float(risk.mean()),
                "epsilon_median": _finite_median(rk.epsilon(run.data_usage, risk)),
                "pp_corr": rk.pp_corr(top, popularity),
                "coverage": 100 * rk.coverage(top, data.n_items),
                "ndcg10": rk.ndcg_at(users, items, truth, run.estimates, nb.mean),
            }
            if k == spec.report_k:
                samples[label] = {
                    "errors": errors,
                    "privacy_risk": risk,
                    "data_usage": run.data_usage,
                    "neighbours_q": _mean_at_q(run.neighbours_at_q, spec.q_max),
                    "coratings_q": _mean_at_q(run.coratings_at_q, spec.q_max),
                }
        out["by_k"][k] = figures
        if samples:
            out["samples"] = samples
    return out


def _rng(seed: Sequence[int], method: int) -> np.random.Generator:
    return np.random.default_rng([*seed, method])


def _finite_median(values: rk.FloatArray) -> float | None:
    kept = values[np.isfinite(values) & (values > 0)]
    return float(np.median(kept)) if kept.size else None


def _mean_at_q(per_user: Mapping[int, Sequence[float]], q_max: int) -> list[float]:
    """The mean over the users who asked at least q queries, for q = 1..q_max."""
    out = []
    for q in range(q_max):
        at = [v[q] for v in per_user.values() if len(v) > q]
        if not at:
            break
        out.append(float(np.mean(at)))
    return out


def lower_in_every_fold(
    samples: Sequence[Mapping[str, Any]], label: str, than: str, key: str, alpha: float
) -> bool:
    """A one-tailed Mann-Whitney U test per fold (scipy): ``label``'s ``key`` lower than ``than``'s
    at ``alpha`` in every fold (003's ** marks)."""
    from scipy.stats import mannwhitneyu

    for fold in samples:
        x, y = fold[label][key], fold[than][key]
        if np.array_equal(x, y) or mannwhitneyu(x, y, alternative="less").pvalue >= alpha:
            return False
    return True


def run_reuseknn(
    title: str,
    spec: ReuseSpec,
    out: Path,
    command: str,
    notes: str = "",
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run the experiment and write results.json, results.csv, report.md and the figures."""
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    data = load_ratings(spec.dataset)
    parts = rk.folds(len(data), spec.folds, spec.seed)
    folds = []
    for f, (train, test) in enumerate(parts):
        started = time.perf_counter()
        folds.append(run_fold(data, train, test, spec, f))
        if progress is not None:
            progress(f"fold {f + 1}/{spec.folds}: {time.perf_counter() - started:.0f} s")
    means = {
        k: {
            label: {
                key: _mean([fold["by_k"][k][label][key] for fold in folds])
                for key in folds[0]["by_k"][k][label]
            }
            for label, _, _ in METHODS
        }
        for k in spec.ks
    }
    taus = {k: _mean([fold["by_k"][k]["tau"] for fold in folds]) for k in spec.ks}
    samples = [fold["samples"] for fold in folds]
    marks = {
        label: {
            key: lower_in_every_fold(samples, label, "UserKNN_DP", sample, spec.alpha)
            for key, sample in (("mae", "errors"), ("privacy_risk", "privacy_risk"))
        }
        for label, _, dp in METHODS
        if dp == "tau" and label != "UserKNN_DP"
    }
    curves = {
        label: {
            what: list(np.mean([s[label][what][: _shortest(samples, label, what)] for s in samples], axis=0))
            for what in ("neighbours_q", "coratings_q")
        }
        for label, _, dp in METHODS
        if dp is None
    }
    seconds = time.perf_counter() - t0
    doc = {
        "experiment": "reuseknn",
        "title": title,
        "mode": "compute",
        "spec": asdict(spec),
        "command": command,
        "seconds": seconds,
        "users": data.n_users,
        "items": data.n_items,
        "ratings": len(data),
        "tau": taus,
        "means": means,
        "significantly_lower_than_userknn_dp": marks,
        "curves_at_report_k": curves,
        "paper_ml1m": PAPER_ML1M,
    }
    write_text(out / "results.json", json.dumps(doc, indent=1, default=_json))
    write_text(out / "results.csv", _csv(means, spec))
    figures = _plots(out, spec, means, curves, samples)
    write_text(out / "report.md", _report(title, spec, doc, figures, notes))
    return doc


def _mean(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return float(np.mean(kept)) if kept else None


def _shortest(samples: Sequence[Mapping[str, Any]], label: str, what: str) -> int:
    return min(len(s[label][what]) for s in samples)


def _json(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON: {type(value).__name__}")


def _csv(means: Mapping[int, Mapping[str, Mapping[str, float | None]]], spec: ReuseSpec) -> str:
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    keys = (
        "mae",
        "vulnerable",
        "data_usage",
        "privacy_risk",
        "epsilon_median",
        "pp_corr",
        "coverage",
        "ndcg10",
    )
    w.writerow(["k", "method", *keys])
    for k in spec.ks:
        for label, _, _ in METHODS:
            w.writerow([k, label, *(means[k][label].get(key) for key in keys)])
    return buf.getvalue()


def _fmt(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _report(title: str, spec: ReuseSpec, doc: Mapping[str, Any], figures: Sequence[str], notes: str) -> str:
    k = spec.report_k
    m = doc["means"][k]
    marks = doc["significantly_lower_than_userknn_dp"]
    paper = PAPER_ML1M

    def star(label: str, key: str) -> str:
        """003's ``**`` after a value, escaped: bare, Markdown reads it as an unclosed bold."""
        return "\\*\\*" if marks.get(label, {}).get(key) else ""

    lines = [
        f"# {title}",
        "",
        f"{doc['ratings']:,} ratings of {doc['users']:,} users on {doc['items']:,} items ({spec.dataset}), "
        f"{spec.folds}-fold cross-validation (seed {spec.seed}), k = {', '.join(map(str, spec.ks))}; "
        f"τ by the {spec.tau} rule from UserKNN's DataUsage: {_fmt(doc['tau'][k], 1)} at k = {k} (003's "
        "ML-1M: 92.89). Means over the folds. 003 ran ML-1M and four other data sets; its ML-1M "
        "numbers stand beside ours as the reference on another data set.",
        "",
        f"## Table 4: users used more than τ times (vulnerable), k = {k}",
        "",
        "| method | vulnerable %: 003 ML-1M | ours | DataUsage (median) | Neighbors@100 | CoRatings@100 |",
        "|---|---|---|---|---|---|",
    ]
    for label in ("UserKNN", "UserKNN+Reuse", "Expect", "Gain"):
        curve = doc["curves_at_report_k"][label]
        last_n = curve["neighbours_q"][-1] if curve["neighbours_q"] else None
        last_co = curve["coratings_q"][-1] if curve["coratings_q"] else None
        lines.append(
            f"| {label} | {_fmt(paper[label].get('vulnerable'))} | {_fmt(m[label]['vulnerable'])} | "
            f"{_fmt(m[label]['data_usage'], 1)} | {_fmt(last_n, 1)} | {_fmt(last_co, 1)} |"
        )
    lines += [
        "",
        f"## Table 5: popularity bias of the top-10 items, k = {k}",
        "",
        "| method | PP-Corr: 003 ML-1M | ours | Coverage %: 003 ML-1M | ours | nDCG@10 |",
        "|---|---|---|---|---|---|",
    ]
    dp_rows = ("UserKNN", "UserKNN_DP", "UserKNN_DP^full", "UserKNN+Reuse_DP", "Expect_DP", "Gain_DP")
    for label in dp_rows:
        row = m[label]
        lines.append(
            f"| {label} | {_fmt(paper[label].get('pp_corr'), 4)} | {_fmt(row['pp_corr'], 4)} | "
            f"{_fmt(paper[label].get('coverage'))} | {_fmt(row['coverage'])} | {_fmt(row['ndcg10'], 4)} |"
        )
    lines += [
        "",
        f"## Table 6: accuracy against privacy risk, k = {k}",
        "",
        f"`**` after a value: lower than UserKNN_DP by a one-tailed Mann-Whitney U test at "
        f"α = {spec.alpha:g} in every fold (MAE over the queries' absolute errors, privacy risk "
        "over the users).",
        "",
        "| method | MAE: 003 ML-1M | ours | privacy risk: 003 ML-1M | ours | median ε of the users used |",
        "|---|---|---|---|---|---|",
    ]
    for label in dp_rows:
        row = m[label]
        lines.append(
            f"| {label} | {_fmt(paper[label].get('mae'))} | {_fmt(row['mae'], 3)}{star(label, 'mae')} | "
            f"{_fmt(paper[label].get('privacy_risk'))} | {_fmt(row['privacy_risk'])}"
            f"{star(label, 'privacy_risk')} | {_fmt(row['epsilon_median'], 2)} |"
        )
    lines += [
        "",
        "MAE@k for every k is in results.csv and the first figure. Every method uses k neighbours a "
        "query, so the mean DataUsage is the same for all; its spread is what differs (the median "
        "in Table 4, the distributions in the second figure). UserKNN's privacy risk is its mean "
        "DataUsage (no DP: every use of its ratings is real); ε is eq. 26 (ln 3 for a user whose every "
        "use went through randomized response, ∞ for one used without it; the column leaves both ends out).",
        "",
        "Command:",
        "",
        "```",
        doc["command"],
        "```",
        "",
        f"{doc['seconds']:.0f} s.",
        "",
        notes.strip(),
        "",
        *(f"![{name}]({name})" for name in figures),
        "",
    ]
    return "\n".join(lines)


def _plots(
    out: Path,
    spec: ReuseSpec,
    means: Mapping[int, Mapping[str, Mapping[str, float | None]]],
    curves: Mapping[str, Mapping[str, Sequence[float]]],
    samples: Sequence[Mapping[str, Any]],
) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, dp in zip(axes, (False, True), strict=True):
        for label, _, how in METHODS:
            if (how is not None) == dp:
                ax.plot(
                    spec.ks,
                    [means[k][label]["mae"] for k in spec.ks],
                    "o-",
                    ms=3,
                    label=label,
                    color=method_colour(label),
                )
        ax.set_xlabel("k (neighbours)")
        ax.set_xticks(spec.ks)  # the k run, not 9.6 and 9.8
        ax.set_ylabel("MAE")
        ax.set_title("with DP past τ" if dp else "without DP", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"MAE@k ({spec.dataset}, {spec.folds} folds)", fontsize=11)
    written.append(save_figure(fig, out / "mae_k.png"))
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for label in ("UserKNN", "UserKNN+Reuse", "Expect", "Gain"):
        usage = np.concatenate([s[label]["data_usage"] for s in samples])
        ax.hist(usage, bins=40, histtype="step", label=label, color=method_colour(label))
    ax.set_xlabel(f"DataUsage@{spec.report_k} (queries a user was a neighbour for)")
    ax.set_ylabel("users (all folds)")
    ax.set_title(f"DataUsage distributions, k = {spec.report_k}", fontsize=10)
    ax.legend(fontsize=8)
    written.append(save_figure(fig, out / "data_usage.png"))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, what, name in zip(
        axes, ("neighbours_q", "coratings_q"), ("Neighbors@q", "CoRatings@q"), strict=True
    ):
        for label, series in curves.items():
            ax.plot(range(1, len(series[what]) + 1), series[what], label=label, color=method_colour(label))
        ax.set_xlabel("q (the target user's queries so far)")
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Neighbourhoods over the queries, k = {spec.report_k}", fontsize=11)
    written.append(save_figure(fig, out / "neighbours_q.png"))
    return written
