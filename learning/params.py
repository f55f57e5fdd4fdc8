"""Model parameters as named float32 numpy arrays, and their specification for checking peer input."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float32]
Params = dict[str, Array]  #: a model a node owns and changes
ParamsView = Mapping[str, Array]  #: a model read, not changed (a peer's, a snapshot)
Index = npt.NDArray[np.int64]  #: ids of users or items


@dataclass(frozen=True)
class TensorSpec:
    """What a named parameter must look like: dtype name and shape."""

    dtype: str
    shape: tuple[int, ...]
    np_dtype: np.dtype[Any] = field(init=False, compare=False, repr=False)
    count: int = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "np_dtype", np.dtype(self.dtype))
        object.__setattr__(self, "count", math.prod(self.shape))

    @property
    def nbytes(self) -> int:
        return self.count * self.np_dtype.itemsize


ModelSpec = Mapping[str, TensorSpec]


def spec_of(params: Mapping[str, Array]) -> dict[str, TensorSpec]:
    """The spec a set of parameters satisfies."""
    return {k: TensorSpec(str(v.dtype), tuple(int(d) for d in v.shape)) for k, v in params.items()}


def copy_params(params: Mapping[str, Array], names: tuple[str, ...] | None = None) -> Params:
    """A deep copy of ``params`` (restricted to ``names`` when given)."""
    keys = names if names is not None else tuple(params)
    return {k: params[k].copy() for k in keys}


def mean_into(own: Mapping[str, Array], others: list[Mapping[str, Array]]) -> None:
    """Set ``own[k] = mean(own[k], *others[k])`` in place for every key the others all carry.

    This is the aggregation of 002 Algorithm 1 line 7 (two models) and Algorithm 2 line 4.
    """
    if not others:
        return
    scale = np.float32(1.0 / (len(others) + 1))
    for name, arr in own.items():
        if not all(name in o for o in others):
            continue
        for o in others:
            arr += o[name]
        arr *= scale


def all_finite(params: Mapping[str, Array]) -> bool:
    """Whether every value is finite.

    Per tensor one dot product of its values with themselves, which is NaN or inf as soon as one
    value is (about one read of the tensor); only when it is not finite does the exact
    element-wise check run, telling a NaN or infinity from an overflow of huge finite values."""
    with np.errstate(over="ignore", invalid="ignore"):
        for v in params.values():
            flat = v.reshape(-1)
            if not math.isfinite(float(flat.dot(flat))) and not np.isfinite(flat).all():
                return False
    return True


class Checked(dict[str, Array]):
    """Tensors a receiver decoded and checked for finiteness, with the dot product of each with
    itself that the check computed (``squares``, by name): :func:`l2_norm` takes those instead of
    reading the tensors again, the same bits (the same dot on the same memory). Replacing a
    tensor forgets its square."""

    def __init__(self, tensors: Mapping[str, Array], squares: dict[str, float]) -> None:
        super().__init__(tensors)
        self.squares = squares

    def __setitem__(self, name: str, value: Array) -> None:
        self._forget((name,))
        super().__setitem__(name, value)

    def update(self, *args: Any, **kwargs: Any) -> None:
        new = dict(*args, **kwargs)
        self._forget(new)
        super().update(new)

    def _forget(self, names: Iterable[str]) -> None:
        squares = self.__dict__.get("squares")  # absent while a copy or unpickling fills it
        if squares is not None:
            for name in names:
                squares.pop(name, None)


def l2_norm(params: Mapping[str, Array], names: Iterable[str] | None = None) -> float:
    """‖params‖ over ``names`` (all tensors by default) as one vector; inf on overflow."""
    total = 0.0
    squares = params.squares if isinstance(params, Checked) else {}
    with np.errstate(over="ignore", invalid="ignore"):
        for name in names if names is not None else params:
            sq = squares.get(name)
            if sq is None:
                v = params[name].ravel()
                sq = float(np.dot(v, v))
            total += sq
    return math.sqrt(total) if math.isfinite(total) else math.inf


def _square_sums(own: Mapping[str, Array], other: Mapping[str, Array]) -> tuple[float, float]:
    """‖other − own‖² and ‖own‖² over the tensors ``other`` carries that ``own`` has, from three
    dot products per tensor, ‖b‖² − 2 a·b + ‖a‖², in float32 as the models are: no temporary
    array (a float64 difference took ten times as long)."""
    diff = 0.0
    norm = 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        for name, theirs in other.items():
            mine = own.get(name)
            if mine is None:
                continue
            a, b = mine.ravel(), theirs.ravel()
            aa = float(np.dot(a, a))
            diff += float(np.dot(b, b)) - 2.0 * float(np.dot(a, b)) + aa
            norm += aa
    return diff, norm


def distance(own: Mapping[str, Array], other: Mapping[str, Array]) -> float:
    """‖other − own‖ over the tensors ``other`` carries that ``own`` has, as one vector (inf on
    overflow)."""
    diff, _ = _square_sums(own, other)
    return math.sqrt(max(diff, 0.0)) if math.isfinite(diff) else math.inf


def toward(own: Mapping[str, Array], other: Mapping[str, Array], scale: float) -> Params:
    """own + scale · (other − own) for the tensors ``other`` carries that ``own`` has (new arrays:
    neither input changes); tensors only ``other`` has are kept as they are."""
    out: Params = {}
    for name, theirs in other.items():
        mine = own.get(name)
        if mine is None:
            out[name] = theirs
            continue
        step = theirs - mine
        step *= np.float32(scale)
        step += mine
        out[name] = step
    return out


def relative_distance(own: Mapping[str, Array], other: Mapping[str, Array]) -> float:
    """‖other − own‖ / ‖own‖ over the tensors ``other`` carries that ``own`` has (L2, all of them
    as one vector); a received model far from the receiver's by this measure is refused (THREAT_MODEL.md).

    On every model received, by :func:`_square_sums`. The cancellation when the models are close
    costs nothing where it matters: the bound is ~100x the honest distances. An overflow gives
    inf, refused as too far."""
    diff, norm = _square_sums(own, other)
    if not math.isfinite(diff):
        return math.inf
    return math.sqrt(max(diff, 0.0)) / max(math.sqrt(norm), 1e-12)


MERGES = ("mean", "trimmed", "median")  #: how a node aggregates several models (``--merge``)
TRIM = 0.1  #: trimmed: the share of values dropped at each end, per coordinate (at least one)


def robust_into(own: Mapping[str, Array], others: list[Mapping[str, Array]], how: str) -> None:
    """Set ``own[k]`` to a coordinate-wise robust aggregate of ``own[k]`` and ``others[k]``.

    ``median``: the median of the n values of each coordinate. ``trimmed``: their mean after
    dropping the ⌊0.1·n⌋ largest and smallest (at least one each when n ≥ 3), so that one model
    of extreme values moves no coordinate (the coordinate-wise trimmed mean and median of Yin et
    al., ICML 2018). Keys the others do not all carry are left alone, as in :func:`mean_into`.
    """
    if how not in ("trimmed", "median"):
        raise ValueError(f"robust aggregation is trimmed or median, not {how!r}")
    if not others:
        return
    n = len(others) + 1
    for name, arr in own.items():
        if not all(name in o for o in others):
            continue
        stack = np.stack([arr, *(o[name] for o in others)])
        if how == "median":
            arr[...] = np.median(stack, axis=0)
            continue
        cut = max(1, int(TRIM * n)) if n >= 3 else 0
        if cut:
            stack.sort(axis=0)
            stack = stack[cut : n - cut]
        arr[...] = stack.mean(axis=0, dtype=np.float32)
