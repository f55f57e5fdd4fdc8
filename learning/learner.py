"""A node's local learner: GMF parameters, Adam, one local update, HR@K evaluation.

Implements the ``protocols.learner.Learner`` interface structurally: the gossip protocols call
``snapshot``, ``merge`` and ``local_update`` and never see the training backend.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from learning import gmf, gmf_dp_fused
from learning.dp import DPConfig, PrivateStepper, poisson_batch
from learning.gmf_fused import FusedGMF, RowUndo, epoch_examples
from learning.gmf_numpy import NumpyGMF, moments_state, reset_moments, restore_moments
from learning.history import Base, ParamHistory
from learning.metrics import Figures, ndcg_at_k, popularity_hit, rank_of, recall_at_k, reciprocal_rank
from learning.negatives import sample_negatives
from learning.params import (
    Array,
    ModelSpec,
    Params,
    all_finite,
    copy_params,
    l2_norm,
    mean_into,
    robust_into,
    spec_of,
)
from learning.snapshots import copy_checked, mean_pair_rows
from learning.split import UserData
from learning.workbench import Workbench

BACKENDS = ("fused", "numpy", "torch")


@dataclass(frozen=True)
class TrainConfig:
    """Local training hyperparameters (GMF defaults from NCF: Adam, lr 0.001, batch 256, 4 negatives)."""

    factors: int = 32
    lr: float = 0.001
    batch_size: int = 256
    negatives: int = 4
    local_epochs: int = 1
    top_k: int = 20
    sparse_items: bool = True  #: SparseAdam on the item rows of each batch; False: dense Adam
    #: "fused" (compiled epochs, fastest), "numpy" (analytic gradients in numpy calls) or "torch"
    #: (the autograd reference); learning/gmf_fused.py says how the first two round differently
    backend: str = "fused"
    share_less_tau: float = 0.0  #: weight τ of the Share-less item regulariser (eq. 2); 0: off
    dp: DPConfig = field(
        default_factory=DPConfig
    )  #: local DP-SGD (learning/dp.py); off unless σ or a target ε is set


class Snapshot(dict[str, Array]):
    """A copy of a learner's shared parameters, stamped with its history's write count: while no
    write happened since, the live model is this snapshot (p2pnode/wire/delta.py opens a base on
    it instead of keeping a copy)."""

    stamp: int = -1


class TorchGMF:
    """The autograd reference backend: torch tensors sharing memory with the numpy parameters."""

    def __init__(self, params: Params, lr: float, sparse_items: bool) -> None:
        self.sparse_items = sparse_items
        self.lr = lr
        self.t = {k: torch.from_numpy(v).requires_grad_(True) for k, v in params.items()}
        self.reset()

    def reset(self) -> None:
        """Fresh optimizers (their running moments forgotten)."""
        lr, sparse_items = self.lr, self.sparse_items
        if sparse_items:
            dense = [t for k, t in self.t.items() if k != gmf.ITEM]
            self.opts: list[torch.optim.Optimizer] = [
                torch.optim.SparseAdam([self.t[gmf.ITEM]], lr=lr),
                torch.optim.Adam(dense, lr=lr),
            ]
        else:
            self.opts = [torch.optim.Adam(list(self.t.values()), lr=lr)]

    def step(
        self,
        idx: npt.NDArray[np.int64],
        y: npt.NDArray[np.float32],
        anchor: Array | None = None,
        tau: float = 0.0,
    ) -> None:
        t = self.t
        q = torch.nn.functional.embedding(torch.from_numpy(idx), t[gmf.ITEM], sparse=self.sparse_items)
        logits = (q * t[gmf.USER]).matmul(t[gmf.H]) + t[gmf.B]
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, torch.from_numpy(y))
        if anchor is not None and tau > 0:
            pos = torch.from_numpy(y > 0.5)
            diff = q[pos] - torch.from_numpy(anchor)[pos]
            loss = loss + tau * torch.linalg.vector_norm(diff, dim=1).sum()
        for opt in self.opts:
            opt.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        for opt in self.opts:
            opt.step()


def _pair_kernel_fits(own: Array, other: Array) -> bool:
    """Whether the compiled two-model mean applies: float32 2-D tensors of one shape, ``own``
    contiguous."""
    return (
        own.ndim == 2
        and own.dtype == np.float32
        and other.dtype == np.float32
        and own.shape == other.shape
        and own.flags.c_contiguous
    )


class BaseLearner(ABC):
    """A node's model as the protocols and the driver see it: shared parameters, merges, a local
    update, and utility on held-out data. Subclasses give the model's relevance scores."""

    metric = "hit_ratio"  #: utility reported per round as ``{metric}_at_{K}``
    model_name = "gmf"  #: the ``--model`` this learner trains
    dp: PrivateStepper | None = None  #: the node's DP-SGD state when it trains privately
    #: selective DP-SGD (paper 003's "DP only where needed", §4.3, carried over to model gossip):
    #: local updates go through DP-SGD only once this many of the node's models were delivered
    #: (0: from the start). Models sent before the switch left the node unprotected.
    dp_after: int = 0
    delivered: int = 0  #: models of this node a peer took (a 200 answer): its DataUsage bound
    #: shared parameters that are sent (an observer reads them) but never merged nor loaded from
    #: the global model: each node keeps its own (paper 004's FedNCF: θ_u is uploaded, and only
    #: the item side is averaged)
    personal: frozenset[str] = frozenset()

    def __init__(
        self,
        data: UserData,
        init: Mapping[str, Array],
        shared: tuple[str, ...],
        rng: np.random.Generator,
        top_k: int,
    ) -> None:
        if not set(shared) <= set(init):
            raise ValueError(f"shared parameters {shared} are not all model parameters")
        self.data = data
        self.rng = rng
        self.top_k = top_k
        self.params: Params = copy_params(init)
        self._init = init  #: θ_0, what :meth:`recover` goes back to after a merge went non-finite
        #: the bases of earlier versions (learning/history.py): delta bases and the recovery point
        self.history = ParamHistory(self.params)
        #: the model before the current local update: a base of the history, or the rows the
        #: fused kernel saved as it wrote them
        self._undo: Base | RowUndo | None = None
        #: whether the current local update wrote only finite values, when its trainer told (the
        #: fused kernel does); None: :meth:`finite` reads what the update changed
        self._update_finite: bool | None = None
        self._merge_broken = False  #: the last merge left a non-finite value
        self.shared_names = shared
        self.version = 0
        #: (scale, seed): Laplace noise on every snapshot sent (004's APM baseline), or None
        self.upload_noise: tuple[float, int] | None = None
        self._excluded = data.interacted
        self._free = int(self._excluded.size - np.count_nonzero(self._excluded))  #: allowed negatives
        #: where training negatives are drawn from (:meth:`negatives_outside_training`): by
        #: default outside everything the user touched, as the ranking's candidates are
        self._neg_excluded, self._neg_free = self._excluded, self._free
        self._eval_items = np.concatenate(([data.test_item], data.test_negatives)).astype(np.int64)
        self._val_items = [
            (np.concatenate(([item], data.validation_negatives)).astype(np.int64), float(t))
            for item, t in zip(data.validation_items, data.validation_times, strict=False)
        ]
        #: the FedAvg clients' shared tables (learning/workbench.py), when this learner uses them
        self._bench: Workbench | None = None
        #: while parked: (version, figures, norm of the shared tensors) at that version
        #: and the validation items' ranks (:meth:`validation_ranks`) at that version
        self._parked: tuple[int, Figures, float, list[int | None]] | None = None

    # -- the workbench (learning/workbench.py) --------------------------------------------------

    def use_workbench(self, bench: Workbench) -> None:
        """Train in ``bench``'s tables instead of tables of its own, from θ_0 on (a FedAvg
        client, before its first turn): its own copies are let go."""
        if self.version != 0 or self.history.active():
            raise ValueError("a learner moves to the workbench before it trains or sends")
        for name, arr in bench.arrays.items():
            if name not in self.shared_names or self.params[name].shape != arr.shape:
                raise ValueError(f"{name} is not a shared table of this model")
            self.params[name] = arr
        self._bench = bench

    def park(self) -> None:
        """Give the workbench up (another client takes it): keep this version's utility and norm,
        and close the bases on tables that others will write."""
        self._parked = (
            self.version,
            self._figures(self.params),
            l2_norm(self.params, self.shared_names),
            self._validation_ranks(self.params),
        )
        self._close_undo()
        for base in list(self.history.bases):
            self.history.close(base)

    def _held(self, what: str) -> None:
        if self._bench is not None:
            self._bench.check(self, what)

    def _readable(self) -> Mapping[str, Array] | None:
        """Where this model's values can be read: its tables while it holds them (or has its
        own), θ_0's tables with its own small tensors before its first turn; None once it was
        parked after a turn (its parked figures stand)."""
        bench = self._bench
        if bench is None or bench.holder is self:
            return self.params
        if self._parked is None:
            return {**self.params, **{k: self._init[k] for k in bench.arrays}}
        if self._parked[0] != self.version:
            raise ValueError("a parked client's model changed without its turn")
        return None

    def norm(self, names: tuple[str, ...]) -> float:
        """‖θ‖ over the tensors ``names`` (what a received model's distance is measured against)."""
        params = self._readable()
        if params is not None:
            return l2_norm(params, names)
        assert self._parked is not None
        if names != self.shared_names:
            raise ValueError(f"the norm over {names} of a parked client (it kept the shared tensors')")
        return self._parked[2]

    def rank_all_items(self) -> None:
        """Rank the held-out item among every item this user never touched (``--eval full``)
        rather than among its sampled test negatives: the full-catalogue protocol. Items of the
        user's other held-out interactions (validation, membership non-members) are left out as
        its training items are: they are relevant, not negatives."""
        free = np.flatnonzero(~self._excluded).astype(np.int64)
        self._eval_items = np.concatenate(([self.data.test_item], free)).astype(np.int64)

    def negatives_outside_training(self) -> None:
        """Draw training negatives from every item outside the training split, the held-out
        test and validation items included, as 004's code does (``data.py``: its negatives come
        from the item pool less the training interactions): a user's test item is then trained
        on as a negative now and then."""
        mask = np.zeros(self.data.n_items, dtype=bool)
        mask[self.data.train_items] = True
        self._neg_excluded, self._neg_free = mask, int(mask.size - np.count_nonzero(mask))

    @property
    def candidates(self) -> int:
        """How many items the held-out one is ranked among, itself included."""
        return len(self._eval_items)

    @abstractmethod
    def _scores(
        self, params: Mapping[str, Array], items: npt.NDArray[np.int64], at: float
    ) -> npt.NDArray[np.float32]:
        """Relevance of ``items`` (higher is better) for this user at time ``at``."""

    @abstractmethod
    def local_update(self) -> int:
        """Train on local data; returns the number of optimizer steps."""

    def epsilon(self) -> float | None:
        """DP ε this node has spent so far (None without DP-SGD). Under selective DP-SGD
        (:attr:`dp_after`) it bounds only the steps since the switch: see :meth:`unprotected`."""
        return None if self.dp is None else self.dp.epsilon()

    def note_delivered(self) -> None:
        """A peer took one of this node's models (the driver's answer to a model sent)."""
        self.delivered += 1

    @property
    def private(self) -> bool:
        """Whether the next local update goes through DP-SGD: with DP-SGD on, from the start, or
        under selective DP-SGD once :attr:`delivered` reached :attr:`dp_after`."""
        return self.dp is not None and self.delivered >= self.dp_after

    def unprotected(self) -> int:
        """Models of this node that peers took before its DP-SGD began (0: every model it sent was
        trained under DP-SGD). No ε covers what they carry about its data."""
        return min(self.delivered, self.dp_after) if self.dp is not None else 0

    @property
    def metric_key(self) -> str:
        return f"{self.metric}_at_{self.top_k}"

    @property
    def spec(self) -> ModelSpec:
        """Spec of the shared parameters, used to check every model a peer sends."""
        return spec_of({k: self.params[k] for k in self.shared_names})

    def snapshot(self) -> Params:
        """A copy of the shared parameters, safe to send while this model keeps changing,
        stamped with the history's write count (:class:`Snapshot`)."""
        self._held("a snapshot")
        snap = Snapshot()
        for k in self.shared_names:
            snap[k], _ = copy_checked(self.params[k])
        snap.stamp = self.history.stamp
        if self.upload_noise is not None:
            scale, seed = self.upload_noise
            # the same model gets the same noise: whoever reads it (a send, the omniscient
            # observer) reads one upload, and reading it draws from no stream the run uses
            rng = np.random.default_rng([seed, self.version, self.history.stamp])
            for k in self.shared_names:
                snap[k] += rng.laplace(0.0, scale, snap[k].shape).astype(np.float32)
            snap.stamp = -1  # not the live model at any stamp: sent whole, never as a row delta
        return snap

    def _begin_update(self, undo: RowUndo | None = None) -> None:
        """Open the recovery point: the model as it stands before this local update, kept by
        the rows the update changes (learning/history.py), or by ``undo`` when the fused kernel
        saves them itself."""
        self._close_undo()
        self._undo = undo if undo is not None else self.history.open(self.version, tuple(self.params))
        self._update_finite = None

    def _close_undo(self) -> None:
        undo, self._undo = self._undo, None
        if isinstance(undo, Base):
            self.history.close(undo)

    def _touch_dense(self) -> None:
        """Every tensor but the item table is about to change (a local step moves them all)."""
        for name, arr in self.params.items():
            if name != self._rows_name:
                if arr.ndim == 2:
                    self.history.touch_rows(name, np.arange(arr.shape[0], dtype=np.int64))
                else:
                    self.history.touch_all(name)

    _rows_name = "item"  #: the embedding table a local step changes by rows

    def finite(self) -> bool:
        """Whether every parameter is a finite number. After a local update only what it
        changed is read (the model was finite before it, and a merge checks its own result)."""
        if self._merge_broken:
            return False
        self._held("the finiteness check")
        undo = self._undo
        if undo is None:
            return all_finite(self.params)
        ok = self._update_finite
        if ok is None:
            assert isinstance(undo, Base)
            ok = undo.finite_where_saved(self.params)
        if ok:
            self._close_undo()
        return ok

    def recover(self) -> None:
        """Go back to a good model after training or a merge left a non-finite value, with a
        fresh optimizer: after a local update, the model exactly as it was before it; after a
        merge (only two models of values beyond ~1e19 can overflow), θ_0."""
        self._held("a recovery")
        undo = self._undo
        if undo is not None and not self._merge_broken:
            restored = list(undo.saved_versions(self.params))
            self._close_undo()
            for name, new in restored:
                self.history.write(name, new)
        else:
            self._close_undo()
            for k in self.params:
                self.history.write(k, np.asarray(self._init[k], dtype=self.params[k].dtype))
        self._merge_broken = False
        self._reset_optimizer()
        self.version += 1

    def _reset_optimizer(self) -> None:
        """Forget the optimizer's running state (models without one have nothing to forget)."""
        return None

    def merge(self, models: Sequence[Mapping[str, Array]], how: str = "mean") -> None:
        """θ ← mean(θ, *models) over the shared parameters (002 Alg. 1 l.7, Alg. 2 l.4), or a
        coordinate-wise trimmed mean or median of them (``how``, learning.params.robust_into).
        The open bases keep the old values of the rows it changes; a result that is not finite
        is remembered for :meth:`finite`."""
        if not models:
            return
        self._held("a merge")
        ok = True
        history = self.history
        for k in self.shared_names:
            arr = self.params[k]
            if k in self.personal or not all(k in m for m in models):
                continue
            others = [m[k] for m in models]
            if how == "mean" and len(others) == 1 and _pair_kernel_fits(arr, others[0]):
                keep = history.capacity(k) if history.active() else 0
                rows, old, changed, finite = mean_pair_rows(arr, others[0], keep)
                history.stamp += 1
                if history.active():
                    if keep >= 0 and changed > keep:
                        history.overflow()
                    if changed:
                        history.changed(k, rows, old)
                ok = ok and finite
                continue
            if (
                how == "mean"
                and len(others) == 1
                and arr.ndim == 1
                and _pair_kernel_fits(*(one_row := (arr[None], others[0][None])))
            ):
                # a small dense tensor (h, b): the same compiled mean on its one-row view; the
                # bases keep it whole, as history.write would have them
                old_whole = arr.copy() if history.active() else None
                _, _, _, finite = mean_pair_rows(*one_row, 0)
                if old_whole is not None:
                    history.replaced(k, old_whole)
                else:
                    history.stamp += 1
                ok = ok and finite
                continue
            single = {k: arr.copy() if history.active() else arr}
            if how == "mean":
                mean_into(single, [{k: o} for o in others])
            else:
                robust_into(single, [{k: o} for o in others], how)
            if history.active():
                history.write(k, single[k])
            else:
                history.stamp += 1
            ok = ok and all_finite({k: arr})
        self._merge_broken |= not ok
        self.version += 1

    def merge_weighted(
        self, models: Sequence[Mapping[str, Array]], weights: Sequence[float], own: float
    ) -> None:
        """θ ← (own θ + Σ w_j θ_j) / (own + Σ w_j) over the shared parameters (Pers-Gossip)."""
        if not models:
            return
        self._held("a merge")
        total = own + sum(weights)
        ok = True
        for k in self.shared_names:
            if k in self.personal:
                continue
            new = self.params[k] * np.float32(own / total)
            for model, w in zip(models, weights, strict=True):
                new += np.float32(w / total) * model[k]
            self.history.write(k, new)
            ok = ok and all_finite({k: new})
        self._merge_broken |= not ok
        self.version += 1

    def state(self) -> dict[str, Any]:
        """A checkpoint of this learner: parameters, version, random stream, optimizer, DP."""
        self._held("a checkpoint")
        return {
            "model": self.model_name,
            "params": {k: v.copy() for k, v in self.params.items()},
            "version": self.version,
            "rng": json.dumps(self.rng.bit_generator.state),
            "optimizer": self._optimizer_state(),
            "dp": None if self.dp is None else self.dp.state(),
            "delivered": self.delivered,
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        """Take back a :meth:`state` of a learner built with the same configuration."""
        if state["model"] != self.model_name:
            raise ValueError(f"checkpoint holds a {state['model']} model, this node trains {self.model_name}")
        saved = state["params"]
        if set(saved) != set(self.params) or any(saved[k].shape != v.shape for k, v in self.params.items()):
            raise ValueError("checkpoint parameters do not match this model's names and shapes")
        if (state["dp"] is None) != (self.dp is None):
            raise ValueError("checkpoint and configuration disagree on DP-SGD")
        if self._bench is not None:
            raise ValueError("a FedAvg client on the simulator's workbench takes no checkpoint")
        for k in self.params:
            self.history.write(k, np.asarray(saved[k], dtype=self.params[k].dtype))
        self.version = int(state["version"])
        self.rng.bit_generator.state = json.loads(state["rng"])
        self._restore_optimizer(state["optimizer"])
        if self.dp is not None:
            self.dp.restore(state["dp"])
        self.delivered = int(state.get("delivered", 0))  # a restart must not reopen selective DP's window

    def _optimizer_state(self) -> dict[str, Any]:
        return {}

    def _restore_optimizer(self, state: Mapping[str, Any]) -> None:
        return None

    def load(self, params: Mapping[str, Array]) -> None:
        """Take the shared parameters from ``params`` (a FedAvg client receiving the global model):
        on the workbench, its turn starts here."""
        if self._bench is not None:
            self._bench.take(self)
            self._parked = None
        for k in self.shared_names:
            if k not in self.personal:
                self.history.write(k, np.asarray(params[k], dtype=self.params[k].dtype))
        self.version += 1

    def score(self, params: Mapping[str, Array] | None) -> float:
        """Share of validation negatives ranked below each validation item, averaged (0..1).

        ``params`` (a received model) is scored with this node's own user-side parameters: what
        matters is how well its item parameters serve this user. None scores the own model.
        """
        if not self._val_items:
            raise ValueError("this learner has no validation items (hold_out_validation)")
        self._held("a validation score")
        merged = dict(self.params) if params is None else {**self.params, **params}
        merged.update({k: v for k, v in self.params.items() if k not in self.shared_names})
        below = 0.0
        for items, at in self._val_items:
            s = self._scores(merged, items, at)
            below += float(np.count_nonzero(s[1:] < s[0])) / (len(s) - 1)
        return below / len(self._val_items)

    def catalogue_scores(self) -> npt.NDArray[np.float32]:
        """This model's relevance of every item for its user at test time (membership inference)."""
        self._held("the catalogue's scores")
        items = np.arange(self.data.n_items, dtype=np.int64)
        return self._scores(self.params, items, self.data.test_time)

    def held_out(self) -> npt.NDArray[np.int64]:
        """Items this node interacted with but never trained on: test, validation, MIA non-members."""
        d = self.data
        return np.concatenate(([d.test_item], d.validation_items, d.nonmember_items)).astype(np.int64)

    def test_rank(self) -> float:
        """Share of the test negatives scored at least as high as the held-out item (0 is best)."""
        self._held("the test rank")
        scores = self._scores(self.params, self._eval_items, self.data.test_time)
        return float(np.count_nonzero(scores[1:] >= scores[0])) / (len(scores) - 1)

    def _rank(self, params: Mapping[str, Array]) -> int | None:
        """The held-out item's 0-based rank among itself and its test negatives under ``params``
        (learning.metrics.rank_of: ties and NaN count against it)."""
        scores = self._scores(params, self._eval_items, self.data.test_time)
        return rank_of(float(scores[0]), scores[1:])

    def hit(self, params: Mapping[str, Array] | None = None) -> bool:
        """Whether the held-out item ranks in the top K among itself and its test negatives
        (of ``params``: this model by default)."""
        if params is None:
            self._held("a hit")
            params = self.params
        rank = self._rank(params)
        return rank is not None and rank < self.top_k

    def _utility_of(self, hit: bool) -> float:
        """This node's utility of one leave-one-out outcome: HR@K (1.0 or 0.0) for GMF and NCF."""
        return 1.0 if hit else 0.0

    def _figures(self, params: Mapping[str, Array]) -> Figures:
        """This node's :class:`Figures` of ``params``, from one ranking."""
        rank = self._rank(params)
        k = self.top_k
        return Figures(
            self._utility_of(rank is not None and rank < k),
            ndcg_at_k(rank, k),
            recall_at_k(rank, k),
            reciprocal_rank(rank),
        )

    def popularity(self, counts: npt.NDArray[np.int64]) -> float:
        """This node's utility (HR@K, F1@K for PRME) had it ranked its candidates by ``counts``,
        every item's count in the training split (learning.metrics.popularity_hit)."""
        return self._utility_of(True) * popularity_hit(counts, self._eval_items, self.top_k)

    def _validation_ranks(self, params: Mapping[str, Array]) -> list[int | None]:
        ranks = []
        for items, at in self._val_items:
            s = self._scores(params, items, at)
            ranks.append(rank_of(float(s[0]), s[1:]))
        return ranks

    def under(self, shared: Mapping[str, Array]) -> dict[str, Array]:
        """This node's model with ``shared`` (a FedAvg server's average) in place of every
        tensor it shares and does not keep as its own: what 004's code evaluates each client
        on, the global tables beside the client's own user rows (and head, when it stays home)."""
        out = {
            **self.params,
            **{k: v for k, v in shared.items() if k in self.shared_names and k not in self.personal},
        }
        bench = self._bench
        if bench is not None and any(out[k] is bench.arrays[k] for k in bench.arrays):
            raise ValueError("a shared table of the workbench is not in the model it is read under")
        return out

    def ranking_under(self, shared: Mapping[str, Array]) -> Figures:
        """:meth:`ranking` of this node's model :meth:`under` ``shared``."""
        return self._figures(self.under(shared))

    def validation_ranks_under(self, shared: Mapping[str, Array]) -> list[int | None]:
        """:meth:`validation_ranks` of this node's model :meth:`under` ``shared``."""
        return self._validation_ranks(self.under(shared))

    def validation_ranks(self) -> list[int | None]:
        """Each validation item's 0-based rank among itself and its own negatives under this
        model (learning.metrics.rank_of; the early stop reads them), [] without validation items;
        a parked client's as they stood at its last turn."""
        params = self._readable()
        if params is not None:
            return self._validation_ranks(params)
        assert self._parked is not None
        return self._parked[3]

    def ranking(self) -> Figures:
        """This node's :class:`Figures`, its parked figures while another client holds the
        workbench."""
        params = self._readable()
        if params is not None:
            return self._figures(params)
        assert self._parked is not None
        return self._parked[1]

    def evaluate(self) -> float:
        """This node's utility (HR@K or F1@K) alone (:meth:`ranking`)."""
        return self.ranking().utility


class GMFLearner(BaseLearner):
    """One user's GMF model and its trainer."""

    def __init__(
        self,
        data: UserData,
        init: Mapping[str, Array],
        config: TrainConfig,
        rng: np.random.Generator,
        shared: tuple[str, ...] = gmf.PARAM_NAMES,
    ) -> None:
        if config.backend not in BACKENDS:
            raise ValueError(f"unknown training backend {config.backend!r}")
        super().__init__(data, init, shared, rng, config.top_k)
        self.config = config
        self._backend: NumpyGMF | TorchGMF
        if config.backend == "fused":
            self._backend = FusedGMF(self.params, config.lr, config.sparse_items)
        elif config.backend == "numpy":
            self._backend = NumpyGMF(self.params, config.lr, config.sparse_items)
        else:
            self._backend = TorchGMF(self.params, config.lr, config.sparse_items)
        self._positives = data.train_items
        n_pos = len(self._positives)
        self._labels = np.concatenate(
            (np.ones(n_pos, np.float32), np.zeros(n_pos * config.negatives, np.float32))
        )
        if config.dp.enabled:
            if config.backend == "torch":
                raise ValueError("DP-SGD runs on the numpy backends only")
            rows = n_pos * (1 + config.negatives)
            self.dp = PrivateStepper(config.dp, rows, config.batch_size, int(rng.integers(2**62)))

    def _scores(
        self, params: Mapping[str, Array], items: npt.NDArray[np.int64], at: float
    ) -> npt.NDArray[np.float32]:
        return gmf.score(dict(params), self.params[gmf.USER][0], items)

    def _optimizer_state(self) -> dict[str, Any]:
        if not isinstance(self._backend, NumpyGMF):
            raise ValueError("checkpoints need the numpy training backend")
        return moments_state(self._backend.moments)

    def _reset_optimizer(self) -> None:
        if isinstance(self._backend, NumpyGMF):
            reset_moments(self._backend.moments)
        else:
            self._backend.reset()

    def _restore_optimizer(self, state: Mapping[str, Any]) -> None:
        if not isinstance(self._backend, NumpyGMF):
            raise ValueError("checkpoints need the numpy training backend")
        restore_moments(self._backend.moments, state)

    def examples(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
        """One epoch's examples in training order: every positive and ``negatives`` fresh
        negatives each (NCF §4.1), shuffled."""
        return epoch_examples(self.rng, self._positives, self._excluded, self._free, self.config.negatives)

    def batches(self) -> Iterator[tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]]:
        """One epoch of :meth:`examples`, ``batch_size`` at a time."""
        cfg = self.config
        items, labels = self.examples()
        for start in range(0, len(items), cfg.batch_size):
            yield items[start : start + cfg.batch_size], labels[start : start + cfg.batch_size]

    def local_update(self) -> int:
        """Run ``local_epochs`` epochs of BCE with sampled negatives; returns the number of steps.

        With Share less (τ > 0) the item embeddings as they stand before this update (after the
        merge) are the anchors e_ju^{t−1} of eq. 2; the regulariser applies to the user's own
        items, at the steps where they are in the batch.
        """
        self._held("a local update")
        tau = self.config.share_less_tau
        before = self.params[gmf.ITEM].copy() if tau > 0 else None
        backend = self._backend
        private = self.private
        if private or not isinstance(backend, FusedGMF):
            self._begin_update()
        if private:
            return self._private_update(before, tau)
        steps = 0
        if isinstance(backend, FusedGMF):
            cfg = self.config
            examples = len(self._positives) * (1 + cfg.negatives) * cfg.local_epochs
            undo = RowUndo(self.params, gmf.ITEM, examples, cfg.sparse_items)
            self._begin_update(undo)
            finite = True
            for _ in range(self.config.local_epochs):
                items, labels = self.examples()
                self._touch(items)
                steps += backend.epoch(items, labels, self.config.batch_size, before, tau, undo)
                finite = finite and backend.finite
            self._update_finite = finite
            self.version += 1
            return steps
        for _ in range(self.config.local_epochs):
            for idx, y in self.batches():
                self._touch(idx)
                anchor = before[idx] if before is not None else None
                self._backend.step(idx, y, anchor, tau)
                steps += 1
        self.version += 1
        return steps

    def _touch(self, items: npt.NDArray[np.int64]) -> None:
        """The rows of ``items`` and every other tensor are about to change (a training step;
        dense Adam moves every row)."""
        if not self.history.active():  # no base to save rows for: only the write count moves
            self.history.stamp += 1
            return
        if self.config.sparse_items:
            self.history.touch_rows(gmf.ITEM, items)
        else:
            self.history.touch_all(gmf.ITEM)
        self._touch_dense()

    def _private_update(self, before: Array | None, tau: float) -> int:
        """DP-SGD epochs: m Poisson batches over the epoch's rows (positives and fresh negatives);
        the noise moves every row of the item table."""
        dp = self.dp
        assert dp is not None and isinstance(self._backend, NumpyGMF)
        self.history.touch_all(gmf.ITEM)
        self._touch_dense()
        cfg = self.config
        n_pos = len(self._positives)
        steps = 0
        backend = self._backend
        fused = dp.config.backend == "fused"
        for _ in range(cfg.local_epochs):
            negs = sample_negatives(self.rng, self._excluded, n_pos * cfg.negatives, self._free)
            items = np.concatenate((self._positives, negs))
            if fused:  # the loop below in one compiled call, the same draws
                steps += gmf_dp_fused.dp_epoch(
                    backend, items, self._labels, self.rng, dp, before, tau * cfg.batch_size
                )
                continue
            for _ in range(dp.steps_per_epoch):
                if not dp.may_step():
                    break
                sel = poisson_batch(self.rng, len(items), dp.sample_rate)
                idx = items[sel]
                anchor = before[idx] if before is not None else None
                backend.dp_step(idx, self._labels[sel], dp, anchor, tau * cfg.batch_size)
                steps += 1
        self.version += 1
        return steps
