"""PRME training steps with analytic gradients: pairwise ranking against a sampled negative.

For a transition (l_c → l) with negative l' and the same time gap, the loss is
−log σ(D(u, l_c, l') − D(u, l_c, l)) plus (λ/2)‖θ‖² on every row the example touches (λ = 0.03),
minimised by SGD with lr 0.005 (Feng et al. 2015; docs/design.md, PRME); a minibatch sums its examples.

Under Share less each example also pays τ‖e_l − e_l^{t−1}‖₂ for its positive item l, where e_l is
the item's whole embedding [X^P_l, X^S_l] and e_l^{t−1} its value before the local update (CIA
paper eq. 2, applied to both of PRME's item spaces).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from learning import prme
from learning.dp import PrivateStepper, clip_factors
from learning.gmf_numpy import _sum_rows
from learning.params import Array, Index, Params

REG = 0.03


@dataclass
class PerExample:
    """Every example's gradient, row by row: ``user[i]`` and, per item table, parallel lists of
    (item index per example, gradient row per example)."""

    user: Array  # (n, d)
    rows: dict[str, list[tuple[Index, Array]]]
    loss: float

    def sq_norms(self) -> Array:
        """‖∇ℓ_i‖² per example, exact when an example touches one row twice (e.g. l = l_c)."""
        sq = (self.user * self.user).sum(1)
        for parts in self.rows.values():
            for a, (ia, ra) in enumerate(parts):
                sq = sq + (ra * ra).sum(1)
                for ib, rb in parts[a + 1 :]:
                    sq = sq + 2.0 * (ia == ib) * (ra * rb).sum(1)
        return np.asarray(sq, dtype=np.float32)

    def summed(self, weights: Array | None = None) -> tuple[Array, dict[str, tuple[Index, Array]]]:
        """(Σ_i w_i ∂user_i, {table: (distinct rows, Σ_i w_i ∂rows_i)}) with w = 1 by default."""
        w = np.ones(len(self.user), np.float32) if weights is None else weights
        user = (self.user * w[:, None]).sum(0, keepdims=True).astype(np.float32)
        out = {}
        for name, parts in self.rows.items():
            idx = np.concatenate([i for i, _ in parts])
            grad = np.concatenate([r * w[:, None] for _, r in parts]).astype(np.float32)
            out[name] = _sum_rows(idx, grad)
        return user, out


@dataclass
class NumpyPRME:
    """One node's PRME trainer (plain SGD, no optimizer state)."""

    params: Params
    lr: float
    reg: float = REG

    def per_example(
        self,
        previous: Index,
        positive: Index,
        negative: Index,
        gap: npt.NDArray[np.float64],
        anchor: tuple[Array, Array] | None = None,
        tau: float = 0.0,
    ) -> PerExample:
        """The gradient of each example's loss; ``anchor`` is (X^P, X^S) rows of each positive."""
        p = self.params
        w_p, w_s = prme.weights(gap)
        u = p[prme.USER_P][0]
        item_p, item_s = p[prme.ITEM_P], p[prme.ITEM_S]
        a_pos = u - item_p[positive]
        a_neg = u - item_p[negative]
        s_prev = item_s[previous]
        b_pos = item_s[positive] - s_prev
        b_neg = item_s[negative] - s_prev
        d_pos = w_p * (a_pos * a_pos).sum(1) + w_s * (b_pos * b_pos).sum(1)
        d_neg = w_p * (a_neg * a_neg).sum(1) + w_s * (b_neg * b_neg).sum(1)
        x = d_neg - d_pos
        loss = float(np.logaddexp(0.0, -x).sum())
        g = -(1.0 / (1.0 + np.exp(np.clip(x, -60.0, 60.0)))).astype(np.float32)  # dL/dD_neg
        cp = (2 * w_p * -g)[:, None]  # coefficient on a_pos
        cn = (2 * w_p * g)[:, None]
        sp = (2 * w_s * -g)[:, None]
        sn = (2 * w_s * g)[:, None]
        lam = np.float32(self.reg)
        user = cp * a_pos + cn * a_neg + lam * u
        p_pos = -cp * a_pos + lam * item_p[positive]
        p_neg = -cn * a_neg + lam * item_p[negative]
        s_pos = sp * b_pos + lam * item_s[positive]
        s_neg = sn * b_neg + lam * item_s[negative]
        s_prv = -(sp * b_pos + sn * b_neg) + lam * s_prev
        if anchor is not None and tau > 0:
            dp_ = item_p[positive] - anchor[0]
            ds_ = item_s[positive] - anchor[1]
            norm = np.sqrt((dp_ * dp_).sum(1) + (ds_ * ds_).sum(1))[:, None]
            inv = np.divide(np.float32(tau), norm, out=np.zeros_like(norm), where=norm > 0)
            p_pos = p_pos + dp_ * inv
            s_pos = s_pos + ds_ * inv
        f32 = np.float32
        return PerExample(
            user.astype(f32),
            {
                prme.ITEM_P: [(positive, p_pos.astype(f32)), (negative, p_neg.astype(f32))],
                prme.ITEM_S: [
                    (positive, s_pos.astype(f32)),
                    (negative, s_neg.astype(f32)),
                    (previous, s_prv.astype(f32)),
                ],
            },
            loss,
        )

    def gradients(
        self,
        previous: Index,
        positive: Index,
        negative: Index,
        gap: npt.NDArray[np.float64],
        anchor: tuple[Array, Array] | None = None,
        tau: float = 0.0,
    ) -> tuple[Array, dict[str, tuple[Index, Array]], float]:
        """(∂/∂user_p, {name: (rows, ∂/∂rows)}, loss) of the summed batch loss."""
        ex = self.per_example(previous, positive, negative, gap, anchor, tau)
        user, rows = ex.summed()
        return user, rows, ex.loss

    def step(
        self,
        previous: Index,
        positive: Index,
        negative: Index,
        gap: npt.NDArray[np.float64],
        anchor: tuple[Array, Array] | None = None,
        tau: float = 0.0,
    ) -> float:
        """One SGD step on a batch of transitions; returns the batch's ranking loss."""
        g_user, rows, loss = self.gradients(previous, positive, negative, gap, anchor, tau)
        lr = np.float32(self.lr)
        self.params[prme.USER_P] -= lr * g_user
        for name, (idx, grad) in rows.items():
            self.params[name][idx] -= lr * grad
        return loss

    def clipped_sum(
        self,
        previous: Index,
        positive: Index,
        negative: Index,
        gap: npt.NDArray[np.float64],
        clip: float,
        anchor: tuple[Array, Array] | None = None,
        tau: float = 0.0,
    ) -> tuple[dict[str, Array], float]:
        """Σ_i min(1, C/(‖∇ℓ_i‖ + 1e-6)) ∇ℓ_i for every parameter (dense), and the batch loss."""
        user, rows, loss = self.clipped_rows(previous, positive, negative, gap, clip, anchor, tau)
        dense = {prme.USER_P: user}
        for name, (idx, grad) in rows.items():
            full = np.zeros_like(self.params[name])
            full[idx] = grad
            dense[name] = full
        return dense, loss

    def clipped_rows(
        self,
        previous: Index,
        positive: Index,
        negative: Index,
        gap: npt.NDArray[np.float64],
        clip: float,
        anchor: tuple[Array, Array] | None = None,
        tau: float = 0.0,
    ) -> tuple[Array, dict[str, tuple[Index, Array]], float]:
        """The clipped per-example sum as (user, {table: (distinct rows, sums)}, loss)."""
        ex = self.per_example(previous, positive, negative, gap, anchor, tau)
        user, rows = ex.summed(clip_factors(ex.sq_norms(), clip))
        return user, rows, ex.loss

    def dp_step(
        self,
        previous: Index,
        positive: Index,
        negative: Index,
        gap: npt.NDArray[np.float64],
        dp: PrivateStepper,
        anchor: tuple[Array, Array] | None = None,
        tau: float = 0.0,
    ) -> float:
        """One DP-SGD step (learning/dp.py): clipped per-example sum plus N(0, σ²C²) on every
        coordinate, then SGD. PRME's loss is a sum, so nothing is divided by the batch size
        (Opacus' ``loss_reduction="sum"``)."""
        user, rows, loss = self.clipped_rows(previous, positive, negative, gap, dp.config.clip, anchor, tau)
        lr = np.float32(self.lr)
        std = dp.noise_std
        dp.noise.add(user, std)
        self.params[prme.USER_P] -= lr * user
        for name, (idx, summed) in rows.items():
            grad = dp.noise.sample(self.params[name].shape, std)  # dense noise, then the batch's rows
            grad[idx] += summed
            grad *= lr
            self.params[name] -= grad
        dp.charge()
        return loss
