"""Local DP-SGD for one node (CIA paper §III-E; Abadi et al. 2016): the parts shared by both models.

What a node does, per step:

1. **Poisson sampling.** Each of the node's ``n`` training rows joins the batch independently
   with probability ``q = 1/m``, where ``m = ⌈n / batch_size⌉`` is the number of steps of one
   local epoch. The expected batch is ``n/m ≤ batch_size``, the same work per epoch as without DP,
   and ``q`` is what the accountant is told.
2. **Per-example clipping.** Every example's gradient over *all* trained parameters (the user
   embedding too, even under Share less) is scaled by ``min(1, C / (‖g_i‖ + 1e-6))``, the factor
   Opacus' ``DPOptimizer`` uses. The models compute ‖g_i‖ in closed form (``gmf_numpy``,
   ``prme_numpy``) and tests check the clipped sums against Opacus' own per-sample gradients.
3. **Gaussian noise** ``N(0, σ²C²)`` on every coordinate of every parameter, dense over the item
   tables: the one example a neighbouring dataset adds could have touched any item row, so the
   rows this batch touched must not stand out.
4. **Accounting.** One Opacus ``RDPAccountant`` per node for its whole life; each step is one
   (σ, q) sampled-Gaussian mechanism. Merging received models is post-processing and is not
   charged.

This is example-level DP over one user's training rows (an interaction, or a sampled negative):
it bounds what a node's models reveal about any single interaction of its user, not about the
user as a whole (user-level DP), and it says nothing about which node a model came from.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
import torch

from learning.gauss import ZigguratNoise
from learning.params import Array

#: Opacus' per-sample clip factor is C / (‖g‖ + this), capped at 1.
NORM_EPS = 1e-6


@dataclass(frozen=True)
class DPConfig:
    """DP-SGD settings of a node: σ given directly, or calibrated from a target ε."""

    noise_multiplier: float | None = None  #: σ: noise std is σ·C per coordinate
    target_epsilon: float | None = None  #: calibrate σ so ε reaches this after ``horizon_updates``
    clip: float = 2.0  #: C, the per-example L2 bound (CIA paper Fig. 5: 2)
    delta: float = 1e-6  #: δ (CIA paper Fig. 5: 1e-6)
    horizon_updates: int = 0  #: local updates the ε target must last for (set by the driver)
    #: "numpy": torch's noise and the numpy step; "fused": learning.gauss's noise and, for GMF,
    #: the compiled step of learning.gmf_dp_fused (docs/design.md, Speed)
    backend: str = "numpy"

    @property
    def enabled(self) -> bool:
        return self.noise_multiplier is not None or self.target_epsilon is not None

    def __post_init__(self) -> None:
        if self.noise_multiplier is not None and self.target_epsilon is not None:
            raise ValueError("give either a noise multiplier or a target epsilon, not both")
        if self.noise_multiplier is not None and not self.noise_multiplier >= 0:
            raise ValueError("the noise multiplier must be >= 0")
        if self.target_epsilon is not None and not self.target_epsilon > 0:
            raise ValueError("the target epsilon must be > 0")
        if not self.clip > 0:
            raise ValueError("the clipping bound must be > 0")
        if not 0 < self.delta < 1:
            raise ValueError("delta must be in (0, 1)")
        if self.backend not in ("numpy", "fused"):
            raise ValueError(f"unknown DP-SGD backend {self.backend!r} (numpy or fused)")


def steps_per_epoch(rows: int, batch_size: int) -> int:
    """m = ⌈rows / batch_size⌉ (at least 1): the steps of one local epoch, and q = 1/m."""
    return max(1, math.ceil(rows / batch_size))


def poisson_batch(rng: np.random.Generator, rows: int, sample_rate: float) -> npt.NDArray[np.int64]:
    """Indices of one Poisson-sampled batch: each row independently with probability ``sample_rate``."""
    return np.flatnonzero(rng.random(rows) < sample_rate).astype(np.int64)


def clip_factors(sq_norms: Array, clip: float) -> Array:
    """min(1, C / (‖g_i‖ + 1e-6)) per example, from the squared per-example norms."""
    norms = np.sqrt(np.maximum(sq_norms, 0.0))
    factors = np.minimum(np.float32(1.0), np.float32(clip) / (norms + np.float32(NORM_EPS)))
    return np.asarray(factors, dtype=np.float32)


class GaussianNoise:
    """Fresh N(0, std²) noise, seeded per node. torch's vectorised sampler is about twice as fast
    as numpy's for the ~50k–200k coordinates a step needs (bench/train_step.py)."""

    def __init__(self, seed: int) -> None:
        self._gen = torch.Generator().manual_seed(seed)

    def state(self) -> bytes:
        return bytes(self._gen.get_state().numpy().tobytes())

    def restore(self, state: bytes) -> None:
        if len(state) == ZigguratNoise.STATE_BYTES:
            raise ValueError("the checkpoint's noise stream is --dp-backend fused's, this run's numpy's")
        self._gen.set_state(torch.frombuffer(bytearray(state), dtype=torch.uint8))

    def sample(self, shape: tuple[int, ...], std: float) -> Array:
        """A fresh float32 array of N(0, std²) values (zeros when std is 0)."""
        out = torch.empty(shape, dtype=torch.float32)
        if std == 0.0:
            out.zero_()
        else:
            out.normal_(0.0, std, generator=self._gen)
        arr: Array = out.numpy()
        return arr

    def add(self, grad: Array, std: float) -> None:
        """grad += N(0, std²) on every coordinate, in place."""
        if std != 0.0:
            grad += self.sample(grad.shape, std)


