"""Random k-out/k-in regular directed graphs: the initial topology G^(1) of 002 §2.4.

The CIA paper (000 §III-C) uses P-out-regular graphs with E|N_in| = P. Drawing the union of k
random permutations (repaired so there are no self-loops or repeated edges) gives every node exactly
k out-neighbours and k in-neighbours, which a k-regular undirected graph cannot do for odd n·k
(943 · 3).
"""

from __future__ import annotations

import random
from collections.abc import Sequence


def random_regular_digraph(nodes: Sequence[int], k: int, rng: random.Random) -> dict[int, list[int]]:
    """Out-neighbour lists of a random digraph where every node has out- and in-degree ``k``."""
    n = len(nodes)
    if k < 1:
        raise ValueError("view size must be at least 1")
    if n <= k:
        raise ValueError(f"a {k}-regular graph needs more than {k} nodes, got {n}")
    order = sorted(nodes)
    for _restart in range(20):
        out: dict[int, set[int]] = {v: set() for v in order}
        try:
            for _layer in range(k):
                _add_permutation_layer(order, out, rng)
        except _Stuck:
            continue
        return {v: sorted(out[v]) for v in order}
    return _relabelled_circulant(order, k, rng)


class _Stuck(Exception):
    """A permutation layer could not be repaired (dense graphs): start over."""


def _relabelled_circulant(order: list[int], k: int, rng: random.Random) -> dict[int, list[int]]:
    """Fallback for dense k: node σ(t) points to σ(t+1..t+k); always k-regular, less random."""
    perm = order[:]
    rng.shuffle(perm)
    n = len(perm)
    return {perm[t]: sorted(perm[(t + d) % n] for d in range(1, k + 1)) for t in range(n)}


def in_views(out: dict[int, list[int]]) -> dict[int, list[int]]:
    """In-neighbour lists implied by out-neighbour lists."""
    inn: dict[int, list[int]] = {v: [] for v in out}
    for v, targets in out.items():
        for t in targets:
            inn[t].append(v)
    return {v: sorted(s) for v, s in inn.items()}


def _add_permutation_layer(order: list[int], out: dict[int, set[int]], rng: random.Random) -> None:
    """Add one edge out of and one edge into every node, avoiding self-loops and duplicates."""
    targets = order[:]
    rng.shuffle(targets)
    n = len(order)
    for _attempt in range(20 * n + 200):
        bad = [i for i in range(n) if _conflict(order[i], targets[i], out)]
        if not bad:
            break
        i = rng.choice(bad)
        j = rng.randrange(n)
        if not _conflict(order[i], targets[j], out) and not _conflict(order[j], targets[i], out):
            targets[i], targets[j] = targets[j], targets[i]
    else:
        raise _Stuck
    for src, dst in zip(order, targets, strict=True):
        out[src].add(dst)


def _conflict(src: int, dst: int, out: dict[int, set[int]]) -> bool:
    return src == dst or dst in out[src]
