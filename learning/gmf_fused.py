"""GMF local epochs as one compiled call: the fused fast path of the local trainer.

The same arithmetic as ``learning.gmf_numpy`` (NCF §3.2's GMF, binary cross-entropy with logits,
torch's Adam on the user row, ``h`` and ``b``, SparseAdam or Adam on the item table, the CIA
paper's eq. 2 Share-less term), written as loops that numba compiles once per machine (cached
next to this file). A step of 256 examples then costs its arithmetic instead of ~20 numpy calls
of a few microseconds each; ``bench/train_step.py`` prints the backends side by side.

Every float32 operation is the one numpy performs, in the same order, with two exceptions that
round differently in the last bits: dot products are summed left to right (numpy hands them to
BLAS, which sums in SIMD lanes), and ``exp`` is LLVM's (numpy has its own vectorised one).
tests/unit/learning/test_learning.py checks the backends agree to float32 precision over whole epochs.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping

import numba
import numpy as np
import numpy.typing as npt

from learning.gmf_numpy import BETA1, BETA2, EPS, NumpyGMF
from learning.params import Array

#: the order of the step counters and moments passed to the kernel
_ORDER = ("item", "user", "h", "b")


def draw_negatives(
    rng: np.random.Generator, excluded: npt.NDArray[np.bool_], count: int, free: int
) -> npt.NDArray[np.int64]:
    """learning.negatives.sample_negatives, the same ids from the same draws, with the filtering
    of each draw compiled (``free``: the number of items not ``excluded``, at least one)."""
    n_items = excluded.shape[0]
    out = np.empty(count, dtype=np.int64)
    filled = 0
    while filled < count:
        draw = rng.integers(0, n_items, size=int((count - filled) * n_items / free) + 8)
        filled = _keep_allowed(draw, excluded, out, filled)
    return out


@numba.njit(cache=True, nogil=True)
def _keep_allowed(
    draw: npt.NDArray[np.int64], excluded: npt.NDArray[np.bool_], out: npt.NDArray[np.int64], filled: int
) -> int:
    """Append the allowed ids of ``draw``, in order, to ``out`` from ``filled`` until it is full."""
    for item in draw:
        if filled == out.shape[0]:
            break
        if not excluded[item]:
            out[filled] = item
            filled += 1
    return filled


def epoch_examples(
    rng: np.random.Generator,
    positives: npt.NDArray[np.int64],
    excluded: npt.NDArray[np.bool_],
    free: int,
    negatives: int,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """One epoch's BCE examples (NCF §4.1): every positive and ``negatives`` fresh negatives each
    (from the ``free`` items ``excluded`` leaves), shuffled; GMF's and NCF's learners alike."""
    n_pos = len(positives)
    if free <= 0:
        raise ValueError("no item is left to sample negatives from")
    negs = draw_negatives(rng, excluded, n_pos * negatives, free)
    perm = rng.permutation(n_pos * (1 + negatives))
    return shuffled_examples(positives, negs, perm)


@numba.njit(cache=True, nogil=True)
def shuffled_examples(
    positives: npt.NDArray[np.int64], negatives: npt.NDArray[np.int64], perm: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """The epoch's items and labels in the order ``perm`` gives to positives-then-negatives:
    ``concatenate((positives, negatives))[perm]`` and the labels 1 / 0 that go with them."""
    n_pos = positives.shape[0]
    items = np.empty(perm.shape[0], dtype=np.int64)
    labels = np.empty(perm.shape[0], dtype=np.float32)
    for i in range(perm.shape[0]):
        j = perm[i]
        if j < n_pos:
            items[i] = positives[j]
            labels[i] = 1.0
        else:
            items[i] = negatives[j - n_pos]
            labels[i] = 0.0
    return items, labels


class FusedGMF(NumpyGMF):
    """One node's optimizer state, trained by the compiled epoch kernel.

    DP-SGD steps and single ``step`` calls are inherited from the numpy backend (DP-SGD keeps its
    numpy path; its clipping and noise dominate a step anyway).
    """

    #: whether every parameter value the last :meth:`epoch` wrote is finite (the kernel reads
    #: them once more as it ends, so the learner need not gather the rows again)
    finite = True

    def epoch(
        self,
        items: npt.NDArray[np.int64],
        labels: npt.NDArray[np.float32],
        batch_size: int,
        before: Array | None = None,
        tau: float = 0.0,
        undo: RowUndo | None = None,
    ) -> int:
        """Train on ``items``/``labels`` in order, ``batch_size`` examples a step; returns steps.

        ``before`` is the item table as it stood before the update (the Share-less anchors,
        used when ``tau`` > 0). ``undo`` keeps the old value of every item row the epoch writes
        (the learner's recovery point, :class:`RowUndo`)."""
        p, mo = self.params, self.moments
        steps = np.array([mo[k].step for k in _ORDER], dtype=np.int64)
        anchor = before if before is not None and tau > 0 else _NO_ANCHOR
        n, finite = epoch_kernel(
            p["item"],
            p["user"],
            p["h"],
            p["b"],
            mo["item"].m,
            mo["item"].v,
            mo["user"].m,
            mo["user"].v,
            mo["h"].m,
            mo["h"].v,
            mo["b"].m,
            mo["b"].v,
            steps,
            np.ascontiguousarray(items, dtype=np.int64),
            np.ascontiguousarray(labels, dtype=np.float32),
            int(batch_size),
            float(self.lr),
            anchor,
            np.float32(tau),
            self.sparse_items,
            *(undo.kernel_args() if undo is not None else _NO_UNDO),
        )
        for k, s in zip(_ORDER, steps, strict=True):
            mo[k].step = int(s)
        self.finite = bool(finite)
        return int(n)


_NO_ANCHOR = np.zeros((0, 0), dtype=np.float32)
_NO_UNDO = (
    np.zeros(0, dtype=np.bool_),
    np.zeros(0, dtype=np.int64),
    np.zeros((0, 0), dtype=np.float32),
    np.zeros(1, dtype=np.int64),
)


class RowUndo:
    """A fused local update's recovery point: the item rows as they stood before it, saved by
    the kernel the first time it writes each (so it costs the rows the update changed, with no
    pass of its own over the epoch's items), and copies of the small tensors it moves whole.

    ``saved_versions`` gives what ``learning.history.Base`` gives: each tensor as it stood."""

    def __init__(self, params: Mapping[str, Array], rows_name: str, capacity: int, sparse: bool) -> None:
        table = params[rows_name]
        self.rows_name = rows_name
        #: without SparseAdam every row moves: the table is saved whole, like the small tensors
        self.whole = {k: v.copy() for k, v in params.items() if k != rows_name or not sparse}
        n = min(capacity, table.shape[0]) if sparse else 0
        self.seen = np.zeros(table.shape[0] if sparse else 0, dtype=np.bool_)
        self.rows = np.empty(n, dtype=np.int64)
        self.values = np.empty((n, table.shape[1]), dtype=np.float32)
        self.count = np.zeros(1, dtype=np.int64)

    def kernel_args(
        self,
    ) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.int64], Array, npt.NDArray[np.int64]]:
        return self.seen, self.rows, self.values, self.count

    def saved_versions(self, params: Mapping[str, Array]) -> Iterator[tuple[str, Array]]:
        """Each tensor the update may have changed, as it was before (a new array)."""
        for name, old in self.whole.items():
            yield name, old.copy()
        if self.rows_name not in self.whole:
            n = int(self.count[0])
            out = params[self.rows_name].copy()
            out[self.rows[:n]] = self.values[:n]
            yield self.rows_name, out


