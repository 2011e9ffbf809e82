"""Surrogate gradients dS/dU as functions of x = U - threshold (docs/numerics.md).

The names and default slopes are snnTorch's, so `surrogate.fast_sigmoid(slope=25)`
means the same thing in both libraries.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._checks import positive_real


@dataclass(frozen=True)
class Surrogate:
    """A surrogate gradient: `name` and its one shape parameter (slope k or alpha)."""

    name: str
    param: float = 0.0

    def grad(self, x: np.ndarray) -> np.ndarray:
        """dS/dU evaluated at x = U - threshold, in the dtype of x."""
        x = np.asarray(x)
        p = x.dtype.type(self.param) if x.dtype.kind == "f" else self.param
        if self.name == "fast_sigmoid":
            return 1.0 / (1.0 + p * np.abs(x)) ** 2
        if self.name == "atan":
            return (p / 2) / (1.0 + (np.pi * p * x / 2) ** 2)
        if self.name == "sigmoid":
            # k e^{-k|x|} / (1 + e^{-k|x|})^2 (the function is even): e^{-k|x|} <= 1 never
            # overflows and keeps full precision in the tails, where k s (1 - s) with
            # s = sigmoid(kx) rounds to 0 in float32.
            e = np.exp(-p * np.abs(x))
            return p * e / (1.0 + e) ** 2
        if self.name == "straight_through":
            return np.ones_like(x)
        raise AssertionError(f"unreachable surrogate {self.name!r}")


def fast_sigmoid(slope: float = 25.0) -> Surrogate:
    """`1 / (1 + slope*|x|)^2` (Finkbeiner & Neftci use slope 10, Perez-Nieves & Goodman 100)."""
    return Surrogate("fast_sigmoid", positive_real("slope", slope))


def atan(alpha: float = 2.0) -> Surrogate:
    """`(alpha/2) / (1 + (pi*alpha*x/2)^2)`."""
    return Surrogate("atan", positive_real("alpha", alpha))


def sigmoid(slope: float = 25.0) -> Surrogate:
    """`slope*e^(-slope*x) / (1 + e^(-slope*x))^2`."""
    return Surrogate("sigmoid", positive_real("slope", slope))


def straight_through() -> Surrogate:
    """dS/dU = 1 everywhere."""
    return Surrogate("straight_through", 0.0)


_BY_NAME = {
    "fast_sigmoid": fast_sigmoid,
    "atan": atan,
    "sigmoid": sigmoid,
    "straight_through": straight_through,
}


def get(spec) -> Surrogate:
    """A Surrogate from itself or from its name ("fast_sigmoid", "atan", ...)."""
    if isinstance(spec, Surrogate):
        return spec
    if isinstance(spec, str) and spec in _BY_NAME:
        return _BY_NAME[spec]()
    raise ValueError(
        f"surrogate must be a popsnn.surrogate.Surrogate or one of {sorted(_BY_NAME)}, got {spec!r}"
    )
