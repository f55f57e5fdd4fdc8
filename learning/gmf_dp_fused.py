"""A GMF DP-SGD step as one compiled call: the fused path of ``--dp-backend fused`` (docs/design.md, Speed).

The arithmetic of ``learning.gmf_numpy.NumpyGMF.dp_step`` (CIA paper §VII-E; Abadi et al. 2016's
DP-SGD as Opacus runs it): every example's gradient of BCE (plus, for a positive under Share
less, the eq. 2 term) on its item row, the user row, h and b; its L2 norm over all of them; the
clip factor min(1, C / (‖∇ℓ_i‖ + 1e-6)); the clipped sums; N(0, σ²C²) on every coordinate,
drawn by ``learning.gauss`` in the numpy path's order (item table, user, h, b); the division by
the expected batch size; dense Adam on every parameter. The numpy path makes ~40 numpy calls and
four passes over the item table a step; this makes one call and, after the noise, one pass.

It rounds differently from the numpy path in the last bits (sums over a row's factors are taken
left to right, a row's clipped gradients are summed in example order, ``exp`` is LLVM's):
``tests/unit/learning/test_gmf_dp_fused.py`` checks the two agree to float32 precision on the same
noise. ``bench/dp_step.py`` prints the two side by side.
"""

from __future__ import annotations

import threading

import numba
import numpy as np
import numpy.typing as npt

from learning import gmf
from learning.adam import adam_scalars
from learning.dp import NORM_EPS, PrivateStepper
from learning.gauss import ZigguratNoise, fill
from learning.gmf_numpy import NumpyGMF
from learning.params import Array

_B1C = np.float32(1 - 0.9)
_B2 = np.float32(0.999)
_B2C = np.float32(1 - 0.999)
_EPS32 = np.float32(1e-8)
_F0 = np.float32(0.0)
_F1 = np.float32(1.0)
_NO_ANCHOR = np.zeros((0, 1), dtype=np.float32)

#: the order Adam's per-parameter scalars are handed to the kernel
_ORDER = (gmf.USER, gmf.ITEM, gmf.H, gmf.B)


class _Scratch(threading.local):
    """Per thread: the item table's noise and the row → batch-slot map, reused between steps
    (one node trains at a time on a thread; a step fills both before it reads them)."""

    def __init__(self) -> None:
        self.noise = np.empty(0, dtype=np.float32)
        self.slots = np.empty(0, dtype=np.int64)

    def get(self, rows: int, cols: int) -> tuple[Array, npt.NDArray[np.int64]]:
        if self.noise.size < rows * cols:
            self.noise = np.empty(rows * cols, dtype=np.float32)
        if self.slots.size < rows:
            self.slots = np.full(rows, -1, dtype=np.int64)
        return self.noise[: rows * cols].reshape(rows, cols), self.slots


_scratch = _Scratch()


def dp_step(
    backend: NumpyGMF,
    idx: npt.NDArray[np.int64],
    y: npt.NDArray[np.float32],
    dp: PrivateStepper,
    anchor: Array | None = None,
    reg_weight: float = 0.0,
) -> None:
    """``backend.dp_step(idx, y, dp, anchor, reg_weight)`` in one compiled call; ``dp``'s noise
    must be a :class:`ZigguratNoise` (``--dp-backend fused``)."""
    words, noise_item, slots = _noise(backend, dp)
    use_anchor = anchor is not None and reg_weight > 0
    reg, clip, std, scale = _step_scalars(dp, reg_weight if use_anchor else 0.0)
    lr_t, bc2 = _adam_steps(backend, 1)
    _kernel(
        *_model(backend),
        np.ascontiguousarray(idx, dtype=np.int64),
        np.ascontiguousarray(y, dtype=np.float32),
        np.ascontiguousarray(anchor, dtype=np.float32) if use_anchor else _NO_ANCHOR,
        reg, clip, std, scale, lr_t[0], bc2[0], words, noise_item, slots,
    )  # fmt: skip
    dp.charge()


def dp_epoch(
    backend: NumpyGMF,
    items: npt.NDArray[np.int64],
    labels: Array,
    rng: np.random.Generator,
    dp: PrivateStepper,
    before: Array | None = None,
    reg_weight: float = 0.0,
) -> int:
    """One DP-SGD epoch over ``items`` (labelled ``labels``): the learner's loop of
    ``dp.may_step()``, ``poisson_batch`` and :func:`dp_step`, with the same draws on ``rng`` and
    the noise stream, in one compiled call. ``before`` is the item table before the update (the
    Share-less anchors, indexed by each batch's items). Returns the steps taken."""
    words, noise_item, slots = _noise(backend, dp)  # refuses torch's noise before anything is drawn
    n_steps = dp.take_steps(dp.steps_per_epoch)
    if n_steps == 0:
        return 0
    picked = rng.random((n_steps, len(items))) < dp.sample_rate  # poisson_batch's draws, row by row
    steps_of, at = np.nonzero(picked)
    offsets = np.searchsorted(steps_of, np.arange(n_steps + 1)).astype(np.int64)
    use_anchor = before is not None and reg_weight > 0
    reg, clip, std, scale = _step_scalars(dp, reg_weight if use_anchor else 0.0)
    lr_t, bc2 = _adam_steps(backend, n_steps)
    _epoch_kernel(
        *_model(backend),
        np.ascontiguousarray(items[at], dtype=np.int64),
        np.ascontiguousarray(labels[at], dtype=np.float32),
        offsets,
        np.ascontiguousarray(before, dtype=np.float32) if use_anchor else _NO_ANCHOR,
        reg, clip, std, scale, lr_t, bc2, words, noise_item, slots,
    )  # fmt: skip
    for _ in range(n_steps):
        dp.charge()
    return n_steps


