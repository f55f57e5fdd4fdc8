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
import torch

from learning.attribute_mlp import MomentumSGD, mlp

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


def cross_entropy(out: torch.Tensor, y: torch.Tensor, classes: int) -> torch.Tensor:
    """The mean cross-entropy of logits ``out`` against classes ``y`` (binary for two classes,
    one logit)."""
    if classes == 2:
        return torch.nn.functional.binary_cross_entropy_with_logits(out.squeeze(1), y.to(out.dtype))
    return torch.nn.functional.cross_entropy(out, y)


class Estimators(torch.nn.Module):
    """ψ of one node: g^ir_t and g^FP_t per attribute, and g^IP."""

    def __init__(self, dim: int, classes: Sequence[int], seed: int) -> None:
        super().__init__()
        if not classes or min(classes) < 2:
            raise ValueError("PARD needs at least one attribute of two classes or more")
        self.dim = dim
        self.classes = tuple(int(c) for c in classes)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.ir = torch.nn.ModuleList(mlp(2 * dim, c) for c in self.classes)
            self.fp = torch.nn.ModuleList(mlp(dim, c) for c in self.classes)
            self.ip = torch.nn.ModuleList(torch.nn.Embedding(c, dim) for c in self.classes)
            for emb in self.ip:
                assert isinstance(emb, torch.nn.Embedding)
                torch.nn.init.normal_(emb.weight, 0.0, 0.01)  # of the user rows' scale
        self.eval()
        self._step = MomentumSGD(list(self.parameters()), 0.0, 0.9)  #: one step for every estimator
        self._groups = [list(net.parameters()) for net in self.nets()]  #: each estimator's tensors

    def nets(self) -> list[torch.nn.Module]:
        """Every estimator, each stepped and clipped on its own."""
        return [*self.ir, *self.fp, *self.ip]

    def ip_of(self, labels: torch.Tensor) -> torch.Tensor:
        """g^IP(μ): the mean of the attributes' embeddings, one row per row of ``labels``."""
        return torch.stack([emb(labels[:, t]) for t, emb in enumerate(self.ip)]).mean(dim=0)

    # -- the loss terms -----------------------------------------------------------------------

    def loss_ir(self, features: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """L_ir (eq. 16): minus the summed cross-entropy of g^ir over the attributes."""
        return -sum_terms(
            cross_entropy(g(features), labels[:, t], c)
            for t, (g, c) in enumerate(zip(self.ir, self.classes, strict=True))
        )

    def loss_fp(self, user_re: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """L^FP_re (eq. 29) and L^FP_con (eq. 30): the summed cross-entropy of g^FP."""
        return sum_terms(
            cross_entropy(g(user_re), labels[:, t], c)
            for t, (g, c) in enumerate(zip(self.fp, self.classes, strict=True))
        )

    def loss_ip(self, user_re: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """L^IP_re (eq. 33) and L^IP_con (eq. 34): the mean of ``‖z^re − g^IP(μ)‖₂`` over rows."""
        distance: torch.Tensor = torch.linalg.vector_norm(user_re - self.ip_of(labels), dim=1)
        return distance.mean()

    def loss_con(self, features: torch.Tensor, user_re: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """What the estimators minimise (eq. 37): L_con + L^FP_con + L^IP_con, the
        representations detached."""
        features, user_re = features.detach(), user_re.detach()
        return -self.loss_ir(features, labels) + self.loss_fp(user_re, labels) + self.loss_ip(user_re, labels)

    def loss_uniform(self, features: torch.Tensor) -> torch.Tensor:
        """L_ir's ``uniform`` form: the summed cross-entropy of g^ir's output against the uniform
        distribution over each attribute's classes (least when it predicts nothing)."""
        total = torch.zeros(())
        for g, c in zip(self.ir, self.classes, strict=True):
            out = g(features)
            if c == 2:
                logp = torch.nn.functional.logsigmoid(torch.cat((out, -out), dim=1))
            else:
                logp = torch.log_softmax(out, dim=1)
            total = total - logp.mean(dim=1).mean()
        return total

    def loss_encoders(
        self, features: torch.Tensor, user_re: torch.Tensor, labels: torch.Tensor, config: PardConfig
    ) -> torch.Tensor:
        """The privacy part of eq. 38: λ_ir·L_ir + λ_re·(L^FP_re + L^IP_re), for the encoders
        (the caller takes gradients for its representations only, the estimators stay as they
        are)."""
        out = torch.zeros(())
        if config.lambda_ir:
            ir = (
                self.loss_uniform(features) if config.ir_loss == "uniform" else self.loss_ir(features, labels)
            )
            out = out + config.lambda_ir * ir
        if config.lambda_re:
            out = out + config.lambda_re * (self.loss_fp(user_re, labels) + self.loss_ip(user_re, labels))
        return out

    # -- stage 1 (eq. 37) ---------------------------------------------------------------------

    def fit(
        self,
        public: PublicSet,
        own_features: npt.NDArray[np.float32],
        own_user_re: npt.NDArray[np.float32],
        own_labels: npt.NDArray[np.int64],
        config: PardConfig,
        seed: int,
    ) -> None:
        """``config.epochs`` steps of every estimator, each on a fresh draw of
        ``config.public_sample`` of D_pub (at least one row) and the node's own row (004 §III-A:
        "we also include user u's own data"): g^ir and g^FP on both, g^IP on the public rows only
        (eq. 34; nothing to fit it on while D_pub is empty). The draws and dropout come from
        ``seed`` on a forked torch stream: the caller's node decides them, and nothing else is
        disturbed."""
        feats = torch.from_numpy(np.concatenate((public.features, own_features[None, :])))
        user_re = torch.from_numpy(np.concatenate((public.user_re, own_user_re[None, :])))
        labels = torch.from_numpy(np.concatenate((public.labels, own_labels[None, :])))
        n_pub = len(public)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.train()
            self._fit(feats, user_re, labels, n_pub, config)
            self.eval()

    def _fit(
        self, feats: torch.Tensor, user_re: torch.Tensor, labels: torch.Tensor, n_pub: int, config: PardConfig
    ) -> None:
        take = min(n_pub, max(1, round(config.public_sample * n_pub))) if n_pub else 0
        own = torch.tensor([n_pub])
        for _ in range(config.epochs):
            for p in self._step.params:
                p.grad = None
            rows = torch.cat((torch.randperm(n_pub)[:take], own)) if take < n_pub else None
            f, r, y = (feats, user_re, labels) if rows is None else (feats[rows], user_re[rows], labels[rows])
            loss = -self.loss_ir(f, y) + self.loss_fp(r, y)
            if take:
                loss = loss + self.loss_ip(r[:take], y[:take])
            loss.backward()  # type: ignore[no-untyped-call]
            clip_each(self._groups, config.clip)  # each estimator's gradient on its own (004's code)
            self._step.lr = config.lr
            self._step()

    def state(self) -> dict[str, npt.NDArray[np.float32]]:
        """The estimators' weights and momentum buffers, as arrays (a node's checkpoint)."""
        out = {f"w{i}": p.detach().numpy().copy() for i, p in enumerate(self.parameters())}
        for i, buf in enumerate(self._step.bufs):
            if buf is not None:
                out[f"m{i}"] = buf.numpy().copy()
        return out

    def restore(self, state: dict[str, npt.NDArray[np.float32]]) -> None:
        """Take back a :meth:`state` of estimators of the same shapes."""
        params = list(self.parameters())
        if sum(k.startswith("w") for k in state) != len(params):
            raise ValueError("checkpoint estimators do not match this model's")
        with torch.no_grad():
            for i, p in enumerate(params):
                w = state[f"w{i}"]
                if w.shape != tuple(p.shape):
                    raise ValueError("checkpoint estimators do not match this model's shapes")
                p.copy_(torch.from_numpy(np.asarray(w, np.float32)))
        self._step.bufs = [
            torch.from_numpy(np.array(state[f"m{i}"], np.float32)) if f"m{i}" in state else None
            for i in range(len(params))
        ]


@torch.no_grad()
def clip_each(groups: list[list[torch.nn.Parameter]], bound: float) -> None:
    """Scale each group's gradient to an L2 norm of at most ``bound``: torch's
    ``clip_grad_norm_(group, bound)`` for every group (coefficient ``bound / (norm + 1e-6)``
    clamped at 1), in a handful of dispatches for all of them instead of a dozen per group."""
    grads: list[torch.Tensor] = []
    owner: list[int] = []
    for g, params in enumerate(groups):
        for p in params:
            if p.grad is not None:
                grads.append(p.grad)
                owner.append(g)
    if not grads:
        return
    squares = torch.stack(torch._foreach_norm(grads)) ** 2
    index = torch.tensor(owner)
    totals = torch.zeros(len(groups)).index_add_(0, index, squares).sqrt()
    coef = torch.clamp(bound / (totals + 1e-6), max=1.0)[index]
    torch._foreach_mul_(grads, list(coef.unbind()))


def sum_terms(terms: object) -> torch.Tensor:
    """The sum of an iterable of scalar tensors."""
    total = torch.zeros(())
    for term in terms:  # type: ignore[attr-defined]
        total = total + term
    return total
