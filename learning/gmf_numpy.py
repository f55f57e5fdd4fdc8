"""GMF minibatch steps with analytic gradients in numpy: the fast path of the local trainer.

The GMF loss (NCF §3.2, binary cross-entropy on σ(hᵀ(p ⊙ q_i) + b)) has a four-line gradient.
Computing it directly avoids torch's per-step dispatch cost, which dominates for these tiny
batches (bench/train_step.py prints both side by side). The updates follow torch's Adam and
SparseAdam formulas exactly, and tests/unit/test_learning.py checks the two backends agree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from learning import gmf
from learning.params import Array, Params

BETA1, BETA2, EPS = 0.9, 0.999, 1e-8


@dataclass
class AdamMoments:
    """First and second moments of one parameter, and its step count."""

    m: Array
    v: Array
    step: int = 0


@dataclass
class NumpyGMF:
    """One node's optimizer state for the numpy GMF backend."""

    params: Params
    lr: float
    sparse_items: bool
    moments: dict[str, AdamMoments] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, arr in self.params.items():
            self.moments[name] = AdamMoments(np.zeros_like(arr), np.zeros_like(arr))

    def step(
        self,
        idx: npt.NDArray[np.int64],
        y: npt.NDArray[np.float32],
        anchor: Array | None = None,
        tau: float = 0.0,
    ) -> None:
        """One minibatch of mean BCE-with-logits, then one optimizer step for every parameter.

        With ``anchor`` (one row per batch example, used where ``y == 1``) the Share-less
        regulariser τ Σ_j ‖e_j − anchor_j‖₂ of the CIA paper's eq. 2 is added for the positives.
        """
        p = self.params
        item, user, h, b = p[gmf.ITEM], p[gmf.USER], p[gmf.H], p[gmf.B]
        pu = user[0]
        q = item[idx]
        z = q * pu
        logits = z @ h + b[0]
        g = ((1.0 / (1.0 + np.exp(-logits))) - y) * np.float32(1.0 / len(idx))
        g = g.astype(np.float32, copy=False)
        gz = g[:, None] * h
        # every gradient is taken before any parameter moves (pu is a view of ``user``)
        g_rows = gz * pu
        grads = {
            gmf.USER: (gz * q).sum(axis=0, keepdims=True),
            gmf.H: g @ z,
            gmf.B: np.array([g.sum()], dtype=np.float32),
        }
        if anchor is not None and tau > 0:
            g_rows = g_rows + _share_less_grad(q, anchor, y, tau)
        for name, grad in grads.items():
            _adam(p[name], grad, self.moments[name], self.lr)
        rows, summed = _sum_rows(idx, g_rows)
        if self.sparse_items:
            _sparse_adam(item, rows, summed, self.moments[gmf.ITEM], self.lr)
        else:
            dense = np.zeros_like(item)
            dense[rows] = summed
            _adam(item, dense, self.moments[gmf.ITEM], self.lr)


def _share_less_grad(q: Array, anchor: Array, y: npt.NDArray[np.float32], tau: float) -> Array:
    """∂/∂q of τ Σ_{positives} ‖q − anchor‖₂, with the subgradient 0 where q = anchor."""
    diff = (q - anchor) * (y > 0.5)[:, None]
    norms = np.sqrt((diff * diff).sum(axis=1, keepdims=True))
    return np.asarray(
        np.divide(diff, norms, out=np.zeros_like(diff), where=norms > 0) * np.float32(tau),
        dtype=np.float32,
    )


def _sum_rows(idx: npt.NDArray[np.int64], values: Array) -> tuple[npt.NDArray[np.int64], Array]:
    """Distinct ``idx`` (ascending) and the sum of ``values`` rows for each: a coalesced gradient."""
    order = np.argsort(idx, kind="stable")
    sorted_idx = idx[order]
    starts = np.flatnonzero(np.concatenate(([True], sorted_idx[1:] != sorted_idx[:-1])))
    return sorted_idx[starts], np.add.reduceat(values[order], starts, axis=0)


def _adam(param: Array, grad: Array, st: AdamMoments, lr: float) -> None:
    """torch.optim.Adam (single tensor, no weight decay, no amsgrad) for one parameter."""
    st.step += 1
    st.m += (grad - st.m) * np.float32(1 - BETA1)
    st.v *= np.float32(BETA2)
    st.v += grad * grad * np.float32(1 - BETA2)
    bc1 = 1 - BETA1**st.step
    bc2_sqrt = math.sqrt(1 - BETA2**st.step)
    denom = np.sqrt(st.v) / np.float32(bc2_sqrt) + np.float32(EPS)
    param -= np.float32(lr / bc1) * st.m / denom


def _sparse_adam(param: Array, rows: npt.NDArray[np.int64], grad: Array, st: AdamMoments, lr: float) -> None:
    """torch.optim.SparseAdam for one parameter whose gradient is ``grad`` on ``rows`` only."""
    st.step += 1
    m_old = st.m[rows]
    v_old = st.v[rows]
    m_new = m_old + (grad - m_old) * np.float32(1 - BETA1)
    v_new = v_old + (grad * grad - v_old) * np.float32(1 - BETA2)
    st.m[rows] = m_new
    st.v[rows] = v_new
    bc1 = 1 - BETA1**st.step
    bc2 = 1 - BETA2**st.step
    step_size = np.float32(lr * math.sqrt(bc2) / bc1)
    param[rows] -= step_size * (m_new / (np.sqrt(v_new) + np.float32(EPS)))
