"""What a user reads (the packages' docstrings, comments and --help, README, docs, THREAT_MODEL.md)
says what and why in its own words: it never points at an internal issue number, which a user has
no tracker to look up."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("p2pnode", "p2pcore", "p2plab", "learning", "adversary", "protocols", "peer_sampling")
DOCS = ("README.md", "THREAT_MODEL.md", "docs")
CITATION = re.compile(r"\bissues? #\d+|(?<![\w&/#-])#\d{1,3}\b", re.IGNORECASE)  # "issue #61", "(#32)"


def _files() -> list[Path]:
    out = [p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))]
    for name in DOCS:
        path = ROOT / name
        out.extend(sorted(path.rglob("*.md")) if path.is_dir() else [path])
    return out


def test_the_pattern_finds_a_citation() -> None:
    """The check can fail: the forms the old texts used are caught, a plain '#' is not."""
    cited = ("(issue #61)", "since issue #33's stop", "Issues #18 and #31", "(#32's target", "of #4 rank")
    for text in cited:
        assert CITATION.search(text), text
    plain = ("`#` comments", "x = 1  # 3 nodes", "#!/usr/bin/env", "the issue of trust", "&#39;", "page#12")
    for text in plain:
        assert not CITATION.search(text), text


def test_no_issue_numbers_in_packages_or_docs() -> None:
    files = _files()
    assert len(files) > 100  # the walk found the packages, not an empty folder
    hits = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()[:100]}"
        for path in files
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if CITATION.search(line)
    ]
    assert not hits, "internal issue numbers cited:\n" + "\n".join(hits)
