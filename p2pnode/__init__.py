"""p2pnode: a gossip-learning node daemon for decentralized recommenders, and its simulator.

From Python (a notebook, a script)::

    import p2pnode

    r = p2pnode.simulate(nodes=100, rounds=10, lr=0.01, attack="cia")
    r["hit_ratio_at_20"]        # mean HR@20 over the nodes after the last round
    r["cia"]["max_aac"]         # the attack's Max AAC, with its upper and random bounds
    r.history                   # a pandas DataFrame, a row per evaluated round
    r.nodes                     # a pandas DataFrame, a row per node
    r.plot()                    # the report's figures

Keyword arguments are the command line's flags (``p2pnode simulate --help``), checked the same
way; ``p2pnode.launch(...)`` runs real processes over HTTP as ``p2pnode launch`` does. Both are
the lab's (``p2plab.simulate``, ``p2plab.launch``; ``p2plab/notebook.py``): the lab registers them
here as plug-ins (the ``p2pnode.api`` entry points of the installed project, pyproject.toml), found
on first use, so the daemon neither imports nor loads the lab.

Below them: ``p2pnode.config.RunConfig`` holds every setting (``RunConfig.replace`` takes nested
fields as ``"learning.lr"``); ``p2pnode.runners.sim.simulate(config)`` runs it on a virtual clock and
``p2pnode.runners.sim.Simulation`` steps it round by round (``run_round``). Real processes:
``p2plab.launch.launch`` and ``p2pnode.runners.real.run_process`` (one ``p2pnode run`` process).
Experiments: ``p2plab.experiment.run_experiment``.

The package is the daemon's I/O shell (config, node driver, transports, clocks, wire, metrics,
simulator); the pure protocols, samplers, attacks and models live in ``protocols``,
``peer_sampling``, ``adversary`` and ``learning``.
"""

import os

# Node work is many small matrix products; a second OpenBLAS thread on a shared core only adds
# hand-offs (a 943-node simulation trained in 2.98 s with two threads vs 2.32 s with one). Set
# before numpy is first imported; a value the user exported wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

__version__ = "0.1.0"


#: the names the lab registers (entry point group ``p2pnode.api``)
API_GROUP = "p2pnode.api"
_API = ("simulate", "launch", "Result")
#: what ``from p2pnode import *`` gives, and what ``help(p2pnode)`` lists (the API above, loaded
#: from the lab on first use)
__all__ = [*_API, "__version__"]


def __getattr__(name: str) -> object:
    """``p2pnode.simulate``, ``p2pnode.launch`` and ``p2pnode.Result``: the plug-ins the lab
    registers under ``p2pnode.api``, loaded on first use (PEP 562)."""
    if name in _API:
        from importlib.metadata import entry_points

        for entry in entry_points(group=API_GROUP, name=name):
            value = entry.load()
            globals()[name] = value
            return value
        raise AttributeError(
            f"p2pnode.{name} is the lab's (p2plab.{name}), registered when the project is installed: "
            f"run `pip install -e .` in the checkout (scripts/bootstrap.sh does), or use p2plab.{name}"
        )
    raise AttributeError(f"module 'p2pnode' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])
