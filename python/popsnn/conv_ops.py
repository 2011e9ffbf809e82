"""NumPy forward and hand-written backward of a stage's stateless layers (Linear, Conv2d,
MaxPool2d, AvgPool2d, Flatten), for the dense reference (popsnn.reference).

Arrays are [M, C, H, W] (M = steps x samples) or [M, N]. Convolution is cross-correlation
as torch.nn.Conv2d, one matrix product over the im2col rows (a strided window view of the
zero-padded input, copied once); its weight gradient reuses those rows, and its input
gradient is the transposed convolution (one product, then each kernel offset's share added
back where it was read). Max pooling routes a window's gradient to its first
maximum in row-major order, as PyTorch does. Work is done in chunks of rows of M so that the
window views stay a bounded size.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .conv import AvgPool2d, Conv2d, Flatten, MaxPool2d
from .layers import Linear

__all__ = ["ops_forward", "ops_backward"]

# Rows of M per chunk: keeps a CSNN's largest window view (12 x 12 x 12 x 5 x 5) near 100 MB.
_CHUNK = 512


def _pad(x: np.ndarray, padding: tuple, value=0.0) -> np.ndarray:
    ph, pw = padding
    if ph == 0 and pw == 0:
        return x
    return np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=value)


def _windows(xp: np.ndarray, kernel: tuple, stride: tuple, out_hw: tuple) -> np.ndarray:
    """[M, C, Ho, Wo, kH, kW] view of the padded input's windows."""
    view = sliding_window_view(xp, kernel, axis=(2, 3))
    return view[:, :, :: stride[0], :: stride[1]][:, :, : out_hw[0], : out_hw[1]]


