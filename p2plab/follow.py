"""``p2pnode metrics URL... [--follow]``: a compact live table of node metrics endpoints.

One row per endpoint (a process), summed over its nodes. On a terminal ``--follow`` redraws the
table in place under a timestamp; piped, it prints one table per refresh. Endpoints that are not
up yet say so; once every endpoint that was seen has been gone for three refreshes the follow
ends by itself.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Callable

from prometheus_client.parser import text_string_to_metric_families

COLUMNS = ("nodes", "round", "HR", "CIA", "KNN q", "usage", "sent", "recv", "MB out", "merges", "rejected")
#: the columns that are "-" where the run has no such part (no attack, no --knn)
OPTIONAL = ("HR", "CIA", "KNN q", "usage")
LEGEND = (
    "HR: share of the nodes whose held-out item ranked in their top K at the last evaluation; "
    "CIA: mean accuracy of the adversaries' community inference (- without attackers); "
    "KNN q: KNN queries done, usage: mean DataUsage, times a node's rating was used (- without --knn); "
    "sent/recv: models; rejected: frames refused (see p2pnode_rejected_messages_total)"
)
GONE_AFTER = 3  #: refreshes with every seen endpoint unreachable before the follow ends
CLEAR = "\x1b[H\x1b[J"  #: cursor home, clear to the end of the screen


def scrape(url: str, timeout: float = 3.0) -> dict[str, float]:
    """Sum a ``/metrics`` page over its nodes (round: max, hit ratio: mean)."""
    if not url.startswith("http"):
        url = "http://" + url
    if not url.rstrip("/").endswith("/metrics"):
        url = url.rstrip("/") + "/metrics"
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return summarize(resp.read().decode())


def summarize(text: str) -> dict[str, float]:
    """One table row from a ``/metrics`` page's text (NaN: a column the run has no part for)."""
    row = dict.fromkeys(COLUMNS, 0.0)
    hits: list[float] = []
    cia: list[float] = []
    knn: dict[str, list[float]] = {"queries": [], "data_usage": []}
    nodes: set[str] = set()
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            node = s.labels.get("node")
            if node is not None and node != "none":
                nodes.add(node)
            match s.name:
                case "p2pnode_round":
                    row["round"] = max(row["round"], s.value)
                case "p2pnode_hit_ratio":
                    hits.append(s.value)
                case "p2pnode_cia_accuracy":
                    cia.append(s.value)
                case "p2pnode_knn" if s.labels.get("figure") in knn:
                    knn[s.labels["figure"]].append(s.value)
                case "p2pnode_models_sent_total":
                    row["sent"] += s.value
                case "p2pnode_models_received_total":
                    row["recv"] += s.value
                case "p2pnode_bytes_sent_total":
                    row["MB out"] += s.value / 1e6
                case "p2pnode_merges_total":
                    row["merges"] += s.value
                case "p2pnode_rejected_messages_total":
                    row["rejected"] += s.value
    row["nodes"] = float(len(nodes))
    row["HR"] = sum(hits) / len(hits) if hits else float("nan")
    row["CIA"] = sum(cia) / len(cia) if cia else float("nan")
    row["KNN q"] = sum(knn["queries"]) if knn["queries"] else float("nan")
    usage = knn["data_usage"]
    row["usage"] = sum(usage) / len(usage) if usage else float("nan")
    return row


def render(rows: dict[str, dict[str, float] | str]) -> str:
    width = max(len(u) for u in rows) if rows else 10
    head = f"{'endpoint':<{width}}  " + "  ".join(f"{c:>8}" for c in COLUMNS)
    lines = [head]
    for url, row in rows.items():
        if isinstance(row, str):
            lines.append(f"{url:<{width}}  {row}")
            continue
        cells = []
        for c in COLUMNS:
            v = row[c]
            if c in OPTIONAL and v != v:  # NaN: nothing to show
                cells.append(f"{'-':>8}")
            elif c in ("HR", "CIA"):
                cells.append(f"{v:8.3f}")
            else:
                cells.append(f"{v:8.1f}" if c == "MB out" else f"{v:8.0f}")
        lines.append(f"{url:<{width}}  " + "  ".join(cells))
    return "\n".join(lines)


def follow(
    urls: list[str],
    interval: float,
    once: bool,
    out: Callable[[str], None],
    count: int = 0,
    redraw: bool = False,
) -> int:
    """Print the table once, or every ``interval`` seconds (``count`` times, 0 = until every
    endpoint seen is gone); ``redraw``: clear the screen before each table (a terminal)."""
    n = 0
    seen: set[str] = set()
    gone_for = 0
    while True:
        rows: dict[str, dict[str, float] | str] = {}
        for url in urls:
            try:
                rows[url] = scrape(url)
                seen.add(url)
            except (urllib.error.URLError, OSError, ValueError) as exc:
                reason = getattr(exc, "reason", exc)
                rows[url] = f"{'gone' if url in seen else 'not up yet'} ({reason})"
        stamp = time.strftime("%H:%M:%S")
        table = f"{stamp}  refresh {n + 1}\n{render(rows)}" if not once else render(rows)
        if n == 0 and not once:
            table = f"{LEGEND}\n{table}"
        out((CLEAR if redraw else "") + table)
        n += 1
        if once or (count and n >= count):
            return 0 if all(not isinstance(r, str) for r in rows.values()) else 1
        reachable = [u for u in urls if not isinstance(rows[u], str)]
        gone_for = gone_for + 1 if seen and not reachable else 0
        if gone_for >= GONE_AFTER:
            out("every endpoint has stopped answering: the run is over")
            return 0
        time.sleep(interval)
