"""The lab on top of the p2pnode daemon: experiments, local clusters, the LAN testbed, following
metrics, and merging what many processes report.

Its Python API (``p2plab/notebook.py``): ``p2plab.simulate(...)`` and ``p2plab.launch(...)`` take
the command line's flags as keyword arguments and return a :class:`Result`; the installed project
also offers them as ``p2pnode.simulate`` and ``p2pnode.launch`` (entry points ``p2pnode.api``).
They are loaded on first use, so the command line does not load pandas.
"""

from __future__ import annotations

__all__ = ["Result", "launch", "simulate"]


def __getattr__(name: str) -> object:
    if name in __all__:
        from p2plab import notebook

        return getattr(notebook, name)
    raise AttributeError(f"module 'p2plab' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
