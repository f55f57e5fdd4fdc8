"""The compiled dense Adam step gives numpy's bits (learning/adam.py)."""

from __future__ import annotations

import numpy as np
import pytest

from learning.adam import adam_dense, adam_numpy


def _state(rng: np.random.Generator, shape: tuple[int, ...], spread: float) -> list[np.ndarray]:
    param = rng.standard_normal(shape).astype(np.float32)
    grad = (rng.standard_normal(shape) * spread).astype(np.float32)
    m = (rng.standard_normal(shape) * 0.01).astype(np.float32)
    v = np.abs(rng.standard_normal(shape) * 1e-4).astype(np.float32)
    grad.flat[0] = 0.0
    if grad.size > 1:
        grad.flat[1] = -0.0
    v.flat[0] = 0.0  # sqrt(0) + eps
    m.flat[0] = 0.0
    return [param, grad, m, v]


@pytest.mark.parametrize("shape", [(1,), (7,), (1682, 32), (1, 32)])
@pytest.mark.parametrize("spread", [1e-6, 1.0, 1e3])
@pytest.mark.parametrize("scale", [None, np.float32(1 / 37.4)])
def test_the_compiled_step_gives_the_numpy_expressions_bits(
    shape: tuple[int, ...], spread: float, scale: np.float32 | None
) -> None:
    rng = np.random.default_rng(len(shape) * 1000 + int(spread * 10))
    ours = _state(rng, shape, spread)
    ref = [a.copy() for a in ours]
    for step in (1, 2, 10, 1000):  # several steps: the moments carry over
        adam_dense(*ours, step, 0.01, scale)
        if scale is not None:
            ref[1] *= scale
        adam_numpy(*ref, step, 0.01)
        for a, b in zip(ours, ref, strict=True):
            assert a.tobytes() == b.tobytes()
        ours[1][...] = ref[1][...] = (rng.standard_normal(shape) * spread).astype(np.float32)


def test_a_strided_parameter_takes_the_numpy_path_with_the_same_result() -> None:
    rng = np.random.default_rng(5)
    base = _state(rng, (40, 32), 1.0)
    strided = [a[:, ::2] for a in (x.copy() for x in base)]
    ref = [np.ascontiguousarray(a) for a in strided]
    adam_dense(*strided, 3, 0.01, np.float32(0.5))
    ref[1] *= np.float32(0.5)
    adam_numpy(*ref, 3, 0.01)
    for a, b in zip(strided, ref, strict=True):
        assert np.ascontiguousarray(a).tobytes() == b.tobytes()
    assert not strided[0].flags.c_contiguous


def test_a_non_finite_gradient_goes_through_as_numpy_would() -> None:
    param, grad, m, v = (np.ones(4, dtype=np.float32) for _ in range(4))
    grad[1], grad[2] = np.nan, np.inf
    ref = [a.copy() for a in (param, grad, m, v)]
    adam_dense(param, grad, m, v, 1, 0.01)
    with np.errstate(invalid="ignore"):
        adam_numpy(*ref, 1, 0.01)
    for a, b in zip((param, grad, m, v), ref, strict=True):
        assert a.tobytes() == b.tobytes()
    assert np.isnan(param[1]) and np.isnan(param[2])
