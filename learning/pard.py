"""PARD's privacy estimators and loss terms (paper 004 §III-A to §III-C, eq. 8–38).

A PARD user has two user rows: z^ir (privacy-irrelevant, ``user``: it leaves the node) and z^re
(privacy-relevant, ``user_re``: it never does). Three estimators per attribute t read them:

- g^ir_t (eq. 14–21) predicts μ_t from ``[z^ir_u, z̄^ir_u]``, the user row beside the mean item
  row over the user's positives: what the attack of ``adversary/aia.py`` reads (004 eq. 7). The
  encoders *maximise* its cross-entropy (eq. 16, L_ir: the simplified vCLUB bound of eq. 15),
  while it is trained to predict on D_pub (eq. 21, L_con).
- g^FP_t (eq. 28–30) predicts μ_t from z^re: the encoder and the estimator both minimise its
  cross-entropy (forward predictive, L^FP_re and L^FP_con).
- g^IP (eq. 31–34) maps the attributes to a representation, the mean of one embedding per
  attribute (004's code: ``embedding_age/gen/occ``), and z^re is pulled to it:
  ``‖z^re − g^IP(μ)‖₂`` (L^IP_re); g^IP itself is trained on D_pub only (eq. 34).

The classifiers have the attack's shapes (``learning/attribute_mlp.py``: 004's code uses one
Discriminator class for both), one logit and binary cross-entropy for two classes, else one logit
per class and cross-entropy. Sums over users in eq. 21, 30 and 34 are taken as means (the scale is
the estimators' learning rate's). Readings where 004's prose and code differ are in
docs/design.md (PARD).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

USER_RE = "user_re"  #: z^re: the privacy-relevant user row, never sent


@dataclass(frozen=True)
class PardConfig:
    """PARD's settings (004 §IV-A-5 and the authors' grid for ML-100k)."""

    lambda_ir: float = 0.5  #: λ_ir of eq. 38 (004's code: 0.5)
    lambda_re: float = 0.3  #: λ_re of eq. 38 (004's code default: 0.3)
    epochs: int = 3  #: the estimators' epochs per local update (the ML-100k grid: 3)
    lr: float = 0.1  #: the estimators' SGD learning rate, momentum 0.9 (the ML-100k grid: 0.1)
    clip: float = 5.0  #: each estimator's gradient norm bound per step (004's code: 5)
    #: the share of D_pub each estimator step reads, drawn afresh each epoch (004's code:
    #: ``pubdata_ratio`` 0.08 in its grid; 1: all of it), beside the node's own row
    public_sample: float = 0.08
    #: L_ir's form: "ce" (eq. 16: minus g^ir's cross-entropy, maximised by the encoders) or
    #: "uniform" (g^ir's cross-entropy against the uniform distribution, minimised: its output
    #: pushed toward no information, as 004's code suggests beside eq. 16; a flipped attribute,
    #: which maximises eq. 16, still tells the attribute)
    ir_loss: str = "ce"
    #: the estimators' stage runs at every ``every``-th local update of the privacy phase (004's
    #: code: ``pri_esti_round`` 2 in its fine-tuning script; Algorithm 1: every update, 1)
    every: int = 1
    #: local updates on the recommendation loss alone before the privacy phase (004's code
    #: pre-trains FedNCF, about 30 rounds, then fine-tunes with the privacy terms; Algorithm 1: 0)
    warmup: int = 0
    #: 004's UC-FedRec baseline: one user row (z^re held at 0 and never trained) and g^ir reading
    #: that row alone (the item half of its input held at 0), λ_re unused
    one_row: bool = False
    #: the estimators' stage as one compiled call (learning/pard_fused.py) or in numpy calls
    #: (the reference): the same draws and arithmetic, equal to float32 precision
    fused: bool = True

    def __post_init__(self) -> None:
        if self.every < 1 or self.warmup < 0:
            raise ValueError("PARD's estimators run every 1 or more updates, after 0 or more")

    def phase(self, update: int) -> tuple[bool, bool]:
        """Whether local update ``update`` (from 0) fits the estimators, and whether its
        recommender's stage has the privacy terms: from the first fit on (004's code leaves them
        out of the fine-tuning's first round, before its estimators were fitted)."""
        f = update - self.warmup
        return f >= 0 and (f + 1) % self.every == 0, f >= self.every - 1


