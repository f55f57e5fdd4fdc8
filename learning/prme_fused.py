"""PRME local epochs as one compiled call: the fused path of PRME's local trainer (docs/design.md, Speed).

The arithmetic of ``learning.prme_numpy.NumpyPRME.step`` (Feng et al. 2015: −log σ(D(u, l_c, l')
− D(u, l_c, l)) with (λ/2)‖θ‖² on every row an example touches, plain SGD on the batch's summed
gradient; the CIA paper's eq. 2 Share-less term on the positive item's two rows), written as
loops numba compiles once per machine (cached next to this file): a batch of transitions then
costs its arithmetic instead of ~60 numpy calls of a few microseconds each, and an epoch is one
call. ``bench/prme_step.py`` prints the two side by side.

It rounds differently from the numpy path in the last bits: sums over a row's factors are taken
left to right (numpy sums them pairwise), ``exp`` and ``log1p`` are LLVM's, and a row touched
twice in a batch has its gradients summed in example order (numpy sums each part's rows, then
the parts). ``tests/unit/learning/test_prme_fused.py`` checks the two agree to float32 precision
over whole epochs. DP-SGD keeps the numpy path.
"""

from __future__ import annotations

import math

import numba
import numpy as np
import numpy.typing as npt

from learning import prme
from learning.params import Array, Params

_F0 = np.float32(0.0)
_F1 = np.float32(1.0)
_F2 = np.float32(2.0)


class FusedPRME:
    """One node's PRME trainer (plain SGD, no optimizer state), an epoch per compiled call."""

    def __init__(self, params: Params, lr: float, reg: float) -> None:
        self.params = params
        self.lr = lr
        self.reg = reg

    def epoch(
        self,
        previous: npt.NDArray[np.int64],
        positive: npt.NDArray[np.int64],
        negative: npt.NDArray[np.int64],
        weights: tuple[Array, Array],
        order: npt.NDArray[np.int64],
        batch_size: int,
        before: tuple[Array, Array] | None = None,
        tau: float = 0.0,
    ) -> tuple[int, float, bool]:
        """Transitions ``order[s : s + batch_size]`` a step, in order; returns (steps, the summed
        ranking loss, whether every value written is finite). ``weights`` is
        ``prme.weights(gap)`` of every transition; ``before`` is (X^P, X^S) as they stood before
        the update: the Share-less anchors of the positive item, used when ``tau`` > 0."""
        w_p, w_s = weights
        anchor_p, anchor_s = before if before is not None and tau > 0 else (_NO_ANCHOR, _NO_ANCHOR)
        p = self.params
        steps, loss, finite = epoch_kernel(
            p[prme.USER_P],
            p[prme.ITEM_P],
            p[prme.ITEM_S],
            np.ascontiguousarray(previous, dtype=np.int64),
            np.ascontiguousarray(positive, dtype=np.int64),
            np.ascontiguousarray(negative, dtype=np.int64),
            np.ascontiguousarray(w_p, dtype=np.float32),
            np.ascontiguousarray(w_s, dtype=np.float32),
            np.ascontiguousarray(order, dtype=np.int64),
            int(batch_size),
            np.float32(self.lr),
            np.float32(self.reg),
            anchor_p,
            anchor_s,
            np.float32(tau),
        )
        return int(steps), float(loss), bool(finite)


_NO_ANCHOR = np.zeros((0, 0), dtype=np.float32)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _add_row(
    slot: npt.NDArray[np.int64],
    rows: npt.NDArray[np.int64],
    acc: Array,
    n_rows: int,
    r: int,
    grad: Array,
) -> int:
    """Add ``grad`` to row ``r``'s sum in ``acc`` (a new place when ``r`` has none yet);
    returns the number of distinct rows."""
    j = slot[r]
    if j < 0:
        j = n_rows
        slot[r] = j
        rows[j] = r
        n_rows += 1
        for k in range(grad.shape[0]):
            acc[j, k] = grad[k]
        return n_rows
    for k in range(grad.shape[0]):
        acc[j, k] += grad[k]
    return n_rows


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _step_rows(
    table: Array,
    rows: npt.NDArray[np.int64],
    acc: Array,
    n_rows: int,
    slot: npt.NDArray[np.int64],
    lr: np.float32,
) -> bool:
    """SGD on the ``n_rows`` summed rows, freeing their places; whether a value written is not
    finite."""
    bad = False
    for j in range(n_rows):
        r = rows[j]
        for k in range(table.shape[1]):
            table[r, k] -= lr * acc[j, k]
            bad |= not np.isfinite(table[r, k])
        slot[r] = -1
    return bad


