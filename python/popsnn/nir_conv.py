"""NIR nodes of popsnn's convolution, pooling and Flatten layers (popsnn.nir_interop uses
these; the chain, neurons and dense layers are there).

Export: Conv2d is `nir.Conv2d` (its `input_shape` the (H, W) it sees), AvgPool2d
`nir.AvgPool2d`, Flatten `nir.Flatten` over the per-sample axes. NIR has no max-pooling node,
so a MaxPool2d is refused. Import also reads `nir.SumPool2d`: the sum is the mean times
kH*kW, and that factor is folded into the stage's weights (a linear map, so the currents are
the same up to rounding), keeping popsnn's AvgPool2d.
"""

from __future__ import annotations

import numpy as np

from . import conv as _conv


class NIRConvError(ValueError):
    """Raised as nir_interop.NIRError by the caller (it names the node)."""


def _pair(value) -> tuple:
    array = np.asarray(value).ravel()
    if array.size == 1:
        return (int(array[0]), int(array[0]))
    if array.size != 2:
        raise NIRConvError(f"expected one or two sizes, got {value!r}")
    return (int(array[0]), int(array[1]))


def node_of(nir, layer, p: dict, in_shape: tuple):
    """The NIR node of a Conv2d / AvgPool2d / Flatten seeing per-sample input `in_shape`."""
    if isinstance(layer, _conv.Conv2d):
        bias = p.get("bias")
        if bias is None:
            bias = np.zeros(layer.out_channels, p["weight"].dtype)
        return nir.Conv2d(
            input_shape=tuple(in_shape[1:]),
            weight=p["weight"],
            stride=layer.stride,
            padding=layer.padding,
            dilation=1,
            groups=1,
            bias=bias,
        )
    if isinstance(layer, _conv.AvgPool2d):
        return nir.AvgPool2d(
            kernel_size=np.array(layer.kernel_size),
            stride=np.array(layer.stride),
            padding=np.array(layer.padding),
        )
    if isinstance(layer, _conv.Flatten):
        return nir.Flatten(input_type={"input": np.array(in_shape)}, start_dim=0, end_dim=-1)
    raise NIRConvError(
        "NIR has no max-pooling node, so a MaxPool2d cannot be exported; use AvgPool2d, or "
        "keep the network in popsnn's own checkpoint format"
    )


def layer_of(nir, node):
    """(popsnn layer, its params or None, the factor a SumPool2d folds into the weights)."""
    if isinstance(node, nir.Conv2d):
        if np.any(np.asarray(node.dilation) != 1) or int(node.groups) != 1:
            raise NIRConvError("dilation and groups must be 1 (popsnn's Conv2d)")
        if isinstance(node.padding, str):
            raise NIRConvError(f"padding={node.padding!r}: give the padding as numbers")
        weight = np.asarray(node.weight)
        bias = np.asarray(node.bias) if node.bias is not None else None
        layer = _conv.Conv2d(
            weight.shape[1],
            weight.shape[0],
            tuple(weight.shape[2:]),
            _pair(node.stride),
            _pair(node.padding),
            bias=bias is not None,
        )
        params = {"weight": weight} if bias is None else {"weight": weight, "bias": bias}
        return layer, params, 1.0
    if isinstance(node, (nir.AvgPool2d, nir.SumPool2d)):
        kernel = _pair(node.kernel_size)
        layer = _conv.AvgPool2d(kernel, _pair(node.stride), _pair(node.padding))
        scale = float(kernel[0] * kernel[1]) if isinstance(node, nir.SumPool2d) else 1.0
        return layer, None, scale
    if isinstance(node, nir.Flatten):
        return _conv.Flatten(), None, 1.0
    return None
