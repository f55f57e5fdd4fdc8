"""PRME training steps with analytic gradients: pairwise ranking against a sampled negative.

For a transition (l_c → l) with negative l' and the same time gap, the loss is
−log σ(D(u, l_c, l') − D(u, l_c, l)) plus (λ/2)‖θ‖² on every row the example touches (λ = 0.03),
minimised by SGD with lr 0.005 (Feng et al. 2015, DESIGN §4); a minibatch sums its examples.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from learning import prme
from learning.gmf_numpy import _sum_rows
from learning.params import Array, Params

REG = 0.03


@dataclass
class NumpyPRME:
    """One node's PRME trainer (plain SGD, no optimizer state)."""

    params: Params
    lr: float
    reg: float = REG

    def gradients(
        self,
        previous: npt.NDArray[np.int64],
        positive: npt.NDArray[np.int64],
        negative: npt.NDArray[np.int64],
        gap: npt.NDArray[np.float64],
    ) -> tuple[Array, dict[str, tuple[npt.NDArray[np.int64], Array]], float]:
        """(∂/∂user_p, {name: (rows, ∂/∂rows)}, loss) of the summed batch loss."""
        p = self.params
        w_p, w_s = prme.weights(gap)
        u = p[prme.USER_P][0]
        a_pos = u - p[prme.ITEM_P][positive]
        a_neg = u - p[prme.ITEM_P][negative]
        s_prev = p[prme.ITEM_S][previous]
        b_pos = p[prme.ITEM_S][positive] - s_prev
        b_neg = p[prme.ITEM_S][negative] - s_prev
        d_pos = w_p * (a_pos * a_pos).sum(1) + w_s * (b_pos * b_pos).sum(1)
        d_neg = w_p * (a_neg * a_neg).sum(1) + w_s * (b_neg * b_neg).sum(1)
        x = d_neg - d_pos
        loss = float(np.logaddexp(0.0, -x).sum())
        g = -(1.0 / (1.0 + np.exp(np.clip(x, -60.0, 60.0)))).astype(np.float32)  # dL/dD_neg
        cp = (2 * w_p * -g)[:, None]  # coefficient on a_pos
        cn = (2 * w_p * g)[:, None]
        sp = (2 * w_s * -g)[:, None]
        sn = (2 * w_s * g)[:, None]
        g_user = (cp * a_pos + cn * a_neg).sum(0, keepdims=True)
        item_p_rows = np.concatenate((positive, negative))
        item_p_grad = np.concatenate((-cp * a_pos, -cn * a_neg))
        item_s_rows = np.concatenate((positive, negative, previous))
        item_s_grad = np.concatenate((sp * b_pos, sn * b_neg, -(sp * b_pos + sn * b_neg)))
        # L2 on every row the example touches
        g_user = g_user + self.reg * len(positive) * p[prme.USER_P]
        item_p_grad = item_p_grad + self.reg * p[prme.ITEM_P][item_p_rows]
        item_s_grad = item_s_grad + self.reg * p[prme.ITEM_S][item_s_rows]
        rows = {
            prme.ITEM_P: _sum_rows(item_p_rows, item_p_grad.astype(np.float32)),
            prme.ITEM_S: _sum_rows(item_s_rows, item_s_grad.astype(np.float32)),
        }
        return g_user.astype(np.float32), rows, loss

    def step(
        self,
        previous: npt.NDArray[np.int64],
        positive: npt.NDArray[np.int64],
        negative: npt.NDArray[np.int64],
        gap: npt.NDArray[np.float64],
    ) -> float:
        """One SGD step on a batch of transitions; returns the batch's ranking loss."""
        g_user, rows, loss = self.gradients(previous, positive, negative, gap)
        lr = np.float32(self.lr)
        self.params[prme.USER_P] -= lr * g_user
        for name, (idx, grad) in rows.items():
            self.params[name][idx] -= lr * grad
        return loss