@dataclass(frozen=True)
class PublicSet:
    """D_pub as a node holds it: one row per public user (004 Alg. 1 line 23)."""

    features: npt.NDArray[np.float32]  #: (n, 2d): [z^ir_u, mean item row over the positives]
    user_re: npt.NDArray[np.float32]  #: (n, d): z^re_u
    labels: npt.NDArray[np.int64]  #: (n, attributes): the class of each attribute

    def __post_init__(self) -> None:
        n = len(self.features)
        if len(self.user_re) != n or len(self.labels) != n:
            raise ValueError("a public set's features, user rows and labels differ in length")

    def __len__(self) -> int:
        return len(self.features)


def empty_public(dim: int, attributes: int) -> PublicSet:
    """D_pub before any public user was heard from."""
    return PublicSet(
        np.zeros((0, 2 * dim), np.float32),
        np.zeros((0, dim), np.float32),
        np.zeros((0, attributes), np.int64),
    )


PAD = np.float32(-1.0e4)  #: the logit of a class an attribute does not have (probability 0)
Array32 = npt.NDArray[np.float32]


def _leaky(x: Array32) -> Array32:
    """LeakyReLU 0.2 (max(x, 0.2x), a quarter of ``np.where``'s time)."""
    return np.asarray(np.maximum(x, np.float32(0.2) * x), np.float32)


def _leaky_slope(x: Array32) -> Array32:
    """LeakyReLU 0.2's derivative: 1 above 0, else 0.2 (torch's at 0 too)."""
    return np.maximum(np.sign(x), np.float32(0.2))


def _log_softmax(x: Array32) -> Array32:
    shifted = x - x.max(axis=-1, keepdims=True)
    return np.asarray(shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True)), np.float32)


def _input(result: tuple[Array32 | None, list[Array32]]) -> Array32:
    """The input's gradient of a backward pass that computed it."""
    assert result[0] is not None
    return result[0]


@dataclass
class _Pass:
    """What a forward pass keeps for its backward pass."""

    x: Array32
    hidden: list[Array32]  #: each hidden layer's pre-activation
    acts: list[Array32]  #: each layer's input (after activation and dropout)
    mask: Array32 | None  #: the dropout's scale per unit (0 or 2), when training
    logp: Array32  #: (A, n, columns)


