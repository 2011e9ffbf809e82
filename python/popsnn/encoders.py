"""Input encoders (docs/numerics.md): static data [B, ...] to time-major [T, B, ...].

The output dtype is the input's floating dtype (float32 for integer or bool input).
"""

from __future__ import annotations

import numpy as np

from ._checks import finite_array, finite_real, positive_int, positive_real

__all__ = ["rate", "latency", "direct"]


def _data(x) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype.kind not in "biuf":
        raise TypeError(f"x must hold real numbers, got dtype {x.dtype}")
    if x.dtype.kind != "f":
        x = x.astype(np.float32)
    return finite_array("x", x)


def _rng(rng) -> np.random.Generator:
    if rng is None or isinstance(rng, (int, np.integer)):
        return np.random.default_rng(rng)
    if isinstance(rng, np.random.Generator):
        return rng
    raise TypeError(f"rng must be None, an int seed or a numpy.random.Generator, got {rng!r}")


def rate(x, num_steps: int, gain: float = 1.0, rng=None) -> np.ndarray:
    """Bernoulli spikes: at every step, input i fires with probability clip(gain*x_i, 0, 1).

    rng: None (fresh entropy), an int seed, or a numpy Generator (advanced in place).
    """
    x = _data(x)
    num_steps = positive_int("num_steps", num_steps)
    gain = finite_real("gain", gain)
    p = np.clip(gain * x, 0.0, 1.0)
    # random() lies in [0, 1): p = 1 always fires, p = 0 never does.
    return (_rng(rng).random((num_steps,) + x.shape) < p).astype(x.dtype)


def latency(
    x, num_steps: int, tau: float = 5.0, threshold: float = 0.01, normalize: bool = False
) -> np.ndarray:
    """One spike per input, later for weaker input; none at or below the threshold.

    The spike time of an input x > threshold is t = tau * ln(x / (x - threshold)),
    rounded to the nearest step (half to even, as torch.round), and it is
    dropped when that step is past the last one (num_steps - 1). With
    normalize=True the times are first scaled by (num_steps - 1) / max(t) so
    the latest spike lands on the last step. x must lie in [0, 1].

    Compared with snntorch.spikegen.latency: the same formula and rounding;
    popsnn's default tau is 5 (snnTorch's is 1); popsnn never emits a spike for
    x <= threshold (snnTorch does so only with clip=True; otherwise it clamps
    such inputs to threshold + 1e-7 and they may still spike late), and drops
    late spikes where snnTorch raises unless bypass=True. snnTorch's normalize
    takes the max over all inputs, sub-threshold ones included; popsnn's over
    the inputs that fire.
    """
    x = _data(x)
    num_steps = positive_int("num_steps", num_steps)
    tau = positive_real("tau", tau)
    threshold = finite_real("threshold", threshold)
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"threshold must lie in (0, 1), got {threshold}")
    if x.size and (x.min() < 0 or x.max() > 1):
        raise ValueError(
            f"x must lie in [0, 1] for latency coding, got values in "
            f"[{x.min()}, {x.max()}]; scale the data first"
        )
    fires = x > threshold
    safe = np.where(fires, x, 1.0)  # keeps the log finite where nothing fires
    times = tau * np.log(safe / (safe - threshold))
    if normalize and fires.any():
        times = times * ((num_steps - 1) / times[fires].max())
    step = np.rint(times)
    fires &= step <= num_steps - 1
    out = np.zeros((num_steps,) + x.shape, dtype=x.dtype)
    idx = np.nonzero(fires)
    out[(step[idx].astype(np.int64),) + idx] = 1
    return out


def direct(x, num_steps: int) -> np.ndarray:
    """x repeated at every step: [T, B, ...] (a copy; pass [B, N] to the reference with
    num_steps instead to let it compute W x once)."""
    x = _data(x)
    num_steps = positive_int("num_steps", num_steps)
    return np.repeat(x[None], num_steps, axis=0)