_Pair = tuple[Array, Array]


def _model(backend: NumpyGMF) -> tuple[Array, Array, Array, Array, _Pair, _Pair, _Pair, _Pair]:
    """The kernels' first arguments: the item table, user, h, b, and their Adam moments."""
    p, mom = backend.params, backend.moments
    m, v = {n: mom[n].m for n in gmf.PARAM_NAMES}, {n: mom[n].v for n in gmf.PARAM_NAMES}
    return (
        p[gmf.ITEM], p[gmf.USER], p[gmf.H], p[gmf.B],
        (m[gmf.ITEM], v[gmf.ITEM]), (m[gmf.USER], v[gmf.USER]), (m[gmf.H], v[gmf.H]), (m[gmf.B], v[gmf.B]),
    )  # fmt: skip


def _step_scalars(
    dp: PrivateStepper, reg_weight: float
) -> tuple[np.float32, np.float32, np.float32, np.float32]:
    """(Share-less weight, C, σC, 1 / expected batch) as the kernels take them."""
    return (
        np.float32(reg_weight),
        np.float32(dp.config.clip),
        np.float32(dp.noise_std),
        np.float32(1.0 / dp.expected_batch),
    )


def _adam_steps(backend: NumpyGMF, n_steps: int) -> tuple[Array, Array]:
    """Each of the next ``n_steps`` steps' Adam scalars (lr / bias correction 1, √bias correction
    2) per parameter in :data:`_ORDER`, advancing the step counts."""
    lr_t = np.empty((n_steps, 4), dtype=np.float32)
    bc2 = np.empty((n_steps, 4), dtype=np.float32)
    moments = [backend.moments[name] for name in _ORDER]
    for s in range(n_steps):
        for n, st in enumerate(moments):
            st.step += 1
            lr_t[s, n], bc2[s, n] = adam_scalars(st.step, backend.lr)
    return lr_t, bc2


def _noise(
    backend: NumpyGMF, dp: PrivateStepper
) -> tuple[npt.NDArray[np.uint64], Array, npt.NDArray[np.int64]]:
    """(the noise stream's state, this thread's item-table noise buffer, its row → slot map)."""
    if not isinstance(dp.noise, ZigguratNoise):
        raise TypeError("the fused DP-SGD step draws its noise from learning.gauss (--dp-backend fused)")
    noise_item, slots = _scratch.get(*backend.params[gmf.ITEM].shape)
    return dp.noise.words, noise_item, slots


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _epoch_kernel(
    item: Array,
    user: Array,
    h: Array,
    b: Array,
    mv_item: tuple[Array, Array],
    mv_user: tuple[Array, Array],
    mv_h: tuple[Array, Array],
    mv_b: tuple[Array, Array],
    idx: npt.NDArray[np.int64],
    y: Array,
    offsets: npt.NDArray[np.int64],
    before: Array,
    reg_weight: np.float32,
    clip: np.float32,
    std: np.float32,
    scale: np.float32,
    lr_t: Array,
    bc2: Array,
    words: npt.NDArray[np.uint64],
    noise: Array,
    slots: npt.NDArray[np.int64],
) -> None:
    """:func:`_kernel` for each step s on ``idx[offsets[s]:offsets[s + 1]]``, its anchors the
    rows of ``before`` at those items (when ``before`` has rows)."""
    for s in range(offsets.size - 1):
        lo, hi = offsets[s], offsets[s + 1]
        batch = idx[lo:hi]
        anchor = before[batch] if before.shape[0] else before
        _kernel(
            item, user, h, b, mv_item, mv_user, mv_h, mv_b, batch, y[lo:hi], anchor, reg_weight,
            clip, std, scale, lr_t[s], bc2[s], words, noise, slots,
        )  # fmt: skip


