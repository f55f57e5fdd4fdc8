"""Earlier versions of a model kept by rows: what a node holds to send deltas and to undo an update.

A :class:`Base` is the model as it stood when the base was opened. It is not a copy: the learner
tells its :class:`ParamHistory` which rows it is about to change (``touch_rows``, ``touch_all``),
and every open base saves the old values of those rows the first time. A base then costs the
rows changed since it was opened, not a model. Two uses:

- delta bases (p2pnode/wire/delta.py): a sender's last acknowledged model, and in one process the
  receivers' copy of it too. A merge changes most rows, so a base whose changed rows could no
  longer make a delta worth sending (``limit``) is closed and frees what it saved;
- the recovery point (learning/learner.py): the model before a local update, restored exactly
  when the update leaves a NaN or an infinity.

Rows are the first axis of 2-D tensors (embedding tables); other tensors are saved whole.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from learning.params import Array, Index, Params, all_finite


class BaseGone(LookupError):
    """The base was closed: its version can no longer be rebuilt."""


class Base(Mapping[str, Array]):
    """The tensors ``names`` of a model as they stood at ``version`` (read: a fresh array each)."""

    def __init__(self, history: ParamHistory, version: int, names: tuple[str, ...], limit: float) -> None:
        self.history = history
        self.version = version
        self.names = names
        self.limit = limit  #: close when the changed rows' delta bytes exceed this (inf: never)
        self.alive = True
        self.holders = 0  #: users that keep it open (``ParamHistory.hold`` / ``release``)
        #: deltas made against it still on their way: while there are any it saves every change
        #: (their receivers rebuild from it), even past its limit
        self.readers = 0
        self._rows: dict[str, list[tuple[Index, Array]]] = {}  #: saved rows, in chunks
        self._mask: dict[str, np.ndarray[Any, np.dtype[np.bool_]]] = {}  #: rows saved per tensor
        self._whole: dict[str, Array] = {}  #: tensors saved whole
        self.cost = 0.0  #: delta bytes of the rows saved (4 bytes of index and the row's values)

    # -- reading ------------------------------------------------------------------------------

    def __getitem__(self, name: str) -> Array:
        if name not in self.names:
            raise KeyError(name)
        if not self.alive:
            raise BaseGone(f"version {self.version} is gone")
        whole = self._whole.get(name)
        if whole is not None:
            return whole.copy()
        out = self.history.params[name].copy()
        for rows, values in self._rows.get(name, ()):
            out[rows] = values
        return out

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    # a base is one version held by its users: compared and hashed by identity, never by values
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __len__(self) -> int:
        return len(self.names)

    def changed_rows(self, name: str, current: Array) -> Index:
        """Rows of 2-D tensor ``name`` where ``current`` differs from this base (``!=``, as numpy
        compares floats), sorted: only saved rows can differ."""
        if not self.alive:
            raise BaseGone(f"version {self.version} is gone")
        whole = self._whole.get(name)
        if whole is not None:
            return np.flatnonzero((current != whole).any(axis=1)).astype(np.int64)
        chunks = self._rows.get(name)
        if not chunks:
            return np.zeros(0, dtype=np.int64)
        rows = np.concatenate([r for r, _ in chunks])
        values = np.concatenate([v for _, v in chunks])
        differ = (current[rows] != values).any(axis=1)
        return np.sort(rows[differ])

    # -- saving -------------------------------------------------------------------------------

    def _save_rows(self, name: str, rows: Index, live: Array, cost_per_row: float) -> None:
        """Save ``live[rows]`` for the rows not saved yet (``rows`` unique)."""
        if name in self._whole:
            return
        mask = self._mask.get(name)
        if mask is None:
            mask = self._mask[name] = np.zeros(live.shape[0], dtype=bool)
        new = rows[~mask[rows]]
        if new.size:
            mask[new] = True
            self._rows.setdefault(name, []).append((new, live[new]))
            self.cost += new.size * cost_per_row

    def _save_old(self, name: str, rows: Index, old: Array, cost_per_row: float) -> None:
        """Save given old values ``old`` of ``rows`` (unique) for the rows not saved yet."""
        if name in self._whole:
            return
        mask = self._mask.get(name)
        if mask is None:
            mask = self._mask[name] = np.zeros(self.history.params[name].shape[0], dtype=bool)
        keep = ~mask[rows]
        if keep.any():
            new = rows[keep]
            mask[new] = True
            self._rows.setdefault(name, []).append((new, old[keep]))
            self.cost += new.size * cost_per_row

    def _save_whole(self, name: str, live: Array, cost: float) -> None:
        if name in self._whole:
            return
        old = live.copy()
        for rows, values in self._rows.pop(name, ()):
            old[rows] = values
            self.cost -= rows.size * self.history.row_cost(name)
        self._mask.pop(name, None)
        self._whole[name] = old
        self.cost += cost

    def _over(self) -> bool:
        """Whether the rows changed since this base could no longer make a delta worth sending:
        checked exactly (a saved row may have come back to its old value) only when the saved
        rows alone are too many."""
        if self.cost <= self.limit:
            return False
        exact = 0.0
        params = self.history.params
        for name in self.names:
            live = params[name]
            if live.ndim == 2:
                exact += self.changed_rows(name, live).size * self.history.row_cost(name)
        return exact > self.limit

    def finite_where_saved(self, params: Params) -> bool:
        """Whether ``params`` is finite wherever it may differ from this base (what it saved)."""
        for name in self._whole:
            if not all_finite({name: params[name]}):
                return False
        for name, chunks in self._rows.items():
            for rows, _ in chunks:
                if not np.isfinite(params[name][rows]).all():
                    return False
        return True

    def saved_versions(self, params: Params) -> Iterator[tuple[str, Array]]:
        """Each tensor it saved something of, as it was at this base's version (a new array)."""
        for name, old in self._whole.items():
            yield name, old.copy()
        for name, chunks in self._rows.items():
            out = params[name].copy()
            for rows, values in chunks:
                out[rows] = values
            yield name, out

    def _close(self) -> None:
        self.alive = False
        self._rows.clear()
        self._mask.clear()
        self._whole.clear()


