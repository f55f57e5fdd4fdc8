"""The readings of the CIA's momentum (000 eq. 4): how v_u starts and how much Θ_u^n weighs.

Eq. 4 is ``v_u^t = β·v_u^{t−1} + (1 − β)·Θ_u^t`` with ``v_u^0 = Θ_u^0`` in the text, while
Algorithms 1 and 2 start v_u empty (line 2) and apply eq. 4 from the first model (line 8). Every
reading below is ``v_u^n = (1 − α_n)·v_u^{n−1} + α_n·Θ_u^n`` over the n-th observation of u:

- ``first``: v_u^1 = Θ_u^1, then α_n = 1 − β (the text's v_u^0 = Θ_u^0);
- ``zero``: v_u^0 = 0, α_n = 1 − β (the algorithms read literally: v_u^1 = (1 − β)·Θ_u^1);
- ``debiased``: v_u^0 = 0 with the bias correction v̂_u^n = v_u^n / (1 − β^n) (as Adam corrects its
  moments), stored directly: α_n = (1 − β) / (1 − β^n), so v̂_u^1 = Θ_u^1, and while n ≪ 1/(1 − β)
  v̂_u^n stays close to the mean of u's observations;
- ``init``: v_u^0 = θ_0, the initial model every node starts from, α_n = 1 − β.

With β = 0 all four are v_u = the latest Θ_u. Pure Python: the config imports it.
"""

from __future__ import annotations

ESTIMATORS = ("first", "zero", "debiased", "init")


def weights(estimator: str, beta: float, n: int) -> tuple[float, float]:
    """(1 − α_n, α_n): the weights of v_u^{n−1} and of the n-th observation Θ_u^n (n ≥ 1).

    For ``first`` the first observation is v_u itself (α_1 = 1).
    """
    if n < 1:
        raise ValueError("observations are counted from 1")
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {', '.join(ESTIMATORS)}, got {estimator!r}")
    if estimator == "first" and n == 1:
        return 0.0, 1.0
    if estimator == "debiased":
        alpha = (1.0 - beta) / (1.0 - beta**n)
        return 1.0 - alpha, alpha
    return beta, 1.0 - beta
