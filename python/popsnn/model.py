"""`popsnn.Model`: a network, its weights, a loss and an optimiser on one device.

    model = popsnn.Model(net, loss=losses.ce_count_loss(), optimizer=optim.Adam(lr=5e-4),
                         device="auto", num_steps=25, batch_size=128, seed=0)
    loss, out_spikes = model.train_step(x, y)      # out_spikes [T, B, C]
    out_spikes = model.infer(x)

The work is done by a backend that follows one protocol (`popsnn.backends.Backend`):
`popsnn.backends.reference.ReferenceBackend` (the dense NumPy reference) for device
"reference", and `popsnn.backends.engine.EngineBackend` for "cpu", "ipu-model" and "ipu"
(imported only when asked for). Every backend checks its arguments with `popsnn.validation`.
`x` is `[B, N_in]` direct current (the same every step, `num_steps` steps) or `[T, B, N_in]`,
float32 or any real dtype; on the engine devices uint8 and bool input (spikes, counts up to
255) is read as bytes, with no float copy (the host lists a quarter of the memory).

`dtype="float16"` stores weights, traces and exchanged values in half with float32 sums,
float32 master weights and a loss scale (`loss_scale="dynamic"` or a number; see
popsnn.precision and docs/numerics.md section 8), on the reference and on the engine devices
(Linear layers; what the engine's half path has not built is refused in one line).

`regularizer=popsnn.regularizers.spike_count_bounds(...)` adds an activity penalty on the
hidden layers' spikes to the loss, on device "reference" (the engine refuses it in one line).
"""

from __future__ import annotations

import threading

import numpy as np

from . import losses as _losses
from . import optim as _optim
from . import precision as _precision
from . import reference as _reference
from .backends.reference import ReferenceBackend
from .defaults import LOSS, OPTIMIZER, RUN
from .layers import Sequential
from .regularizers import spike_count_bounds
from .validation import check_learning_rate, check_sizes

__all__ = [
    "Model",
    "DEVICES",
    "ENGINE_DEVICES",
    "resolve_device",
    "available_devices",
    "ReferenceBackend",
    "check_learning_rate",
]

DEVICES = ("reference", "cpu", "ipu-model", "ipu")
ENGINE_DEVICES = ("cpu", "ipu-model", "ipu")


def _engine_module():
    """popsnn.backends.engine, or None when it is not built / not importable here."""
    try:
        from .backends import engine
    except ImportError:
        return None
    return engine


def resolve_device(device: str) -> str:
    """The device a name stands for: "auto" picks "cpu" when the engine is built, else
    "reference" (a Model also picks "reference" for a network the engine does not run). The
    "ipu" device (Graphcore's SDK) is always asked for by name."""
    if device == "auto":
        return "reference" if _engine_module() is None else "cpu"
    if device not in DEVICES:
        raise ValueError(
            f"unknown device {device!r}; valid devices: {', '.join(DEVICES + ('auto',))}"
        )
    return device


def _engine_runs_half(net: Sequential) -> bool:
    """Whether the engine's half path runs `net` (docs/numerics.md section 8): Linear layers,
    no all-to-all RLeaky recurrence, no learned beta or threshold yet."""
    return net.is_linear and not any(
        neuron.learned() or getattr(neuron, "all_to_all", False) for _, neuron in net.pairs
    )


def _engine_runs(net: Sequential) -> bool:
    """Whether the engine devices run every layer of `net` (not yet: some conv nets)."""
    if net.is_linear:
        return True
    from .backends.conv_engine import check_conv_engine_supports

    try:
        check_conv_engine_supports(net)
    except ValueError:
        return False
    return True


def available_devices() -> list:
    engine = _engine_module()
    if engine is None:
        return ["reference"]
    return ["reference", "cpu", "ipu-model"]


def _checked_regularizer(regularizer):
    if not isinstance(regularizer, spike_count_bounds):
        raise TypeError(
            f"regularizer must be a popsnn.regularizers regulariser such as "
            f"popsnn.regularizers.spike_count_bounds(), got {regularizer!r}"
        )
    return regularizer


