"""PARD's estimator stage (004 eq. 37, Algorithm 1 lines 6–9) as one compiled call per fit.

``learning.pard.Estimators.fit`` in numpy spends most of its time in calls of a few microseconds
each: a fit is three epochs of a forward and backward pass through two stacks of four-layer MLPs
(one per attribute), g^IP's gradient, per-estimator clipping and SGD with momentum, on about
sixteen rows. Here the whole fit is one numba call: the matrix products go to BLAS through
``np.dot`` and everything between them is a loop. The random draws (each epoch's sample of D_pub
and the dropout masks) are made by the caller from the same generator in the same order as the
numpy path, so both paths train on the same rows with the same masks.

The arithmetic is the numpy path's, in float32, with two differences in the last bits: the
matrix products of one attribute are separate BLAS calls rather than numpy's batched ``matmul``
(which may sum in another order), and each estimator's gradient norm is summed in float64.
tests/unit/learning/test_pard.py checks both paths agree to float32 precision over whole fits.
"""

from __future__ import annotations

from collections.abc import Sequence

import numba
import numpy as np
import numpy.typing as npt

Array32 = npt.NDArray[np.float32]
Tensors = tuple[Array32, Array32, Array32, Array32]

_SLOPE = np.float32(0.2)


def four(arrays: Sequence[Array32]) -> Tensors:
    """A stack's four layers' arrays as the tuple the kernels take."""
    a, b, c, d = arrays
    return (a, b, c, d)


#: LeakyReLU's negative slope (pard._leaky)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _leaky(z: Array32) -> Array32:
    out = np.empty_like(z)
    for i in range(z.shape[0]):
        for j in range(z.shape[1]):
            v = z[i, j]
            s = _SLOPE * v
            out[i, j] = v if v > s else s
    return out


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _back_leaky(g: Array32, z: Array32) -> None:
    """``g *= LeakyReLU'(z)`` in place (1 above 0, else 0.2: pard._leaky_slope)."""
    for i in range(g.shape[0]):
        for j in range(g.shape[1]):
            if not z[i, j] > 0:
                g[i, j] *= _SLOPE


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _put(dst: Array32, src: Array32) -> None:
    """``dst[...] = src`` for 2-d arrays of one shape (a loop: numba compiles it in a blink)."""
    for i in range(src.shape[0]):
        for j in range(src.shape[1]):
            dst[i, j] = src[i, j]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _colsum(src: Array32, dst: Array32) -> None:
    """``dst[...] = src.sum(axis=0)``, summed row by row as numpy sums a small array."""
    for j in range(src.shape[1]):
        dst[j] = np.float32(0.0)
    for i in range(src.shape[0]):
        for j in range(src.shape[1]):
            dst[j] += src[i, j]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _attribute(
    x: Array32,
    labels: npt.NDArray[np.int64],
    t: int,
    ws: Tensors,
    bs: Tensors,
    keep: Array32,
    pad: Array32,
    mask: Array32,
    dropout: bool,
    target: Array32,
    uniform: bool,
) -> tuple[float, Array32, tuple[Array32, Array32, Array32, Array32, Array32, Array32]]:
    """Attribute ``t``'s estimator on the rows ``x``: its summed loss (cross-entropy against
    ``labels``, or with ``uniform`` against ``target`` ``(A, 1, columns)``, each attribute's uniform
    distribution over its classes), the loss's mean gradient in the logits, and what the
    backward pass reads (each layer's pre-activation and output). Dropout ``mask[t]`` before the
    last layer when ``dropout`` (pard.Stack.forward, cross_entropy and uniform)."""
    z0 = np.dot(x, ws[0][t]) + bs[0][t, 0]
    h0 = _leaky(z0)
    z1 = np.dot(h0, ws[1][t]) + bs[1][t, 0]
    h1 = _leaky(z1)
    z2 = np.dot(h1, ws[2][t]) + bs[2][t, 0]
    h2 = _leaky(z2) * mask[t] if dropout else _leaky(z2)
    logits = (np.dot(h2, ws[3][t]) + bs[3][t, 0]) * keep[t, 0] + pad[t, 0]
    n = x.shape[0]
    inv = np.float32(1.0) / np.float32(n)
    loss = 0.0
    g = np.empty_like(logits)
    for i in range(n):
        top = logits[i].max()
        total = np.float32(0.0)
        for j in range(logits.shape[1]):
            total += np.exp(logits[i, j] - top)
        log_total = np.log(total)
        for j in range(logits.shape[1]):
            logp = logits[i, j] - top - log_total
            p = np.exp(logp)
            if uniform:
                loss -= float(logp * target[t, 0, j])
                p -= target[t, 0, j]
            elif j == labels[i, t]:
                loss -= float(logp)
                p -= np.float32(1.0)
            g[i, j] = p * inv * keep[t, 0, j]
    return loss, g, (z0, h0, z1, h1, z2, h2)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _backward(
    g: Array32,
    x: Array32,
    t: int,
    ws: Tensors,
    kept: tuple[Array32, Array32, Array32, Array32, Array32, Array32],
    mask: Array32,
    dropout: bool,
    gws: Tensors,
    gbs: Tensors,
    weights: bool,
) -> Array32:
    """Back from the logits' gradient ``g`` through attribute ``t``'s layers: the weights' and
    biases' gradients into ``gws[k][t]`` and ``gbs[k][t]`` when ``weights``; returns the input's
    gradient (empty when ``weights``: fitting does not need it) (pard.Stack.backward)."""
    z0, h0, z1, h1, z2, h2 = kept
    if weights:
        _put(gws[3][t], np.dot(h2.T, g))
        _colsum(g, gbs[3][t, 0])
    g2 = np.dot(g, ws[3][t].T) * mask[t] if dropout else np.dot(g, ws[3][t].T)
    _back_leaky(g2, z2)
    if weights:
        _put(gws[2][t], np.dot(h1.T, g2))
        _colsum(g2, gbs[2][t, 0])
    g1 = np.dot(g2, ws[2][t].T)
    _back_leaky(g1, z1)
    if weights:
        _put(gws[1][t], np.dot(h0.T, g1))
        _colsum(g1, gbs[1][t, 0])
    g0 = np.dot(g1, ws[1][t].T)
    _back_leaky(g0, z0)
    if weights:
        _put(gws[0][t], np.dot(x.T, g0))
        _colsum(g0, gbs[0][t, 0])
        return np.empty((0, 0), np.float32)
    dx: Array32 = np.dot(g0, ws[0][t].T)
    return dx


