"""An empirical lower bound on a run's ε from canaries, in one training run, sans I/O.

Steinke, Nasr and Jagielski (NeurIPS 2023, "Privacy auditing with one (1) training run"): m
canaries are each put into the training data independently with probability ½; after the run an
auditor scores every canary, guesses "in" for the k₊ highest scores and "out" for the k₋ lowest,
and abstains on the rest. If the training is ε-DP, the number v of correct guesses among the
r = k₊ + k₋ made is stochastically dominated by Binomial(r, e^ε / (1 + e^ε)) (their Theorem 3.1,
randomized response's accuracy); with δ > 0 the tail gains at most 2·m·δ·α, α the largest
average of the Binomial's mass just below v (their Proposition 5.2's term). So a run whose v is
too unlikely under ε is not ε-DP: the largest such ε at confidence 1 − β is the lower bound.

The guesses' sizes are fixed in advance, from :data:`GUESSES`; the best over them is reported
with a Bonferroni correction (each tried at β / its count), so choosing after the fact does not
overstate the bound. An attack that guesses at random audits to about 0; a perfect one to the most
the number of guesses allows, logit(β^(1/r)) at δ = 0 (:func:`most_for`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

#: the shares of the canaries guessed "in" (highest scores) and "out" (lowest), tried in turn
GUESSES = (
    (0.01, 0.0),
    (0.02, 0.0),
    (0.05, 0.0),
    (0.1, 0.0),
    (0.05, 0.05),
    (0.1, 0.1),
    (0.25, 0.25),
    (0.5, 0.5),
)
#: 1 − confidence of the bound
BETA = 0.05


def p_value(m: int, r: int, v: int, eps: float, delta: float = 0.0) -> float:
    """The probability of at least ``v`` correct guesses out of ``r`` (of ``m`` canaries) under
    (ε, δ)-DP: the Binomial(r, e^ε/(1+e^ε)) tail, plus 2·m·δ·α where δ > 0."""
    if not 0 <= v <= r <= m:
        raise ValueError(f"need 0 <= v <= r <= m, not v={v}, r={r}, m={m}")
    if eps < 0 or not 0.0 <= delta <= 1.0:
        raise ValueError(f"ε >= 0 and δ in [0, 1], not ε={eps}, δ={delta}")
    from scipy import stats  # here, not at the top: scipy.stats loads socket and threading

    q = 1.0 / (1.0 + math.exp(-eps))
    tail = float(stats.binom.sf(v - 1, r, q))
    if delta == 0.0 or v == 0:
        return min(tail, 1.0)
    below = stats.binom.pmf(np.arange(v - 1, -1, -1), r, q)  # P[Bin = v-1], P[Bin = v-2], ...
    alpha = float(np.max(np.cumsum(below) / np.arange(1, v + 1)))
    return min(tail + 2.0 * m * delta * alpha, 1.0)


def epsilon_lower_bound(m: int, r: int, v: int, beta: float = BETA, delta: float = 0.0) -> float:
    """The largest ε at which ``v`` correct of ``r`` guesses has probability below ``beta``
    (0 where even ε = 0 explains it): the run is not (ε, δ)-DP for any smaller ε, at 1 − β."""
    if not 0.0 < beta < 1.0:
        raise ValueError(f"β is in (0, 1), not {beta}")
    if p_value(m, r, v, 0.0, delta) >= beta:
        return 0.0
    lo, hi = 0.0, 1.0
    while p_value(m, r, v, hi, delta) < beta:
        lo, hi = hi, 2.0 * hi
        if hi > 1e4:  # no ε explains it (v = r and β^(1/r) rounds to 1): the bound is unbounded
            return math.inf
    for _ in range(60):
        mid = (lo + hi) / 2.0
        if p_value(m, r, v, mid, delta) < beta:
            lo = mid
        else:
            hi = mid
    return lo


def most_for(r: int, beta: float = BETA) -> float:
    """The bound ``r`` all-correct guesses give at δ = 0: logit(β^(1/r))."""
    q = beta ** (1.0 / r)
    return math.log(q / (1.0 - q))


@dataclass(frozen=True)
class Audit:
    """The ε lower bound of one run's canaries, and the guesses that gave it."""

    epsilon: float  #: the lower bound (0: nothing shown)
    canaries: int  #: m
    included: int  #: how many went into training
    guesses: int  #: r
    correct: int  #: v
    guessed_in: int  #: k₊
    guessed_out: int  #: k₋
    beta: float
    delta: float

    def to_dict(self) -> dict[str, float | int]:
        return dict(self.__dict__)


def audit(
    scores: npt.ArrayLike,
    included: npt.ArrayLike,
    beta: float = BETA,
    delta: float = 0.0,
    guesses: tuple[tuple[float, float], ...] = GUESSES,
) -> Audit:
    """The best bound over ``guesses`` (each tried at β / len(guesses)) for canaries scored
    ``scores`` (higher: more likely in), of which ``included`` went into training."""
    s = np.asarray(scores, dtype=np.float64).ravel()
    inc = np.asarray(included, dtype=bool).ravel()
    if len(s) != len(inc) or not len(s):
        raise ValueError(f"one score per canary: {len(s)} scores, {len(inc)} canaries")
    if not np.isfinite(s).all():
        raise ValueError("the canaries' scores hold NaN or infinite values")
    m = len(s)
    order = np.argsort(-s, kind="mergesort")
    ranked = inc[order]
    best = Audit(0.0, m, int(inc.sum()), 0, 0, 0, 0, beta, delta)
    for share_in, share_out in guesses:
        k_in, k_out = round(share_in * m), round(share_out * m)
        if k_in + k_out == 0 or k_in + k_out > m:
            continue
        v = (
            int(ranked[:k_in].sum()) + int((~ranked[m - k_out :]).sum())
            if k_out
            else int(ranked[:k_in].sum())
        )
        eps = epsilon_lower_bound(m, k_in + k_out, v, beta / len(guesses), delta)
        if eps > best.epsilon:
            best = Audit(eps, m, int(inc.sum()), k_in + k_out, v, k_in, k_out, beta, delta)
    return best