class Model:
    """A trainable network on a device; see the module docstring."""

    def __init__(
        self,
        net: Sequential,
        loss=None,
        optimizer=None,
        device: str = "auto",
        num_steps: int = RUN["num_steps"],
        batch_size: int = RUN["batch_size"],
        seed: int = 0,
        params=None,
        dtype="float32",
        loss_scale=None,
        regularizer=None,
        **device_options,
    ):
        if not isinstance(net, Sequential):
            raise TypeError(f"net must be a popsnn.Sequential, got {type(net).__name__}")
        self.net = net
        self.loss = _losses.get(LOSS["name"] if loss is None else loss)
        if optimizer is None:
            optimizer = _optim.get(OPTIMIZER["name"], lr=OPTIMIZER["lr"])
        if not isinstance(optimizer, _optim.Optimizer):
            raise TypeError(
                f"optimizer must be a popsnn.optim optimiser such as "
                f"popsnn.optim.Adam(lr=1e-3), got {optimizer!r}"
            )
        self.optimizer = optimizer
        self.num_steps, self.batch_size = check_sizes(net, num_steps, batch_size)
        self.seed = seed
        self.device = resolve_device(device)
        self.dtype = _precision.check_dtype(dtype)
        if device == "auto" and self.device != "reference":
            # conv nets the engine does not run yet, nor what its half path has not built
            # (docs/convolution.md, docs/numerics.md section 8)
            if not _engine_runs(net) or (self.dtype == "float16" and not _engine_runs_half(net)):
                self.device = "reference"
        scaler = _precision.make_scaler(self.dtype, loss_scale)
        if self.dtype == "float16" and self.device != "reference" and not net.is_linear:
            raise ValueError(
                f"dtype='float16' on the engine (device {self.device!r}) runs Linear layers "
                f"only, not convolutional stages yet; pass device='reference' or dtype='float32'"
            )
        if regularizer is not None:
            device_options = dict(device_options, regularizer=_checked_regularizer(regularizer))
            if self.device != "reference":
                raise ValueError(
                    f"regularizer runs on device='reference' only (the engine's backward does "
                    f"not add it yet), not {self.device!r}; pass device='reference' or drop it"
                )
        if params is None:
            params = net.init_params(seed)
        if scaler is not None:
            device_options = dict(device_options, loss_scaler=scaler)
        if self.device == "reference":
            backend_cls = ReferenceBackend
        else:
            engine = _engine_module()
            if engine is None:
                raise RuntimeError(
                    f"device {self.device!r} needs popsnn's engine, which is not "
                    f"available in this install; use device='reference' or "
                    f"reinstall popsnn with its native extension"
                )
            backend_cls = engine.EngineBackend
            if not net.is_linear:  # convolutional stages: their own graph (conv_engine)
                from .backends.conv_engine import ConvEngineBackend as backend_cls
        self.backend = backend_cls(
            net,
            params,
            self.loss,
            optimizer,
            num_steps=self.num_steps,
            batch_size=self.batch_size,
            device=self.device,
            **device_options,
        )
        # A backend holds one set of weights, optimiser state and device buffers: calls from
        # several threads take turns (otherwise two steps interleave and both come out wrong).
        self._lock = threading.RLock()

    @property
    def num_classes(self) -> int:
        """Classes of the task: the loss's num_classes, else one per output neuron."""
        return self.loss.num_classes or self.net.num_outputs

    def train_step(self, x, y):
        """One forward + backward + update on a minibatch; returns (loss, out_spikes [T,B,C])."""
        with self._lock:
            value, out = self.backend.train_step(x, y)
        return float(value), out

    def loss_and_grad(self, x, y):
        with self._lock:
            return self.backend.loss_and_grad(x, y)

    def loss_and_input_grad(self, x, y):
        """(loss, grads, dL/dx shaped as x) without updating anything, on the engine devices
        (popsnn.torch passes dL/dx to the layers upstream)."""
        if not hasattr(self.backend, "loss_and_input_grad"):
            raise ValueError(
                f"loss_and_input_grad is for the engine devices, not {self.device!r}: "
                f"use popsnn.reference.backward(..., input_grad=True) there"
            )
        with self._lock:
            return self.backend.loss_and_input_grad(x, y)

    def infer(self, x) -> np.ndarray:
        with self._lock:
            return self.backend.infer(x)

    def record(self, x) -> _reference.Record:
        """Spikes and membranes of every layer for `x` (dense reference on the current
        weights), for rasters and activity statistics."""
        steps = self.num_steps if np.ndim(x) == 2 else None
        storage = self.dtype if self.dtype == "float16" else None
        return _reference.forward(self.net, self.get_params(), x, steps, storage)

    def accuracy(self, out_spikes, y) -> float:
        return _losses.accuracy(out_spikes, y, self.num_classes)

    def get_params(self):
        with self._lock:
            return self.backend.get_params()

    def set_params(self, params):
        with self._lock:
            self.backend.set_params(params)

    def optimizer_state(self) -> dict:
        with self._lock:
            return self.backend.optimizer_state()

    def load_optimizer_state(self, state) -> None:
        with self._lock:
            self.backend.load_optimizer_state(state)

    @property
    def learning_rate(self) -> float:
        """The optimiser's current learning rate."""
        return float(self.optimizer.hyper["lr"])

    def set_learning_rate(self, lr) -> None:
        """Use learning rate `lr` from the next training step on; weights and optimiser state
        (Adam's moments and step count) stay as they are. Cheap on every device: the engines
        keep the rate in device memory and write it from the host, no recompile -- call it
        every step for a schedule."""
        with self._lock:
            self.backend.set_learning_rate(lr)
            self.optimizer.hyper["lr"] = check_learning_rate(lr)

    @property
    def loss_scaler(self):
        """The popsnn.precision.LossScaler of a float16 model (scale, skipped steps); None
        in float32."""
        return getattr(self.backend, "loss_scaler", None)

    def profile(self) -> dict:
        with self._lock:
            return self.backend.profile()

    def __repr__(self):
        return (
            f"popsnn.Model(device={self.device!r}, dtype={self.dtype!r}, "
            f"num_steps={self.num_steps}, batch_size={self.batch_size}, loss={self.loss!r}, "
            f"optimizer={self.optimizer!r})"
        )