@numba.njit(cache=True, nogil=True, error_model="numpy")
def epoch_kernel(
    user: Array,
    item_p: Array,
    item_s: Array,
    previous: npt.NDArray[np.int64],
    positive: npt.NDArray[np.int64],
    negative: npt.NDArray[np.int64],
    w_p: Array,
    w_s: Array,
    order: npt.NDArray[np.int64],
    batch_size: int,
    lr: np.float32,
    lam: np.float32,
    anchor_p: Array,
    anchor_s: Array,
    tau: np.float32,
) -> tuple[int, float, bool]:
    """Train in place on the transitions ``order`` names, ``batch_size`` a step: every gradient
    of a batch from the parameters as the batch found them, then SGD on the sums. Returns the
    steps, the summed loss and whether every value written is finite."""
    f = user.shape[1]
    n_items = item_p.shape[0]
    u = user[0]
    g_user = np.empty(f, dtype=np.float32)
    a_pos = np.empty(f, dtype=np.float32)
    a_neg = np.empty(f, dtype=np.float32)
    b_pos = np.empty(f, dtype=np.float32)
    b_neg = np.empty(f, dtype=np.float32)
    grad = np.empty(f, dtype=np.float32)
    slot_p = np.full(n_items, -1, dtype=np.int64)
    slot_s = np.full(n_items, -1, dtype=np.int64)
    rows_p = np.empty(2 * batch_size, dtype=np.int64)
    rows_s = np.empty(3 * batch_size, dtype=np.int64)
    acc_p = np.empty((2 * batch_size, f), dtype=np.float32)
    acc_s = np.empty((3 * batch_size, f), dtype=np.float32)
    use_anchor = anchor_p.shape[0] > 0 and tau > 0
    total = order.shape[0]
    loss = 0.0
    n_steps = 0
    bad = False
    for start in range(0, total, batch_size):
        n = min(batch_size, total - start)
        for k in range(f):
            g_user[k] = _F0
        n_p = 0
        n_s = 0
        for i in range(n):
            e = order[start + i]
            lp, lq, lc = positive[e], negative[e], previous[e]
            wp, ws = w_p[e], w_s[e]
            sa_pos = _F0
            sa_neg = _F0
            sb_pos = _F0
            sb_neg = _F0
            for k in range(f):
                a_pos[k] = u[k] - item_p[lp, k]
                a_neg[k] = u[k] - item_p[lq, k]
                b_pos[k] = item_s[lp, k] - item_s[lc, k]
                b_neg[k] = item_s[lq, k] - item_s[lc, k]
                sa_pos += a_pos[k] * a_pos[k]
                sa_neg += a_neg[k] * a_neg[k]
                sb_pos += b_pos[k] * b_pos[k]
                sb_neg += b_neg[k] * b_neg[k]
            x = (wp * sa_neg + ws * sb_neg) - (wp * sa_pos + ws * sb_pos)
            xd = float(x)
            loss += max(0.0, -xd) + math.log1p(math.exp(-abs(xd)))
            xc = min(max(x, np.float32(-60.0)), np.float32(60.0))
            g = -(_F1 / (_F1 + np.exp(xc)))  # dL/dD_neg
            cp = _F2 * wp * -g
            cn = _F2 * wp * g
            sp = _F2 * ws * -g
            sn = _F2 * ws * g
            for k in range(f):
                g_user[k] += cp * a_pos[k] + cn * a_neg[k] + lam * u[k]
            for k in range(f):
                grad[k] = -cp * a_pos[k] + lam * item_p[lp, k]
            if use_anchor:
                norm = _F0
                for k in range(f):
                    d = item_p[lp, k] - anchor_p[lp, k]
                    norm += d * d
                for k in range(f):
                    d = item_s[lp, k] - anchor_s[lp, k]
                    norm += d * d
                norm = np.sqrt(norm)
                inv = tau / norm if norm > 0 else _F0
                for k in range(f):
                    grad[k] += (item_p[lp, k] - anchor_p[lp, k]) * inv
            n_p = _add_row(slot_p, rows_p, acc_p, n_p, lp, grad)
            for k in range(f):
                grad[k] = -cn * a_neg[k] + lam * item_p[lq, k]
            n_p = _add_row(slot_p, rows_p, acc_p, n_p, lq, grad)
            for k in range(f):
                grad[k] = sp * b_pos[k] + lam * item_s[lp, k]
            if use_anchor:
                for k in range(f):
                    grad[k] += (item_s[lp, k] - anchor_s[lp, k]) * inv
            n_s = _add_row(slot_s, rows_s, acc_s, n_s, lp, grad)
            for k in range(f):
                grad[k] = sn * b_neg[k] + lam * item_s[lq, k]
            n_s = _add_row(slot_s, rows_s, acc_s, n_s, lq, grad)
            for k in range(f):
                grad[k] = -(sp * b_pos[k] + sn * b_neg[k]) + lam * item_s[lc, k]
            n_s = _add_row(slot_s, rows_s, acc_s, n_s, lc, grad)
        # SGD on the batch's sums, after every gradient was taken
        for k in range(f):
            u[k] -= lr * g_user[k]
            bad |= not np.isfinite(u[k])
        bad |= _step_rows(item_p, rows_p, acc_p, n_p, slot_p, lr)
        bad |= _step_rows(item_s, rows_s, acc_s, n_s, slot_s, lr)
        n_steps += 1
    return n_steps, loss, not bad


def warm() -> None:
    """Compile (or load from the cache) the kernel on a tiny model."""
    params = prme.init_params(6, 4, seed=0)
    model = FusedPRME({k: v.copy() for k, v in params.items()}, 0.1, prme.ALPHA)
    idx = np.array([0, 1, 2], dtype=np.int64)
    before = (params[prme.ITEM_P], params[prme.ITEM_S])
    weights = prme.weights(np.array([1.0, 1e6, 2.0]))
    model.epoch(idx, idx + 1, idx + 3, weights, np.arange(3), 2, before, 0.1)
    model.epoch(idx, idx + 1, idx + 3, weights, np.arange(3), 2)


if __name__ == "__main__":
    warm()
