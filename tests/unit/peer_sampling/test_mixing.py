"""λ2(W*) of static and dynamic k-regular graphs (002 §4, eqs. 8-11)."""

from __future__ import annotations

import numpy as np
import pytest

from peer_sampling.mixing import (
    connected,
    contraction,
    lambda2_curve,
    mixing_matrix,
    mixing_table,
    random_regular_graph,
)


@pytest.mark.parametrize("k", [2, 3, 5, 10])
def test_random_regular_graphs_are_simple_connected_and_k_regular(k: int) -> None:
    rng = np.random.default_rng(k)
    adj = random_regular_graph(40, k, rng)
    assert (adj == adj.T).all() and not adj.diagonal().any()
    assert (adj.sum(axis=1) == k).all()
    assert connected(adj)
    w = mixing_matrix(adj)
    assert np.allclose(w.sum(axis=0), 1) and np.allclose(w.sum(axis=1), 1) and np.allclose(w, w.T)


def test_graphs_are_random_not_the_circulant_start() -> None:
    a = random_regular_graph(40, 4, np.random.default_rng(1))
    b = random_regular_graph(40, 4, np.random.default_rng(2))
    assert (a != b).any()
    idx = np.arange(40)
    assert not a[idx, (idx + 1) % 40].all()  # the ring edges of the start were swapped away


def test_impossible_graphs_are_refused() -> None:
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match="even"):
        random_regular_graph(9, 3, rng)
    with pytest.raises(ValueError):
        random_regular_graph(5, 5, rng)


def test_connectivity_check() -> None:
    two_triangles = np.zeros((6, 6), dtype=bool)
    for a, b in [(0, 1), (1, 2), (2, 0), (3, 4), (4, 5), (5, 3)]:
        two_triangles[a, b] = two_triangles[b, a] = True
    assert not connected(two_triangles)
    assert contraction(mixing_matrix(two_triangles)) == pytest.approx(1.0)  # never mixes


def test_static_curve_is_the_power_of_the_second_eigenvalue() -> None:
    """Static setting: λ2(W*) = λ2(W)^T, λ2 the largest |eigenvalue| after the trivial 1 (002 §4)."""
    n, k, t = 30, 3, 6
    curve = lambda2_curve(n, k, t, dynamic=False, rng=np.random.default_rng(5))
    w = mixing_matrix(random_regular_graph(n, k, np.random.default_rng(5)))
    eig = np.sort(np.abs(np.linalg.eigvalsh(w)))[::-1]
    assert eig[0] == pytest.approx(1.0)
    assert curve == pytest.approx([eig[1] ** (i + 1) for i in range(t)], rel=1e-9)


def test_contraction_bounds_the_distance_to_the_average() -> None:
    """Eq. 10 for W*: ||W*θ - 1θ̃|| <= λ2(W*) ||θ - 1θ̃|| on random vectors, dynamic products too."""
    rng = np.random.default_rng(3)
    w = mixing_matrix(random_regular_graph(24, 3, rng))
    product = np.eye(24)
    for _ in range(4):
        perm = rng.permutation(24)
        product = w[np.ix_(perm, perm)] @ product
    lam = contraction(product)
    for _ in range(20):
        theta = rng.normal(size=24)
        centred = theta - theta.mean()
        mixed = product @ theta
        assert np.linalg.norm(mixed - theta.mean()) <= lam * np.linalg.norm(centred) + 1e-12


def test_dynamic_graphs_mix_faster_than_static_ones() -> None:
    points, curves = mixing_table(60, [2, 4], iterations=8, runs=4, seed=0)
    at = {(p.degree, p.dynamic): p for p in points if p.iteration == 8}
    for k in (2, 4):
        assert at[(k, True)].mean < at[(k, False)].mean / 5
    assert len(curves[(2, True)]) == 4 and all(len(c) == 8 for c in curves[(2, True)])
    assert all(a >= b - 1e-12 for a, b in zip(curves[(4, False)][0], curves[(4, False)][0][1:], strict=False))
