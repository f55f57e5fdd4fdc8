"""A node's PARD learner (paper 004 §III, Algorithm 1 lines 10–21) on GMF or NCF.

The model is the backbone's with a second user row: ``user`` is z^ir and leaves the node with the
item rows, ``user_re`` is z^re and never does; the head (GMF's h and b, NCF's MLP) stays on the
node too (004 Alg. 1 line 21; the caller's shared names say so). The head reads both rows side by
side (eq. 35: NCF's first layer takes [z^ir ; z^re ; q_i], GMF has an output weight per row's
product with q_i) or, as 004's code does, their sum z^ir + z^re where it read the user row; which
one, the head's shape says (``init_user_re``). Under the sum both rows take the recommender's
gradient alike, so whatever z^re is pulled to that the recommender does not want, z^ir takes the
opposite of: docs/design.md, PARD.

A local update (Alg. 1 lines 11–17, once per update as 004's code does):

1. the estimators' stage (eq. 37): ``learning.pard.Estimators.fit`` on the node's D_pub and its
   own row, the representations detached;
2. the recommender's stage (eq. 38): for every batch of the epoch, BCE on sampled negatives plus
   λ_ir·L_ir + λ_re·(L^FP_re + L^IP_re), the estimators frozen (in eval mode: no dropout), one Adam
   step a batch on every trained tensor (SparseAdam on the item rows it touched), as GMF's and
   NCF's learners step.

The gradients are analytic, in numpy: the backbone's (``learning.ncf.gradients`` with the two
rows as one user side, GMF's written out here) plus the estimators' (``Estimators.encoders``),
checked against torch's autograd in tests/unit/learning/test_pard.py; the Adam steps are the numpy
ones GMF and NCF take (learning/gmf_numpy.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from learning import gmf, ncf
from learning.gmf_fused import epoch_examples
from learning.gmf_numpy import (
    AdamMoments,
    _adam,
    _sparse_adam,
    _sum_rows,
    moments_state,
    reset_moments,
    restore_moments,
)
from learning.learner import BaseLearner
from learning.params import Array, Params
from learning.pard import USER_RE, Estimators, PardConfig, PublicSet, empty_public
from learning.sgd_groups import SGDGroups
from learning.split import UserData

ITEM = gmf.ITEM
USER = gmf.USER
assert ncf.ITEM == ITEM and ncf.USER == USER


@dataclass(frozen=True)
class PardTrain:
    """The backbone's local training settings (GMF's and NCF's defaults)."""

    model: str = "ncf"  #: "gmf" or "ncf"
    lr: float = 0.001
    batch_size: int = 256
    negatives: int = 4
    local_epochs: int = 1
    top_k: int = 20
    #: plain SGD at these rates (004's code, learning/sgd_groups.py) instead of Adam at ``lr``
    sgd: SGDGroups | None = None
    warmup_lr: float = 0.0  #: Adam's rate during the warm-up updates (0: ``lr``)
    warmup_sgd: SGDGroups | None = None  #: SGD's rates during the warm-up (None: ``sgd``'s)


def init_user_re(
    init: Mapping[str, Array], seed: int, combine: str = "concat", one_row: bool = False, std: float = 0.01
) -> Params:
    """θ_0 with z^re beside z^ir: the same shape and scale (N(0, ``std``): the backbone's user
    row's), drawn from the seed.
    ``concat`` (eq. 35) widens the head to read both rows: NCF's first layer takes 3d inputs
    (drawn as torch's ``Linear(3d, hidden)``), GMF's output weights 2d (one per row's product
    with the item); ``sum`` leaves the head as it is (004's code). ``one_row`` (UC-FedRec): z^re
    is 0, summed, and stays so: the backbone as it was."""
    if combine not in ("concat", "sum"):
        raise ValueError(f"PARD combines its user rows by concat or sum, not {combine}")
    if one_row and combine != "sum":
        raise ValueError("one user row is read alone: combine by sum")
    rng = np.random.default_rng([seed, 0x70617264])
    out = dict(init)
    d = init[USER].shape[1]
    out[USER_RE] = rng.normal(0.0, std, init[USER].shape).astype(np.float32)
    if one_row:
        out[USER_RE] = np.zeros_like(out[USER_RE])
    if combine == "concat":
        if ncf.W1 in init:
            hidden = init[ncf.W1].shape[1]
            bound = 1.0 / np.sqrt(3 * d)
            out[ncf.W1] = rng.uniform(-bound, bound, (3 * d, hidden)).astype(np.float32)
            out[ncf.B1] = rng.uniform(-bound, bound, (hidden,)).astype(np.float32)
        else:
            bound = np.sqrt(3.0 / d)
            out[gmf.H] = rng.uniform(-bound, bound, (2 * d,)).astype(np.float32)
    return out


