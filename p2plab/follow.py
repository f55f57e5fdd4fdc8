"""``p2pnode metrics URL... [--follow]``: a compact live table of node metrics endpoints."""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Callable

from prometheus_client.parser import text_string_to_metric_families

COLUMNS = ("nodes", "round", "hit", "sent", "recv", "MB out", "merges", "rejected")


def scrape(url: str, timeout: float = 3.0) -> dict[str, float]:
    """Sum a ``/metrics`` page over its nodes (round: max, hit ratio: mean)."""
    if not url.startswith("http"):
        url = "http://" + url
    if not url.rstrip("/").endswith("/metrics"):
        url = url.rstrip("/") + "/metrics"
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        text = resp.read().decode()
    row = dict.fromkeys(COLUMNS, 0.0)
    hits: list[float] = []
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
    row["hit"] = sum(hits) / len(hits) if hits else float("nan")
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
            cells.append(f"{v:8.3f}" if c == "hit" else f"{v:8.1f}" if c == "MB out" else f"{v:8.0f}")
        lines.append(f"{url:<{width}}  " + "  ".join(cells))
    return "\n".join(lines)


def follow(urls: list[str], interval: float, once: bool, out: Callable[[str], None], count: int = 0) -> int:
    """Print the table once, or every ``interval`` seconds (``count`` times, 0 = forever)."""
    n = 0
    while True:
        rows: dict[str, dict[str, float] | str] = {}
        for url in urls:
            try:
                rows[url] = scrape(url)
            except (urllib.error.URLError, OSError, ValueError) as exc:
                rows[url] = f"unreachable: {exc}"
        out(render(rows))
        n += 1
        if once or (count and n >= count):
            return 0 if all(not isinstance(r, str) for r in rows.values()) else 1
        time.sleep(interval)
