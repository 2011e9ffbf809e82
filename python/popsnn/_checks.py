"""Argument checks shared by every room of the Python package.

Every error names the argument, what it got and what it expects, so the
user can fix the call without reading popsnn's source.
"""

from __future__ import annotations

import numbers

import numpy as np


def unit_interval(name: str, value) -> float:
    """A decay constant such as beta or alpha: a real number in [0, 1]."""
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(f"{name} must be a real number in [0, 1], got {value!r}")
    value = float(value)
    if not (0.0 <= value <= 1.0):  # also rejects NaN
        raise ValueError(
            f"{name} must lie in [0, 1], got {value}; snnTorch would clamp it silently, "
            f"popsnn refuses: pass a value between 0 and 1"
        )
    return value


def positive_real(name: str, value) -> float:
    if (
        not isinstance(value, numbers.Real)
        or isinstance(value, bool)
        or not np.isfinite(value)
        or value <= 0
    ):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def finite_real(name: str, value) -> float:
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not np.isfinite(value):
        raise ValueError(f"{name} must be a finite real number, got {value!r}")
    return float(value)


def positive_int(name: str, value) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def one_of(name: str, value, choices) -> str:
    if value not in choices:
        raise ValueError(f"{name} must be one of {sorted(choices)}, got {value!r}")
    return value


def finite_array(name: str, array: np.ndarray) -> np.ndarray:
    """Reject NaN and inf before they propagate through T steps of state."""
    if not np.all(np.isfinite(array)):
        bad = int(np.size(array) - np.count_nonzero(np.isfinite(array)))
        raise ValueError(
            f"{name} contains {bad} NaN or inf value(s); clean or clip the input "
            f"before passing it to popsnn"
        )
    return array