class PardLearner(BaseLearner):
    """One user's PARD model: the backbone, z^re, the estimators and the node's D_pub."""

    def __init__(
        self,
        data: UserData,
        init: Mapping[str, Array],
        train: PardTrain,
        pard: PardConfig,
        labels: npt.NDArray[np.int64],
        classes: tuple[int, ...],
        rng: np.random.Generator,
        shared: tuple[str, ...],
        seed: int,
    ) -> None:
        if train.model not in ("gmf", "ncf"):
            raise ValueError(f"PARD trains GMF or NCF, not {train.model}")
        if USER_RE not in init:
            raise ValueError("a PARD model has a privacy-relevant user row (init_user_re)")
        if USER_RE in shared:
            raise ValueError("z^re never leaves the node (004 Alg. 1 line 21)")
        if len(labels) != len(classes) or any(
            not 0 <= int(y) < c for y, c in zip(labels, classes, strict=True)
        ):
            raise ValueError("the node's attribute labels do not fit the attributes' classes")
        super().__init__(data, init, shared, rng, train.top_k)
        self.model_name = train.model
        self.train_config = train
        self.pard = pard
        self.labels = np.asarray(labels, dtype=np.int64)
        self.dim = int(init[USER].shape[1])
        #: the head reads [z^ir ; z^re] (eq. 35, init_user_re's concat) or z^ir + z^re (004's code)
        self.concat = (
            init[ncf.W1].shape[0] == 3 * self.dim
            if train.model == "ncf"
            else init[gmf.H].shape[0] == 2 * self.dim
        )
        self.estimators = Estimators(self.dim, classes, seed)
        self.public: PublicSet = empty_public(self.dim, len(classes))
        self.moments = {k: AdamMoments(np.zeros_like(v), np.zeros_like(v)) for k, v in self.params.items()}
        self._positives = data.train_items
        self.updates = 0  #: local updates so far (PardConfig.phase)
        self._private = True  #: whether this update's recommender's stage has the privacy terms
        self._warm = False  #: whether this update is one of the warm-up's (its own rates)

    # -- what the node shows ------------------------------------------------------------------

    def _scores(
        self, params: Mapping[str, Array], items: npt.NDArray[np.int64], at: float
    ) -> npt.NDArray[np.float32]:
        full = {**self.params, **params} if params is not self.params else self.params
        ir, re = self.params[USER][0], self.params[USER_RE][0]
        side = np.concatenate((ir, re)) if self.concat else np.asarray(ir + re, dtype=np.float32)
        if self.model_name == "ncf":  # NCF's first layer reads a user side of 2d values or d
            return ncf.score(dict(full), side, items)
        if not self.concat:
            return gmf.score(dict(full), side, items)
        d = self.dim
        h = full[gmf.H]
        logits = full[ITEM][items] @ (ir * h[:d] + re * h[d:]) + full[gmf.B][0]
        with np.errstate(over="ignore"):  # σ's limit, 0, where exp(-logit) overflows
            return np.asarray(1.0 / (1.0 + np.exp(-logits)), dtype=np.float32)

    def features(self) -> npt.NDArray[np.float32]:
        """``[z^ir, mean item row over the positives]``: g^ir's input, and what the attack reads
        (UC-FedRec's g^ir: ``[z^ir, 0]``, the user row alone)."""
        if self.pard.one_row:
            return np.concatenate((self.params[USER][0], np.zeros(self.dim, np.float32)))
        rows = self.params[ITEM][self._positives]
        mean = rows.mean(axis=0) if len(rows) else np.zeros(self.dim, np.float32)
        return np.concatenate((self.params[USER][0], mean)).astype(np.float32)

    def record(self) -> PublicSet:
        """This node's row of D_pub (004 Alg. 1 line 23), for a node that opted in to publish."""
        return PublicSet(self.features()[None, :], self.params[USER_RE].copy(), self.labels[None, :].copy())

    # -- training -----------------------------------------------------------------------------

    def examples(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """One epoch's examples: every positive and ``negatives`` fresh negatives each, shuffled."""
        return epoch_examples(
            self.rng, self._positives, self._neg_excluded, self._neg_free, self.train_config.negatives
        )

    def local_update(self) -> int:
        """The estimators' stage, then ``local_epochs`` epochs of the recommender's stage."""
        self._held("a local update")
        cfg = self.train_config
        self._begin_update()
        seed = int(self.rng.integers(2**62))  # before anything else draws: a checkpoint replays it
        fit, self._private = self.pard.phase(self.updates)
        self._warm = self.updates < self.pard.warmup
        if fit:
            self.estimators.fit(
                self.public, self.features(), self.params[USER_RE][0], self.labels, self.pard, seed
            )
        self.updates += 1
        steps = 0
        for _ in range(cfg.local_epochs):
            items, labels = self.examples()
            for start in range(0, len(items), cfg.batch_size):
                idx, y = items[start : start + cfg.batch_size], labels[start : start + cfg.batch_size]
                self._step(idx, y)
                steps += 1
        self.version += 1
        return steps

    def _step(self, idx: npt.NDArray[np.int64], y: npt.NDArray[np.float32]) -> None:
        """One step of eq. 38 on a batch: every gradient is taken before anything moves."""
        p = self.params
        pos = self._positives
        grads, g_rows = self.gradients(idx, y)
        rows = idx
        if self._private and (self.pard.lambda_ir or self.pard.lambda_re):
            d = self.dim
            feats = self.features()  # [z^ir, the mean item row over the positives]
            _, d_feats, d_re = self.estimators.encoders(feats, p[USER_RE][0], self.labels, self.pard)
            grads[USER] = grads[USER] + d_feats[None, :d]
            grads[USER_RE] = grads[USER_RE] + d_re[None, :]
            if self.pard.lambda_ir and len(pos) and not self.pard.one_row:  # L_re does not read them
                rows = np.concatenate((idx, pos))
                spread = np.broadcast_to(d_feats[d:] / np.float32(len(pos)), (len(pos), d))
                g_rows = np.concatenate((g_rows, spread))
        if self.pard.one_row:  # UC-FedRec: z^re stays 0
            del grads[USER_RE]
        self.history.touch_rows(ITEM, rows)
        self._touch_dense()
        cfg = self.train_config
        urows, summed = _sum_rows(rows, g_rows)
        sgd = (cfg.warmup_sgd or cfg.sgd) if self._warm else cfg.sgd
        if sgd is not None:
            sgd.step(p, grads, urows, summed)
            return
        lr = cfg.warmup_lr if self._warm and cfg.warmup_lr else cfg.lr
        for name, g in grads.items():
            _adam(p[name], g, self.moments[name], lr)
        _sparse_adam(p[ITEM], urows, summed, self.moments[ITEM], lr)

    def gradients(
        self, idx: npt.NDArray[np.int64], y: npt.NDArray[np.float32]
    ) -> tuple[dict[str, Array], Array]:
        """The gradients of the batch's mean BCE: every dense tensor's, and one row per example
        for the item table (to be summed by item)."""
        p = self.params
        ir, re = p[USER][0], p[USER_RE][0]
        d = self.dim
        if self.model_name == "ncf":
            user_side = np.concatenate((ir, re)) if self.concat else ir + re
            grads, g_rows = ncf.gradients(p, user_side, idx, y)
            g_user = grads.pop(USER)
            if self.concat:
                grads[USER], grads[USER_RE] = g_user[:, :d], g_user[:, d:]
            else:
                grads[USER], grads[USER_RE] = g_user, g_user.copy()
            return grads, g_rows
        h = p[gmf.H]
        q = p[ITEM][idx]
        v = ir * h[:d] + re * h[d:] if self.concat else (ir + re) * h
        out = q @ v + p[gmf.B][0]
        with np.errstate(over="ignore"):
            g = ((1.0 / (1.0 + np.exp(-out))) - y) * np.float32(1.0 / len(idx))
        g = g.astype(np.float32, copy=False)
        gq = g @ q  # (d,): the batch's item rows weighted by their error
        if self.concat:
            dense = {
                USER: (gq * h[:d])[None, :],
                USER_RE: (gq * h[d:])[None, :],
                gmf.H: np.concatenate((gq * ir, gq * re)),
            }
        else:
            dense = {USER: (gq * h)[None, :], USER_RE: (gq * h)[None, :], gmf.H: gq * (ir + re)}
        dense[gmf.B] = np.array([g.sum()], np.float32)
        return {k: v.astype(np.float32) for k, v in dense.items()}, (g[:, None] * v[None, :]).astype(
            np.float32
        )

    # -- checkpoints ----------------------------------------------------------------------------

    def _optimizer_state(self) -> dict[str, Any]:
        out = moments_state(self.moments)
        out["pard_estimators"] = self.estimators.state()
        out["pard_updates"] = self.updates
        return out

    def _reset_optimizer(self) -> None:
        reset_moments(self.moments)

    def _restore_optimizer(self, state: Mapping[str, Any]) -> None:
        rest = {k: v for k, v in state.items() if k not in ("pard_estimators", "pard_updates")}
        restore_moments(self.moments, rest)
        if "pard_estimators" not in state:
            raise ValueError("checkpoint holds no PARD estimators")
        self.estimators.restore(dict(state["pard_estimators"]))
        self.updates = int(state.get("pard_updates", 0))
