"""Adam's dense step, compiled, bit for bit the numpy expression it replaces.

``gmf_numpy._adam`` wrote torch.optim.Adam (no weight decay, no amsgrad) as seven numpy passes over
the parameter, each with a temporary. DP-SGD (CIA paper §VII-E, learning/dp.py) noises every
coordinate of the item table, so each private step runs it over the whole table: ~60 µs a call
for ML-100k's 1,682 × 32 floats, four calls a step. This kernel makes one pass. It does the same
float32 operations in the same order on each element (IEEE addition, multiplication, division and
square root are correctly rounded, so a scalar loop and numpy's vector loops give the same bits),
and takes the step's scalars computed in Python exactly as the numpy expression computed them:
``lr / bc1`` and ``sqrt(bc2)`` in double precision, then rounded to float32. ``grad`` may first be
scaled (DP-SGD's division by the expected batch size), as ``grad *= scale`` did before.
tests/unit/learning/test_adam.py checks the bits against the numpy expression.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from learning.params import Array

BETA1, BETA2, EPS = 0.9, 0.999, 1e-8
_B1C = np.float32(1 - BETA1)
_B2 = np.float32(BETA2)
_B2C = np.float32(1 - BETA2)
_EPS32 = np.float32(EPS)


def adam_scalars(step: int, lr: float) -> tuple[np.float32, np.float32]:
    """(lr / bias correction 1, √bias correction 2) of step ``step``, as float32."""
    bc1 = 1 - BETA1**step
    bc2_sqrt = math.sqrt(1 - BETA2**step)
    return np.float32(lr / bc1), np.float32(bc2_sqrt)


def adam_numpy(param: Array, grad: Array, m: Array, v: Array, step: int, lr: float) -> None:
    """The numpy reference: torch.optim.Adam's update of ``param`` at ``step`` (1-based)."""
    lr_t, bc2_sqrt = adam_scalars(step, lr)
    m += (grad - m) * _B1C
    v *= _B2
    v += grad * grad * _B2C
    denom = np.sqrt(v) / bc2_sqrt + _EPS32
    param -= lr_t * m / denom


def adam_dense(
    param: Array, grad: Array, m: Array, v: Array, step: int, lr: float, scale: np.float32 | None = None
) -> None:
    """Adam's update of ``param`` at ``step`` (1-based), after ``grad *= scale`` where given (``grad``
    is then scaled in place, as before). Same bits as :func:`adam_numpy`; arrays that are not
    contiguous float32 of one shape take the numpy path."""
    arrays = (param, grad, m, v)
    if all(a.dtype == np.float32 and a.flags.c_contiguous and a.shape == param.shape for a in arrays):
        lr_t, bc2_sqrt = adam_scalars(step, lr)
        one = scale is None
        _kernel(
            param.reshape(-1),
            grad.reshape(-1),
            m.reshape(-1),
            v.reshape(-1),
            lr_t,
            bc2_sqrt,
            np.float32(1.0) if one else np.float32(scale),
            one,
        )
        return
    if scale is not None:
        grad *= scale
    adam_numpy(param, grad, m, v, step, lr)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _kernel(
    param: Array,
    grad: Array,
    m: Array,
    v: Array,
    lr_t: np.float32,
    bc2_sqrt: np.float32,
    scale: np.float32,
    unscaled: bool,
) -> None:
    for j in range(param.size):
        g = grad[j]
        if not unscaled:
            g = g * scale
            grad[j] = g
        mj = m[j] + (g - m[j]) * _B1C
        vj = v[j] * _B2 + g * g * _B2C
        m[j] = mj
        v[j] = vj
        param[j] = param[j] - lr_t * mj / (np.sqrt(vj) / bc2_sqrt + _EPS32)


def warm() -> None:
    """Compile (or load from numba's cache) before the first timed step."""
    z = np.zeros(2, dtype=np.float32)
    adam_dense(z.copy(), z.copy(), z.copy(), z.copy(), 1, 0.01, np.float32(0.5))
    adam_dense(z.copy(), z.copy(), z.copy(), z.copy(), 1, 0.01)
