"""Mixing of static and dynamic k-regular gossip graphs: λ2(W*) against iterations (002 §4).

The idealised consensus of 002 §4: at every synchronous iteration each node averages its model
with its k neighbours (eq. 8), so the models evolve as θ ← W^(t) θ with W_ij = 1/(k+1) on the
edges and the diagonal of an undirected k-regular graph (eq. 9). After T iterations the mixing is
measured by λ2(W*), W* = W^(T) ··· W^(1): the factor by which the distance to the average shrinks
(eq. 10). In the *static* setting W^(t) = W for every t; in the *dynamic* setting the nodes are
randomly permuted at every iteration (the same graph shape, new neighbours), which is what
PeerSwap does in the limit of many swaps per round.

A product of symmetric matrices is not symmetric, so the contraction factor of eq. 10 for W* is
its second largest *singular* value, i.e. the spectral norm of W* − 11ᵀ/n (W* is doubly
stochastic). For a static W this is max_{i≥2} |λ_i(W)|^T, which the tests check.

Pure: numpy only, every random choice from the ``numpy.random.Generator`` passed in.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def random_regular_graph(n: int, k: int, rng: np.random.Generator, swaps: int | None = None) -> np.ndarray:
    """Adjacency matrix (bool, symmetric, no self-loops) of a random undirected k-regular graph.

    Starts from a circulant k-regular graph and randomises it with degree-preserving double-edge
    swaps (a–b, c–d → a–d, c–b when that creates no loop or repeated edge); ``swaps`` defaults to
    10 per edge, far past the chain's mixing on graphs of this size. Only connected graphs are
    returned (a disconnected W has λ2 = 1 and never mixes); for k = 2 that is a random cycle.
    """
    if k < 1 or k >= n:
        raise ValueError(f"a k-regular graph needs 1 <= k < n, got k={k}, n={n}")
    if (n * k) % 2:
        raise ValueError(f"no {k}-regular graph on {n} nodes: n·k must be even")
    if k == 2:  # connected 2-regular graphs are exactly the Hamiltonian cycles
        order = rng.permutation(n)
        adj = np.zeros((n, n), dtype=bool)
        adj[order, np.roll(order, 1)] = True
        adj[np.roll(order, 1), order] = True
        return adj
    for _draw in range(100):
        adj = _swapped_circulant(n, k, rng, swaps)
        if connected(adj):
            return adj
    raise ValueError(f"could not draw a connected {k}-regular graph on {n} nodes")


def connected(adj: np.ndarray) -> bool:
    """Whether the undirected graph is connected (breadth-first search from node 0)."""
    seen = np.zeros(len(adj), dtype=bool)
    seen[0] = True
    frontier = seen.copy()
    while frontier.any():
        nxt = adj[frontier].any(axis=0) & ~seen
        seen |= nxt
        frontier = nxt
    return bool(seen.all())


def _swapped_circulant(n: int, k: int, rng: np.random.Generator, swaps: int | None) -> np.ndarray:
    adj = np.zeros((n, n), dtype=bool)
    idx = np.arange(n)
    for d in range(1, k // 2 + 1):
        adj[idx, (idx + d) % n] = True
        adj[(idx + d) % n, idx] = True
    if k % 2:  # odd k, even n: add the diameter
        adj[idx, (idx + n // 2) % n] = True
    edges = np.argwhere(np.triu(adj))
    m = len(edges)
    todo = 10 * m if swaps is None else swaps
    picks = rng.integers(0, m, size=(todo, 2))
    flips = rng.random(todo) < 0.5
    for (i, j), flip in zip(picks, flips, strict=True):
        if i == j:
            continue
        a, b = edges[i]
        c, d = edges[j]
        if flip:
            c, d = d, c
        if a == d or c == b or adj[a, d] or adj[c, b]:
            continue
        adj[a, b] = adj[b, a] = adj[c, d] = adj[d, c] = False
        adj[a, d] = adj[d, a] = adj[c, b] = adj[b, c] = True
        edges[i] = (a, d)
        edges[j] = (c, b)
    return adj


def mixing_matrix(adj: np.ndarray) -> np.ndarray:
    """W of eq. 9: 1/(k+1) on each edge and on the diagonal (doubly stochastic, symmetric)."""
    degrees = adj.sum(axis=1)
    if not np.all(degrees == degrees[0]):
        raise ValueError("the graph is not regular")
    k = int(degrees[0])
    return (adj.astype(np.float64) + np.eye(len(adj))) / (k + 1)


def contraction(w_star: np.ndarray) -> float:
    """λ2(W*) of eq. 10: the largest singular value of W* − 11ᵀ/n (second of W*)."""
    n = len(w_star)
    return float(np.linalg.norm(w_star - 1.0 / n, ord=2))


def lambda2_curve(n: int, k: int, iterations: int, dynamic: bool, rng: np.random.Generator) -> list[float]:
    """λ2(W^(t)···W^(1)) for t = 1..iterations, one graph drawn from ``rng``."""
    w = mixing_matrix(random_regular_graph(n, k, rng))
    product = np.eye(n)
    curve = []
    for _t in range(iterations):
        if dynamic:
            perm = rng.permutation(n)
            step = w[np.ix_(perm, perm)]  # P W Pᵀ: the same graph, nodes relabelled
        else:
            step = w
        product = step @ product
        curve.append(contraction(product))
    return curve


@dataclass(frozen=True)
class MixingPoint:
    degree: int
    dynamic: bool
    iteration: int
    mean: float
    std: float


def mixing_table(
    n: int, degrees: list[int], iterations: int, runs: int, seed: int
) -> tuple[list[MixingPoint], dict[tuple[int, bool], list[list[float]]]]:
    """Mean and spread of λ2(W*) over ``runs`` graphs per (degree, setting), as in 002 Figure 8."""
    points: list[MixingPoint] = []
    curves: dict[tuple[int, bool], list[list[float]]] = {}
    for k in degrees:
        for dynamic in (False, True):
            rng = np.random.default_rng([seed, k, int(dynamic)])
            runs_k = [lambda2_curve(n, k, iterations, dynamic, rng) for _ in range(runs)]
            curves[(k, dynamic)] = runs_k
            arr = np.asarray(runs_k)
            for t in range(iterations):
                col = arr[:, t]
                std = float(col.std(ddof=1)) if runs > 1 else 0.0
                points.append(MixingPoint(k, dynamic, t + 1, float(col.mean()), std))
    return points, curves
