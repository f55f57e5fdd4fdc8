"""docs/quickstart.ipynb runs from top to bottom in a fresh Jupyter kernel and ends with the
report's figures; ``p2pnode.launch`` runs real processes from Python, inside a
running event loop as in Jupyter."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest

import p2pnode

NOTEBOOK = Path(__file__).resolve().parents[2] / "docs" / "quickstart.ipynb"

pytestmark = pytest.mark.functional


@pytest.mark.untimed  # the notebook simulates only: beside the other worker's tests (tests/conftest.py)
def test_the_quickstart_notebook_runs_and_ends_with_a_plot(tmp_path: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    work = tmp_path / "nb"
    work.mkdir()
    shutil.copy(NOTEBOOK, work / NOTEBOOK.name)
    nb = nbformat.read(work / NOTEBOOK.name, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(work)}}
    )
    client.execute()  # raises CellExecutionError, with the cell and its traceback, on any error
    code = [c for c in nb.cells if c.cell_type == "code"]
    first = "".join(o.get("data", {}).get("text/plain", "") for o in code[0].outputs)
    assert "CIA: Max AAC" in first and "over 5 adversaries" in first
    printed = "".join(o.get("text", "") for c in code for o in c.outputs if o.output_type == "stream")
    assert "80 nodes; Max AAC" in printed  # the file's 80 users, every one a node
    assert "do not fit the network" in printed  # the refused call's message
    last = code[-1].outputs
    assert any("image/png" in o.get("data", {}) for o in last), "the notebook does not end with a plot"
    assert (work / "mine.csv").is_file()


def test_launch_from_python_runs_real_processes_even_inside_an_event_loop() -> None:
    async def in_a_notebook() -> Any:
        return p2pnode.launch(  # type: ignore[attr-defined]
            nodes=12, rounds=3, processes=2, lr=0.01, tick_seconds=0.004, seed=1, progress=False
        )

    r = asyncio.run(in_a_notebook())
    assert r["mode"] == "launch" and r["round"] == 3 and r["nodes"] == 12
    assert list(r.nodes.index) == list(range(12))  # both processes' nodes, in order
    assert int(r.nodes["models_sent"].sum()) == r["model_messages"]
    with pytest.raises(p2pnode.config.ConfigError, match="--processes 20 is more than --nodes 12"):
        p2pnode.launch(nodes=12, rounds=1, processes=20)  # type: ignore[attr-defined]