_F1 = np.float32(1.0)
_B1C = np.float32(1 - BETA1)
_B2C = np.float32(1 - BETA2)
_B2 = np.float32(BETA2)
_EPS32 = np.float32(EPS)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _dense_adam(param: Array, grad: Array, m: Array, v: Array, step: int, lr: float) -> None:
    """torch.optim.Adam for one flat parameter (gmf_numpy._adam, element by element)."""
    bc1 = 1.0 - BETA1**step
    bc2_sqrt = np.float32(math.sqrt(1.0 - BETA2**step))
    lr_t = np.float32(lr / bc1)
    for j in range(param.size):
        g = grad[j]
        mj = m[j] + (g - m[j]) * _B1C
        vj = v[j] * _B2 + g * g * _B2C
        m[j] = mj
        v[j] = vj
        param[j] = param[j] - lr_t * mj / (np.sqrt(vj) / bc2_sqrt + _EPS32)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def epoch_kernel(
    item: Array,
    user: Array,
    h: Array,
    b: Array,
    m_item: Array,
    v_item: Array,
    m_user: Array,
    v_user: Array,
    m_h: Array,
    v_h: Array,
    m_b: Array,
    v_b: Array,
    steps: npt.NDArray[np.int64],
    items: npt.NDArray[np.int64],
    labels: npt.NDArray[np.float32],
    batch_size: int,
    lr: float,
    anchor: Array,
    tau: np.float32,
    sparse: bool,
    seen: npt.NDArray[np.bool_],
    undo_rows: npt.NDArray[np.int64],
    undo_values: Array,
    undone: npt.NDArray[np.int64],
) -> tuple[int, bool]:
    """Train on ``items``/``labels`` in order, ``batch_size`` examples a step, in place on the
    parameters and moments; ``steps`` holds the item, user, h and b step counts. ``anchor``
    (empty: none) is the Share-less anchor table, weighted by ``tau``; ``sparse`` picks
    SparseAdam (else Adam) for the item table. Returns the number of steps taken and whether
    every parameter value it wrote is finite (a NaN or infinity in a parameter stays one through
    the later steps' updates, so reading the written rows once at the end tells). With SparseAdam
    and a non-empty ``undo_rows``, the first write of each item row saves its old value first:
    the row id to ``undo_rows[undone[0]]``, the row to ``undo_values``, ``seen`` marking it."""
    n_items, f = item.shape
    pu = user[0]
    user_flat = user.reshape(-1)
    mu_flat = m_user.reshape(-1)
    vu_flat = v_user.reshape(-1)
    q_t = np.empty((f, batch_size), dtype=np.float32)  # the batch's item rows, transposed
    logit = np.empty(batch_size, dtype=np.float32)
    g = np.empty(batch_size, dtype=np.float32)
    g_user = np.empty(f, dtype=np.float32)
    g_h = np.empty(f, dtype=np.float32)
    g_b = np.empty(1, dtype=np.float32)
    row = np.empty(f, dtype=np.float32)
    slot = np.full(n_items, -1, dtype=np.int64)  # item row -> its place in ``rows``
    rows = np.empty(batch_size, dtype=np.int64)
    acc = np.empty((batch_size, f), dtype=np.float32)
    use_anchor = anchor.shape[0] > 0
    keep_undo = undo_rows.shape[0] > 0
    n_steps = 0
    total = items.shape[0]
    for start in range(0, total, batch_size):
        n = min(batch_size, total - start)
        inv_n = np.float32(1.0 / n)
        # forward, hᵀ(q ⊙ p) + b summed over factors in order, vectorised across the batch
        for i in range(n):
            r = items[start + i]
            for k in range(f):
                q_t[k, i] = item[r, k]
        for i in range(n):
            logit[i] = np.float32(0.0)
        for k in range(f):
            pk = pu[k]
            hk = h[k]
            for i in range(n):
                logit[i] += (q_t[k, i] * pk) * hk
        b0 = b[0]
        for i in range(n):
            g[i] = (_F1 / (_F1 + np.exp(-(logit[i] + b0))) - labels[start + i]) * inv_n
        # gradients, all taken before any parameter moves; item rows summed per distinct row
        g_b[0] = np.float32(0.0)
        for k in range(f):
            g_user[k] = np.float32(0.0)
            g_h[k] = np.float32(0.0)
        n_rows = 0
        for i in range(n):
            gi = g[i]
            g_b[0] += gi
            r = items[start + i]
            j = slot[r]
            if j < 0:
                j = n_rows
                slot[r] = j
                rows[j] = r
                n_rows += 1
                for k in range(f):
                    acc[j, k] = np.float32(0.0)
            for k in range(f):
                gz = gi * h[k]
                qk = item[r, k]
                g_user[k] += gz * qk
                g_h[k] += gi * (qk * pu[k])
                row[k] = gz * pu[k]
            if use_anchor and labels[start + i] > 0.5:  # Share less, eq. 2: τ (q − a)/‖q − a‖
                norm = np.float32(0.0)
                for k in range(f):
                    d = item[r, k] - anchor[r, k]
                    norm += d * d
                norm = np.sqrt(norm)
                if norm > 0:
                    for k in range(f):
                        row[k] = row[k] + (item[r, k] - anchor[r, k]) / norm * tau
            for k in range(f):
                acc[j, k] += row[k]
        # optimizer steps: user, h, b (Adam), then the item rows (SparseAdam, or Adam)
        steps[1] += 1
        _dense_adam(user_flat, g_user, mu_flat, vu_flat, steps[1], lr)
        steps[2] += 1
        _dense_adam(h, g_h, m_h, v_h, steps[2], lr)
        steps[3] += 1
        _dense_adam(b, g_b, m_b, v_b, steps[3], lr)
        steps[0] += 1
        st = steps[0]
        if sparse:
            bc1 = 1.0 - BETA1**st
            bc2 = 1.0 - BETA2**st
            step_size = np.float32(lr * math.sqrt(bc2) / bc1)
            for j in range(n_rows):
                r = rows[j]
                if keep_undo and not seen[r]:
                    seen[r] = True
                    u = undone[0]
                    undo_rows[u] = r
                    for k in range(f):
                        undo_values[u, k] = item[r, k]
                    undone[0] = u + 1
                for k in range(f):
                    gr = acc[j, k]
                    mo = m_item[r, k]
                    vo = v_item[r, k]
                    mn = mo + (gr - mo) * _B1C
                    vn = vo + (gr * gr - vo) * _B2C
                    m_item[r, k] = mn
                    v_item[r, k] = vn
                    item[r, k] = item[r, k] - step_size * (mn / (np.sqrt(vn) + _EPS32))
        else:
            dense = np.zeros((n_items, f), dtype=np.float32)
            for j in range(n_rows):
                for k in range(f):
                    dense[rows[j], k] = acc[j, k]
            _dense_adam(item.reshape(-1), dense.reshape(-1), m_item.reshape(-1), v_item.reshape(-1), st, lr)
        for j in range(n_rows):
            slot[rows[j]] = -1
        n_steps += 1
    return n_steps, _written_finite(item, user_flat, h, b, items, sparse)


