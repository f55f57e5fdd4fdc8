"""What the attacks need from a recommendation model, expressed through its ``score`` function.

The CIA (000 §IV-B) ranks users by the mean relevance ``Ŷ(Θ_u, V_target)`` that their models give
to the target items. An observer keeps, per observed user, only the rows of the item tables that
its targets need plus the user-side and global parameters (``keep``), and asks the model's own
``score`` for relevance. Under Share less it pairs received item rows with a fictive user
embedding e_A trained on V_target (§IV-C, ``fit_user``).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from learning import gmf, ncf, prme
from learning.params import Array, Index, Params


class AttackModel(ABC):
    """One recommendation model as the attacks see it."""

    name: str
    item_tables: tuple[str, ...]  #: item-indexed parameters, kept only at the target rows
    user_name: str  #: the user-side parameter (absent from Share-less models)
    probabilistic = False  #: relevance is an interaction probability (membership inference, mia.py)
    needs_head = False  #: scores with the observer's own head (:class:`OwnHead`), borrowed

    def borrow(self, params: Mapping[str, Array]) -> None:
        """Take what the model scores with from the observer's own ``params`` (OwnHead only)."""
        raise TypeError(f"{self.name} scores with what it receives: it borrows nothing")

    def keep(self, params: Mapping[str, Array], rows: Index) -> Params:
        """The part of a received model the observer stores: target rows of the item tables, and
        every other parameter it scores with (copies, so the sender's arrays can be reused)."""
        out: Params = {}
        for name, arr in params.items():
            if name in self.item_tables:
                out[name] = arr[rows].astype(np.float32, copy=True)
            elif name not in self.dropped:
                out[name] = np.array(arr, dtype=np.float32, copy=True)
        return out

    dropped: tuple[str, ...] = ()  #: parameters the attack never needs

    def keep_into(self, params: Mapping[str, Array], rows: Index, out: Mapping[str, Array]) -> None:
        """``keep`` written into preallocated arrays (the observer's scratch buffer)."""
        for name, dst in out.items():
            src = params[name]
            if name in self.item_tables and src.dtype == dst.dtype:
                np.take(src, rows, axis=0, out=dst, mode="clip")  # rows are in range: no buffering
            elif name in self.item_tables:
                dst[...] = src[rows]
            else:
                np.copyto(dst, src, casting="same_kind")

    #: ``--fictive-backend fused``: e_A fitted and scored in compiled calls (GMF only;
    #: adversary/fictive_fused.py), rounding otherwise in the last bits
    fused = False

    def fit_users(
        self,
        params: Mapping[str, Array],
        targets: Sequence[Index],
        rng: np.random.Generator,
        start: Array | None,
    ) -> Array:
        """e_A of every target, in order, each from its row of ``start`` where given (float32)."""
        refs = [
            self.fit_user(params, t, rng, None if start is None else start[i]) for i, t in enumerate(targets)
        ]
        return np.stack(refs).astype(np.float32)

    def fictive_means(
        self, kept: Params, refs: Array, flat: Index, starts: Index, sizes: npt.NDArray[np.float64]
    ) -> npt.NDArray[np.float64] | None:
        """Each target's mean relevance of its kept rows ``flat`` under its e_A in one compiled
        call, or None where the model has none (the observer then scores through :meth:`relevance`)."""
        return None

    @abstractmethod
    def relevance(self, kept: Params, users: Array, rows: Index | slice) -> npt.NDArray[np.float32]:
        """Relevance of ``rows`` (positions, or a slice) of the kept item tables for ``users``
        ((d,), or one row per item)."""

    def user_of(self, kept: Params) -> Array:
        """The user embedding of a model that shares it."""
        return np.asarray(kept[self.user_name][0], dtype=np.float32)

    @abstractmethod
    def fit_user(
        self, params: Mapping[str, Array], positives: Index, rng: np.random.Generator, start: Array | None
    ) -> Array:
        """e_A: a user embedding that likes ``positives``, trained against ``params``' item side."""


