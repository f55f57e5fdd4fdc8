"""A user's own model (``--model-plugin``, docs/plugins.md): the learner that runs it.

A model plug-in is an object (a class is made with no arguments) with

- ``init(n_items, seed) -> dict[str, ndarray]``: θ_0, every node's first model. float32 arrays;
  the user's own row(s) as a table of one row (as GMF's ``user``), item tables with one row per
  item. Every node starts from it, as the built-in models do.
- ``scores(params, items) -> ndarray``: the relevance of ``items`` (higher is better) under
  ``params`` for the node's user (its own user row is in ``params``: a received model is scored
  with the node's own user row, as HR@K of a received model is everywhere here).
- ``update(params, items, labels, rng) -> int``: one local epoch on the node's examples (its
  training items, label 1, and ``negatives`` sampled items it never touched per positive, label
  0, shuffled), written **in place** into ``params``' arrays; returns the optimizer steps taken.
- optionally ``shared``: the names of the tensors that leave the node (default: all).

The learner around it is a :class:`~learning.learner.BaseLearner`: merging, deltas, the recovery
from a non-finite model, checkpoints, HR@K / NDCG@K / Recall@K / MRR, ``--eval full`` are the
built-in models' own. It records every tensor as changed by each update (a plug-in's update may
write anywhere), so a delta of a plug-in model is as large as its changed tables.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from learning.gmf_fused import epoch_examples
from learning.learner import BaseLearner
from learning.params import Array
from learning.split import UserData
from p2pcore.plugin import PluginError


class ModelPlugin(Protocol):
    """What ``--model-plugin`` expects (see the module's docstring)."""

    def init(self, n_items: int, seed: int) -> Mapping[str, Array]: ...

    def scores(self, params: Mapping[str, Array], items: npt.NDArray[np.int64]) -> Array: ...

    def update(
        self,
        params: Mapping[str, Array],
        items: npt.NDArray[np.int64],
        labels: npt.NDArray[np.float32],
        rng: np.random.Generator,
    ) -> int: ...


def plugin_init(name: str, plugin: ModelPlugin, n_items: int, seed: int) -> dict[str, Array]:
    """θ_0 of the plug-in, checked: named float32 arrays of finite numbers, at least one."""
    try:
        made = dict(plugin.init(n_items, seed))
    except Exception as exc:
        raise PluginError(f"model plugin {name}: init() raised {exc!r}") from exc
    if not made:
        raise PluginError(f"model plugin {name}: init() returned no parameters")
    out: dict[str, Array] = {}
    for key, value in made.items():
        arr = np.asarray(value)
        if not isinstance(key, str) or arr.dtype != np.float32 or arr.ndim == 0:
            raise PluginError(
                f"model plugin {name}: init() must map names to float32 arrays; {key!r} is {arr.dtype} "
                f"of shape {arr.shape}"
            )
        if not np.isfinite(arr).all():
            raise PluginError(f"model plugin {name}: init()'s {key!r} holds a non-finite value")
        out[key] = np.ascontiguousarray(arr)
    return out


def plugin_shared(name: str, plugin: ModelPlugin, init: Mapping[str, Array]) -> tuple[str, ...]:
    """The tensors a plug-in model shares: its ``shared`` names, or all of them."""
    shared = tuple(getattr(plugin, "shared", None) or tuple(init))
    unknown = [k for k in shared if k not in init]
    if unknown:
        raise PluginError(
            f"model plugin {name}: shared names {unknown} are not among init()'s {sorted(init)}"
        )
    return shared


class PluginLearner(BaseLearner):
    """One user's model of a user's model plug-in."""

    def __init__(
        self,
        name: str,
        plugin: ModelPlugin,
        data: UserData,
        init: Mapping[str, Array],
        shared: tuple[str, ...],
        rng: np.random.Generator,
        top_k: int,
        negatives: int,
    ) -> None:
        super().__init__(data, init, shared, rng, top_k)
        self.plugin_name = name
        self.model_name = f"plugin:{name}"
        self.plugin = plugin
        self.negatives = negatives

    def _scores(
        self, params: Mapping[str, Array], items: npt.NDArray[np.int64], at: float
    ) -> npt.NDArray[np.float32]:
        try:
            scores = np.asarray(self.plugin.scores(params, items), dtype=np.float32)
        except Exception as exc:
            raise PluginError(f"model plugin {self.plugin_name}: scores() raised {exc!r}") from exc
        if scores.shape != items.shape:
            raise PluginError(
                f"model plugin {self.plugin_name}: scores() returned shape {scores.shape} for "
                f"{items.shape[0]} items"
            )
        return scores

    def local_update(self) -> int:
        """One epoch of the plug-in's update on fresh examples; every tensor recorded as changed
        first (the bases and the recovery point keep their old values)."""
        self._held("a local update")
        self._begin_update()
        for name, arr in self.params.items():
            if arr.ndim == 2:
                self.history.touch_rows(name, np.arange(arr.shape[0], dtype=np.int64))
            else:
                self.history.touch_all(name)
        items, labels = epoch_examples(
            self.rng, self.data.train_items, self._excluded, self._free, self.negatives
        )
        arrays = {k: v for k, v in self.params.items()}
        try:
            steps = int(self.plugin.update(self.params, items, labels, self.rng))
        except Exception as exc:
            raise PluginError(f"model plugin {self.plugin_name}: update() raised {exc!r}") from exc
        moved = [k for k, v in arrays.items() if self.params.get(k) is not v]
        if moved or set(self.params) != set(arrays):
            raise PluginError(
                f"model plugin {self.plugin_name}: update() must write its arrays in place "
                f"(params[k][...] = ...), not replace them ({moved or 'names changed'})"
            )
        self.version += 1
        return steps

    def _optimizer_state(self) -> dict[str, Any]:
        return {}
