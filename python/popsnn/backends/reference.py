"""The dense NumPy reference (`popsnn.reference`) as a backend of `popsnn.Model`: the oracle
every engine is checked against, and the device that always works."""

from __future__ import annotations

import copy
import time

import numpy as np

from .. import reference as _reference
from ..precision import LossScaler
from ..validation import check_batch, check_learning_rate, check_params, check_sizes, param_shapes

__all__ = ["ReferenceBackend"]


class ReferenceBackend:
    """The dense NumPy reference as a backend: the oracle, and the device that always works.

    It follows `popsnn.backends.Backend`. With a `loss_scaler` (half storage, popsnn.precision)
    the parameters it holds are the float32 master weights; the forward and backward use their
    half copy, and a step whose gradients overflowed is skipped.
    """

    def __init__(
        self,
        net,
        params,
        loss,
        optimizer,
        *,
        num_steps,
        batch_size,
        device="reference",
        loss_scaler: LossScaler | None = None,
        regularizer=None,
        **device_options,
    ):
        if device_options:
            raise ValueError(
                f"the reference device takes no device options, got "
                f"{sorted(device_options)}; they are for the engine devices "
                f"cpu, ipu-model and ipu"
            )
        self.net, self.loss, self.optimizer = net, loss, optimizer
        self.regularizer = regularizer
        # Spikes, membranes, currents and masks of every neuron and step, in float64.
        self.num_steps, self.batch_size = check_sizes(
            net, num_steps, batch_size, bytes_per_neuron_step=32
        )
        dtype = check_params(net, params)
        if loss_scaler is not None and dtype != np.float32:
            raise ValueError(
                f"dtype='float16' keeps float32 master weights; the parameters given are "
                f"{dtype}: pass float32 parameters (e.g. net.init_params(seed))"
            )
        self.params = copy.deepcopy(params)
        self.loss_scaler = loss_scaler
        self.storage = None if loss_scaler is None else "float16"
        self._steps = 0
        self._seconds = 0.0
        self._samples = 0

    def _checked(self, x):
        """x checked as every device checks it (its dtype is the parameters', for the oracle)."""
        return check_batch(
            self.net, x, self.num_steps, self.batch_size, self.params[0]["weight"].dtype
        )[0]

    def _loss_and_grad(self, x, y):
        """Forward and backward, counted as a training step in profile() (the optimiser may
        step here or on the host: data-parallel training, popsnn.torch)."""
        start = time.perf_counter()
        x = self._checked(x)
        scale = 1.0 if self.loss_scaler is None else self.loss_scaler.scale
        # Half can overflow to inf under a loss scale; the scaler sees it in the gradients.
        with np.errstate(over="ignore", invalid="ignore"):
            out = _reference.loss_and_grad(
                self.net,
                self.params,
                x,
                y,
                self.loss,
                self.num_steps if x.ndim == 2 else None,
                storage=self.storage,
                loss_scale=scale,
                regularizer=self.regularizer,
            )
        self._seconds += time.perf_counter() - start
        self._steps += 1
        self._samples += len(y)
        return out

    def train_step(self, x, y):
        value, grads, rec = self._loss_and_grad(x, y)
        start = time.perf_counter()
        if self.loss_scaler is None or self.loss_scaler.update(grads):
            self.optimizer.step(self.params, grads)
        self._seconds += time.perf_counter() - start
        return value, rec.spikes[-1]

    def loss_and_grad(self, x, y):
        value, grads, _ = self._loss_and_grad(x, y)
        return value, grads

    def loss_grad_and_spikes(self, x, y):
        value, grads, rec = self._loss_and_grad(x, y)
        return value, grads, rec.spikes[-1]

    def infer(self, x):
        x = self._checked(x)
        return _reference.forward(
            self.net, self.params, x, self.num_steps if x.ndim == 2 else None, self.storage
        ).spikes[-1]

    def get_params(self):
        return copy.deepcopy(self.params)

    def set_params(self, params):
        check_params(self.net, params)
        self.params = copy.deepcopy(params)

    def optimizer_state(self) -> dict:
        return self.optimizer.state_dict()

    def load_optimizer_state(self, state) -> None:
        self.optimizer.load_state_dict(state, param_shapes(self.net))

    def set_learning_rate(self, lr) -> None:
        self.optimizer.hyper["lr"] = check_learning_rate(lr)

    def profile(self) -> dict:
        counters = {
            "device": "reference",
            "dtype": self.storage or "float32",
            "train_steps": self._steps,
            "train_samples": self._samples,
            "train_seconds": self._seconds,
        }
        if self.loss_scaler is not None:
            counters["loss_scale"] = self.loss_scaler.scale
            counters["skipped_steps"] = self.loss_scaler.skipped_steps
        return counters