@contextmanager
def _quiet_orders() -> Iterator[None]:
    """Opacus warns when the best RDP order is at the edge of its grid. The ε it returns is still a
    valid upper bound, only not the tightest, and 943 nodes would repeat the warning each round."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Optimal order is the", category=UserWarning)
        yield


@lru_cache(maxsize=4096)
def _rdp_per_step(noise_multiplier: float, sample_rate: float) -> tuple[float, ...]:
    """The RDP of one sampled-Gaussian step at Opacus' default orders (linear in steps, so cached)."""
    from opacus.accountants import RDPAccountant
    from opacus.accountants.analysis import rdp as rdp_analysis

    rdp = rdp_analysis.compute_rdp(
        q=sample_rate, noise_multiplier=noise_multiplier, steps=1, orders=RDPAccountant.DEFAULT_ALPHAS
    )
    return tuple(float(x) for x in np.atleast_1d(rdp))


class NodeAccountant:
    """A node's privacy accountant: an Opacus ``RDPAccountant`` that every step is charged to,
    with ε read through a cache of the per-step RDP curve by (σ, q).

    ``RDPAccountant.get_epsilon`` recomputes the RDP curve on every call (0.3 s at q = 1/2), which
    a 943-node simulation reporting ε each round cannot afford. The RDP of ``k`` identical steps
    is ``k`` times that of one (``compute_rdp`` multiplies by ``steps``), so the cache gives the
    same numbers; a unit test checks them against ``RDPAccountant.get_epsilon``. Opacus is
    imported here, not at module load, because it takes ~1.5 s and runs without DP never need it.
    """

    def __init__(self) -> None:
        from opacus.accountants import RDPAccountant

        self.opacus = RDPAccountant()
        self._alphas: list[float] = list(RDPAccountant.DEFAULT_ALPHAS)

    def step(self, *, noise_multiplier: float, sample_rate: float) -> None:
        self.opacus.step(noise_multiplier=noise_multiplier, sample_rate=sample_rate)

    @property
    def history(self) -> list[tuple[float, float, int]]:
        """(σ, q, steps) runs, as Opacus records them."""
        return [(float(s), float(q), int(n)) for s, q, n in self.opacus.history]

    @property
    def steps(self) -> int:
        return sum(n for _, _, n in self.history)

    def get_epsilon(self, delta: float) -> float:
        """ε spent at ``delta`` (0 before the first step)."""
        from opacus.accountants.analysis import rdp as rdp_analysis

        if not self.opacus.history:
            return 0.0
        total = np.zeros(len(self._alphas))
        for sigma, q, steps in self.history:
            total += np.asarray(_rdp_per_step(sigma, q)) * steps
        with _quiet_orders():
            eps, _alpha = rdp_analysis.get_privacy_spent(orders=self._alphas, rdp=total, delta=delta)
        return float(eps)


#: Opacus' binary search stops within this much of the target ε (its default, used here)
EPSILON_TOLERANCE = 0.01


class SigmaStore(Protocol):
    """Where calibrated σ are kept between processes (p2pnode/data/sigma_store.py keeps a file)."""

    def get(self, key: str) -> float | None: ...

    def put(self, key: str, sigma: float) -> None: ...


_STORE: list[SigmaStore] = []


def use_sigma_store(store: SigmaStore | None) -> None:
    """Calibrations look in ``store`` first and leave theirs there (None: none is used)."""
    _STORE[:] = [store] if store is not None else []


def calibration_key(target_epsilon: float, delta: float, sample_rate: float, steps: int) -> str:
    """What a calibration depends on: its inputs exactly, the accountant and Opacus' version."""
    import opacus

    return (
        f"rdp opacus-{opacus.__version__} tol={EPSILON_TOLERANCE!r} eps={target_epsilon!r} "
        f"delta={delta!r} q={sample_rate!r} steps={steps}"
    )


def calibrated(sigma: float, target_epsilon: float, delta: float, sample_rate: float, steps: int) -> bool:
    """Whether ``sigma`` is what the calibration accepts: ``steps`` steps at ``sample_rate`` spend
    at most ``target_epsilon`` and at least ``target_epsilon`` − the tolerance. One ε reading
    (~0.1–0.25 s), against the 10–20 of the search: a stored σ is checked, never trusted."""
    from opacus.accountants import RDPAccountant

    if not (math.isfinite(sigma) and sigma > 0):
        return False
    accountant = RDPAccountant()
    accountant.history = [(sigma, sample_rate, steps)]
    with _quiet_orders():
        eps = float(accountant.get_epsilon(delta=delta))
    return eps <= target_epsilon and target_epsilon - eps <= EPSILON_TOLERANCE


