"""Convolutional layers with PyTorch's names and shapes: Conv2d, MaxPool2d, AvgPool2d, Flatten.

A convolutional SNN (Sun et al.'s CSNN 12C5-MP2-64C5-MP2-10) is written as in
snnTorch, with the input's per-sample shape given once:

    net = popsnn.Sequential(
        popsnn.Conv2d(1, 12, 5), popsnn.MaxPool2d(2), popsnn.Leaky(beta=0.5),
        popsnn.Conv2d(12, 64, 5), popsnn.MaxPool2d(2), popsnn.Leaky(beta=0.5),
        popsnn.Flatten(), popsnn.Linear(64 * 4 * 4, 10), popsnn.Leaky(beta=0.5),
        input_shape=(1, 28, 28))

Each layer here is a description (no weights) that knows the per-sample shape it maps to
(`output_shape((C, H, W))`) and refuses, in one line, the options popsnn does not run
(dilation, groups, ceil_mode, ...). The arithmetic is in `popsnn.conv_ops`.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._checks import positive_int

__all__ = ["Conv2d", "MaxPool2d", "AvgPool2d", "Flatten", "SHAPE_LAYERS"]


def _pair(name: str, value, minimum: int = 1) -> tuple:
    """An int or a pair of ints (PyTorch's `_pair`), each >= minimum, as a 2-tuple."""
    values = value if isinstance(value, (tuple, list)) else (value, value)
    if len(values) != 2 or any(isinstance(v, bool) or not isinstance(v, int) for v in values):
        raise TypeError(f"{name} must be an int or a pair of ints, got {value!r}")
    if any(v < minimum for v in values):
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    return tuple(values)


def _refuse(layer: str, option: str, value, default, fix: str) -> None:
    if value != default:
        raise ValueError(f"{layer}: {option}={value!r} is not supported by popsnn; {fix}")


def _spatial(layer: str, in_shape: tuple) -> tuple:
    if len(in_shape) != 3:
        raise ValueError(
            f"{layer} takes [C, H, W] per sample, got a layer output of shape "
            f"{tuple(in_shape)}; put it before Flatten / Linear, or give Sequential "
            f"input_shape=(C, H, W)"
        )
    return in_shape


def _window_out(layer, size, kernel, stride, padding) -> tuple:
    out = []
    for axis, n, k, s, p in zip("HW", size, kernel, stride, padding):
        if n + 2 * p < k:
            raise ValueError(
                f"{layer}: input {axis}={n} (padding {p}) is smaller than the kernel ({k}); "
                f"use a larger input or a smaller kernel_size"
            )
        out.append((n + 2 * p - k) // s + 1)
    return tuple(out)


@dataclass(frozen=True)
class Conv2d:
    """2-D convolution (cross-correlation, as torch.nn.Conv2d); weight [C_out, C_in, kH, kW]."""

    in_channels: int
    out_channels: int
    kernel_size: int | tuple
    stride: int | tuple = 1
    padding: int | tuple = 0
    dilation: int | tuple = 1
    groups: int = 1
    bias: bool = True
    padding_mode: str = "zeros"

    def __post_init__(self):
        positive_int("in_channels", self.in_channels)
        positive_int("out_channels", self.out_channels)
        if isinstance(self.padding, str):
            raise ValueError(
                f"Conv2d: padding={self.padding!r} is not supported; give the padding as "
                f"an int or a pair of ints (e.g. kernel_size // 2 for 'same' at stride 1)"
            )
        object.__setattr__(self, "kernel_size", _pair("kernel_size", self.kernel_size))
        object.__setattr__(self, "stride", _pair("stride", self.stride))
        object.__setattr__(self, "padding", _pair("padding", self.padding, minimum=0))
        _refuse("Conv2d", "dilation", _pair("dilation", self.dilation), (1, 1), "use dilation=1")
        _refuse("Conv2d", "groups", self.groups, 1, "use groups=1")
        _refuse("Conv2d", "padding_mode", self.padding_mode, "zeros", "use padding_mode='zeros'")
        object.__setattr__(self, "dilation", (1, 1))
        if not isinstance(self.bias, bool):
            raise TypeError(f"Conv2d: bias must be True or False, got {self.bias!r}")

    @property
    def fan_in(self) -> int:
        return self.in_channels * self.kernel_size[0] * self.kernel_size[1]

    def weight_shape(self) -> tuple:
        return (self.out_channels, self.in_channels, *self.kernel_size)

    def output_shape(self, in_shape: tuple) -> tuple:
        c, h, w = _spatial("Conv2d", in_shape)
        if c != self.in_channels:
            raise ValueError(
                f"Conv2d(in_channels={self.in_channels}) gets {c} channels from the "
                f"previous layer (shape {tuple(in_shape)}); set in_channels={c}"
            )
        hw = _window_out("Conv2d", (h, w), self.kernel_size, self.stride, self.padding)
        return (self.out_channels, *hw)


@dataclass(frozen=True)
class _Pool2d:
    kernel_size: int | tuple
    stride: int | tuple | None = None
    padding: int | tuple = 0

    def _check_window(self, name: str):
        object.__setattr__(self, "kernel_size", _pair("kernel_size", self.kernel_size))
        stride = self.kernel_size if self.stride is None else self.stride
        object.__setattr__(self, "stride", _pair("stride", stride))
        object.__setattr__(self, "padding", _pair("padding", self.padding, minimum=0))
        if any(2 * p > k for p, k in zip(self.padding, self.kernel_size)):
            raise ValueError(
                f"{name}: padding {self.padding} must be at most half the kernel_size "
                f"{self.kernel_size} (as PyTorch requires)"
            )
        _refuse(name, "ceil_mode", self.ceil_mode, False, "use ceil_mode=False")

    def output_shape(self, in_shape: tuple) -> tuple:
        name = type(self).__name__
        c, h, w = _spatial(name, in_shape)
        return (c, *_window_out(name, (h, w), self.kernel_size, self.stride, self.padding))


@dataclass(frozen=True)
class MaxPool2d(_Pool2d):
    """Max over each window (padding counts as -inf); the gradient goes to the window's first
    maximum in row-major order, as PyTorch routes it."""

    dilation: int | tuple = 1
    return_indices: bool = False
    ceil_mode: bool = False

    def __post_init__(self):
        self._check_window("MaxPool2d")
        _refuse("MaxPool2d", "dilation", _pair("dilation", self.dilation), (1, 1), "use 1")
        object.__setattr__(self, "dilation", (1, 1))
        _refuse("MaxPool2d", "return_indices", self.return_indices, False, "use False")


@dataclass(frozen=True)
class AvgPool2d(_Pool2d):
    """Mean over each window; padding counts as zeros in the mean (count_include_pad=True)."""

    ceil_mode: bool = False
    count_include_pad: bool = True
    divisor_override: int | None = None

    def __post_init__(self):
        self._check_window("AvgPool2d")
        _refuse("AvgPool2d", "count_include_pad", self.count_include_pad, True, "use True")
        _refuse("AvgPool2d", "divisor_override", self.divisor_override, None, "use None")


@dataclass(frozen=True)
class Flatten:
    """[C, H, W] -> [C*H*W] per sample, row-major as torch.nn.Flatten()."""

    start_dim: int = 1
    end_dim: int = -1

    def __post_init__(self):
        if (self.start_dim, self.end_dim) != (1, -1):
            raise ValueError(
                f"Flatten: only Flatten() (start_dim=1, end_dim=-1) is supported, got "
                f"start_dim={self.start_dim}, end_dim={self.end_dim}"
            )

    def output_shape(self, in_shape: tuple) -> tuple:
        size = 1
        for n in in_shape:
            size *= n
        return (size,)


# The layers that change a sample's shape without weights of their own.
SHAPE_LAYERS = (MaxPool2d, AvgPool2d, Flatten)
