"""The Community Inference Attack observer (CIA paper §IV, Algorithms 1 and 2), sans I/O.

An observer holds one or more targets V_target. For every user u whose model it sees (a FedAvg
update at the server, a gossip model from a neighbour, or a colluding partner's multicast) it
folds the n-th observation Θ_u^n into a momentum model v_u (eq. 4), scores
``y_u = mean_{i ∈ V_target} ŷ(v_u, i)`` (EvaluateModel, line 12) and keeps the score (AddSorted,
line 13). The predicted community is the K best-scoring users (eq. 3, line 16/17).

Eq. 4 has several readings (``estimator``, see adversary/momentum.py): v_u starts at the first
Θ_u (``first``), at zero (``zero``, ``debiased`` with the bias correction) or at θ_0 (``init``).
The per-user observation count n is kept (``counts``) and checkpointed.

Memory: v_u is kept only where the targets need it: the target rows of the item tables and the
small user-side and global parameters (``AttackModel.keep``). Under Share less the received
models lack the user embedding; the observer pairs them with a fictive user e_A per target,
trained on V_target against a reference model (§IV-C, ``set_reference``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from adversary.community import top_k
from adversary.models import AttackModel
from adversary.momentum import ESTIMATORS, weights
from learning.params import Array, Index, Params


@dataclass(frozen=True)
class Prediction:
    """A predicted community: users best first, with their scores Ŷ(v_u, V_target)."""

    users: list[int]
    scores: list[float]


_ALL = slice(None)  #: every kept row, as a view


def kept_rows(targets: Sequence[Index]) -> Index:
    """The item rows an observer of ``targets`` keeps of every model (sorted, unique)."""
    return np.unique(np.concatenate([np.asarray(t, dtype=np.int64) for t in targets]))


class CIAObserver:
    """CIA state of one adversary (a node, a colluder, or the FedAvg server)."""

    def __init__(
        self,
        model: AttackModel,
        targets: Sequence[Index],
        k: int = 50,
        momentum: float = 0.99,
        exclude: Sequence[Iterable[int]] | None = None,
        fictive_user: bool = False,
        keep_last: bool = False,
        estimator: str = "first",
        initial: Mapping[str, Array] | None = None,
    ) -> None:
        if not targets or any(len(t) == 0 for t in targets):
            raise ValueError("every target needs at least one item")
        if not 0.0 <= momentum < 1.0:
            raise ValueError("momentum β must be in [0, 1)")
        if k < 1:
            raise ValueError("K must be >= 1")
        if estimator not in ESTIMATORS:
            raise ValueError(f"estimator must be one of {', '.join(ESTIMATORS)}")
        if estimator == "init" and initial is None:
            raise ValueError("the 'init' estimator needs the initial model θ_0")
        self.model = model
        self.estimator = estimator
        self.k = k
        self.beta = float(momentum)
        self.fictive_user = fictive_user  #: score with e_A per target (Share less, §IV-C)
        uniq = [np.unique(np.asarray(t, dtype=np.int64)) for t in targets]
        self.rows = kept_rows(uniq)  #: the item rows kept per observed user
        pos = np.searchsorted(self.rows, np.concatenate(uniq))
        self._flat = pos.astype(np.int64)  #: kept-row positions of every target, concatenated
        sizes = np.array([len(t) for t in uniq], dtype=np.int64)
        self._starts = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
        self._sizes = sizes.astype(np.float64)
        self._owner = np.repeat(np.arange(len(uniq)), sizes)  #: target of each flat entry
        self._identity = len(uniq) == 1  #: one target: its entries are the kept rows, in order
        self.targets = uniq
        self.exclude = [set(e) for e in exclude] if exclude is not None else [set() for _ in uniq]
        if len(self.exclude) != len(uniq):
            raise ValueError("one exclude set per target")
        self.v: dict[int, Params] = {}  #: v_u restricted to ``rows`` (views onto ``_buf``)
        self._buf: dict[int, npt.NDArray[np.float32]] = {}
        self._layout: list[tuple[str, int, tuple[int, ...]]] | None = None
        self._slices: list[tuple[str, int, int, tuple[int, ...]]] = []  #: name, start, end, shape
        self._shapes: dict[str, tuple[int, ...]] = {}
        self._size = 0
        self._scratch = np.zeros(0, dtype=np.float32)
        self._scratch_views: Params = {}
        self._scores: dict[int, npt.NDArray[np.float64]] = {}  #: y_u per target
        self._unscored: set[int] = set()  #: users whose v_u changed since it was last scored
        self.observations = 0
        self.counts: dict[int, int] = {}  #: n: how many observations of u were folded
        self._initial = initial  #: θ_0 (full model), for the 'init' estimator
        self._initial_flat: npt.NDArray[np.float32] | None = None
        self._refs: Array | None = None  #: e_A per target (Share less)
        #: e_A of each flat entry's target (``_refs[_owner]``), gathered once per change of e_A
        self._ref_rows: Array | None = None
        self.keep_last = keep_last
        self.last: dict[int, Params] = {}  #: the latest observation of u (membership inference)
        self._table: tuple[tuple[int, int, int], npt.NDArray[np.float32]] | None = None  #: relevance cache

    # -- state updates --------------------------------------------------------------------------

    def observe(self, user: int, params: Mapping[str, Array]) -> Params:
        """A full received model Θ_u (lines 6–13); returns the updated v_u for colluders."""
        if self._layout is None:
            self._set_layout(self.model.keep(params, self.rows))
        self.model.keep_into(params, self.rows, self._scratch_views)
        return self._fold_scratch(user)

    def keep(self, params: Mapping[str, Array]) -> Params:
        """A copy of the part of ``params`` this observer keeps (what a colluder multicasts)."""
        return self.model.keep(params, self.rows)

    def fold(self, user: int, kept: Mapping[str, Array]) -> Params:
        """An observation already restricted to ``rows`` (a colluder's multicast v_u)."""
        if self._layout is None:
            self._set_layout(kept)
        self._check(kept)
        for name, view in self._scratch_views.items():
            np.copyto(view, kept[name], casting="same_kind")
        return self._fold_scratch(user)

    @property
    def needs_reference(self) -> bool:
        """Whether the observer scores with something of its own node's model, refreshed by
        :meth:`set_reference`: e_A (Share less) or its own head (PARD, models.OwnHead)."""
        return self.fictive_user or self.model.needs_head

    def set_reference(self, params: Mapping[str, Array], rng: np.random.Generator) -> None:
        """Share less: (re)train e_A for every target against ``params`` (the adversary's own model,
        or the FedAvg global model), warm-started from the previous e_A. PARD: borrow the head of
        ``params`` (the adversary's own model)."""
        if self.model.needs_head:
            self.model.borrow(params)
        if not self.fictive_user:
            return
        self._refs = self.model.fit_users(params, self.targets, rng, self._refs)
        self._ref_rows = None

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps: every v_u (flat, with the layout), scores, e_A, counters."""
        return {
            "layout": [[name, at, list(shape)] for name, at, shape in self._layout or []],
            "v": {u: buf.copy() for u, buf in self._buf.items()},
            "last": {
                u: np.concatenate([a.ravel() for _, a in sorted(p.items())]) for u, p in self.last.items()
            },
            "scores": {u: s.copy() for u, s in self.scores.items()},
            "observations": self.observations,
            "counts": dict(self.counts),
            "estimator": self.estimator,
            "refs": None if self._refs is None else self._refs.copy(),
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        """Take back a :meth:`state` of an observer built for the same targets and model."""
        layout = [(str(name), int(at), tuple(int(d) for d in shape)) for name, at, shape in state["layout"]]
        self._layout = None
        self._buf, self.v, self.last = {}, {}, {}
        if layout:
            self._adopt_layout(layout)
        for u, buf in state["v"].items():
            arr = np.asarray(buf, dtype=np.float32)
            if arr.shape != (self._size,):
                raise ValueError(f"checkpoint v_u of user {u} has {arr.size} values, the layout {self._size}")
            self._buf[int(u)] = arr.copy()
            self.v[int(u)] = self._views(self._buf[int(u)])
        for u, buf in state["last"].items():
            self.last[int(u)] = self._views(np.asarray(buf, dtype=np.float32).copy())
        n_targets = len(self.targets)
        self._scores, self._unscored = {}, set()
        for u, sc in state["scores"].items():
            arr64 = np.asarray(sc, dtype=np.float64)
            if arr64.shape != (n_targets,):
                raise ValueError("checkpoint scores do not match this observer's targets")
            self._scores[int(u)] = arr64.copy()
        self.observations = int(state["observations"])
        stored = str(state.get("estimator", "first"))
        if stored != self.estimator:
            raise ValueError(
                f"checkpoint observer used the {stored!r} estimator, this run uses {self.estimator!r}"
            )
        if "counts" in state:
            self.counts = {int(u): int(n) for u, n in state["counts"].items()}
        else:  # written before counts existed, by 'first', which only asks whether u was seen
            self.counts = {u: 1 for u in self._buf}
        if set(self.counts) != set(self._buf):
            raise ValueError("checkpoint observation counts do not match its observed users")
        self._refs = None if state["refs"] is None else np.asarray(state["refs"], dtype=np.float32).copy()
        self._ref_rows = None
        self._table = None

    # -- queries --------------------------------------------------------------------------------

    @property
    def scores(self) -> dict[int, npt.NDArray[np.float64]]:
        """y_u per target of every observed user (AddSorted, line 13). Under full sharing y_u
        depends on v_u alone, so it is computed when asked for, once per change of v_u: a
        colluder whose accuracy is never read (every group member but the first) never scores.
        Under Share less it is computed at observation time with the e_A of that time."""
        if self._unscored:
            for u in sorted(self._unscored):
                self._scores[u] = self._evaluate(self.v[u])
            self._unscored.clear()
        return self._scores

    @property
    def observed(self) -> set[int]:
        return set(self.v)

    def predict(self, target: int = 0, k: int | None = None) -> Prediction:
        """Ĉ for one target: the K best-scoring observed users (eq. 3), excluded users left out."""
        users = sorted(self.scores)
        if not users:
            return Prediction([], [])
        s = np.array([self.scores[u][target] for u in users])
        excl = [i for i, u in enumerate(users) if u in self.exclude[target]]
        best = top_k(s, k or self.k, excl)
        return Prediction([users[i] for i in best], [float(s[i]) for i in best])

    def predicted_ids(self, target: int = 0) -> Index:
        return np.asarray(self.predict(target).users, dtype=np.int64)

    def relevance_table(
        self, target: int = 0, latest: bool = False
    ) -> tuple[list[int], npt.NDArray[np.float32]]:
        """ŷ(·, i) for every observed user u (sorted) and every item i of one target, as a
        (users × |V_target|) matrix: what membership inference asks of the same observations
        (§VIII-C). ``latest`` scores u's latest observation (``keep_last``) instead of v_u."""
        if latest and not self.keep_last:
            raise RuntimeError("latest observations are kept only with keep_last")
        state = self.last if latest else self.v
        users = sorted(state)
        lo = int(self._starts[target])
        cols = self._flat[lo : lo + int(self._sizes[target])]
        if not users:
            return users, np.zeros((0, len(cols)), np.float32)
        if self.fictive_user:
            if self._refs is None:
                raise RuntimeError("Share less: set_reference must train e_A first")
            ref = self._refs[target]
            rows = [self.model.relevance(state[u], ref, cols) for u in users]
            return users, np.stack(rows).astype(np.float32)
        key = (self.observations, int(latest), getattr(self.model, "version", 0))
        if self._table is None or self._table[0] != key:
            every_row = np.arange(len(self.rows), dtype=np.int64)
            full = np.stack(
                [self.model.relevance(state[u], self.model.user_of(state[u]), every_row) for u in users]
            )
            self._table = (key, full.astype(np.float32))
        return users, self._table[1][:, cols]

    # -- internals ------------------------------------------------------------------------------

    def _set_layout(self, kept: Mapping[str, Array]) -> None:
        """v_u of every user lives in one flat float32 buffer (eq. 4 is then three array
        operations), with named views onto it; the layout comes from the first observation."""
        layout, at = [], 0
        for name in sorted(kept):
            shape = tuple(np.shape(kept[name]))
            layout.append((name, at, shape))
            at += int(np.prod(shape))
        self._adopt_layout(layout)

    def _adopt_layout(self, layout: list[tuple[str, int, tuple[int, ...]]]) -> None:
        self._layout = layout
        self._slices = [(name, at, at + int(np.prod(shape)), shape) for name, at, shape in layout]
        self._shapes = {name: shape for name, _, shape in layout}
        self._size = self._slices[-1][2] if layout else 0
        self._scratch = np.zeros(self._size, dtype=np.float32)
        self._scratch_views = self._views(self._scratch)
        if self._initial is not None:
            flat = np.zeros(self._size, dtype=np.float32)
            self.model.keep_into(self._initial, self.rows, self._views(flat))
            self._initial_flat = flat

    def _views(self, buf: npt.NDArray[np.float32]) -> Params:
        return {name: buf[lo:hi].reshape(shape) for name, lo, hi, shape in self._slices}

    def _fold_scratch(self, user: int) -> Params:
        """Eq. 4 with the observation in the scratch buffer (which it consumes)."""
        if self.keep_last:
            self.last[user] = self._views(self._scratch.copy())
        n = self.counts.get(user, 0) + 1
        self.counts[user] = n
        buf = self._buf.get(user)
        if buf is None and self.estimator == "first":  # v_u^1 = Θ_u^1
            buf = self._scratch.copy()
            self._buf[user] = buf
            self.v[user] = self._views(buf)
        else:
            if buf is None:
                buf = self._start()
                self._buf[user] = buf
                self.v[user] = self._views(buf)
            keep, alpha = weights(self.estimator, self.beta, n)
            buf *= np.float32(keep)
            self._scratch *= np.float32(alpha)
            buf += self._scratch
        v = self.v[user]
        if self.needs_reference:  # scored with the e_A, or the observer's head, of now
            self._scores[user] = self._evaluate(v)
        else:
            self._unscored.add(user)
        self.observations += 1
        return v

    def _start(self) -> npt.NDArray[np.float32]:
        """v_u^0: zero, or θ_0 for ``init`` (``first`` never asks: it starts at Θ_u^1)."""
        if self.estimator == "init":
            assert self._initial_flat is not None
            return self._initial_flat.copy()
        return np.zeros(self._size, dtype=np.float32)

    def _check(self, kept: Mapping[str, Array]) -> None:
        shapes = self._shapes
        if kept.keys() != shapes.keys() or any(np.shape(a) != shapes[name] for name, a in kept.items()):
            raise ValueError("observation does not match the observer's kept parameters")

    def _evaluate(self, v: Params) -> npt.NDArray[np.float64]:
        """EvaluateModel: mean relevance of each target's items under v (line 12)."""
        if self.fictive_user:
            if self._refs is None:
                raise RuntimeError("Share less: set_reference must train e_A before observing")
            means = self.model.fictive_means(v, self._refs, self._flat, self._starts, self._sizes)
            if means is not None:
                return means
            if self._ref_rows is None:  # the FedAvg server scores ~2,000 updates a round per e_A
                self._ref_rows = self._refs[self._owner]
            rel = self.model.relevance(v, self._ref_rows, self._flat)
        else:  # one user for every target: score each kept row once
            rel = self.model.relevance(v, self.model.user_of(v), _ALL)
            if not self._identity:
                rel = rel[self._flat]
        return np.add.reduceat(rel.astype(np.float64), self._starts) / self._sizes