@lru_cache(maxsize=1024)
def calibrate_noise(target_epsilon: float, delta: float, sample_rate: float, steps: int) -> float:
    """σ such that ``steps`` steps at ``sample_rate`` spend at most ``target_epsilon`` (Opacus RDP).

    Cached: nodes with the same number of steps per epoch share one calibration (a few seconds
    each, ~50 s for the 14 distinct ones of a 943-node run), and with a :class:`SigmaStore` in use
    runs share them across processes: a stored σ is taken only if :func:`calibrated` accepts it,
    so a stale or edited store cannot weaken the guarantee, only cost the search again.
    """
    from opacus.accountants.utils import get_noise_multiplier

    key = calibration_key(target_epsilon, delta, sample_rate, steps)
    for store in _STORE:
        stored = store.get(key)
        if stored is not None and calibrated(stored, target_epsilon, delta, sample_rate, steps):
            return stored
    with _quiet_orders():
        sigma = get_noise_multiplier(
            target_epsilon=target_epsilon,
            target_delta=delta,
            sample_rate=sample_rate,
            steps=steps,
            accountant="rdp",
            epsilon_tolerance=EPSILON_TOLERANCE,
        )
    for store in _STORE:
        store.put(key, float(sigma))
    return float(sigma)


class PrivateStepper:
    """A node's DP state: its σ, sample rate, step budget, noise source and accountant.

    The model backends ask it for batches, clip factors and noise; it charges every step.
    """

    def __init__(self, config: DPConfig, rows: int, batch_size: int, seed: int) -> None:
        if not config.enabled:
            raise ValueError("DP-SGD is not configured (no noise multiplier and no target epsilon)")
        self.config = config
        self.rows = rows
        self.steps_per_epoch = steps_per_epoch(rows, batch_size)
        self.sample_rate = 1.0 / self.steps_per_epoch
        self.expected_batch = rows * self.sample_rate
        self.budget_steps: int | None = None
        if config.target_epsilon is not None:
            if config.horizon_updates < 1:
                raise ValueError("a target epsilon needs the number of local updates it must last")
            self.budget_steps = config.horizon_updates * self.steps_per_epoch
            self.noise_multiplier = calibrate_noise(
                config.target_epsilon, config.delta, self.sample_rate, self.budget_steps
            )
        else:
            assert config.noise_multiplier is not None
            self.noise_multiplier = config.noise_multiplier
        self.accountant = NodeAccountant()
        self.noise: GaussianNoise | ZigguratNoise = (
            ZigguratNoise(seed) if config.backend == "fused" else GaussianNoise(seed)
        )
        self.skipped_steps = 0  #: steps refused because the ε budget was spent

    @property
    def noise_std(self) -> float:
        return self.noise_multiplier * self.config.clip

    def may_step(self) -> bool:
        """False once the steps the target ε was calibrated for are spent: ε never exceeds it."""
        if self.budget_steps is not None and self.accountant.steps >= self.budget_steps:
            self.skipped_steps += 1
            return False
        return True

    def take_steps(self, wanted: int) -> int:
        """How many of ``wanted`` steps :meth:`may_step` lets through in a row (the budget's
        remainder), counting the refusal that ends them as :meth:`may_step` does."""
        allowed = wanted
        if self.budget_steps is not None:
            allowed = max(0, min(wanted, self.budget_steps - self.accountant.steps))
        if allowed < wanted:
            self.skipped_steps += 1
        return allowed

    def charge(self) -> None:
        """Record one (σ, q) step with the accountant."""
        self.accountant.step(noise_multiplier=self.noise_multiplier, sample_rate=self.sample_rate)

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps: the accountant's (σ, q, steps) runs and the noise stream."""
        return {
            "history": [[s, q, n] for s, q, n in self.accountant.history],
            "skipped": self.skipped_steps,
            "noise_multiplier": self.noise_multiplier,
            "noise": self.noise.state(),
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Take back the accountant's history, so ε continues from where it was, never lower."""
        if float(state["noise_multiplier"]) != self.noise_multiplier:
            raise ValueError(
                f"checkpoint was made with σ = {state['noise_multiplier']}, this run has σ = "
                f"{self.noise_multiplier}: the DP settings changed"
            )
        self.accountant.opacus.history = [(float(s), float(q), int(n)) for s, q, n in state["history"]]
        self.skipped_steps = int(state["skipped"])
        self.noise.restore(state["noise"])

    def epsilon(self) -> float:
        """ε spent so far at the configured δ (0 before the first step; inf with σ = 0)."""
        if self.noise_multiplier == 0.0 and self.accountant.steps:
            return math.inf
        return self.accountant.get_epsilon(self.config.delta)