@numba.njit(inline="always")
def _adam1(p: Array, m: Array, v: Array, j: int, g: np.float32, lr_t: np.float32, bc2: np.float32) -> None:
    """torch.optim.Adam on one float32 coordinate (learning/adam.py's expression)."""
    mj = m[j] + (g - m[j]) * _B1C
    vj = v[j] * _B2 + g * g * _B2C
    m[j] = mj
    v[j] = vj
    p[j] = p[j] - lr_t * mj / (np.sqrt(vj) / bc2 + _EPS32)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _kernel(
    item: Array,
    user: Array,
    h: Array,
    b: Array,
    mv_item: tuple[Array, Array],
    mv_user: tuple[Array, Array],
    mv_h: tuple[Array, Array],
    mv_b: tuple[Array, Array],
    idx: npt.NDArray[np.int64],
    y: Array,
    anchor: Array,
    reg_weight: np.float32,
    clip: np.float32,
    std: np.float32,
    scale: np.float32,
    lr_t: Array,
    bc2: Array,
    words: npt.NDArray[np.uint64],
    noise: Array,
    slots: npt.NDArray[np.int64],
) -> None:
    n_ex = idx.size
    d = item.shape[1]
    pu = user[0]
    # the noise first, in the numpy path's order: item table, user, h, b (none drawn at σ = 0)
    g_user = np.zeros(d, dtype=np.float32)
    g_h = np.zeros(d, dtype=np.float32)
    g_b = np.zeros(1, dtype=np.float32)
    if std != _F0:
        fill(words, noise.reshape(-1), std)
        fill(words, g_user, std)
        fill(words, g_h, std)
        fill(words, g_b, std)
    else:
        noise[...] = _F0
    # per-example gradients, their norms and clip factors; clipped item rows summed per row
    acc = np.zeros((max(n_ex, 1), d), dtype=np.float32)
    rows = np.empty(d, dtype=np.float32)
    hp = h * pu
    used = 0
    for e in range(n_ex):
        r = idx[e]
        q = item[r]
        logit = _F0
        for k in range(d):
            logit += q[k] * pu[k] * h[k]
        g = _F1 / (_F1 + np.exp(-(logit + b[0]))) - y[e]
        sq = g * g
        for k in range(d):
            rows[k] = g * hp[k]
        if reg_weight > _F0 and y[e] > np.float32(0.5):
            nrm = _F0
            for k in range(d):
                dk = q[k] - anchor[e, k]
                nrm += dk * dk
            nrm = np.sqrt(nrm)
            if nrm > _F0:
                for k in range(d):
                    rows[k] += (q[k] - anchor[e, k]) / nrm * reg_weight
        for k in range(d):
            gu = g * (h[k] * q[k])
            gh = g * (q[k] * pu[k])
            sq += rows[k] * rows[k] + gu * gu + gh * gh
        c = min(_F1, clip / (np.sqrt(max(sq, _F0)) + np.float32(NORM_EPS)))
        slot = slots[r]
        if slot < 0:
            slot = used
            slots[r] = slot
            used += 1
        for k in range(d):
            acc[slot, k] += rows[k] * c
            g_user[k] += g * (h[k] * q[k]) * c
            g_h[k] += g * (q[k] * pu[k]) * c
        g_b[0] += g * c
    # dense Adam on every parameter: the item table's clipped rows added to its noise, then one
    # pass (a loop with no branch, which the compiler vectorises as it does learning/adam.py's)
    for e in range(n_ex):
        r = idx[e]
        slot = slots[r]
        if slot >= 0:
            for k in range(d):
                noise[r, k] += acc[slot, k]
            slots[r] = -1
    m, v = mv_item
    flat, mf, vf, nz = item.reshape(-1), m.reshape(-1), v.reshape(-1), noise.reshape(-1)
    lr_i, bc2_i = lr_t[1], bc2[1]
    for j in range(flat.size):
        _adam1(flat, mf, vf, j, nz[j] * scale, lr_i, bc2_i)
    m, v = mv_user
    for k in range(d):
        _adam1(pu, m[0], v[0], k, g_user[k] * scale, lr_t[0], bc2[0])
    m, v = mv_h
    for k in range(d):
        _adam1(h, m, v, k, g_h[k] * scale, lr_t[2], bc2[2])
    m, v = mv_b
    _adam1(b, m, v, 0, g_b[0] * scale, lr_t[3], bc2[3])


def warm() -> None:
    """Compile (or load from numba's cache) before the first timed step."""
    from learning import gauss
    from learning.dp import DPConfig

    gauss.warm()
    params = gmf.init_params(8, 2, seed=0)
    backend = NumpyGMF({k: v.copy() for k, v in params.items()}, 0.01, False)
    stepper = PrivateStepper(DPConfig(noise_multiplier=1.0, backend="fused"), 4, 2, 0)
    idx = np.array([1, 2, 1], dtype=np.int64)
    y = np.array([1.0, 0.0, 1.0], dtype=np.float32)
    dp_step(backend, idx, y, stepper, params[gmf.ITEM][idx], 0.1)
    dp_step(backend, idx, y, stepper)


if __name__ == "__main__":
    warm()