def _out_hw(x_hw: tuple, kernel: tuple, stride: tuple, padding: tuple) -> tuple:
    return tuple((n + 2 * p - k) // s + 1 for n, k, s, p in zip(x_hw, kernel, stride, padding))


def _offsets(kernel: tuple):
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            yield i, j


def _scatter_windows(dxp, dy_by_offset, kernel, stride, out_hw):
    """Add, for each kernel offset (i, j), dy_by_offset(i, j) [M, C, Ho, Wo] into the padded
    input positions that offset reads: the adjoint of `_windows`."""
    ho, wo = out_hw
    sh, sw = stride
    for i, j in _offsets(kernel):
        dxp[:, :, i : i + sh * (ho - 1) + 1 : sh, j : j + sw * (wo - 1) + 1 : sw] += dy_by_offset(
            i, j
        )


def _crop(dxp: np.ndarray, padding: tuple) -> np.ndarray:
    ph, pw = padding
    return dxp[:, :, ph : dxp.shape[2] - ph, pw : dxp.shape[3] - pw]


# ----------------------------------------------------------------------------- Conv2d


def _im2col(x, kernel, stride, padding, out_hw) -> np.ndarray:
    """[M*Ho*Wo, C*kH*kW]: each output position's input window, one row each."""
    win = _windows(_pad(x, padding), kernel, stride, out_hw)  # [M, C, Ho, Wo, kH, kW]
    m, c = x.shape[:2]
    return win.transpose(0, 2, 3, 1, 4, 5).reshape(m * out_hw[0] * out_hw[1], -1)


def _conv2d_with_cols(x, weight, bias, stride, padding):
    """(y [M, C_out, Ho, Wo], the im2col rows the backward reuses)."""
    kernel = weight.shape[2:]
    out_hw = _out_hw(x.shape[2:], kernel, stride, padding)
    cols = _im2col(x, kernel, stride, padding, out_hw)
    y = cols @ weight.reshape(weight.shape[0], -1).T  # [M*Ho*Wo, C_out]
    if bias is not None:
        y += bias
    y = y.reshape(x.shape[0], *out_hw, -1).transpose(0, 3, 1, 2)
    return np.ascontiguousarray(y), cols


def conv2d_forward(x, weight, bias, stride, padding):
    return _conv2d_with_cols(x, weight, bias, stride, padding)[0]


def conv2d_backward(x, weight, dy, stride, padding, need_dx: bool, cols=None):
    """(d_weight, d_bias, d_x or None) of conv2d_forward for output gradient dy; `cols` are
    the forward's im2col rows when the caller kept them."""
    kernel = weight.shape[2:]
    out_hw = dy.shape[2:]
    if cols is None:
        cols = _im2col(x, kernel, stride, padding, out_hw)
    dy_rows = dy.transpose(0, 2, 3, 1).reshape(-1, dy.shape[1])  # [M*Ho*Wo, C_out]
    d_weight = (dy_rows.T @ cols).reshape(weight.shape)
    d_bias = dy_rows.sum(axis=0)
    if not need_dx:
        return d_weight, d_bias, None
    # The transposed convolution: each row's window gradient, added back where it was read.
    d_cols = dy_rows @ weight.reshape(weight.shape[0], -1)
    d_cols = d_cols.reshape(x.shape[0], *out_hw, x.shape[1], *kernel)
    ph, pw = padding
    dxp = np.zeros((*x.shape[:2], x.shape[2] + 2 * ph, x.shape[3] + 2 * pw), dy.dtype)
    _scatter_windows(
        dxp, lambda i, j: d_cols[..., i, j].transpose(0, 3, 1, 2), kernel, stride, out_hw
    )
    return d_weight, d_bias, _crop(dxp, padding)


# ----------------------------------------------------------------------------- pooling


def max_pool_forward(x, kernel, stride, padding):
    """(y, argmax): argmax indexes the window row-major, first maximum on ties."""
    out_hw = _out_hw(x.shape[2:], kernel, stride, padding)
    win = _windows(_pad(x, padding, -np.inf), kernel, stride, out_hw)
    flat = win.reshape(*win.shape[:4], -1)
    argmax = flat.argmax(axis=-1)
    y = np.take_along_axis(flat, argmax[..., None], axis=-1)[..., 0]
    return y, argmax


def max_pool_backward(dy, argmax, x_shape, kernel, stride, padding):
    ph, pw = padding
    dxp = np.zeros((*x_shape[:2], x_shape[2] + 2 * ph, x_shape[3] + 2 * pw), dy.dtype)
    _scatter_windows(
        dxp, lambda i, j: dy * (argmax == i * kernel[1] + j), kernel, stride, dy.shape[2:]
    )
    return _crop(dxp, padding)


def avg_pool_forward(x, kernel, stride, padding):
    out_hw = _out_hw(x.shape[2:], kernel, stride, padding)
    win = _windows(_pad(x, padding), kernel, stride, out_hw)
    return win.mean(axis=(4, 5), dtype=x.dtype)


def avg_pool_backward(dy, x_shape, kernel, stride, padding):
    ph, pw = padding
    dxp = np.zeros((*x_shape[:2], x_shape[2] + 2 * ph, x_shape[3] + 2 * pw), dy.dtype)
    share = dy / dy.dtype.type(kernel[0] * kernel[1])
    _scatter_windows(dxp, lambda i, j: share, kernel, stride, dy.shape[2:])
    return _crop(dxp, padding)


# ----------------------------------------------------------------------------- a stage


def _op_forward(op, p, x):
    """(y, saved) of one layer; `saved` is what its backward needs besides its input."""
    if isinstance(op, Conv2d):
        return _conv2d_with_cols(x, p["weight"], p.get("bias"), op.stride, op.padding)
    if isinstance(op, MaxPool2d):
        return max_pool_forward(x, op.kernel_size, op.stride, op.padding)
    if isinstance(op, AvgPool2d):
        return avg_pool_forward(x, op.kernel_size, op.stride, op.padding), None
    if isinstance(op, Flatten):
        return x.reshape(x.shape[0], -1), None
    y = x @ p["weight"].T  # Linear
    if "bias" in p:
        y += p["bias"]
    return y, None


def _op_backward(op, p, x, saved, dy, grads, need_dx):
    """dL/dx of one layer (None when not needed); adds its parameter gradients to grads."""
    if isinstance(op, Conv2d):
        dw, db, dx = conv2d_backward(x, p["weight"], dy, op.stride, op.padding, need_dx, saved)
        grads["weight"] += dw
        if "bias" in p:
            grads["bias"] += db
        return dx
    if not need_dx and isinstance(op, (MaxPool2d, AvgPool2d, Flatten)):
        return None
    if isinstance(op, MaxPool2d):
        return max_pool_backward(dy, saved, x.shape, op.kernel_size, op.stride, op.padding)
    if isinstance(op, AvgPool2d):
        return avg_pool_backward(dy, x.shape, op.kernel_size, op.stride, op.padding)
    if isinstance(op, Flatten):
        return dy.reshape(x.shape)
    grads["weight"] += dy.T @ x  # Linear
    if "bias" in p:
        grads["bias"] += dy.sum(axis=0)
    return dy @ p["weight"] if need_dx else None


def ops_forward(stage, p, x: np.ndarray) -> np.ndarray:
    """The stage's synaptic current [M, N] for flat input x [M, N_in]."""
    out = np.empty((x.shape[0], stage.num_neurons), x.dtype)
    for lo in range(0, x.shape[0], _CHUNK):
        h = x[lo : lo + _CHUNK].reshape(-1, *stage.in_shape)
        for op in stage.ops:
            h, _ = _op_forward(op, p, h)
        out[lo : lo + _CHUNK] = h.reshape(h.shape[0], -1)
    return out


def ops_backward(stage, p, x: np.ndarray, d_current: np.ndarray, need_dx: bool):
    """(grads of the stage's weights, dL/dx [M, N_in] or None) for flat input x [M, N_in] and
    dL/dcurrent [M, N]. The forward is recomputed chunk by chunk (pooling needs it)."""
    grads = {k: np.zeros_like(v) for k, v in p.items() if k in ("weight", "bias")}
    dx_all = np.empty_like(x) if need_dx else None
    weighted = next(k for k, op in enumerate(stage.ops) if isinstance(op, (Conv2d, Linear)))
    for lo in range(0, x.shape[0], _CHUNK):
        h = x[lo : lo + _CHUNK].reshape(-1, *stage.in_shape)
        trail = []
        for op in stage.ops:
            y, saved = _op_forward(op, p, h)
            trail.append((op, h, saved))
            h = y
        dy = d_current[lo : lo + _CHUNK].reshape(h.shape)
        for k, (op, h_in, saved) in reversed(list(enumerate(trail))):
            # Below the weighted layer, dL/dx is wanted only for the stage's input gradient.
            dy = _op_backward(op, p, h_in, saved, dy, grads, need_dx or k > weighted)
        if need_dx:
            dx_all[lo : lo + _CHUNK] = dy.reshape(dy.shape[0], -1)
    return grads, dx_all
