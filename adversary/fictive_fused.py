"""The CIA's fictive user e_A for GMF in compiled calls: ``--fictive-backend fused`` (docs/design.md, Speed).

Under Share less (CIA paper §IV-C) and in the fictive-user probes, an observer trains one e_A per
target against its reference model (60 steps of full-batch Adam on the user row alone, BCE on
V_target and 4 sampled other items per positive: ``adversary.models.GMFAttack.fit_user``) and
scores every model it folds with them (the mean σ(hᵀ(e_A ⊙ q_i) + b) over each target's items:
``CIAObserver._evaluate``). The FedAvg server holds 943 targets of 50 items: the numpy path
trains them one Python loop at a time (~4 s a round here) and scores each client update through
a 47k-row gather (~3.5 ms an update), most of an `fl-probes` fictive-user round.

Here both are one compiled call: :func:`fit` runs every target's Adam steps on the examples the
numpy path draws (the same calls on the observer's generator, in the same order), and
:func:`target_means` scores the kept rows against (e_A ⊙ h) per target without gathering them.
They round differently from the numpy path in the last bits (dot products summed left to right,
not by BLAS; e_A ⊙ h taken once per target), so near-ties between users' scores may break the
other way: ``tests/unit/adversary/test_fictive_fused.py`` checks both against the numpy path to
float32 precision, ``bench/fictive_user.py`` prints the two side by side.
"""

from __future__ import annotations

import numba
import numpy as np
import numpy.typing as npt

from learning.params import Array

_F0 = np.float32(0.0)
_F1 = np.float32(1.0)
_B1 = np.float32(0.9)
_B1C = np.float32(0.1)
_B2 = np.float32(0.999)
_B2C = np.float32(0.001)
_EPS = np.float32(1e-8)


@numba.njit(cache=True, nogil=True, error_model="numpy", fastmath={"reassoc"})
def fit(
    item: Array,
    h: Array,
    b: Array,
    idx: npt.NDArray[np.int64],
    y: Array,
    offsets: npt.NDArray[np.int64],
    start: Array,
    steps: int,
    lr: np.float32,
) -> Array:
    """e_A of every target t: full-batch Adam (β 0.9, 0.999, ε 1e-8) on a user row alone for
    ``steps`` steps, on examples ``idx[offsets[t]:offsets[t + 1]]`` labelled ``y``, from
    ``start[t]`` (zeros where ``start`` has no rows)."""
    n_targets = offsets.size - 1
    d = item.shape[1]
    out = np.zeros((n_targets, d), dtype=np.float32)
    m = np.empty(d, dtype=np.float32)
    v = np.empty(d, dtype=np.float32)
    grad = np.empty(d, dtype=np.float32)
    width = 0
    for t in range(n_targets):
        width = max(width, offsets[t + 1] - offsets[t])
    qh = np.empty((width, d), dtype=np.float32)
    for t in range(n_targets):
        lo, hi = offsets[t], offsets[t + 1]
        n = hi - lo
        p = out[t]
        if start.shape[0]:
            p[:] = start[t]
        m[:] = _F0
        v[:] = _F0
        for e in range(n):
            row = item[idx[lo + e]]
            for k in range(d):
                qh[e, k] = row[k] * h[k]
        inv_n = np.float32(n)
        for s in range(1, steps + 1):
            grad[:] = _F0
            for e in range(n):
                logit = _F0
                for k in range(d):
                    logit += qh[e, k] * p[k]
                g = _F1 / (_F1 + np.exp(-(logit + b[0]))) - y[lo + e]
                for k in range(d):
                    grad[k] += g * qh[e, k]
            c1 = np.float32(1.0 - 0.9**s)
            c2 = np.float32(1.0 - 0.999**s)
            for k in range(d):
                gk = grad[k] / inv_n
                m[k] = _B1 * m[k] + _B1C * gk
                v[k] = _B2 * v[k] + _B2C * gk * gk
                p[k] -= lr * (m[k] / c1) / (np.sqrt(v[k] / c2) + _EPS)
    return out


@numba.njit(cache=True, nogil=True, error_model="numpy", fastmath={"reassoc"})
def target_means(
    rows: Array,
    h: Array,
    b: Array,
    refs: Array,
    flat: npt.NDArray[np.int64],
    starts: npt.NDArray[np.int64],
    sizes: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """Mean relevance σ(q_i · (e_t ⊙ h) + b) of each target t's kept rows ``flat[starts[t]:…]``
    (the relevance float32, the mean over them in float64, as the numpy path takes it)."""
    n_targets = starts.size
    d = rows.shape[1]
    out = np.empty(n_targets, dtype=np.float64)
    eh = np.empty(d, dtype=np.float32)
    for t in range(n_targets):
        for k in range(d):
            eh[k] = refs[t, k] * h[k]
        lo = starts[t]
        hi = starts[t + 1] if t + 1 < n_targets else flat.size
        acc = 0.0
        for j in range(lo, hi):
            q = rows[flat[j]]
            logit = _F0
            for k in range(d):
                logit += q[k] * eh[k]
            acc += np.float64(_F1 / (_F1 + np.exp(-(logit + b[0]))))
        out[t] = acc / sizes[t]
    return out


def warm() -> None:
    """Compile (or load from numba's cache) before the first timed call."""
    item = np.ones((4, 2), np.float32)
    h, b = np.ones(2, np.float32), np.zeros(1, np.float32)
    idx = np.array([0, 1, 2], np.int64)
    y = np.array([1, 0, 0], np.float32)
    offsets = np.array([0, 1, 3], np.int64)
    refs = fit(item, h, b, idx, y, offsets, np.zeros((0, 2), np.float32), 2, np.float32(0.05))
    fit(item, h, b, idx, y, offsets, refs, 2, np.float32(0.05))
    target_means(item, h, b, refs, idx, np.array([0, 1], np.int64), np.array([1.0, 2.0]))


if __name__ == "__main__":
    warm()