class Stack:
    """One MLP of 004's discriminator shape (``learning.attribute_mlp.mlp``) per attribute, all
    reading the same input, held as stacked numpy arrays with an analytic gradient: a handful of
    batched matrix products for every attribute at once instead of torch's per-call overhead
    per layer per attribute (the cost goal, at most 3x a plain round: ``bench/pard_cost.py``).

    Layer k of attribute t is ``x @ weights[k][t] + biases[k][t]`` (weights ``(A, in, out)``, the
    transpose of torch's ``Linear.weight``; biases ``(A, 1, out)``), drawn as ``Linear`` draws
    them (uniform within ``1/sqrt(in)``), LeakyReLU 0.2 between layers, dropout 0.5 before the
    last when training. The last layer has a column per class of the widest attribute; an
    attribute of two classes reads one logit z (column 1) against a fixed 0 (column 0), which is
    binary cross-entropy on z written as a two-class softmax, and one of c classes reads the
    first c columns. The other columns are held at :data:`PAD`: their weights get no gradient.
    """

    def __init__(self, width: int, classes: Sequence[int], rng: np.random.Generator) -> None:
        half = max(1, width // 2)
        columns = max(classes)
        a = len(classes)
        self.classes = tuple(classes)
        self.weights: list[Array32] = []
        self.biases: list[Array32] = []
        for fan_in, fan_out in ((width, width), (width, width), (width, half), (half, columns)):
            bound = 1.0 / np.sqrt(fan_in)
            self.weights.append(rng.uniform(-bound, bound, (a, fan_in, fan_out)).astype(np.float32))
            self.biases.append(rng.uniform(-bound, bound, (a, 1, fan_out)).astype(np.float32))
        self.keep = np.zeros((a, 1, columns), np.float32)  #: the columns whose logit is computed
        self.valid = np.zeros((a, 1, columns), np.float32)  #: the columns that are classes
        for t, c in enumerate(classes):
            if c == 2:
                self.keep[t, 0, 1] = 1.0
            else:
                self.keep[t, 0, :c] = 1.0
            self.valid[t, 0, :c] = 1.0
        self.pad = (1.0 - self.valid) * PAD  #: a two-class attribute's column 0 stays at 0
        self.counts = np.array(classes, np.float32)
        #: each attribute's uniform distribution over its classes (L_ir's uniform form)
        self.target = np.asarray(self.valid / self.counts[:, None, None], np.float32)

    def tensors(self) -> list[Array32]:
        """Every trained array, layer by layer (weights then biases)."""
        return [t for pair in zip(self.weights, self.biases, strict=True) for t in pair]

    def layer(self, t: int) -> list[tuple[Array32, Array32]]:
        """Attribute ``t``'s layers as (weight ``(in, out)``, bias ``(out,)``) arrays, the last
        cut to the columns it reads (one for two classes)."""
        out = [(w[t], b[t, 0]) for w, b in zip(self.weights, self.biases, strict=True)]
        c = self.classes[t]
        cols = slice(1, 2) if c == 2 else slice(0, c)
        w, b = out[-1]
        out[-1] = (w[:, cols], b[cols])
        return out

    def forward(self, x: Array32, rng: np.random.Generator | None = None) -> _Pass:
        """Every attribute's log-probabilities of its classes for the rows of ``x`` ``(n, width)``;
        dropout (training) draws from ``rng`` when one is given."""
        acts, hidden = [x], []
        h = x
        last = len(self.weights) - 1
        mask = None
        for k, (w, b) in enumerate(zip(self.weights, self.biases, strict=True)):
            if k == last and rng is not None:
                mask = self.dropout(len(x), rng)
                h = h * mask
                acts[-1] = h
            z = np.matmul(h, w) + b
            if k < last:
                hidden.append(z)
                h = _leaky(z)
                acts.append(h)
            else:
                logits = z * self.keep + self.pad
        return _Pass(x, hidden, acts, mask, _log_softmax(logits))

    def dropout(self, n: int, rng: np.random.Generator) -> Array32:
        """The dropout before the last layer for ``n`` rows: each unit's scale, 0 or 2 (p = 0.5),
        ``(A, n, the last layer's input)``."""
        shape = (len(self.classes), n, self.weights[-1].shape[1])
        return (rng.random(shape, dtype=np.float32) >= 0.5).astype(np.float32) * np.float32(2.0)

    def cross_entropy(self, run: _Pass, labels: npt.NDArray[np.int64]) -> tuple[float, Array32]:
        """The summed over attributes mean cross-entropy of each estimator against ``labels``
        ``(n, A)`` (binary cross-entropy for two classes), and its gradient in the logits."""
        n = len(run.x)
        where = (np.arange(len(self.classes))[:, None], np.arange(n)[None, :], labels.T)
        picked = run.logp[where]  # (A, n): each row's log-probability of its class
        grad = np.exp(run.logp)
        grad[where] -= np.float32(1.0)  # softmax minus the one-hot class
        return -float(picked.sum()) / n, grad * np.float32(1.0 / n)

    def uniform(self, run: _Pass) -> tuple[float, Array32]:
        """The summed cross-entropy of each estimator's output against the uniform distribution
        over its attribute's classes, and its gradient in the logits."""
        n = len(run.x)
        target = self.target
        loss = -float((run.logp * target).sum()) / n
        return loss, (np.exp(run.logp) - target) * np.float32(1.0 / n)

    def backward(
        self, run: _Pass, d_logits: Array32, weights: bool, need_input: bool = True
    ) -> tuple[Array32 | None, list[Array32]]:
        """The gradient in the input ``(n, width)`` (summed over the attributes, which read the
        same input; None unless ``need_input``) and, when ``weights``, in every array of
        :meth:`tensors`."""
        g = d_logits * self.keep
        grads: list[Array32] = []
        last = len(self.weights) - 1
        for k in range(last, -1, -1):
            a = run.acts[k]
            if weights:
                a3 = a if a.ndim == 3 else np.broadcast_to(a, (len(self.classes), *a.shape))
                grads.append(g.sum(axis=1, keepdims=True))
                grads.append(np.matmul(a3.transpose(0, 2, 1), g))
            if k == 0 and not need_input:
                break
            g = np.matmul(g, self.weights[k].transpose(0, 2, 1))
            if k == last and run.mask is not None:
                g = g * run.mask
            if k > 0:
                g = g * _leaky_slope(run.hidden[k - 1])
        grads.reverse()  # weight, bias per layer from the first
        return (np.asarray(g.sum(axis=0), np.float32) if need_input else None), grads


class Estimators:
    """ψ of one node: g^ir_t and g^FP_t per attribute (each a :class:`Stack`), and g^IP (one
    embedding table per attribute, held as one table with an offset per attribute), stepped by
    SGD with momentum 0.9 (004's code: ``torch.optim.SGD``) and clipped each on its own."""

    def __init__(self, dim: int, classes: Sequence[int], seed: int) -> None:
        if not classes or min(classes) < 2:
            raise ValueError("PARD needs at least one attribute of two classes or more")
        self.dim = dim
        self.classes = tuple(int(c) for c in classes)
        rng = np.random.default_rng([seed, 0x65737469])
        self.ir = Stack(2 * dim, self.classes, rng)
        self.fp = Stack(dim, self.classes, rng)
        #: g^IP: every attribute's class embeddings, of the user rows' scale
        self.ip = rng.normal(0.0, 0.01, (sum(self.classes), dim)).astype(np.float32)
        self.offsets = np.cumsum((0, *self.classes[:-1])).astype(np.int64)
        self._owner = np.repeat(np.arange(len(self.classes)), self.classes)
        self.bufs: list[Array32 | None] = [None] * len(self.parameters())  #: momentum

    def parameters(self) -> list[Array32]:
        """Every trained array: g^ir's, g^FP's, then g^IP's table."""
        return [*self.ir.tensors(), *self.fp.tensors(), self.ip]

    def ip_rows(self, t: int) -> Array32:
        """Attribute ``t``'s class embeddings: a view of g^IP's table."""
        start = int(self.offsets[t])
        return self.ip[start : start + self.classes[t]]

    def ip_of(self, labels: npt.NDArray[np.int64]) -> Array32:
        """g^IP(μ): the mean of the attributes' embeddings, one row per row of ``labels``."""
        return np.asarray(self.ip[labels + self.offsets].mean(axis=1), np.float32)

    # -- the loss terms -----------------------------------------------------------------------

    def loss_ir(self, features: Array32, labels: npt.NDArray[np.int64]) -> float:
        """L_ir (eq. 16): minus the summed cross-entropy of g^ir over the attributes."""
        return -self.ir.cross_entropy(self.ir.forward(features), labels)[0]

    def loss_fp(self, user_re: Array32, labels: npt.NDArray[np.int64]) -> float:
        """L^FP_re (eq. 29) and L^FP_con (eq. 30): the summed cross-entropy of g^FP."""
        return self.fp.cross_entropy(self.fp.forward(user_re), labels)[0]

    def loss_ip(self, user_re: Array32, labels: npt.NDArray[np.int64]) -> float:
        """L^IP_re (eq. 33) and L^IP_con (eq. 34): the mean of ``‖z^re − g^IP(μ)‖₂`` over rows."""
        return self._ip(user_re, labels)[0]

    def _ip(self, user_re: Array32, labels: npt.NDArray[np.int64]) -> tuple[float, Array32]:
        """L^IP and its gradient in ``user_re`` (the table's is its opposite, spread over the
        attributes' rows)."""
        diff = user_re - self.ip_of(labels)
        norm = np.linalg.norm(diff, axis=1, keepdims=True)
        grad = np.divide(diff, norm, out=np.zeros_like(diff), where=norm > 0) / np.float32(len(diff))
        return float(norm.mean()), grad.astype(np.float32)

    def loss_con(self, features: Array32, user_re: Array32, labels: npt.NDArray[np.int64]) -> float:
        """What the estimators minimise (eq. 37): L_con + L^FP_con + L^IP_con."""
        return -self.loss_ir(features, labels) + self.loss_fp(user_re, labels) + self.loss_ip(user_re, labels)

    def loss_uniform(self, features: Array32) -> float:
        """L_ir's ``uniform`` form: the summed cross-entropy of g^ir's output against the uniform
        distribution over each attribute's classes (least when it predicts nothing)."""
        return self.ir.uniform(self.ir.forward(features))[0]

    def encoders(
        self, features: Array32, user_re: Array32, labels: npt.NDArray[np.int64], config: PardConfig
    ) -> tuple[float, Array32, Array32]:
        """The privacy part of eq. 38, λ_ir·L_ir + λ_re·(L^FP_re + L^IP_re), and its gradients in
        ``features`` and ``user_re`` (the encoders' side: the estimators stay as they are). One
        user's 1-d rows, or one row per user."""
        if features.ndim == 1:
            loss, d_feats, d_re = self.encoders(features[None, :], user_re[None, :], labels[None, :], config)
            return loss, d_feats[0], d_re[0]
        if config.fused:
            from learning import pard_fused

            four, g_ir, g_fp = pard_fused.four, self.ir, self.fp
            return pard_fused.encoders_kernel(
                np.ascontiguousarray(features, np.float32),
                np.ascontiguousarray(user_re, np.float32),
                np.ascontiguousarray(labels, np.int64),
                (four(g_ir.weights), four(g_ir.biases), g_ir.keep, g_ir.pad, g_ir.target),
                (four(g_fp.weights), four(g_fp.biases), g_fp.keep, g_fp.pad, g_fp.target),
                config.ir_loss == "uniform",
                float(config.lambda_ir),
                float(config.lambda_re),
                self.ip,
                self.offsets,
            )
        loss = 0.0
        d_feats = np.zeros_like(features)
        d_re = np.zeros_like(user_re)
        if config.lambda_ir:
            run = self.ir.forward(features)
            if config.ir_loss == "uniform":
                value, d_logits = self.ir.uniform(run)
            else:
                value, d_logits = self.ir.cross_entropy(run, labels)
                value, d_logits = -value, -d_logits
            loss += config.lambda_ir * value
            d_feats = _input(self.ir.backward(run, d_logits, weights=False)) * np.float32(config.lambda_ir)
        if config.lambda_re:
            run = self.fp.forward(user_re)
            fp, d_logits = self.fp.cross_entropy(run, labels)
            ip, d_ip = self._ip(user_re, labels)
            loss += config.lambda_re * (fp + ip)
            d_re = (_input(self.fp.backward(run, d_logits, weights=False)) + d_ip) * np.float32(
                config.lambda_re
            )
        return loss, d_feats, d_re

    # -- stage 1 (eq. 37) ---------------------------------------------------------------------

    def fit(
        self,
        public: PublicSet,
        own_features: Array32,
        own_user_re: Array32,
        own_labels: npt.NDArray[np.int64],
        config: PardConfig,
        seed: int,
    ) -> None:
        """``config.epochs`` steps of every estimator, each on a fresh draw of
        ``config.public_sample`` of D_pub (at least one row) and the node's own row (004 §III-A:
        "we also include user u's own data"): g^ir and g^FP on both, g^IP on the public rows only
        (eq. 34; nothing to fit it on while D_pub is empty). The draws and dropout come from
        ``seed``: the caller's node decides them. An estimator whose term weighs nothing in eq. 38
        (λ = 0) is not fitted."""
        feats = np.concatenate((public.features, own_features[None, :]))
        user_re = np.concatenate((public.user_re, own_user_re[None, :]))
        labels = np.concatenate((public.labels, own_labels[None, :]))
        n_pub = len(public)
        rng = np.random.default_rng(seed)
        take = min(n_pub, max(1, round(config.public_sample * n_pub))) if n_pub else 0
        if config.fused:
            self._fit_fused(feats, user_re, labels, take, config, rng)
            return
        for _ in range(config.epochs):
            rows = np.append(rng.permutation(n_pub)[:take], n_pub) if take < n_pub else None
            f, r, y = (feats, user_re, labels) if rows is None else (feats[rows], user_re[rows], labels[rows])
            grads: list[Array32 | None] = []
            for stack, x, used in ((self.ir, f, config.lambda_ir), (self.fp, r, config.lambda_re)):
                if not used:  # an estimator whose term weighs nothing is not fitted
                    grads += [None] * len(stack.tensors())
                    continue
                run = stack.forward(x, rng)
                grads += stack.backward(run, stack.cross_entropy(run, y)[1], True, need_input=False)[1]
            if take and config.lambda_re:
                _, d_re = self._ip(r[:take], y[:take])
                d_table = np.zeros_like(self.ip)
                spread = np.repeat(-d_re / np.float32(len(self.classes)), len(self.classes), axis=0)
                np.add.at(d_table, (y[:take] + self.offsets).ravel(), spread)
                grads.append(d_table)
            else:
                grads.append(None)
            self._clip(grads, config.clip)
            self._step(grads, config.lr)

    def _fit_fused(
        self,
        feats: Array32,
        user_re: Array32,
        labels: npt.NDArray[np.int64],
        take: int,
        config: PardConfig,
        rng: np.random.Generator,
    ) -> None:
        """:meth:`fit`'s epochs as one compiled call: the rows and dropout masks drawn here from
        ``rng`` in the numpy path's order (each epoch: the sample of D_pub, g^ir's mask, g^FP's)."""
        from learning import pard_fused  # numba compiles (or loads) it on first use

        if config.epochs < 1:
            return
        n_pub = len(feats) - 1
        use = (bool(config.lambda_ir), bool(config.lambda_re))
        rows: list[npt.NDArray[np.int64]] = []
        masks: tuple[list[Array32], list[Array32]] = ([], [])
        for _ in range(config.epochs):
            r = np.append(rng.permutation(n_pub)[:take], n_pub) if take < n_pub else np.arange(n_pub + 1)
            rows.append(r.astype(np.int64))
            for used, stack, out in zip(use, (self.ir, self.fp), masks, strict=True):
                if used:
                    out.append(stack.dropout(len(r), rng))
        per = len(self.ir.tensors())
        for j, (used, stack, drawn) in enumerate(zip(use, (self.ir, self.fp), masks, strict=True)):
            if not used:
                continue
            bufs = []
            for i in range(j * per, (j + 1) * per):
                buf = self.bufs[i]
                if buf is None:
                    buf = self.bufs[i] = np.zeros_like(self.parameters()[i])
                bufs.append(buf)
            pard_fused.fit_stack(
                np.ascontiguousarray(feats if j == 0 else user_re, np.float32),
                np.ascontiguousarray(labels, np.int64),
                np.stack(rows),
                pard_fused.four(stack.weights),
                pard_fused.four(stack.biases),
                pard_fused.four(bufs[0::2]),
                pard_fused.four(bufs[1::2]),
                stack.keep,
                stack.pad,
                np.stack(drawn),
                float(config.lr),
                float(config.clip),
            )
        if take and use[1]:
            if self.bufs[-1] is None:
                self.bufs[-1] = np.zeros_like(self.ip)
            buf = self.bufs[-1]
            assert buf is not None
            pard_fused.fit_ip(
                np.ascontiguousarray(user_re, np.float32),
                np.ascontiguousarray(labels, np.int64),
                np.stack(rows)[:, :take],
                self.ip,
                buf,
                self.offsets,
                self._owner.astype(np.int64),
                float(config.lr),
                float(config.clip),
            )

    def _clip(self, grads: list[Array32 | None], bound: float) -> None:
        """Scale each estimator's gradient to an L2 norm of at most ``bound`` in place: torch's
        ``clip_grad_norm_(estimator.parameters(), bound)`` for each (coefficient
        ``bound / (norm + 1e-6)`` clamped at 1), as 004's code clips."""
        a = len(self.classes)
        per = len(self.ir.tensors())
        for part in (grads[:per], grads[per : 2 * per]):
            if all(g is None for g in part):
                continue
            squares = sum(np.einsum("ijk,ijk->i", g, g) for g in part if g is not None)
            coef = np.minimum(bound / (np.sqrt(squares) + 1e-6), 1.0).astype(np.float32)[:, None, None]
            for g in part:
                if g is not None:
                    g *= coef
        table = grads[-1]
        if table is not None:
            squares = np.bincount(self._owner, np.square(table).sum(axis=1), minlength=a)
            coef = np.minimum(bound / (np.sqrt(squares) + 1e-6), 1.0).astype(np.float32)
            table *= coef[self._owner][:, None]

    def _step(self, grads: list[Array32 | None], lr: float) -> None:
        """SGD with momentum 0.9, no dampening: buf ← grad at the first step, then
        buf ← 0.9·buf + grad; w ← w − lr·buf (``torch.optim.SGD``'s update)."""
        for i, (p, g) in enumerate(zip(self.parameters(), grads, strict=True)):
            if g is None:
                continue
            buf = self.bufs[i]
            if buf is None:
                buf = self.bufs[i] = g.copy()
            else:
                buf *= np.float32(0.9)
                buf += g
            np.multiply(buf, np.float32(lr), out=g)  # the gradient is spent: its array takes lr·buf
            p -= g

    def state(self) -> dict[str, Array32]:
        """The estimators' weights and momentum buffers (a node's checkpoint)."""
        out = {f"w{i}": p.copy() for i, p in enumerate(self.parameters())}
        for i, buf in enumerate(self.bufs):
            if buf is not None:
                out[f"m{i}"] = buf.copy()
        return out

    def restore(self, state: dict[str, Array32]) -> None:
        """Take back a :meth:`state` of estimators of the same shapes."""
        params = self.parameters()
        if sum(k.startswith("w") for k in state) != len(params):
            raise ValueError("checkpoint estimators do not match this model's")
        for i, p in enumerate(params):
            w = np.asarray(state[f"w{i}"], np.float32)
            if w.shape != p.shape:
                raise ValueError("checkpoint estimators do not match this model's shapes")
            p[...] = w
        self.bufs = [
            np.array(state[f"m{i}"], np.float32) if f"m{i}" in state else None for i in range(len(params))
        ]


def warm() -> None:
    """Compile (or load from numba's cache) every kernel of the compiled estimators
    (learning/pard_fused.py) on a tiny model, so that the processes of a run or a test suite do
    not each compile them."""
    est = Estimators(2, (2, 3), seed=0)
    public = PublicSet(np.ones((2, 4), np.float32), np.ones((2, 2), np.float32), np.zeros((2, 2), np.int64))
    own = (np.ones(4, np.float32), np.ones(2, np.float32), np.zeros(2, np.int64))
    est.fit(public, *own, PardConfig(), 0)
    for form in ("ce", "uniform"):
        est.encoders(*own, PardConfig(ir_loss=form))


if __name__ == "__main__":
    warm()