@numba.njit(cache=True, nogil=True, error_model="numpy", fastmath={"reassoc", "contract"})
def _squares(a: Array32) -> float:
    """The sum of squares of a contiguous array, in float64 (summed in any order: a norm for
    clipping, where the last bits do not matter)."""
    total = 0.0
    for i in range(a.shape[0]):
        for j in range(a.shape[1]):
            v = float(a[i, j])
            total += v * v
    return total


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _clip_stack(gws: Tensors, gbs: Tensors, bound: float) -> None:
    """Scale each attribute's estimator's gradient to an L2 norm of at most ``bound``: torch's
    ``clip_grad_norm_`` per estimator, as pard.Estimators._clip."""
    for t in range(gws[0].shape[0]):
        squares = 0.0
        for k in range(4):
            squares += _squares(gws[k][t]) + _squares(gbs[k][t])
        coef = np.float32(min(bound / (np.sqrt(squares) + 1e-6), 1.0))
        if coef < 1.0:
            for k in range(4):
                gws[k][t] *= coef
                gbs[k][t] *= coef


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _momentum(param: Array32, grad: Array32, buf: Array32, lr: float) -> None:
    """SGD with momentum 0.9 (buf ← 0.9·buf + grad, param ← param − lr·buf; a buffer of zeros
    takes the gradient itself, as torch's first step does)."""
    p, g, b = param.reshape(param.size), grad.reshape(grad.size), buf.reshape(buf.size)
    rate = np.float32(lr)
    for i in range(p.size):
        v = b[i] * np.float32(0.9) + g[i]
        b[i] = v
        p[i] -= v * rate


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _step_stack(
    ws: Tensors, bs: Tensors, gws: Tensors, gbs: Tensors, bw: Tensors, bb: Tensors, lr: float
) -> None:
    for k in range(4):
        _momentum(ws[k], gws[k], bw[k], lr)
        _momentum(bs[k], gbs[k], bb[k], lr)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def fit_stack(
    x: Array32,
    labels: npt.NDArray[np.int64],
    rows: npt.NDArray[np.int64],
    ws: Tensors,
    bs: Tensors,
    bw: Tensors,
    bb: Tensors,
    keep: Array32,
    pad: Array32,
    masks: Array32,
    lr: float,
    bound: float,
) -> None:
    """Every epoch of one estimator stack's fit: epoch e reads ``rows[e]`` of ``x`` and
    ``labels`` with dropout ``masks[e]`` ``(A, m, half)``; each epoch's gradient is clipped per
    attribute and stepped with momentum (``bw``, ``bb``) at once. The estimators of a fit share
    no weight, so each is fitted in a call of its own."""
    gws = (np.empty_like(ws[0]), np.empty_like(ws[1]), np.empty_like(ws[2]), np.empty_like(ws[3]))
    gbs = (np.empty_like(bs[0]), np.empty_like(bs[1]), np.empty_like(bs[2]), np.empty_like(bs[3]))
    for e in range(rows.shape[0]):
        r = rows[e]
        xr = np.empty((r.shape[0], x.shape[1]), np.float32)
        y = np.empty((r.shape[0], labels.shape[1]), np.int64)
        for i in range(r.shape[0]):
            xr[i] = x[r[i]]
            y[i] = labels[r[i]]
        for t in range(ws[0].shape[0]):  # each attribute's mean cross-entropy, with dropout
            _, g, kept = _attribute(xr, y, t, ws, bs, keep, pad, masks[e], True, keep, False)
            _backward(g, xr, t, ws, kept, masks[e], True, gws, gbs, True)
        _clip_stack(gws, gbs, bound)
        _step_stack(ws, bs, gws, gbs, bw, bb, lr)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _ip_gap(
    user_re: Array32, labels: npt.NDArray[np.int64], ip: Array32, offsets: npt.NDArray[np.int64]
) -> tuple[np.float32, Array32]:
    """``‖z^re − g^IP(μ)‖₂`` of one user and ``z^re − g^IP(μ)`` (g^IP(μ): the mean of the user's
    attributes' class embeddings; pard.Estimators._ip)."""
    mean = np.zeros(ip.shape[1], np.float32)
    for t in range(offsets.shape[0]):
        mean += ip[labels[t] + offsets[t]]
    mean /= np.float32(offsets.shape[0])
    diff = user_re - mean
    return np.float32(np.sqrt(np.sum(diff * diff))), diff