class GMFAttack(AttackModel):
    """GMF: relevance σ(hᵀ(p ⊙ q_i) + b) from ``learning.gmf.score``."""

    name = "gmf"
    probabilistic = True
    item_tables = (gmf.ITEM,)
    user_name = gmf.USER
    steps = 60
    lr = 0.05
    negatives = 4

    def relevance(self, kept: Params, users: Array, rows: Index | slice) -> npt.NDArray[np.float32]:
        return gmf.score(kept, users, rows)

    def fit_user(
        self, params: Mapping[str, Array], positives: Index, rng: np.random.Generator, start: Array | None
    ) -> Array:
        """Full-batch Adam on the user row only: BCE on V_target and sampled other items."""
        item, h, b = params[gmf.ITEM], params[gmf.H], params[gmf.B]
        n_items, d = item.shape
        idx, y = _labelled(rng, n_items, positives, self.negatives)
        q_h = item[idx] * h  # logit = (q ⊙ h)·p + b

        def gradient(p: Array) -> Array:
            with np.errstate(over="ignore"):  # σ's limit, 0, where exp(-logit) overflows
                g = (1.0 / (1.0 + np.exp(-(q_h @ p + b[0])))) - y
            return np.asarray((g @ q_h) / len(idx))

        return _adam_user(gradient, d, start, self.steps, self.lr)

    def fit_users(
        self,
        params: Mapping[str, Array],
        targets: Sequence[Index],
        rng: np.random.Generator,
        start: Array | None,
    ) -> Array:
        if not self.fused:
            return super().fit_users(params, targets, rng, start)
        from adversary import fictive_fused  # numba (and its threads) only where asked for

        item = np.ascontiguousarray(params[gmf.ITEM], dtype=np.float32)
        parts = [_labelled(rng, item.shape[0], t, self.negatives) for t in targets]  # the numpy path's draws
        offsets = np.concatenate(([0], np.cumsum([len(i) for i, _ in parts]))).astype(np.int64)
        return fictive_fused.fit(
            item,
            np.ascontiguousarray(params[gmf.H], dtype=np.float32),
            np.ascontiguousarray(params[gmf.B], dtype=np.float32),
            np.concatenate([i for i, _ in parts]),
            np.concatenate([y for _, y in parts]),
            offsets,
            np.zeros((0, item.shape[1]), np.float32)
            if start is None
            else np.ascontiguousarray(start, np.float32),
            self.steps,
            np.float32(self.lr),
        )

    def fictive_means(
        self, kept: Params, refs: Array, flat: Index, starts: Index, sizes: npt.NDArray[np.float64]
    ) -> npt.NDArray[np.float64] | None:
        if not self.fused:
            return None
        from adversary import fictive_fused

        return fictive_fused.target_means(kept[gmf.ITEM], kept[gmf.H], kept[gmf.B], refs, flat, starts, sizes)


class PRMEAttack(AttackModel):
    """PRME: relevance −‖X^P_u − X^P_l‖², i.e. ``learning.prme.score`` with the previous item more
    than τ ago (the attacker has no sequence of its own; the sequential table is not needed)."""

    name = "prme"
    item_tables = (prme.ITEM_P,)
    dropped = (prme.ITEM_S,)
    user_name = prme.USER_P
    steps = 60
    lr = 0.05

    def relevance(self, kept: Params, users: Array, rows: Index | slice) -> npt.NDArray[np.float32]:
        side = prme.UserSide(users, 0, math.inf)  # beyond τ: previous item unused
        return prme.score(kept, side, rows)

    def fit_user(
        self, params: Mapping[str, Array], positives: Index, rng: np.random.Generator, start: Array | None
    ) -> Array:
        """Pairwise ranking of V_target above sampled items in the preference space (SGD, mean)."""
        item_p = params[prme.ITEM_P]
        negs = _negatives(rng, item_p.shape[0], positives, len(positives))
        pos_rows, neg_rows = item_p[positives], item_p[negs]
        u = item_p[positives].mean(0) if start is None else start.astype(np.float32, copy=True)
        for _ in range(self.steps):
            a, c = u - pos_rows, u - neg_rows
            x = (c * c).sum(1) - (a * a).sum(1)  # D_neg − D_pos
            w = (1.0 / (1.0 + np.exp(np.clip(x, -60, 60))))[:, None]  # σ(−x) = −∂softplus(−x)/∂x
            u = u - self.lr * (w * (2 * a - 2 * c)).mean(0)  # ∂x/∂u = 2(u − neg) − 2(u − pos)
        return np.asarray(u, dtype=np.float32)


class NCFAttack(AttackModel):
    """NCF (paper 004's FedNCF): relevance σ(w2ᵀ ReLU(W1ᵀ[p ; q_i] + b1) + b2) from
    ``learning.ncf.score``."""

    name = "ncf"
    probabilistic = True
    item_tables = (ncf.ITEM,)
    user_name = ncf.USER
    steps = 60
    lr = 0.05
    negatives = 4

    def relevance(self, kept: Params, users: Array, rows: Index | slice) -> npt.NDArray[np.float32]:
        return ncf.score(kept, users, rows)

    def fit_user(
        self, params: Mapping[str, Array], positives: Index, rng: np.random.Generator, start: Array | None
    ) -> Array:
        """Full-batch Adam on the user row only, through the model's head: BCE on ``positives``
        and sampled other items."""
        item = params[ncf.ITEM]
        n_items, d = item.shape
        idx, y = _labelled(rng, n_items, positives, self.negatives)
        head = dict(params)

        def gradient(p: Array) -> Array:
            return np.asarray(ncf.gradients(head, p, idx, y)[0][ncf.USER][0])

        return _adam_user(gradient, d, start, self.steps, self.lr)


