"""Half precision: a model's storage dtype, where values are rounded to it, and loss scaling.

`dtype="float16"` (docs/numerics.md section 8) stores in half what lives in memory between
two steps of work: the weights the forward and backward read, the membrane and synaptic
traces, the synaptic current handed to the neuron update, the surrogate trace, and every
value exchanged between layers (the direct-current batch, dL/dS from the loss, dL/dI blocks).
Sums and the neuron update run in float32 and are rounded once, when stored. The optimiser
keeps float32 master weights and state: an Adam step is often below half's resolution of a
weight (2**-11 relative), and rounding the weight itself would drop it.

Gradients are carried multiplied by a loss scale so that small dL/dI values do not flush to
zero in half; the float32 weight gradients are divided by it again. `LossScaler` follows
torch.cuda.amp.GradScaler: a step whose gradients hold inf or NaN is skipped and, when the
scale is dynamic, halves the scale; `growth_interval` finite steps in a row double it.
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = ["DTYPES", "check_dtype", "rounding", "store_params", "LossScaler", "make_scaler"]

DTYPES = ("float32", "float16")

# torch.cuda.amp.GradScaler's defaults.
INIT_SCALE = 2.0**16
GROWTH_FACTOR = 2.0
BACKOFF_FACTOR = 0.5
GROWTH_INTERVAL = 2000


def check_dtype(dtype) -> str:
    """The dtype's name ("float32" or "float16"); one line naming the choices otherwise."""
    try:
        name = np.dtype(dtype).name if not isinstance(dtype, bool) else None
    except TypeError:
        name = None
    if name not in DTYPES:
        raise ValueError(
            f"dtype must be 'float32' or 'float16' (half storage, float32 accumulation), "
            f"got {dtype!r}"
        )
    return name


def _to_half(a):
    """a rounded to the nearest half (ties to even, as a float32 -> half conversion), kept
    in float32 so the arithmetic that follows is float32. Beyond half's range: +-inf."""
    with np.errstate(over="ignore"):
        return np.asarray(a).astype(np.float16).astype(np.float32)


def _identity(a):
    return a


def rounding(dtype: str | None):
    """The function a storage point applies: rounding to half for "float16", else none."""
    return _to_half if dtype == "float16" else _identity


def store_params(params, dtype: str | None):
    """The parameters as the device stores them (float32 master weights rounded to half)."""
    if dtype != "float16":
        return params
    return [{k: _to_half(v) for k, v in p.items()} for p in params]


class LossScaler:
    """The loss scale of a half-precision model and its update rule (GradScaler's)."""

    def __init__(
        self,
        init_scale: float = INIT_SCALE,
        *,
        dynamic: bool = True,
        growth_factor: float = GROWTH_FACTOR,
        backoff_factor: float = BACKOFF_FACTOR,
        growth_interval: int = GROWTH_INTERVAL,
    ):
        self.scale = _positive("loss_scale", init_scale)
        self.dynamic = bool(dynamic)
        if not growth_factor > 1.0 or not 0.0 < backoff_factor < 1.0:
            raise ValueError(
                f"growth_factor must be > 1 and backoff_factor in (0, 1), got "
                f"{growth_factor!r} and {backoff_factor!r}"
            )
        if not isinstance(growth_interval, numbers.Integral) or growth_interval < 1:
            raise ValueError(f"growth_interval must be an integer >= 1, got {growth_interval!r}")
        self.growth_factor = float(growth_factor)
        self.backoff_factor = float(backoff_factor)
        self.growth_interval = int(growth_interval)
        self.skipped_steps = 0
        self._finite_in_a_row = 0

    def update(self, grads) -> bool:
        """After a backward: True if every gradient is finite (apply the step), else False
        (skip it). A dynamic scale backs off on a skipped step and grows after
        growth_interval applied steps in a row."""
        return self.update_finite(all(np.all(np.isfinite(g)) for p in grads for g in p.values()))

    def update_finite(self, finite: bool) -> bool:
        """update() given whether every gradient was finite (the engine counts non-finite
        entries on the device and skips the optimiser step itself)."""
        if not finite:
            self.skipped_steps += 1
            self._finite_in_a_row = 0
            if self.dynamic:
                self.scale *= self.backoff_factor
            return False
        self._finite_in_a_row += 1
        if self.dynamic and self._finite_in_a_row == self.growth_interval:
            self.scale *= self.growth_factor
            self._finite_in_a_row = 0
        return True

    def state_dict(self) -> dict:
        return {
            "scale": self.scale,
            "dynamic": self.dynamic,
            "skipped_steps": self.skipped_steps,
            "finite_in_a_row": self._finite_in_a_row,
        }

    def __repr__(self):
        kind = "dynamic" if self.dynamic else "static"
        return f"LossScaler({kind}, scale={self.scale:g}, skipped_steps={self.skipped_steps})"


def _positive(name, value) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not np.isfinite(value)
        or value <= 0
    ):
        raise ValueError(
            f"{name} must be 'dynamic' or a finite number > 0 (a static scale), got {value!r}"
        )
    return float(value)


def make_scaler(dtype: str, loss_scale) -> LossScaler | None:
    """The scaler a model of `dtype` uses: `loss_scale` is "dynamic" (GradScaler's rule,
    the float16 default), a number (a static scale), or a LossScaler. None for float32,
    whose gradients do not underflow where half's would; a scale given there is refused."""
    if dtype != "float16":
        if loss_scale is not None:
            raise ValueError(
                f"loss_scale applies to dtype='float16' only (float32 gradients do not "
                f"underflow), got loss_scale={loss_scale!r} with dtype={dtype!r}; drop it"
            )
        return None
    if loss_scale is None or loss_scale == "dynamic":
        return LossScaler()
    if isinstance(loss_scale, LossScaler):
        return loss_scale
    return LossScaler(_positive("loss_scale", loss_scale), dynamic=False)
