"""Tensors on the wire as ``{"d": dtype, "s": shape, "b": raw bytes}``, checked before use.

docs/design.md, rule 6: never unpickle, never ``torch.load`` peer bytes. The dtype comes from an
allowlist, the shape must match the local model's, the byte count must match the shape, and every
value must be finite.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from learning.params import Checked, TensorSpec
from p2pnode.wire.schema import WireError

ALLOWED_DTYPES: dict[str, np.dtype[Any]] = {
    "float32": np.dtype("<f4"),
    "float16": np.dtype("<f2"),
    "int32": np.dtype("<i4"),
}
_NAME_OF = {dt: name for name, dt in ALLOWED_DTYPES.items()}
_F32 = ALLOWED_DTYPES["float32"]
_F16 = ALLOWED_DTYPES["float16"]


def pack_tensor(arr: npt.NDArray[Any], dtype: str | None = None) -> dict[str, Any]:
    """The wire form of ``arr`` (cast to ``dtype`` when given); bytes are little-endian."""
    if dtype is not None:
        arr = arr.astype(ALLOWED_DTYPES[dtype])
    name = _NAME_OF.get(arr.dtype)
    if name is None:
        raise TypeError(f"dtype {arr.dtype} cannot go on the wire")
    if arr.size == 0:
        return {"d": name, "s": list(arr.shape), "b": b""}
    if not arr.flags.c_contiguous:
        arr = np.ascontiguousarray(arr)
    # msgpack packs a C-contiguous buffer of any format as bin (its raw bytes)
    return {"d": name, "s": list(arr.shape), "b": arr.data}


def unpack_tensors(
    objs: Mapping[str, object], spec: Mapping[str, TensorSpec], *, allow_float16: bool = True
) -> dict[str, npt.NDArray[Any]]:
    """``unpack_tensor`` for every entry of ``objs`` against ``spec[name]`` (the caller checks
    that the names are the expected ones)."""
    squares: dict[str, float] = {}
    out = {k: _unpack(v, spec[k], allow_float16, k, squares) for k, v in objs.items()}
    return Checked(out, squares)


def unpack_tensor(
    obj: object,
    spec: TensorSpec,
    *,
    allow_float16: bool = True,
    what: str = "tensor",
) -> npt.NDArray[Any]:
    """Check a wire tensor against ``spec`` and return a read-only array of the spec's dtype."""
    return _unpack(obj, spec, allow_float16, what, None)


def _unpack(
    obj: object, spec: TensorSpec, allow_float16: bool, what: str, squares: dict[str, float] | None
) -> npt.NDArray[Any]:
    """``unpack_tensor``; the finiteness check's dot product goes to ``squares[what]`` when the
    tensor arrived in its own dtype (l2_norm then reuses it)."""
    if type(obj) is not dict or len(obj) != 3:
        raise WireError("schema", f"{what}: a tensor is a map with keys d, s, b")
    try:
        dtype_name, shape, raw = obj["d"], obj["s"], obj["b"]
    except KeyError:
        raise WireError("schema", f"{what}: a tensor is a map with keys d, s, b") from None
    got = ALLOWED_DTYPES.get(dtype_name) if type(dtype_name) is str else None
    want = spec.np_dtype
    if got is not want and got != want:
        if got is None:
            raise WireError("dtype", f"{what}: dtype {dtype_name!r} is not allowed")
        if not (allow_float16 and got is _F16 and want == _F32):
            raise WireError("dtype", f"{what}: dtype {dtype_name} where {spec.dtype} is expected")
    if type(shape) is not list or tuple(shape) != spec.shape:
        raise WireError("shape", f"{what}: shape {shape!r} where {list(spec.shape)} is expected")
    if type(raw) is not bytes:
        raise WireError("schema", f"{what}: data must be bytes")
    if len(raw) != spec.count * got.itemsize:
        raise WireError("shape", f"{what}: {len(raw)} bytes for shape {spec.shape} {dtype_name}")
    flat = np.frombuffer(raw, dtype=got)  # read-only: it views the immutable bytes
    if got.kind == "f" and flat.size:
        sq = finite_square(flat)
        if sq is None:
            raise WireError("non-finite", f"{what}: NaN or infinite values")
        if squares is not None and (got is want or got == want):
            squares[what] = sq  # l2_norm takes it instead of reading the tensor again
    arr = flat.reshape(spec.shape) if len(spec.shape) != 1 else flat
    if got is not want and got != want:
        arr = arr.astype(want)
        arr.flags.writeable = False
    return arr


def finite_square(flat: npt.NDArray[Any]) -> float | None:
    """The dot product of the 1-D float array ``flat`` with itself, or None when an element is
    NaN or ±inf.

    A BLAS dot product of the values with themselves is NaN or inf as soon as one value is, and
    costs about one read of the array; only when it is not finite is the exact element-wise check
    run (it tells a NaN from an overflow of legitimately huge values). The overflow warning numpy
    would print for those is filtered for this module alone (``_QUIET_OVERFLOW``) rather than
    silenced with ``np.errstate``, whose entry costs more than the dot product of a small tensor.
    """
    sq = float(flat.dot(flat))
    return sq if math.isfinite(sq) or bool(np.isfinite(flat).all()) else None


# Squares of finite values above ~1.8e19 overflow float32: the exact check then decides. NaN and
# ±inf themselves raise no floating-point flag in a dot product of a vector with itself.
_QUIET_OVERFLOW = r"overflow encountered in dot"
warnings.filterwarnings("ignore", message=_QUIET_OVERFLOW, category=RuntimeWarning, module=__name__)
