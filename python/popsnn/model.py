"""`popsnn.Model`: a network, its weights, a loss and an optimiser on one device.

    model = popsnn.Model(net, loss=losses.ce_count_loss(), optimizer=optim.Adam(lr=5e-4),
                         device="auto", num_steps=25, batch_size=128, seed=0)
    loss, out_spikes = model.train_step(x, y)      # out_spikes [T, B, C]
    out_spikes = model.infer(x)

The work is done by a backend that follows one protocol (see `ReferenceBackend`):
`ReferenceBackend` (here, the dense NumPy reference) for device "reference", and
`popsnn.engine.EngineBackend` for "cpu", "ipu-model" and "ipu" (imported only when asked for).
`x` is `[B, N_in]` direct current (the same every step, `num_steps` steps) or `[T, B, N_in]`.
"""
from __future__ import annotations

import copy
import numbers
import time
from typing import Optional

import numpy as np

from . import losses as _losses
from . import optim as _optim
from . import reference as _reference
from ._checks import positive_int
from .layers import Sequential

DEVICES = ("reference", "cpu", "ipu-model", "ipu")
ENGINE_DEVICES = ("cpu", "ipu-model", "ipu")


def _engine_module():
    """popsnn.engine, or None when it is not built / not importable here."""
    try:
        from . import engine
    except ImportError:
        return None
    return engine


def _ipu_present(engine) -> bool:
    probe = getattr(engine, "ipu_available", None)
    try:
        return bool(probe()) if callable(probe) else False
    except Exception:  # a broken SDK install must not stop "auto" from falling back
        return False


def resolve_device(device: str) -> str:
    """The device a name stands for: "auto" picks "ipu" if one is attached, else "cpu" when the
    engine is available, else "reference"."""
    if device == "auto":
        engine = _engine_module()
        if engine is None:
            return "reference"
        return "ipu" if _ipu_present(engine) else "cpu"
    if device not in DEVICES:
        raise ValueError(f"unknown device {device!r}; valid devices: "
                         f"{', '.join(DEVICES + ('auto',))}")
    return device


def available_devices() -> list:
    engine = _engine_module()
    if engine is None:
        return ["reference"]
    found = ["reference", "cpu", "ipu-model"]
    return found + (["ipu"] if _ipu_present(engine) else [])


def check_learning_rate(lr) -> float:
    """`lr` as a float, or a ValueError saying what a learning rate may be."""
    if isinstance(lr, bool) or not isinstance(lr, numbers.Real) or not np.isfinite(lr) \
            or lr < 0:
        raise ValueError(f"the learning rate must be a finite number >= 0, got {lr!r}")
    return float(lr)


class ReferenceBackend:
    """The dense NumPy reference as a backend: the oracle, and the device that always works.

    The protocol every backend follows:
    `__init__(net, params, loss, optimizer, *, num_steps, batch_size, device, **device_options)`,
    `train_step(x, y) -> (loss, out_spikes)` (forward, backward, optimiser update),
    `loss_and_grad(x, y) -> (loss, grads)`, `infer(x) -> out_spikes`,
    `get_params()`, `set_params(params)`, `optimizer_state()`, `load_optimizer_state(state)`,
    `set_learning_rate(lr)` (from the next step on), `profile() -> dict`.
    """

    def __init__(self, net, params, loss, optimizer, *, num_steps, batch_size,
                 device="reference", **device_options):
        if device_options:
            raise ValueError(f"the reference device takes no device options, got "
                             f"{sorted(device_options)}; they are for the engine devices "
                             f"{', '.join(ENGINE_DEVICES)}")
        self.net, self.loss, self.optimizer = net, loss, optimizer
        self.num_steps, self.batch_size = num_steps, batch_size
        _reference.check_params(net, params)
        self.params = copy.deepcopy(params)
        self._steps = 0
        self._seconds = 0.0
        self._samples = 0

    def _steps_for(self, x) -> Optional[int]:
        return self.num_steps if np.ndim(x) == 2 else None

    def train_step(self, x, y):
        start = time.perf_counter()
        value, grads, rec = _reference.loss_and_grad(self.net, self.params, x, y, self.loss,
                                                     self._steps_for(x))
        self.optimizer.step(self.params, grads)
        self._seconds += time.perf_counter() - start
        self._steps += 1
        self._samples += len(y)
        return value, rec.spikes[-1]

    def loss_and_grad(self, x, y):
        value, grads, _ = _reference.loss_and_grad(self.net, self.params, x, y, self.loss,
                                                   self._steps_for(x))
        return value, grads

    def loss_grad_and_spikes(self, x, y):
        """loss_and_grad plus the output spikes of the same forward (data-parallel steps)."""
        value, grads, rec = _reference.loss_and_grad(self.net, self.params, x, y, self.loss,
                                                     self._steps_for(x))
        return value, grads, rec.spikes[-1]

    def infer(self, x):
        return _reference.forward(self.net, self.params, x, self._steps_for(x)).spikes[-1]

    def get_params(self):
        return copy.deepcopy(self.params)

    def set_params(self, params):
        _reference.check_params(self.net, params)
        self.params = copy.deepcopy(params)

    def optimizer_state(self) -> dict:
        return self.optimizer.state_dict()

    def load_optimizer_state(self, state) -> None:
        self.optimizer.load_state_dict(state)

    def set_learning_rate(self, lr) -> None:
        self.optimizer.hyper["lr"] = check_learning_rate(lr)

    def profile(self) -> dict:
        return {"device": "reference", "train_steps": self._steps,
                "train_samples": self._samples, "train_seconds": self._seconds}


