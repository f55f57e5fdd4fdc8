"""docs/design.md, rule 1: the pure packages import no I/O, no clock and no global randomness."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

from learning import TORCH_MODULES

ROOT = Path(__file__).resolve().parents[2]
PURE = ("p2pcore", "peer_sampling", "protocols", "adversary")
FORBIDDEN = {"asyncio", "aiohttp", "socket", "time", "torch", "selectors", "threading"}


NUMPY_LEARNING = (
    "learning.params, learning.gmf, learning.prme, learning.interactions, learning.split, "
    "learning.negatives, learning.metrics, learning.synthetic"
)


def test_fresh_interpreter_loads_no_io_modules() -> None:
    """The pure packages, and the numpy half of learning they build on, load no I/O and no torch."""
    code = (
        "import sys, json\n"
        "import p2pcore.effects, peer_sampling.base, peer_sampling.peerswap, peer_sampling.cyclon, "
        "peer_sampling.graph, peer_sampling.personalized, protocols.base_gl, protocols.samo, "
        "protocols.gossip, protocols.fedavg, protocols.merging, adversary.plan, adversary.evaluation, "
        "adversary.cia, adversary.node, adversary.mia, adversary.momentum, adversary.models, "
        f"{NUMPY_LEARNING}\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    loaded = set(json.loads(out.stdout))
    assert not (FORBIDDEN - {"time"}) & loaded
    assert not any(m.startswith(("aiohttp", "asyncio", "torch", "opacus")) for m in loaded)


def test_learning_imports_torch_only_where_it_says() -> None:
    """learning/__init__.py names the modules that import torch; no other one does."""
    for path in (ROOT / "learning").glob("*.py"):
        name = f"learning.{path.stem}"
        tree = ast.parse(path.read_text())
        imports = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                imports |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                imports.add((node.module or "").split(".")[0])
        uses_torch = bool(imports & {"torch", "opacus"})
        assert uses_torch == (name in TORCH_MODULES), f"{name}: torch import does not match TORCH_MODULES"


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


PROJECT = ("p2pcore", "p2pnode", "p2plab", "peer_sampling", "protocols", "adversary", "learning")
#: who may import whom: the lab sits on the daemon, the daemon on the pure packages
LAYERS = {
    "p2pcore": 0,
    "learning": 0,
    "peer_sampling": 1,
    "protocols": 2,
    "adversary": 3,
    "p2pnode": 4,
    "p2plab": 5,
}


def _import_graph() -> dict[str, set[str]]:
    """Every project module and the project modules it imports anywhere in its source (top level,
    inside functions, or under ``if TYPE_CHECKING``). ``from pkg import sub`` is an edge to the
    module ``pkg.sub``; a package's ``__init__`` then counts only for the names it defines."""
    modules = {}
    for pkg in PROJECT:
        for path in (ROOT / pkg).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
            modules[name] = path
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                # ``from pkg import sub`` imports the module pkg.sub; ``from pkg import name``, pkg
                subs = [f"{node.module}.{a.name}" for a in node.names]
                names_only = any(sub not in modules for sub in subs)
                targets = [*([node.module] if names_only else []), *subs]
            else:
                continue
            graph[name] |= {t for t in targets if t in modules and t != name}
    return graph


def test_no_import_cycles_and_no_import_upward() -> None:
    graph = _import_graph()
    for name, targets in graph.items():
        for target in targets:
            here, there = name.split(".")[0], target.split(".")[0]
            assert LAYERS[there] <= LAYERS[here], f"{name} imports {target}: {there} sits above {here}"
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            raise AssertionError("import cycle: " + " -> ".join([*path[path.index(module) :], module]))
        if module in done:
            return
        for target in sorted(graph[module]):
            visit(target, [*path, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])


#: the daemon's wings, bottom to top (docs/design.md, "The daemon's layout"): a module imports
#: only from its own wing or one below it. The top-level modules sit where their imports put them:
#: config, plugins and clock above data (config reads the table formats), cli above everything.
WINGS = (
    ("wire",),
    ("data",),
    ("config", "plugins", "clock"),
    ("trust",),
    ("telemetry",),
    ("transport",),
    ("nodes",),
    ("attacks",),
    ("runners",),
    ("cli", "__main__"),
)


