"""The engine backend of `popsnn.Model` for convolutional networks (docs/convolution.md).

The stages run in one Poplar graph (`popsnn._native.ConvNetwork`, host/src/ConvNetwork.cpp),
compiled once: each `Conv2d` stage as `_native.conv_stage` runs it (event-driven or dense
convolution by density, pools with argmax routing, Leaky neurons, BPTT with the sparse
rules), each stage's spikes exchanged onto the next stage's tiles and, backward, its dL/dx
back. A `Linear` stage (the readout after `Flatten`) is the convolution of a 1 x 1 map with
N_in channels, so it runs as one more stage. The loss and its gradient (`popsnn.losses`) and
the optimiser step (`popsnn.optim`) run on the host between the two programs, on float32
parameters kept here, so checkpoints, learning rates and optimiser state work as on the
reference.

Device options: `num_ipus`, `tiles_per_ipu`, `memory_bytes_per_tile` (ipu-model geometry);
`input_activity` and `grad_activity` (per stage, the cost model's activity: estimates only).
"""

from __future__ import annotations

import copy
import time

import numpy as np

from .. import _native
from ..conv import AvgPool2d, Conv2d, Flatten, MaxPool2d
from ..layers import Leaky, Linear
from ..validation import check_batch, check_learning_rate, check_params, check_sizes, param_shapes

__all__ = ["ConvEngineBackend", "conv_stage_specs", "check_conv_engine_supports"]

_DEVICE_OPTIONS = (
    "num_ipus",
    "tiles_per_ipu",
    "memory_bytes_per_tile",
    "input_activity",
    "grad_activity",
)


def _neuron_spec(l, neuron) -> dict:
    if type(neuron) is not Leaky:
        raise ValueError(
            f"stage {l}: {type(neuron).__name__} neurons after a Conv2d / Flatten run on "
            f"device='reference' only for now (the engine's convolutional stages take Leaky); "
            f"use device='reference'"
        )
    if neuron.learned() or neuron.per_neuron_constants():
        raise ValueError(
            f"stage {l}: learned or per-neuron beta / threshold in a convolutional network "
            f"run on device='reference' only for now; use device='reference'"
        )
    return {
        "neuron": "Leaky",
        "beta": float(neuron.beta),
        "threshold": float(neuron.threshold),
        "reset": neuron.reset_mechanism,
        "surrogate": neuron.surrogate.name,
        "surrogate_param": float(neuron.surrogate.param),
        "sparse": "none" if neuron.sparse is None else neuron.sparse.kind,
        "sparse_value": 0.0 if neuron.sparse is None else float(neuron.sparse.value),
    }


def _window(layer) -> dict:
    return {"kernel_size": layer.kernel_size, "stride": layer.stride, "padding": layer.padding}


def _stage_spec(l, stage, rows, steps) -> dict:
    """One stage as ConvStageSpec: Conv2d then pools, or a Linear as a 1 x 1 convolution
    (Flatten is free: stage state is flat, row-major, already)."""
    spec = {"rows": rows, "steps": steps, "neuron": _neuron_spec(l, stage.neuron), "pools": []}
    synapse = stage.synapse
    seen_synapse = False
    for op in stage.ops:
        if op is synapse:
            seen_synapse = True
        elif isinstance(op, (MaxPool2d, AvgPool2d)):
            if not seen_synapse:
                raise ValueError(
                    f"stage {l}: pooling before the Conv2d / Linear of a stage runs on "
                    f"device='reference' only for now; put the pool after the Conv2d or use "
                    f"device='reference'"
                )
            kind = "max" if isinstance(op, MaxPool2d) else "avg"
            spec["pools"].append({"kind": kind, **_window(op)})
        elif not isinstance(op, Flatten):
            raise ValueError(f"stage {l}: layer {type(op).__name__} is not run by the engine")
    if isinstance(synapse, Conv2d):
        spec.update(
            in_shape=tuple(stage.in_shape),
            out_channels=synapse.out_channels,
            conv=_window(synapse),
        )
    else:
        assert isinstance(synapse, Linear)
        spec.update(
            in_shape=(synapse.in_features, 1, 1),
            out_channels=synapse.out_features,
            conv={"kernel_size": (1, 1), "stride": (1, 1), "padding": (0, 0)},
        )
    return spec


def conv_stage_specs(net, num_steps, batch_size) -> list:
    """The net's stages as the engine's ConvNetwork takes them; ValueError in one line for
    what the engine does not run."""
    rows = num_steps * batch_size
    return [_stage_spec(l, stage, rows, num_steps) for l, stage in enumerate(net.stages)]


def check_conv_engine_supports(net) -> None:
    """Refuse in one line what the engine's convolutional network does not run."""
    conv_stage_specs(net, 1, 1)


