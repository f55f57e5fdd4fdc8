"""The attribute inference attack's classifier: a small torch MLP per attribute (paper 004's code,
``attacker.py`` Discriminator and ``eval_privacy.py``).

Shapes as 004's: two hidden layers of the input's width and one of half of it, LeakyReLU 0.2,
dropout 0.5 before the output; one logit for two classes (binary cross-entropy), else one per
class (cross-entropy). SGD with momentum 0.9 on a random batch of at most ``batch`` training users
per epoch, as 004's code steps. :func:`train` yields, after every epoch, a function that gives
the class probabilities of each array it is asked about (called before the next epoch), so that
the caller (``adversary.aia``) chooses the epoch and computes them only for epochs it looks at.
Deterministic for a seed: torch runs on a forked RNG, the caller's stream is left alone. A step
that leaves a weight non-finite (a handful of training users and many classes can diverge at
these rates) is undone and training stops there: the last epoch yielded is the last sound one
(an epoch is yielded once the next epoch's loss, or after the last a look at the training users'
outputs, shows its weights sound).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np
import numpy.typing as npt
import torch

Probabilities = npt.NDArray[np.float64]


def mlp(width: int, classes: int) -> torch.nn.Module:
    """004's discriminator for an input of ``width`` values and ``classes`` classes."""
    half = max(1, width // 2)
    return torch.nn.Sequential(
        torch.nn.Linear(width, width),
        torch.nn.LeakyReLU(0.2),
        torch.nn.Linear(width, width),
        torch.nn.LeakyReLU(0.2),
        torch.nn.Linear(width, half),
        torch.nn.LeakyReLU(0.2),
        torch.nn.Dropout(0.5),
        torch.nn.Linear(half, 1 if classes == 2 else classes),
    )


def train(
    x: npt.NDArray[np.float32],
    y: npt.NDArray[np.int64],
    views: Sequence[npt.NDArray[np.float32]],
    classes: int,
    epochs: int,
    lr: float,
    batch: int,
    seed: int,
) -> Iterator[Callable[[], list[Probabilities]]]:
    """Train on (``x``, ``y``); after each epoch yield what gives the probabilities of every array
    of ``views`` under the model of that epoch."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        net = mlp(x.shape[1], classes)
        params = list(net.parameters())
        step = MomentumSGD(params, lr, 0.9)
        loss_fn: torch.nn.Module = (
            torch.nn.BCEWithLogitsLoss() if classes == 2 else torch.nn.CrossEntropyLoss()
        )
        xt, yt = torch.from_numpy(x), torch.from_numpy(y)
        seen = [torch.from_numpy(v) for v in views]
        looked = [True]  #: whether the caller looked since the net was last put in training mode

        def probabilities() -> list[Probabilities]:
            looked[0] = True
            net.eval()
            with torch.no_grad():
                return [_probabilities(net, v, classes) for v in seen]

        # An epoch is yielded once the next one's loss shows its weights sound (or, after the last
        # epoch, a look at the training users' outputs); a step that broke them is undone.
        saved: list[torch.Tensor] = []
        for epoch in range(epochs):
            if looked[0]:  # Module.train walks every layer: only after a look switched it off
                net.train()
                looked[0] = False
            pick = torch.randperm(len(xt))[:batch]
            out = net(xt[pick])
            target = yt[pick]
            loss = loss_fn(out.squeeze(1), target.float()) if classes == 2 else loss_fn(out, target)
            if not bool(torch.isfinite(loss)):
                _restore(net, saved)
                return
            if epoch:
                yield probabilities
            saved = [p.detach().clone() for p in params]
            for p in params:
                p.grad = None
            loss.backward()
            step()
        net.eval()
        with torch.no_grad():
            if epochs and not bool(torch.isfinite(net(xt)).all()):
                _restore(net, saved)
                return
        if epochs:
            yield probabilities


class MomentumSGD:
    """SGD with momentum, no dampening, no weight decay: ``torch.optim.SGD(params, lr,
    momentum)``'s update to the bit (buf ← grad at the first step, then buf ← μ·buf + grad;
    p ← p − lr·buf), without its per-step dispatch and without the compiler stack that
    constructing a torch optimiser imports (3.8 s, once per process): bench/aia_cost.py."""

    def __init__(self, params: Sequence[torch.Tensor], lr: float, momentum: float) -> None:
        self.params = list(params)
        self.lr = lr
        self.momentum = momentum
        self.bufs: list[torch.Tensor | None] = [None] * len(params)

    @torch.no_grad()
    def __call__(self) -> None:
        if all(b is not None for b in self.bufs) and all(p.grad is not None for p in self.params):
            # every tensor at once: the same element-wise operations, one dispatch for the lot
            bufs = [b for b in self.bufs if b is not None]
            torch._foreach_mul_(bufs, self.momentum)
            torch._foreach_add_(bufs, [p.grad for p in self.params if p.grad is not None])
            torch._foreach_add_(list[torch.Tensor](self.params), bufs, alpha=-self.lr)
            return
        for i, p in enumerate(self.params):
            grad = p.grad
            if grad is None:
                continue
            buf = self.bufs[i]
            if buf is None:
                buf = self.bufs[i] = torch.clone(grad).detach()
            else:
                buf.mul_(self.momentum).add_(grad)
            p.add_(buf, alpha=-self.lr)


def _restore(net: torch.nn.Module, saved: list[torch.Tensor]) -> None:
    """Put back the weights of before the last step (nothing to do before the first)."""
    with torch.no_grad():
        for p, old in zip(net.parameters(), saved, strict=True):
            p.copy_(old)


def _probabilities(net: torch.nn.Module, x: torch.Tensor, classes: int) -> Probabilities:
    if len(x) == 0:
        return np.zeros((0, classes))
    out = net(x)
    if classes == 2:
        p = torch.sigmoid(out.squeeze(1)).double().numpy()
        return np.stack([1 - p, p], axis=1)
    return torch.softmax(out.double(), dim=1).numpy()  # in float64: rows sum to 1 (log-loss checks)