class ParamHistory:
    """The open bases of one model, and the hooks its writers call before changing it."""

    def __init__(self, params: Params) -> None:
        self.params = params
        self.bases: list[Base] = []
        self.stamp = 0  #: how many writes were announced: a snapshot taken at stamp s is the live model at s

    def row_cost(self, name: str) -> float:
        """Delta bytes of one row of ``name`` (a float32 row and its int32 index)."""
        arr = self.params[name]
        return 4.0 + (arr.shape[1] * arr.itemsize if arr.ndim == 2 else arr.nbytes)

    def open(self, version: int, names: tuple[str, ...], limit: float = float("inf")) -> Base:
        """A base of the model as it stands now."""
        base = Base(self, version, names, limit)
        self.bases.append(base)
        return base

    def hold(self, base: Base) -> None:
        base.holders += 1

    def read(self, base: Base) -> None:
        """A delta made against ``base`` is on its way (``unread`` when it is answered)."""
        base.readers += 1

    def unread(self, base: Base) -> None:
        base.readers -= 1
        if base.readers <= 0 and base.alive and base.limit < float("inf") and base._over():
            self.close(base)

    def release(self, base: Base) -> None:
        """One holder less; a base nobody holds is closed."""
        base.holders -= 1
        if base.holders <= 0:
            self.close(base)

    def close(self, base: Base) -> None:
        if base.alive:
            base._close()
        if base in self.bases:
            self.bases.remove(base)

    def active(self) -> bool:
        """Whether a writer must report what it changes (some base is open)."""
        return bool(self.bases)

    # -- hooks: called before the rows change ------------------------------------------------------

    def touch_rows(self, name: str, rows: Index) -> None:
        """Rows ``rows`` of 2-D ``name`` are about to change (repeats allowed: a batch's items).
        Made unique and sorted, as ``np.unique`` would, through a mask over the table: on a
        38k-row POI table ``np.unique`` of an epoch's items was 7% of a round."""
        self.stamp += 1
        if not self.bases:
            return
        live = self.params[name]
        seen = np.zeros(live.shape[0], dtype=bool)
        seen[rows] = True
        rows = np.flatnonzero(seen)
        cost = self.row_cost(name)
        for base in self.bases:
            base._save_rows(name, rows, live, cost)
        self._trim()

    def touch_all(self, name: str) -> None:
        """All of ``name`` is about to change (dense noise: every row changes). A limited base
        that every row changing would put over its limit closes at once, saving nothing."""
        self.stamp += 1
        live = self.params[name]
        full = live.shape[0] * self.row_cost(name) if live.ndim == 2 else 0.0
        for base in list(self.bases):
            if (
                base.limit < float("inf")
                and base.cost + full > base.limit
                and name not in base._whole
                and not base.readers
            ):
                self.close(base)
            else:
                base._save_whole(name, live, full)
        self._trim()

    def write(self, name: str, new: Array) -> None:
        """Set ``name`` to ``new``, the open bases saving exactly the rows whose bits change."""
        self.stamp += 1
        live = self.params[name]
        if self.bases:
            if live.ndim == 2 and live.dtype == np.float32:
                rows = np.flatnonzero((new.view(np.uint32) != live.view(np.uint32)).any(axis=1))
                old = live[rows]
                cost = self.row_cost(name)
                for base in self.bases:
                    base._save_old(name, rows, old, cost)
            else:
                for base in self.bases:
                    base._save_whole(
                        name, live, live.shape[0] * self.row_cost(name) if live.ndim == 2 else 0.0
                    )
        live[...] = new
        self._trim()

    def replaced(self, name: str, old: Array) -> None:
        """All of 1-D ``name`` has just been rewritten; ``old`` (a copy nobody else holds) is
        its value before: what :meth:`write` would have saved."""
        self.stamp += 1
        for base in self.bases:
            base._save_whole(name, old, 0.0)  # a 1-D tensor costs no delta rows
        self._trim()

    def changed(self, name: str, rows: Index, old: Array) -> None:
        """Rows ``rows`` (unique) of 2-D ``name`` have just changed; ``old`` holds their values
        before (a writer that finds out which rows change while it writes)."""
        self.stamp += 1
        cost = self.row_cost(name)
        for base in self.bases:
            base._save_old(name, rows, old, cost)
        self._trim()

    def capacity(self, name: str) -> int:
        """How many changed rows of ``name`` a writer that learns them while it writes must keep
        the old values of: beyond this many, every limited base is over its limit whatever it
        saved before (-1: all, an unlimited base is open)."""
        cost = self.row_cost(name)
        most = 0
        for base in self.bases:
            if base.limit == float("inf") or base.readers:
                return -1
            most = max(most, int(base.limit // cost) + 1)
        return most

    def overflow(self) -> None:
        """A writer changed more rows than :meth:`capacity` and kept no old values: the limited
        bases can no longer serve."""
        self.stamp += 1
        for base in list(self.bases):
            if base.limit < float("inf") and not base.readers:
                self.close(base)

    def _trim(self) -> None:
        for base in list(self.bases):
            if base.limit < float("inf") and not base.readers and base._over():
                self.close(base)
