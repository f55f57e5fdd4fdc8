"""The machine's floor for one simulated round: what any simulator of this setting must compute.

Every user's local epoch done as one batched computation over all users at once (no nodes, no
messages, no per-user calls), plus one copy of every model (the least a round of gossip moves):

- 4 fresh uniform negatives per positive for every user, drawn for all users together (rejecting
  items the user interacted with), and every user's examples shuffled;
- step s of every user in one pass: GMF forward and backward for all rows of all users' s-th
  batches of 256, the gradients summed per user and per (user, item) row;
- torch's Adam on each user's embedding, h and b, and SparseAdam (lazy) on the item rows each
  user's batch touched, with every user's own moments and step counts;
- one copy of all N item tables, user rows, h and b.

This is the same arithmetic and memory traffic as a Base GL round's training, without the
gossip (merges, messages) the simulator also does, so the ratio round / floor bounds what is
overhead. ``bench/sim_round.py`` runs it between measured rounds and prints the ratio.

A second, lower floor runs the same epochs as one compiled loop over the users
(:func:`compiled_round`: the simulator's own fused kernel, one call for all users, the examples
drawn as above). Batching across users scatters every step over all users' tables (600 MB with
the moments), where a per-user loop keeps one user's 0.6 MB in cache, so the per-user loop is
the faster of the two on this machine; both are printed.

    .venv/bin/python -m bench.floor [--nodes 943] [--repeats 3]
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numba
import numpy as np
import numpy.typing as npt
import torch

from learning.gmf_fused import epoch_kernel
from learning.gmf_numpy import BETA1, BETA2, EPS
from learning.split import UserData


@dataclass
class BatchedModels:
    """Every user's GMF model and Adam moments as stacked torch tensors. User u's item table is
    rows u·n_items … (u+1)·n_items − 1 of ``table``, each row holding the item's embedding and
    its two Adam moments side by side (one gather and one scatter move all three)."""

    n_items: int
    table: torch.Tensor
    user: torch.Tensor
    h: torch.Tensor
    b: torch.Tensor
    moments: dict[str, tuple[torch.Tensor, torch.Tensor]]
    item_steps: torch.Tensor
    dense_steps: torch.Tensor
    received: list[torch.Tensor]  #: where :meth:`copy_all` copies every model to

    @classmethod
    def create(cls, n_users: int, n_items: int, factors: int, seed: int) -> BatchedModels:
        rng = np.random.default_rng(seed)
        bound = math.sqrt(3.0 / factors)
        table = torch.zeros(n_users * n_items, 3, factors)
        table[:, 0] = torch.from_numpy(rng.normal(0.0, 0.01, (n_users * n_items, factors)).astype(np.float32))
        user = torch.from_numpy(rng.normal(0.0, 0.01, (n_users, factors)).astype(np.float32))
        h = torch.from_numpy(rng.uniform(-bound, bound, (n_users, factors)).astype(np.float32))
        b = torch.zeros(n_users, 1)
        dense = {"user": user, "h": h, "b": b}
        moments = {k: (torch.zeros_like(a), torch.zeros_like(a)) for k, a in dense.items()}
        steps = (torch.zeros(n_users, dtype=torch.int64), torch.zeros(n_users, dtype=torch.int64))
        received = [torch.empty(n_users * n_items, factors), *(torch.empty_like(a) for a in dense.values())]
        return cls(n_items, table, user, h, b, moments, *steps, received)

    def copy_all(self) -> None:
        """One read and write of every model (a round of gossip moves at least this much)."""
        for dst, src in zip(self.received, (self.table[:, 0], self.user, self.h, self.b), strict=True):
            dst.copy_(src)


def _sparse_adam_rows(
    table: torch.Tensor, rows: torch.Tensor, grad: torch.Tensor, steps: torch.Tensor, lr: float
) -> None:
    """SparseAdam on ``rows`` of the packed item table, each row with its own step count."""
    s = steps.to(torch.float64).unsqueeze(1)
    step_size = (lr * (1.0 - BETA2**s).sqrt() / (1.0 - BETA1**s)).to(torch.float32)
    st = table.index_select(0, rows)
    p, m, v = st[:, 0], st[:, 1], st[:, 2]
    m.lerp_(grad, 1 - BETA1)
    v.lerp_(grad.mul_(grad), 1 - BETA2)
    p.sub_(m.div(v.sqrt().add_(EPS)).mul_(step_size))
    table.index_copy_(0, rows, st)


def _adam_rows(
    param: torch.Tensor,
    moments: tuple[torch.Tensor, torch.Tensor],
    rows: torch.Tensor,
    grad: torch.Tensor,
    steps: torch.Tensor,
    lr: float,
    lazy: bool,
) -> None:
    """Adam (``lazy``: SparseAdam's form) on ``rows`` of ``param``, each row with its own step count."""
    m, v = moments
    s = steps.to(torch.float64).unsqueeze(1)
    bc1 = (1.0 - BETA1**s).to(torch.float32)
    bc2 = (1.0 - BETA2**s).to(torch.float32)
    m_new = m.index_select(0, rows)
    m_new += (grad - m_new) * (1 - BETA1)
    v_new = v.index_select(0, rows)
    v_new += (grad * grad - v_new) * (1 - BETA2)
    m.index_copy_(0, rows, m_new)
    v.index_copy_(0, rows, v_new)
    p = param.index_select(0, rows)
    if lazy:
        p -= (lr * bc2.sqrt() / bc1) * (m_new / (v_new.sqrt() + EPS))
    else:
        p -= (lr / bc1) * m_new / (v_new.sqrt() / bc2.sqrt() + EPS)
    param.index_copy_(0, rows, p)


def examples(
    positives: Sequence[npt.NDArray[np.int64]],
    excluded: npt.NDArray[np.bool_],
    rng: np.random.Generator,
    negatives: int = 4,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float32], npt.NDArray[np.int64]]:
    """Every user's epoch: (owner, item, label) grouped by owner and shuffled within it, and the
    number of examples per user. Negatives are drawn for all users together."""
    n_items = excluded.shape[1]
    n_pos = np.array([len(p) for p in positives])
    owner_pos = np.repeat(np.arange(len(positives)), n_pos)
    owner_neg = np.repeat(owner_pos, negatives)
    neg = rng.integers(0, n_items, owner_neg.size)
    bad = excluded[owner_neg, neg]
    while bad.any():
        neg[bad] = rng.integers(0, n_items, int(bad.sum()))
        bad[bad] = excluded[owner_neg[bad], neg[bad]]
    owner = np.concatenate((owner_pos, owner_neg))
    item = np.concatenate((np.concatenate(positives), neg))
    label = np.concatenate((np.ones(owner_pos.size, np.float32), np.zeros(owner_neg.size, np.float32)))
    order = np.argsort(owner + rng.random(owner.size))  # by owner, shuffled within each
    return owner[order], item[order], label[order], n_pos * (1 + negatives)