class ConvEngineBackend:
    """Convolutional networks on the engine devices; follows `popsnn.backends.Backend`."""

    def __init__(
        self, net, params, loss, optimizer, *, num_steps, batch_size, device, **device_options
    ):
        from .engine import codelets_path

        unknown = sorted(set(device_options) - set(_DEVICE_OPTIONS))
        if unknown:
            raise ValueError(
                f"device options {unknown} are not taken by convolutional networks on the "
                f"engine; valid: {', '.join(_DEVICE_OPTIONS)}"
            )
        self.net, self.loss, self.optimizer = net, loss, optimizer
        self.num_steps, self.batch_size = check_sizes(net, num_steps, batch_size)
        check_params(net, params)
        self.params = [{k: np.asarray(v, np.float32).copy() for k, v in p.items()} for p in params]
        specs = conv_stage_specs(net, self.num_steps, self.batch_size)
        native_spec = {"stages": specs}
        for key in ("input_activity", "grad_activity"):
            if key in device_options:
                native_spec[key] = [float(a) for a in device_options.pop(key)]
        native_device = {"type": device, "codelets": str(codelets_path()), **device_options}
        self.device = device
        self._native_spec, self._native_device = native_spec, native_device
        # One graph per input kind, built when first needed: direct input ([B, ...], the
        # same every step) runs the first stage's convolution once per sample.
        self._networks = {}
        self._network = self._network_for(direct=True)
        self._steps = self._samples = 0
        self._seconds = 0.0
        self._dense_rows = None
        self._active_grads = None
        self._input_grad_dense_rows = None

    def _network_for(self, direct):
        if direct not in self._networks:
            spec = dict(self._native_spec, direct=direct)
            self._networks[direct] = _native.ConvNetwork(spec, self._native_device)
        self._network = self._networks[direct]
        return self._network

    def _write_params(self):
        for l, p in enumerate(self.params):
            self._network.set_params(l, p["weight"].reshape(-1), p.get("bias"))

    def _forward(self, x, record_all=False):
        """(spikes, membranes) lists of [T, B, N] per stage (the last only unless
        record_all), for a checked x; B is x's, the rest of the batch zero input."""
        x, direct, batch = check_batch(self.net, x, self.num_steps, self.batch_size)
        T, B = self.num_steps, self.batch_size
        self._network_for(bool(direct))
        if direct:  # one row per sample: the graph applies it at every step
            full = np.zeros((B, x.shape[-1]), np.float32)
            full[:batch] = x
        else:
            full = np.zeros((T, B, x.shape[-1]), np.float32)
            full[:, :batch] = x
        self._write_params()
        spikes, membranes, dense = self._network.forward(full.reshape(-1, x.shape[-1]), record_all)
        self._dense_rows = list(dense)

        def shaped(a):
            return a.reshape(T, B, -1)[:, :batch]

        return [shaped(s) for s in spikes], [shaped(m) for m in membranes], batch

    def _loss_and_grad(self, x, y):
        start = time.perf_counter()
        spikes, membranes, batch = self._forward(x)
        out_spikes, out_membranes = spikes[-1], membranes[-1]
        value = self.loss(out_spikes, out_membranes, y)
        d_spikes, d_membranes = self.loss.backward(out_spikes, out_membranes, y)
        T, B = self.num_steps, self.batch_size
        n = out_spikes.shape[-1]
        grads_in = []
        for d in (d_spikes, d_membranes):
            full = None
            if d is not None:
                full = np.zeros((T, B, n), np.float32)
                full[:, :batch] = d
                full = full.reshape(T * B, n)
            grads_in.append(full)
        g_weights, g_biases, active, input_dense = self._network.backward(*grads_in)
        self._active_grads = list(active)
        self._input_grad_dense_rows = list(input_dense)
        grads = []
        for p, gw, gb in zip(self.params, g_weights, g_biases):
            g = {"weight": gw.reshape(p["weight"].shape)}
            if "bias" in p:
                g["bias"] = gb
            grads.append({k: g[k] for k in p})
        self._seconds += time.perf_counter() - start
        self._steps += 1
        self._samples += batch
        return value, grads, out_spikes

    def train_step(self, x, y):
        value, grads, out = self._loss_and_grad(x, y)
        start = time.perf_counter()
        self.optimizer.step(self.params, grads)
        self._seconds += time.perf_counter() - start
        return value, out

    def loss_and_grad(self, x, y):
        value, grads, _ = self._loss_and_grad(x, y)
        return value, grads

    def loss_grad_and_spikes(self, x, y):
        return self._loss_and_grad(x, y)

    def loss_and_input_grad(self, x, y):
        raise ValueError(
            "loss_and_input_grad: convolutional networks on the engine devices do not form "
            "dL/dx of their first stage yet; use device='reference' (popsnn.reference."
            "backward(..., input_grad=True))"
        )

    def infer(self, x):
        return self._forward(x)[0][-1]

    def record(self, x) -> tuple:
        """(spikes, membranes): per stage [T, B, N], as the engine computed them."""
        spikes, membranes, _ = self._forward(x, record_all=True)
        return spikes, membranes

    def get_params(self):
        return copy.deepcopy(self.params)

    def set_params(self, params):
        check_params(self.net, params)
        self.params = [{k: np.asarray(v, np.float32).copy() for k, v in p.items()} for p in params]

    def optimizer_state(self) -> dict:
        return self.optimizer.state_dict()

    def load_optimizer_state(self, state) -> None:
        self.optimizer.load_state_dict(state, param_shapes(self.net))

    def set_learning_rate(self, lr) -> None:
        self.optimizer.hyper["lr"] = check_learning_rate(lr)

    def plans(self) -> list:
        """The planner's layout of every stage (channel groups, row groups, shards)."""
        return self._network.plans

    def profile(self) -> dict:
        counters = {
            "device": self.device,
            "dtype": "float32",
            "train_steps": self._steps,
            "train_samples": self._samples,
            "train_seconds": self._seconds,
            "dense_rows": self._dense_rows,
            "active_grads": self._active_grads,
            "input_grad_dense_rows": self._input_grad_dense_rows,
        }
        if self.device != "cpu":
            counters.update(self._network.estimate())
        return counters
