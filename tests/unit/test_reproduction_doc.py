"""What experiments/REPRODUCTION.md and the README state is what the project's commands produce."""

from __future__ import annotations

import runpy
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_reproduction_md_summary_is_the_summary_of_the_committed_reports() -> None:
    """Issue #33: REPRODUCTION.md's summary is ``p2pnode experiment summary experiments/reports``
    written into its block, not typed by hand; a report changed without regenerating it fails."""
    from p2plab.experiment_summary import BEGIN, END, render, summarize

    doc = (ROOT / "experiments" / "REPRODUCTION.md").read_text(encoding="utf-8")
    assert doc.count(BEGIN) == 1 and doc.count(END) == 1
    block = doc.split(BEGIN)[1].split(END)[0]
    expected = render(summarize(ROOT / "experiments" / "reports"))
    assert block.strip() == expected.strip(), (
        "REPRODUCTION.md's summary is stale: run "
        "`p2pnode experiment summary experiments/reports --write experiments/REPRODUCTION.md`"
    )
    assert "| table3 | Rand-Gossip GMF | Max AAC | 14.6 |" in block  # the headline row is there


def test_the_main_job_spread_script_runs_the_readmes_own_command() -> None:
    """experiments/main_job_spread.py measures the README's first command, read from the README,
    so the spread the README quotes cannot drift from the command it quotes it for."""
    from p2plab.notebook import _parser
    from p2pnode.cli import config_from_args

    script = runpy.run_path(str(ROOT / "experiments" / "main_job_spread.py"))
    flags = script["readme_main_job"]()
    first = (ROOT / "README.md").read_text(encoding="utf-8").split("```bash\n")[1].splitlines()[0]
    assert first.endswith("p2pnode launch " + " ".join(flags))
    config = config_from_args(_parser("launch").parse_args(flags), {})  # as the command takes them
    assert config.nodes == 100 and config.attack.kind == "cia" and config.attack.fictive_user
    assert script["spread"]([24.0, 38.0, 28.0]) == "30.0 ± 7.2 (24–38)"