def batched_epoch(
    models: BatchedModels,
    positives: Sequence[npt.NDArray[np.int64]],
    excluded: npt.NDArray[np.bool_],
    rng: np.random.Generator,
    lr: float = 0.001,
    batch: int = 256,
) -> int:
    """One local epoch of every user at once; returns the number of per-user steps it stands for."""
    n_items = models.n_items
    owner, item, label, counts = examples(positives, excluded, rng)
    first = np.concatenate(([0], np.cumsum(counts)[:-1]))
    step_of = (np.arange(owner.size) - np.repeat(first, counts)) // batch
    by_step = np.argsort(step_of, kind="stable")  # within a step, users stay in order
    bounds = np.searchsorted(step_of[by_step], np.arange(int(step_of.max()) + 2))
    m, table = models.moments, models.table
    params = table[:, 0]
    total_steps = 0
    for s in range(len(bounds) - 1):
        sel = by_step[bounds[s] : bounds[s + 1]]
        u_np = owner[sel]
        users_np, inverse_np, sizes = np.unique(u_np, return_inverse=True, return_counts=True)
        u = torch.from_numpy(u_np)
        users = torch.from_numpy(users_np)
        slot = torch.from_numpy(inverse_np)
        gid = u * n_items + torch.from_numpy(item[sel])
        y = torch.from_numpy(label[sel])
        q = params.index_select(0, gid)
        pu = models.user.index_select(0, u)
        hu = models.h.index_select(0, u)
        z = q * pu
        logits = (z * hu).sum(1) + models.b.index_select(0, u).squeeze(1)
        g = (torch.sigmoid(logits) - y) / torch.from_numpy(sizes[inverse_np].astype(np.float32))
        gz = g.unsqueeze(1) * hu
        k = len(users_np)
        g_user = torch.zeros(k, q.shape[1]).index_add_(0, slot, gz * q)
        g_h = torch.zeros(k, q.shape[1]).index_add_(0, slot, g.unsqueeze(1) * z)
        g_b = torch.zeros(k, 1).index_add_(0, slot, g.unsqueeze(1))
        rows, row_slot = torch.unique(gid, return_inverse=True)
        summed = torch.zeros(len(rows), q.shape[1]).index_add_(0, row_slot, gz * pu)
        models.dense_steps[users] += 1
        models.item_steps[users] += 1
        ds = models.dense_steps.index_select(0, users)
        _adam_rows(models.user, m["user"], users, g_user, ds, lr, lazy=False)
        _adam_rows(models.h, m["h"], users, g_h, ds, lr, lazy=False)
        _adam_rows(models.b, m["b"], users, g_b, ds, lr, lazy=False)
        _sparse_adam_rows(table, rows, summed, models.item_steps.index_select(0, rows // n_items), lr)
        total_steps += k
    return total_steps


def floor_round(
    models: BatchedModels,
    positives: Sequence[npt.NDArray[np.int64]],
    excluded: npt.NDArray[np.bool_],
    rng: np.random.Generator,
    lr: float = 0.001,
) -> tuple[float, int]:
    """Seconds for one floor round (every model copied once, every user's epoch); and its steps."""
    t = time.perf_counter()
    models.copy_all()
    steps = batched_epoch(models, positives, excluded, rng, lr)
    return time.perf_counter() - t, steps


@dataclass
class StackedModels:
    """Every user's GMF model and Adam moments as stacked numpy arrays, for the compiled floor."""

    item: npt.NDArray[np.float32]  #: (users, items, factors)
    user: npt.NDArray[np.float32]  #: (users, 1, factors)
    h: npt.NDArray[np.float32]  #: (users, factors)
    b: npt.NDArray[np.float32]  #: (users, 1)
    moments: dict[str, tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]]
    steps: npt.NDArray[np.int64]  #: (users, 4): item, user, h, b
    received: list[npt.NDArray[np.float32]]

    @classmethod
    def create(cls, n_users: int, n_items: int, factors: int, seed: int) -> StackedModels:
        rng = np.random.default_rng(seed)
        bound = math.sqrt(3.0 / factors)
        params = {
            "item": rng.normal(0.0, 0.01, (n_users, n_items, factors)).astype(np.float32),
            "user": rng.normal(0.0, 0.01, (n_users, 1, factors)).astype(np.float32),
            "h": rng.uniform(-bound, bound, (n_users, factors)).astype(np.float32),
            "b": np.zeros((n_users, 1), np.float32),
        }
        moments = {k: (np.zeros_like(a), np.zeros_like(a)) for k, a in params.items()}
        received = [np.empty_like(a) for a in params.values()]
        return cls(**params, moments=moments, steps=np.zeros((n_users, 4), np.int64), received=received)

    def copy_all(self) -> None:
        for dst, src in zip(self.received, (self.item, self.user, self.h, self.b), strict=True):
            np.copyto(dst, src)


@numba.njit(cache=True, nogil=True)
def _every_user(
    item: npt.NDArray[np.float32],
    user: npt.NDArray[np.float32],
    h: npt.NDArray[np.float32],
    b: npt.NDArray[np.float32],
    mi: npt.NDArray[np.float32],
    vi: npt.NDArray[np.float32],
    mu: npt.NDArray[np.float32],
    vu: npt.NDArray[np.float32],
    mh: npt.NDArray[np.float32],
    vh: npt.NDArray[np.float32],
    mb: npt.NDArray[np.float32],
    vb: npt.NDArray[np.float32],
    steps: npt.NDArray[np.int64],
    items: npt.NDArray[np.int64],
    labels: npt.NDArray[np.float32],
    first: npt.NDArray[np.int64],
    batch: int,
    lr: float,
) -> int:
    no_anchor = np.zeros((0, 0), dtype=np.float32)
    no_seen = np.zeros(0, dtype=np.bool_)
    no_rows = np.zeros(0, dtype=np.int64)
    undone = np.zeros(1, dtype=np.int64)
    total = 0
    for u in range(item.shape[0]):
        lo, hi = first[u], first[u + 1]
        n, _ = epoch_kernel(
            item[u], user[u], h[u], b[u], mi[u], vi[u], mu[u], vu[u], mh[u], vh[u], mb[u], vb[u],
            steps[u], items[lo:hi], labels[lo:hi], batch, lr, no_anchor, np.float32(0.0), True,
            no_seen, no_rows, no_anchor, undone,
        )  # fmt: skip
        total += n
    return total


def compiled_round(
    models: StackedModels,
    positives: Sequence[npt.NDArray[np.int64]],
    excluded: npt.NDArray[np.bool_],
    rng: np.random.Generator,
    lr: float = 0.001,
    batch: int = 256,
) -> tuple[float, int]:
    """Seconds for one round of the compiled floor: every model copied once, the examples drawn
    as in :func:`examples`, and every user's epoch by the simulator's own kernel
    (learning/gmf_fused.py) in one compiled loop over the users (no Python per user)."""
    t = time.perf_counter()
    models.copy_all()
    _, item, label, counts = examples(positives, excluded, rng)
    first = np.concatenate(([0], np.cumsum(counts)))
    m = models.moments
    steps = _every_user(
        models.item, models.user, models.h, models.b, *m["item"], *m["user"], *m["h"], *m["b"],
        models.steps, item, label, first, batch, lr,
    )  # fmt: skip
    return time.perf_counter() - t, int(steps)


def inputs(users: Sequence[UserData]) -> tuple[list[npt.NDArray[np.int64]], npt.NDArray[np.bool_]]:
    """Per user: training positives, and the mask of items negatives may not be."""
    return [u.train_items for u in users], np.stack([u.interacted for u in users])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=943)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(1)
    from learning.split import leave_one_out
    from p2pnode.data.datasets import load_ml100k

    data = load_ml100k().subset_users(args.nodes)
    positives, excluded = inputs(leave_one_out(data, seed=0))
    models = BatchedModels.create(args.nodes, data.n_items, 32, seed=0)
    stacked = StackedModels.create(args.nodes, data.n_items, 32, seed=0)
    rng = np.random.default_rng(0)
    times: dict[str, list[float]] = {"batched": [], "compiled": []}
    for _ in range(args.repeats + 1):  # the first round of each compiles and allocates
        secs, steps = floor_round(models, positives, excluded, rng)
        times["batched"].append(secs)
        secs, steps2 = compiled_round(stacked, positives, excluded, rng)
        times["compiled"].append(secs)
    for name, ts in times.items():
        print(f"{name:8s} floor, {args.nodes} users: {', '.join(f'{x:.3f}' for x in ts[1:])} s a round")
    print(f"user steps a round: {steps} (batched), {steps2} (compiled)")


if __name__ == "__main__":
    main()
