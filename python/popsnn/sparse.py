"""The two sparse-backward rules (docs/numerics.md): which (t, b, j) entries carry gradient.

With a rule on, the surrogate is multiplied by the rule's 0/1 mask; every other
entry gets exactly zero gradient. Without a rule (None) the backward is dense.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._checks import finite_real, positive_real


@dataclass(frozen=True)
class SparseRule:
    """`kind` is "window" (active iff |U - theta| < b_th, Perez-Nieves & Goodman) or
    "one_sided" (active iff U >= theta_grad, Finkbeiner & Neftci)."""

    kind: str
    value: float

    def mask(self, u: np.ndarray, threshold: float) -> np.ndarray:
        """Boolean mask of the entries that carry gradient."""
        if self.kind == "window":
            return np.abs(u - threshold) < self.value
        if self.kind == "one_sided":
            return u >= self.value
        raise AssertionError(f"unreachable sparse rule {self.kind!r}")


def window(b_th: float) -> SparseRule:
    """Two-sided window: gradient only where |U - threshold| < b_th."""
    return SparseRule("window", positive_real("b_th", b_th))


def one_sided(theta_grad: float) -> SparseRule:
    """One-sided threshold: gradient only where U >= theta_grad (below the firing threshold)."""
    return SparseRule("one_sided", finite_real("theta_grad", theta_grad))
