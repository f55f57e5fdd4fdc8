"""GMF minibatch steps with analytic gradients in numpy: the fast path of the local trainer.

The GMF loss (NCF §3.2, binary cross-entropy on σ(hᵀ(p ⊙ q_i) + b)) has a four-line gradient.
Computing it directly avoids torch's per-step dispatch cost, which dominates for these tiny
batches (bench/train_step.py prints both side by side). The updates follow torch's Adam and
SparseAdam formulas exactly, and tests/unit/learning/test_learning.py checks the two backends agree.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from learning import gmf
from learning.adam import BETA1, BETA2, EPS, adam_dense
from learning.dp import PrivateStepper, clip_factors
from learning.params import Array, Params
from learning.rowsum import sum_rows

__all__ = ["BETA1", "BETA2", "EPS", "AdamMoments", "NumpyGMF"]


@dataclass
class AdamMoments:
    """First and second moments of one parameter, and its step count."""

    m: Array
    v: Array
    step: int = 0


def moments_state(moments: Mapping[str, AdamMoments]) -> dict[str, Any]:
    """A checkpoint's copy of Adam's moments and step counts, per parameter."""
    return {k: {"m": st.m.copy(), "v": st.v.copy(), "step": st.step} for k, st in moments.items()}


def reset_moments(moments: Mapping[str, AdamMoments]) -> None:
    """Forget Adam's running moments (a fresh optimizer)."""
    for st in moments.values():
        st.m[...] = 0.0
        st.v[...] = 0.0
        st.step = 0


def restore_moments(moments: Mapping[str, AdamMoments], state: Mapping[str, Any]) -> None:
    """Take back a :func:`moments_state`."""
    for k, st in moments.items():
        st.m[...] = state[k]["m"]
        st.v[...] = state[k]["v"]
        st.step = int(state[k]["step"])


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
        with np.errstate(over="ignore"):  # σ's limit, 0, where exp(-logit) overflows
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

    def dp_step(
        self,
        idx: npt.NDArray[np.int64],
        y: npt.NDArray[np.float32],
        dp: PrivateStepper,
        anchor: Array | None = None,
        reg_weight: float = 0.0,
    ) -> None:
        """One DP-SGD step (learning/dp.py) on a Poisson batch, then dense Adam on every parameter.

        Example i's loss is BCE_i plus, for a positive under Share less, ``reg_weight``·‖q_i − a_i‖₂
        (the learner passes τ·batch size, so the mix matches the plain step's mean BCE + τ Σ).
        Its gradient touches one item row and the user, h and b:

            ∂q_i = g_i h⊙p (+ reg),  ∂p = g_i h⊙q_i,  ∂h = g_i p⊙q_i,  ∂b = g_i,  g_i = σ(logit_i) − y_i

        so ‖∇ℓ_i‖ is computed without materialising per-example copies of the item table. The
        clipped sum gets N(0, σ²C²) noise on every coordinate and is divided by the expected batch
        size, as Opacus' ``DPOptimizer`` does for a mean loss.
        """
        grads, (rows, summed) = self._clipped(idx, y, dp.config.clip, anchor, reg_weight)
        std = dp.noise_std
        scale = np.float32(1.0 / dp.expected_batch)
        grads[gmf.ITEM] = dp.noise.sample(self.params[gmf.ITEM].shape, std)  # dense noise...
        grads[gmf.ITEM][rows] += summed  # ...plus the batch's clipped rows
        for name in gmf.PARAM_NAMES:
            grad = grads[name]
            if name != gmf.ITEM:
                dp.noise.add(grad, std)
            _adam(self.params[name], grad, self.moments[name], self.lr, scale)
        dp.charge()

    def clipped_sum(
        self,
        idx: npt.NDArray[np.int64],
        y: npt.NDArray[np.float32],
        clip: float,
        anchor: Array | None = None,
        reg_weight: float = 0.0,
    ) -> dict[str, Array]:
        """Σ_i min(1, C/(‖∇ℓ_i‖ + 1e-6)) ∇ℓ_i over the batch, for every parameter (item dense)."""
        grads, (rows, summed) = self._clipped(idx, y, clip, anchor, reg_weight)
        dense = np.zeros_like(self.params[gmf.ITEM])
        dense[rows] = summed
        grads[gmf.ITEM] = dense
        return grads

    def _clipped(
        self,
        idx: npt.NDArray[np.int64],
        y: npt.NDArray[np.float32],
        clip: float,
        anchor: Array | None,
        reg_weight: float,
    ) -> tuple[dict[str, Array], tuple[npt.NDArray[np.int64], Array]]:
        """The clipped sums of the user, h and b, and (distinct item rows, their clipped sums)."""
        p = self.params
        item, user, h, b = p[gmf.ITEM], p[gmf.USER], p[gmf.H], p[gmf.B]
        pu = user[0]
        q = item[idx]
        z = q * pu
        with np.errstate(over="ignore"):  # σ's limit, 0, where exp(-logit) overflows
            g = ((1.0 / (1.0 + np.exp(-(z @ h + b[0])))) - y).astype(np.float32)
        rows = g[:, None] * (h * pu)
        if anchor is not None and reg_weight > 0:
            rows = rows + _share_less_grad(q, anchor, y, reg_weight)
        g_user = g[:, None] * (h * q)
        g_h = g[:, None] * z
        sq = (rows * rows).sum(1) + (g_user * g_user).sum(1) + (g_h * g_h).sum(1) + g * g
        c = clip_factors(sq, clip)
        cg = c[:, None]
        empty = (idx, np.zeros((0, item.shape[1]), np.float32))
        item_rows = _sum_rows(idx, rows * cg) if len(idx) else empty
        return {
            gmf.USER: (g_user * cg).sum(axis=0, keepdims=True).astype(np.float32),
            gmf.H: (g_h * cg).sum(axis=0).astype(np.float32),
            gmf.B: np.array([(g * c).sum()], dtype=np.float32),
        }, item_rows


def _share_less_grad(q: Array, anchor: Array, y: npt.NDArray[np.float32], tau: float) -> Array:
    """∂/∂q of τ Σ_{positives} ‖q − anchor‖₂, with the subgradient 0 where q = anchor."""
    diff = (q - anchor) * (y > 0.5)[:, None]
    norms = np.sqrt((diff * diff).sum(axis=1, keepdims=True))
    return np.asarray(
        np.divide(diff, norms, out=np.zeros_like(diff), where=norms > 0) * np.float32(tau),
        dtype=np.float32,
    )


def _sum_rows(idx: npt.NDArray[np.int64], values: Array) -> tuple[npt.NDArray[np.int64], Array]:
    """Distinct ``idx`` (ascending) and the sum of ``values`` rows for each: a coalesced gradient
    (compiled, bit for bit ``np.add.reduceat`` over the stable sort: learning/rowsum.py)."""
    return sum_rows(idx, values)


def _adam(param: Array, grad: Array, st: AdamMoments, lr: float, scale: np.float32 | None = None) -> None:
    """torch.optim.Adam (single tensor, no weight decay, no amsgrad) for one parameter, after
    ``grad *= scale`` where given: one compiled pass, bit for bit the numpy expression
    (learning/adam.py)."""
    st.step += 1
    adam_dense(param, grad, st.m, st.v, st.step, lr, scale)


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
