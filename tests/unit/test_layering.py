"""DESIGN §2 rule 1: the pure packages import no I/O, no clock and no global randomness."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PURE = ("p2pcore", "peer_sampling", "protocols", "adversary")
FORBIDDEN = {"asyncio", "aiohttp", "socket", "time", "torch", "selectors", "threading"}


def test_fresh_interpreter_loads_no_io_modules() -> None:
    code = (
        "import sys, json\n"
        "import p2pcore.effects, peer_sampling.base, peer_sampling.peerswap, peer_sampling.cyclon, "
        "peer_sampling.graph, peer_sampling.personalized, protocols.base_gl, protocols.samo, "
        "protocols.gossip, protocols.fedavg, protocols.merging\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout))
    assert not (FORBIDDEN - {"time"}) & loaded
    assert not any(m.startswith(("aiohttp", "asyncio", "torch")) for m in loaded)


def test_pure_sources_import_nothing_forbidden_and_use_seeded_random_only() -> None:
    for pkg in PURE:
        for path in (ROOT / pkg).rglob("*.py"):
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names = {a.name.split(".")[0] for a in node.names}
                elif isinstance(node, ast.ImportFrom):
                    names = {(node.module or "").split(".")[0]}
                    if node.module == "random":
                        assert {a.name for a in node.names} <= {"Random"}, path
                else:
                    names = set()
                assert not names & FORBIDDEN, f"{path} imports {names & FORBIDDEN}"
                if (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Name)
                    and node.value.id == "random"
                ):
                    assert node.attr == "Random", f"{path}: random.{node.attr} is global state"