def _adam_user(
    gradient: Callable[[Array], Array], d: int, start: Array | None, steps: int, lr: float
) -> Array:
    """Full-batch Adam (β 0.9, 0.999) on a user row alone, from ``start`` or zeros: e_A."""
    p = np.zeros(d, np.float32) if start is None else start.astype(np.float32, copy=True)
    m = np.zeros(d, np.float32)
    v = np.zeros(d, np.float32)
    for t in range(1, steps + 1):
        grad = gradient(p)
        m = 0.9 * m + 0.1 * grad
        v = 0.999 * v + 0.001 * grad * grad
        p -= lr * (m / (1 - 0.9**t)) / (np.sqrt(v / (1 - 0.999**t)) + 1e-8)
    return p.astype(np.float32)


def _labelled(
    rng: np.random.Generator, n_items: int, positives: Index, per_positive: int
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """A fictive user's examples: ``positives`` labelled 1, then ``per_positive`` sampled other
    items for each, labelled 0."""
    negs = _negatives(rng, n_items, positives, per_positive * len(positives))
    idx = np.concatenate((positives, negs)).astype(np.int64)
    y = np.concatenate((np.ones(len(positives)), np.zeros(len(negs)))).astype(np.float32)
    return idx, y


def _negatives(rng: np.random.Generator, n_items: int, positives: Index, count: int) -> Index:
    """``count`` items drawn uniformly from those outside ``positives``."""
    mask = np.ones(n_items, bool)
    mask[positives] = False
    pool = np.flatnonzero(mask)
    if not len(pool):
        return np.zeros(0, np.int64)
    return np.asarray(pool[rng.integers(0, len(pool), count)], dtype=np.int64)


class OwnHead(AttackModel):
    """A model whose head stays home (``--local-head``; PARD, 004 Alg. 1 line 20: z^ir and the
    item rows leave the node, z^re and the head do not). A gossip observer runs the same model,
    so it scores what it receives with its own head, borrowed at each :meth:`borrow` (the node's
    reference, as e_A is refreshed), and under PARD the sender's z^re at 0, which it never sees:
    the head then reads z^ir alone (GMF's h cut to the z^ir half of eq. 35's side-by-side rows,
    NCF's first layer without the z^re inputs; with 004's summed rows, z^ir + 0 is z^ir). The
    attack on what PARD shares."""

    needs_head = True

    def __init__(self, base: AttackModel) -> None:
        if base.name not in ("gmf", "ncf"):
            raise ValueError(f"PARD trains GMF or NCF, not {base.name}")
        self.base = base
        self.name = f"{base.name}, own head"
        self.item_tables = base.item_tables
        self.user_name = base.user_name
        self.dropped = base.dropped
        self.probabilistic = base.probabilistic
        self.head: Params = {}  #: the observer's head, cut to read z^ir alone
        self.version = 0  #: how many times a head was borrowed

    def borrow(self, params: Mapping[str, Array]) -> None:
        """Take the observer's own head from its current model (``params``: every parameter of
        a PARD node, z^re included)."""
        d = int(np.shape(params[self.user_name])[1])
        if self.base.name == "gmf":
            h = np.asarray(params[gmf.H], np.float32)
            self.head = {gmf.H: h[:d].copy(), gmf.B: np.array(params[gmf.B], np.float32)}
        else:
            w1 = np.asarray(params[ncf.W1], np.float32)
            k = w1.shape[0] - int(np.shape(params[ncf.ITEM])[1])  # the user side's width: d or 2d
            head = {n: np.array(params[n], np.float32) for n in (ncf.B1, ncf.W2, ncf.B2)}
            head[ncf.W1] = np.concatenate((w1[:d], w1[k:])).astype(np.float32)
            self.head = head
        self.version += 1

    def relevance(self, kept: Params, users: Array, rows: Index | slice) -> npt.NDArray[np.float32]:
        if not self.head:
            raise RuntimeError("the observer's head must be borrowed before it scores")
        return self.base.relevance({**kept, **self.head}, users, rows)

    def fit_user(
        self, params: Mapping[str, Array], positives: Index, rng: np.random.Generator, start: Array | None
    ) -> Array:
        """e_A trained through the observer's own head (borrowed first: :meth:`borrow`) against
        ``params``' item rows: under PARD a z^ir with z^re at 0."""
        if not self.head:
            raise RuntimeError("the observer's head must be borrowed before e_A is trained")
        return self.base.fit_user({**params, **self.head}, positives, rng, start)


def attack_model(name: str) -> AttackModel:
    """The adapter for ``--model``."""
    models: dict[str, AttackModel] = {"gmf": GMFAttack(), "prme": PRMEAttack(), "ncf": NCFAttack()}
    if name not in models:
        raise ValueError(f"no attack adapter for model {name!r}")
    return models[name]