@numba.njit(cache=True, nogil=True)
def _written_finite(
    item: Array, user: Array, h: Array, b: Array, items: npt.NDArray[np.int64], sparse: bool
) -> bool:
    """Whether the rows ``items`` of the item table (every row without ``sparse``: dense Adam
    moves them all) and all of ``user``, ``h`` and ``b`` are finite: no value has every
    exponent bit set (learning.snapshots reads the bits the same way)."""
    bits = item.view(np.uint32)
    bad = np.uint32(0)
    if sparse:
        for r in items:
            for k in range(bits.shape[1]):
                bad |= np.uint32((bits[r, k] & _EXP) == _EXP)
    else:
        flat = bits.reshape(-1)
        for j in range(flat.size):
            bad |= np.uint32((flat[j] & _EXP) == _EXP)
    for arr in (user, h, b):
        small = arr.view(np.uint32)
        for j in range(small.size):
            bad |= np.uint32((small[j] & _EXP) == _EXP)
    return bool(bad == 0)


_EXP = np.uint32(0x7F800000)  #: float32 exponent bits: all set for inf and NaN


def warm() -> None:
    """Compile (or load from the cache) every kernel of the fused path on a tiny model, and the
    snapshot and dense Adam (DP-SGD's) kernels, so that node processes started together do not
    each compile them."""
    from learning import adam, gmf, snapshots

    snapshots.warm()
    adam.warm()
    params = gmf.init_params(8, 2, seed=0)
    excluded = np.zeros(8, dtype=bool)
    excluded[0] = True
    negs = draw_negatives(np.random.default_rng(0), excluded, 4, 7)
    items, labels = shuffled_examples(np.array([0], dtype=np.int64), negs, np.arange(5))
    for sparse in (True, False):
        model = FusedGMF({k: v.copy() for k, v in params.items()}, 0.01, sparse)
        model.epoch(items, labels, 2, params["item"], 0.1)


if __name__ == "__main__":
    warm()