@numba.njit(cache=True, nogil=True, error_model="numpy")
def fit_ip(
    user_re: Array32,
    labels: npt.NDArray[np.int64],
    rows: npt.NDArray[np.int64],
    ip: Array32,
    ip_buf: Array32,
    offsets: npt.NDArray[np.int64],
    owner: npt.NDArray[np.int64],
    lr: float,
    bound: float,
) -> None:
    """Every epoch of g^IP's fit (eq. 34): epoch e reads the public rows ``rows[e]``; the
    gradient of the mean ``‖z^re − g^IP(μ)‖₂`` in the table, clipped per attribute, then SGD with
    momentum."""
    n_attr = offsets.shape[0]
    share = np.float32(n_attr)
    for e in range(rows.shape[0]):
        grad = np.zeros_like(ip)
        count = np.float32(rows.shape[1])
        for r in rows[e]:
            norm, diff = _ip_gap(user_re[r], labels[r], ip, offsets)
            if norm > 0:
                step = -(diff / norm / count) / share
                for t in range(n_attr):
                    grad[labels[r, t] + offsets[t]] += step
        squares = np.zeros(n_attr, np.float64)
        for i in range(ip.shape[0]):
            squares[owner[i]] += _squares(grad[i : i + 1])
        for i in range(ip.shape[0]):
            coef = np.float32(min(bound / (np.sqrt(squares[owner[i]]) + 1e-6), 1.0))
            grad[i] *= coef
        _momentum(ip, grad, ip_buf, lr)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _input_grad(
    x: Array32,
    labels: npt.NDArray[np.int64],
    ws: Tensors,
    bs: Tensors,
    keep: Array32,
    pad: Array32,
    target: Array32,
    uniform: bool,
) -> tuple[float, Array32]:
    """A frozen stack's summed loss over the attributes on ``x`` ``(n, in)``, without dropout,
    and its gradient in ``x``: the cross-entropy against ``labels``, or (``uniform``) against
    ``target`` ``(A, 1, columns)``, each attribute's uniform distribution over its classes
    (pard.Stack.forward, cross_entropy or uniform, and backward with ``weights=False``)."""
    n = x.shape[0]
    loss = 0.0
    dx = np.zeros_like(x)
    no_mask = np.empty((0, 0, 0), np.float32)
    for t in range(ws[0].shape[0]):
        value, g, kept = _attribute(x, labels, t, ws, bs, keep, pad, no_mask, False, target, uniform)
        loss += value
        dx += _backward(g, x, t, ws, kept, no_mask, False, ws, bs, False)
    return loss / n, dx


@numba.njit(cache=True, nogil=True, error_model="numpy")
def encoders_kernel(
    feats: Array32,
    user_re: Array32,
    labels: npt.NDArray[np.int64],
    ir: tuple[Tensors, Tensors, Array32, Array32, Array32],
    fp: tuple[Tensors, Tensors, Array32, Array32, Array32],
    uniform: bool,
    lambda_ir: float,
    lambda_re: float,
    ip: Array32,
    offsets: npt.NDArray[np.int64],
) -> tuple[float, Array32, Array32]:
    """The privacy part of eq. 38 and its gradients in ``feats`` and ``user_re`` (rows of
    users), the estimators frozen: pard.Estimators.encoders. ``ir`` and ``fp`` are each
    (weights, biases, keep, pad, uniform target)."""
    loss = 0.0
    d_feats = np.zeros_like(feats)
    d_re = np.zeros_like(user_re)
    if lambda_ir != 0.0:
        ws, bs, keep, pad, target = ir
        value, dx = _input_grad(feats, labels, ws, bs, keep, pad, target, uniform)
        if not uniform:  # L_ir = minus the cross-entropy (eq. 16)
            value, dx = -value, -dx
        loss += lambda_ir * value
        d_feats = dx * np.float32(lambda_ir)
    if lambda_re != 0.0:
        ws, bs, keep, pad, target = fp
        value, dx = _input_grad(user_re, labels, ws, bs, keep, pad, target, False)
        n = user_re.shape[0]
        total = 0.0
        for r in range(n):
            norm, diff = _ip_gap(user_re[r], labels[r], ip, offsets)
            total += float(norm)
            if norm > 0:
                dx[r] += diff / norm / np.float32(n)
        loss += lambda_re * (value + total / n)
        d_re = dx * np.float32(lambda_re)
    return loss, d_feats, d_re
