"""Writing the lab's figures: titles wrapped to the figure's width, laid out, saved at 120 dpi."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any


def wrap_width(fig_inches: float, fontsize: float) -> int:
    """How many characters of a title fit on one line of a figure this wide (a safe estimate:
    DejaVu Sans averages about 0.6 em a character, and the figure keeps a margin)."""
    return max(20, int(0.9 * fig_inches * 72 / (0.6 * fontsize)))


def save_figure(fig: Any, path: Path) -> str:
    """Lay out, write (120 dpi) and close a matplotlib figure; returns the file name.

    Axes titles longer than the figure is wide are wrapped onto more lines first, so that a long
    experiment title is read in full rather than cut at both edges.
    """
    import matplotlib.pyplot as plt

    wrap_titles(fig)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path.name


def wrap_titles(fig: Any) -> None:
    """Wrap each axes title onto as many lines as its share of the figure's width needs."""
    for ax in fig.axes:
        title = ax.title
        width = fig.get_figwidth() / max(1, len(fig.axes))  # axes side by side share the width
        chars = wrap_width(width, title.get_fontsize())
        lines = [textwrap.fill(line, chars) for line in title.get_text().split("\n")]
        title.set_text("\n".join(lines))