class Model:
    """A trainable network on a device; see the module docstring."""

    def __init__(self, net: Sequential, loss=None, optimizer=None, device: str = "auto",
                 num_steps: int = 25, batch_size: int = 128, seed: int = 0, params=None,
                 **device_options):
        if not isinstance(net, Sequential):
            raise TypeError(f"net must be a popsnn.Sequential, got {type(net).__name__}")
        self.net = net
        self.loss = _losses.ce_count_loss() if loss is None else _losses.get(loss)
        if optimizer is None:
            optimizer = _optim.Adam(lr=1e-3)
        if not isinstance(optimizer, _optim.Optimizer):
            raise TypeError(f"optimizer must be a popsnn.optim optimiser such as "
                            f"popsnn.optim.Adam(lr=1e-3), got {optimizer!r}")
        self.optimizer = optimizer
        self.num_steps = positive_int("num_steps", num_steps)
        self.batch_size = positive_int("batch_size", batch_size)
        self.seed = seed
        self.device = resolve_device(device)
        if params is None:
            params = net.init_params(seed)
        if self.device == "reference":
            backend_cls = ReferenceBackend
        else:
            engine = _engine_module()
            if engine is None:
                raise RuntimeError(f"device {self.device!r} needs popsnn's engine, which is not "
                                   f"available in this install; use device='reference' or "
                                   f"reinstall popsnn with its native extension")
            backend_cls = engine.EngineBackend
        self.backend = backend_cls(net, params, self.loss, optimizer, num_steps=self.num_steps,
                                   batch_size=self.batch_size, device=self.device,
                                   **device_options)

    @property
    def num_classes(self) -> int:
        """Classes of the task: the loss's num_classes, else one per output neuron."""
        return self.loss.num_classes or self.net.num_outputs

    def train_step(self, x, y):
        """One forward + backward + update on a minibatch; returns (loss, out_spikes [T,B,C])."""
        value, out = self.backend.train_step(x, y)
        return float(value), out

    def loss_and_grad(self, x, y):
        return self.backend.loss_and_grad(x, y)

    def infer(self, x) -> np.ndarray:
        return self.backend.infer(x)

    def record(self, x) -> _reference.Record:
        """Spikes and membranes of every layer for `x` (dense reference on the current
        weights), for rasters and activity statistics."""
        steps = self.num_steps if np.ndim(x) == 2 else None
        return _reference.forward(self.net, self.get_params(), x, steps)

    def accuracy(self, out_spikes, y) -> float:
        return _losses.accuracy(out_spikes, y, self.num_classes)

    def get_params(self):
        return self.backend.get_params()

    def set_params(self, params):
        self.backend.set_params(params)

    def optimizer_state(self) -> dict:
        return self.backend.optimizer_state()

    def load_optimizer_state(self, state) -> None:
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
        self.backend.set_learning_rate(lr)
        self.optimizer.hyper["lr"] = check_learning_rate(lr)

    def profile(self) -> dict:
        return self.backend.profile()

    def __repr__(self):
        return (f"popsnn.Model(device={self.device!r}, num_steps={self.num_steps}, "
                f"batch_size={self.batch_size}, loss={self.loss!r}, "
                f"optimizer={self.optimizer!r})")
