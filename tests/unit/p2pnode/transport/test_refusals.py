"""Every refusal reason is in one table, THREAT_MODEL.md prints it, and each refusal is counted once."""

from __future__ import annotations

import re
from pathlib import Path

from p2pnode.telemetry.metrics import Metrics
from p2pnode.transport.refusals import REASONS, Refusals, markdown_table
from p2pnode.wire.schema import DECODE_REASONS

ROOT = Path(__file__).resolve().parents[4]
_GIVEN = re.compile(
    r"""(?:WireError|Verdict|Judgement|Outcome)\(\s*(?:(\d{3}),\s*)?"([a-z][a-z-]*)"(?:,[^)]*?(\d{3})\))?"""
    r"""|(?:Dropped\(|body_failed\(\w+, )"([a-z][a-z-]*)"\)|(?:return|else) "([a-z]+-[a-z-]+)"$"""
    r"""|refusals\.count\([^,()]+, "([a-z][a-z-]*)"\)""",
    re.MULTILINE,
)
#: reasons the code gives that are not a refusal of a peer's request: a sender's own outcomes
_NOT_REFUSALS = {"bad-batch-answer"}


def _given() -> dict[str, set[int]]:
    """Every reason the code gives, with the statuses given beside it where they are literal."""
    found: dict[str, set[int]] = {}
    for package in ("p2pnode", "protocols", "adversary", "peer_sampling"):
        for path in (ROOT / package).rglob("*.py"):
            for m in _GIVEN.finditer(path.read_text()):
                reason = m.group(2) or m.group(4) or m.group(5) or m.group(6)
                status = m.group(1) or m.group(3)
                found.setdefault(reason, set())
                if status:
                    found[reason].add(int(status))
    return found


def test_every_reason_the_code_gives_is_in_the_table_with_its_status() -> None:
    given = _given()
    assert {"bad-mac", "not-holder", "busy", "too-far", "not-neighbour", "no-base", "buffer-full"} <= set(
        given
    )
    unknown = set(given) - set(REASONS) - _NOT_REFUSALS
    assert not unknown, f"reasons given but not in p2pnode.transport.refusals.REASONS: {sorted(unknown)}"
    for reason, statuses in given.items():
        if reason in REASONS and statuses:
            assert statuses == {REASONS[reason].status}, (reason, statuses)
    never = set(REASONS) - set(given)
    assert not never, f"reasons in the table the code never gives: {sorted(never)}"
    assert set(REASONS) >= DECODE_REASONS


def test_threat_model_prints_the_table() -> None:
    assert markdown_table() in (ROOT / "THREAT_MODEL.md").read_text()


def test_a_refusal_is_counted_once_per_node_and_in_the_metric() -> None:
    metrics = Metrics()
    refusals = Refusals(metrics)

    class Node:
        def __init__(self) -> None:
            self.node_id = 4
            self.rejected: dict[str, int] = {}

    node = Node()
    refusals.count(node, "too-far")
    refusals.for_node(node)("buffer-full")
    refusals.count(None, "unknown-node")
    assert node.rejected == {"too-far": 1, "buffer-full": 1}

    def value(label: str, reason: str) -> float | None:
        return metrics.registry.get_sample_value(
            "p2pnode_rejected_messages_total", {"node": label, "reason": reason}
        )

    assert (
        value("4", "too-far") == 1 and value("4", "buffer-full") == 1 and value("none", "unknown-node") == 1
    )


def test_the_readme_table_names_every_reason_a_user_can_meet() -> None:
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("| reason | status | what happened |") :]
    table = table[: table.index("\n\n")]
    missing = [name for name, reason in REASONS.items() if reason.counted and f"`{name}`" not in table]
    assert not missing, missing
