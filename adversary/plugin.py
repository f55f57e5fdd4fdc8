"""A user's own attack: an observer of what an adversary node receives (``--attack-plugin``).

The plug-in API (docs/plugins.md) for attacks, pure like the rest of ``adversary/``: a plug-in is a
class (or any callable) taking an :class:`AttackContext` and returning an object with

- ``observe(sender, params, now)``: called with every model the node receives (a gossip model,
  or at the FedAvg server a client's update), before the node merges it. ``params`` maps each
  shared tensor's name to a read-only float32 array (GMF: ``user``, ``item``, ``h``, ``b``;
  PRME: ``user_p``, ``item_p``, ``item_s``; NCF adds its MLP's ``w1``, ``b1``, ``w2``, ``b2``;
  under Share less no user row); keep a copy of what you need: the arrays change after the call.
  ``now`` is the node's clock in ticks (100 a round).
- ``result()``: a JSON-serialisable mapping of this observer's figures, read when the run ends.

Optionally ``state()`` / ``restore(state)`` (JSON-serialisable) to survive a real process's
restart from its checkpoint; without them, a restarted observer starts over.

The same plug-in runs in the simulator and in real processes over HTTP: each process imports it
by name (``p2pnode.plugins``) and runs it on its own adversary nodes, and the run's summary keeps
every observer's ``result()`` under ``attack_plugin`` (a launch merges its processes' observers).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from p2pcore.plugin import PluginError

Array = npt.NDArray[np.float32]

__all__ = ["AttackContext", "AttackPlugin", "PluginError", "PluginObserver", "read_only"]


@dataclass(frozen=True)
class AttackContext:
    """What an attack plug-in is told about its node and the run when it is made."""

    node_id: int  #: the adversary node it observes for
    nodes: int  #: the network's users (node ids 0..nodes-1; a FedAvg server is ``nodes``)
    n_items: int  #: the catalogue's size (rows of the item tables)
    model: str  #: the run's model: gmf, prme or ncf
    protocol: str  #: base, samo or fedavg
    seed: int  #: the run's seed, for a plug-in's own random choices
    #: the lab's ground truth, for scoring only (an attacker does not have it): the training items
    #: of user ``u`` (a node id), as the run split them
    truth: Callable[[int], npt.NDArray[np.int64]] = field(repr=False, default=lambda u: np.zeros(0, np.int64))


class AttackPlugin(Protocol):
    """What ``--attack-plugin`` expects of the object its class returns."""

    def observe(self, sender: int, params: Mapping[str, Array], now: float) -> None: ...

    def result(self) -> Mapping[str, Any]: ...


def read_only(params: Mapping[str, Any]) -> dict[str, Array]:
    """Views of ``params`` that cannot be written through (no copy)."""
    out: dict[str, Array] = {}
    for name, value in params.items():
        view = np.asarray(value).view()
        view.flags.writeable = False
        out[name] = view
    return out


class PluginObserver:
    """One node's attack plug-in, with the errors of the user's code named as the plug-in's."""

    def __init__(self, name: str, plugin: Any) -> None:
        for method in ("observe", "result"):
            if not callable(getattr(plugin, method, None)):
                raise PluginError(f"attack plugin {name}: its object has no {method}() (docs/plugins.md)")
        self.name = name
        self.plugin = plugin
        self.observed = 0  #: models handed to it

    def observe(self, sender: int, params: Mapping[str, Any], now: float) -> None:
        try:
            self.plugin.observe(int(sender), read_only(params), float(now))
        except Exception as exc:
            raise PluginError(f"attack plugin {self.name}: observe() raised {exc!r}") from exc
        self.observed += 1

    def result(self) -> dict[str, Any]:
        try:
            figures = dict(self.plugin.result())
        except Exception as exc:
            raise PluginError(f"attack plugin {self.name}: result() raised {exc!r}") from exc
        return {"observed": self.observed, **figures}

    def state(self) -> Any:
        saver = getattr(self.plugin, "state", None)
        return {"observed": self.observed, "plugin": saver() if callable(saver) else None}

    def restore(self, state: Mapping[str, Any]) -> None:
        self.observed = int(state.get("observed", 0))
        restorer = getattr(self.plugin, "restore", None)
        if callable(restorer) and state.get("plugin") is not None:
            restorer(state["plugin"])