def _wing(module: str) -> int:
    part = module.split(".")[1] if module.count(".") else ""
    for level, names in enumerate(WINGS):
        if part in names:
            return level
    if module == "p2pnode":  # the package's own docstring and lazy API: imports no wing
        return len(WINGS)
    raise AssertionError(f"{module}: in no wing of WINGS; put it in one (or add its wing)")


def test_the_daemons_wings_import_only_downward() -> None:
    graph = _import_graph()
    daemon = [m for m in graph if m.split(".")[0] == "p2pnode"]
    assert {_wing(m) for m in daemon} >= set(range(len(WINGS)))  # every wing was found
    upward = [
        f"{name} imports {target}"
        for name in daemon
        for target in sorted(graph[name])
        if target.startswith("p2pnode.") and _wing(target) > _wing(name)
    ]
    assert not upward, "imports from a lower wing to a higher one:\n" + "\n".join(upward)
    flat = sorted(p.stem for p in (ROOT / "p2pnode").glob("*.py") if p.stem != "__init__")
    assert flat == ["__main__", "cli", "clock", "config", "plugins"], flat  # the rest live in wings


def test_no_imports_hidden_behind_type_checking() -> None:
    for pkg in PROJECT:
        for path in (ROOT / pkg).rglob("*.py"):
            assert "TYPE_CHECKING" not in path.read_text(), f"{path}: an import hidden from the runtime"


def test_unit_tests_mirror_the_packages() -> None:
    """tests/unit/PACKAGE/ holds the unit tests of PACKAGE (tests/unit/experiments/ those of the
    scripts and documents of experiments/); only this project-wide test sits at the top."""
    unit = ROOT / "tests" / "unit"
    assert [p.name for p in unit.glob("test_*.py")] == ["test_layering.py"]
    folders = {p.name for p in unit.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders <= {*PROJECT, "experiments"}, folders - {*PROJECT, "experiments"}
    for folder in unit.rglob("*"):
        if folder.is_dir() and folder.name != "__pycache__" and folder != unit:
            assert (folder / "__init__.py").exists(), folder
            mirrored = ROOT / folder.relative_to(unit)
            assert folder.parts[-1] == "experiments" or mirrored.is_dir(), f"{folder}: no package {mirrored}"


# What a user reads (the packages' docstrings, comments and --help, the tests, benches, scripts
# and experiment files, README, docs, THREAT_MODEL.md, REPRODUCTION.md) says what and why in its
# own words: it never points at an internal issue number, which a user has no tracker to look up.
CITED_PACKAGES = (
    *("p2pnode", "p2pcore", "p2plab", "learning", "adversary", "protocols", "peer_sampling"),
    *("tests", "bench", "scripts", "deploy", "experiments"),
)
DOCS = ("README.md", "THREAT_MODEL.md", "CHANGELOG.md", "docs", "experiments/REPRODUCTION.md")
#: the files that hold citations on purpose: this one (the pattern's own examples)
EXEMPT = {Path(__file__).resolve()}
#: "issue #61", "(#32)", and the team's numbered sittings ("since stop 79")
CITATION = re.compile(r"\bissues? #\d+|(?<![\w&/#-])#\d{1,3}\b|\bstops? \d{2,3}\b", re.IGNORECASE)


def _files() -> list[Path]:
    out = [
        p
        for pkg in CITED_PACKAGES
        for p in sorted((ROOT / pkg).rglob("*"))
        if p.suffix in (".py", ".sh", ".toml") and "reports" not in p.parts and p.resolve() not in EXEMPT
    ]
    out += [ROOT / ".ci" / "run"]
    for name in DOCS:
        path = ROOT / name
        out.extend(sorted(path.rglob("*.md")) if path.is_dir() else [path])
    return out


def test_the_pattern_finds_a_citation() -> None:
    """The check can fail: the forms the old texts used are caught, a plain '#' is not."""
    cited = (
        "(issue #61)",
        "since issue #33's stop",
        "Issues #18 and #31",
        "(#32's target",
        "of #4 rank",
        "since stop 79",
    )
    for text in cited:
        assert CITATION.search(text), text
    plain = (
        "`#` comments",
        "x = 1  # 3 nodes",
        "#!/usr/bin/env",
        "the issue of trust",
        "&#39;",
        "page#12",
        "--earlystop 10",
    )
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
