"""The plain reading of paper 003's query loop, one candidate at a time, as the authors' code
(``pmuellner/ReuseKNN``, ``UserKNN.estimate``) runs it: the reference that the vectorised
``learning.reuseknn.answer`` is tested against (``tests/unit/learning/test_reuseknn.py``) and
timed against (``python -m bench.reuseknn``). It draws from its generator exactly as ``answer``
does, so the two agree to the last bit on the same seed."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from learning.reuseknn import FloatArray, Neighbourhoods


def loop_answer(
    nb: Neighbourhoods,
    strategy: str,
    k: int,
    queries: Sequence[tuple[int, int]],
    tau: float,
    dp: bool,
    rng: np.random.Generator,
) -> tuple[FloatArray, FloatArray, FloatArray, dict[int, list[int]]]:
    """Estimates, DataUsage, privacy risk and Neighbors@q of ``queries``, as ``answer`` gives them."""
    rank = nb.ranking(strategy)
    usage = np.zeros(nb.sim.shape[0])
    risk = np.zeros_like(usage)
    neighbours: dict[int, set[int]] = {}
    sizes: dict[int, list[int]] = {}
    estimates = []
    for u, i in queries:
        cand = [c for c in nb.raters[i].tolist() if c != u]
        if not cand:
            estimates.append(nb.mean)
            continue
        keys = rng.random(len(cand))
        ordered = [
            c for _, _, c in sorted(((-rank[u, c], key, c) for c, key in zip(cand, keys, strict=True)))
        ]
        mine = neighbours.setdefault(u, set())
        if strategy == "reuse":
            already = [c for c in ordered if c in mine]
            fresh = [c for c in ordered if c not in mine][: max(k - len(already), 0)]
            mine.update(fresh)
            pool = [c for c in ordered if c in mine]
            top = sorted(pool, key=lambda c: -nb.sim[u, c])[:k]  # stable: rank order among equals
        else:
            top = ordered[:k]
            mine.update(top)
        sizes.setdefault(u, []).append(len(mine))
        top = [c for c in top if nb.sim[u, c] > 0]
        if not top:
            estimates.append(nb.mean)
            continue
        for c in top:
            usage[c] += 1
        answers = [nb.ratings[c, i] for c in top]
        if dp:
            truthful, second = rng.random(len(top)) >= 0.5, rng.random(len(top)) >= 0.5
            noise = rng.uniform(nb.scale[0], nb.scale[1], len(top))
            for j, c in enumerate(top):
                if usage[c] > tau:
                    if not truthful[j] and not second[j]:
                        answers[j] = noise[j]
                else:
                    risk[c] += 1
        else:
            for c in top:
                risk[c] += 1
        s = np.array([nb.sim[u, c] for c in top])
        estimates.append(float(np.dot(s, answers) / s.sum()))
    return np.array(estimates), usage, risk, sizes
