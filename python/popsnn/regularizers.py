"""Activity regularisers on the hidden layers' spikes, with their gradients.

`spike_count_bounds` is Perez-Nieves & Goodman's pair of penalties (docs/papers.md): an
upper bound on each sample's mean spike count per neuron and a penalty on neurons that stay
silent for a whole sample. It applies to every spiking layer but the output one, and its
gradient dR/dS is added to the layer's dL/dS before the backward; a sparse rule then passes
it to U only at the entries it keeps, as it does the loss's.

    R_up(b)  = lambda_upper * max(0, mean_j c[b, j] - upper) ** upper_power
    R_low(b) = lambda_lower / n * sum_j max(0, lower - c[b, j]) ** 2
    R        = sum over hidden layers of mean_b (R_up(b) + R_low(b))

with c[b, j] = sum_t S[t, b, j] the spike count of neuron j (n of them, trailing dimensions
flattened) in sample b.
"""

from __future__ import annotations

import numpy as np

from ._checks import finite_real

__all__ = ["spike_count_bounds"]


def _non_negative(name, value) -> float:
    value = finite_real(name, value)
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return value


class spike_count_bounds:
    """Bounds on the hidden layers' spike counts (defaults: Perez-Nieves & Goodman's
    Fashion-MNIST setting): `upper` mean spikes per neuron and sample, `lower` spikes of
    each neuron per sample; `lambda_*` their weights; `upper_power` >= 1 the upper term's
    exponent."""

    def __init__(
        self,
        upper: float = 1.0,
        lambda_upper: float = 0.06,
        lower: float = 1e-3,
        lambda_lower: float = 100.0,
        upper_power: float = 1.0,
    ):
        self.upper = _non_negative("upper", upper)
        self.lambda_upper = _non_negative("lambda_upper", lambda_upper)
        self.lower = _non_negative("lower", lower)
        self.lambda_lower = _non_negative("lambda_lower", lambda_lower)
        self.upper_power = finite_real("upper_power", upper_power)
        if self.upper_power < 1:
            raise ValueError(
                f"upper_power must be >= 1 (below 1 the gradient is unbounded at the "
                f"bound), got {self.upper_power}"
            )

    def value_and_grad(self, spikes) -> tuple:
        """(R of one layer as a float, dR/dS shaped and typed as `spikes` [T, B, ...])."""
        s = np.asarray(spikes)
        if s.ndim < 3 or 0 in s.shape:
            raise ValueError(f"spikes must be a [T, B, neurons...] array, got shape {s.shape}")
        T, B = s.shape[:2]
        counts = s.reshape(T, B, -1).sum(axis=0, dtype=np.float64)  # [B, n]
        n = counts.shape[1]
        over = np.maximum(counts.mean(axis=1) - self.upper, 0.0)  # [B]
        under = np.maximum(self.lower - counts, 0.0)  # [B, n]
        value = (
            self.lambda_upper * (over**self.upper_power).sum()
            + self.lambda_lower / n * (under**2).sum()
        ) / B
        # d/dc of the two terms; a count is a sum over t, so every step gets the same.
        d_over = self.lambda_upper * self.upper_power * over ** (self.upper_power - 1)
        d_over = np.where(over > 0, d_over, 0.0)
        d_counts = (d_over[:, None] - 2.0 * self.lambda_lower * under) / (n * B)
        grad = np.broadcast_to(d_counts.astype(s.dtype, copy=False), (T, B, n))
        return float(value), np.ascontiguousarray(grad).reshape(s.shape)

    def __call__(self, spikes) -> float:
        return self.value_and_grad(spikes)[0]

    def __repr__(self):
        return (
            f"spike_count_bounds(upper={self.upper}, lambda_upper={self.lambda_upper}, "
            f"lower={self.lower}, lambda_lower={self.lambda_lower}, "
            f"upper_power={self.upper_power})"
        )
