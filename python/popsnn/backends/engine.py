"""The engine backend of `popsnn.Model`: the sparse SNN engine compiled into one
Poplar graph (host/ + codelets/), run on the "cpu" device (popsnn's runtime,
tiles = this machine's threads), "ipu-model" (IPU geometry and memory enforced,
cycle estimates) or "ipu" (hardware through Graphcore's SDK).

The protocol is `popsnn.backends.Backend`; results equal the dense
NumPy reference (`popsnn.reference`) computed in float32, spikes identical. With a
`loss_scaler` (Model's dtype="float16", popsnn.precision) the device stores weights' half
copies, states, traces and exchanged values in half and keeps float32 masters, the reference
in the same mode being the oracle (docs/numerics.md section 8); a step whose gradients
overflow under the loss scale is skipped on the device and the scaler backs off.

How it runs (host/src/Network.cpp has the details): every layer is sharded by
output neuron over the tiles; per step a shard writes its spike ids into a
buffer, the buffers of all steps one after the other (the id trace); the next
layer sums the weight rows of the received ids (a layer narrower than those
buffers, like a 10-class readout, gets W.S[t] sums pushed by its input layer's
tiles instead). With a sparse rule, the forward also keeps a gradient trace per
shard: the ids and surrogate values of the entries inside the rule, compressed
over all steps and samples. Both traces are sized by the activity over all
steps (`spike_activity`, `trace_activity`), not by the busiest step (`max_activity` bounds one
step's buffer, which matters where buffers are sent per step). The backward
computes dL/dS only for the gradient trace's entries, from the downstream
layer's dL/dI and a per-tile copy of its weights, and weight
gradients only for inputs that spiked. `profile()["layer{l}_trace_bytes"]`
(surrogate plus ids) reports what is kept. Schedule: layer-major (each layer's T steps in one
compute phase) when it fits the tiles' memory, else step-major (one phase per
layer and step); `profile()["step_major"]` says which. If the whole batch fits
neither way, it runs in chunks of samples one after the other (gradients summed
over the chunks, one optimiser step; the results are the whole batch's):
`profile()["sample_chunks"]` and `["chunk_batch"]`.

Each input layout ([B, N] direct current, [T, B, N] per step) has its own engine, compiled
the first time the layout is used and kept: switching layouts hands the weights, optimiser
state and learning rate over (host copies) instead of recompiling; `engine_builds` counts the
compilations. A model fed both layouts holds both engines' memory.

The learning rate is device state (one float per tile, written from the host):
`set_learning_rate(lr)` changes it between steps without a recompile.

Device options: `num_ipus`, `tiles_per_ipu`, `memory_bytes_per_tile`
(ipu-model geometry), `max_activity` (spike-buffer capacity as a fraction of a
shard's neurons, default 1.0: never overflows), `spike_activity` and
`trace_activity` (the id trace and the gradient trace, kept over all steps, as
fractions of a shard's T x B x n entries; by default the gradient trace is measured: the
first minibatch counts its entries, the engine rebuilds at that plus 25% and redoes the step,
and grows it on overflow whatever `on_overflow` says; the id trace is `max_activity`'s size,
measured in that same rebuild where there is one (at least 1%), docs/numerics.md section 7),
`input_activity` ([T, B, N] input: the host lists the batch's non-zero entries once per batch,
in the pass that checks for NaN and inf, and only that list crosses onto the first layer's
tiles, whose forward and weight gradient read it instead of scanning T x B x N floats; the
list holds this fraction of T x B x N entries, from 0.45 up the dense block is kept (an entry
costs 8 bytes against 4); default None: 1.5 x the first [T, B, N] batch's non-zero fraction;
a denser batch grows the list, a rebuild counted in `profile()["input_list_grows"]`),
`grad_list_activity` (dL/dI between two layers with compressed gradient traces crosses tiles
as a list of the live neurons' values, sized at this fraction of a shard's T x B x n entries
instead of the dense [T, B, n] block; the forward counts what it needs before any backward
runs; default None: measured on the first minibatch, grown whatever `on_overflow` says),
`sparse_backward_max_live` (a sparse rule's layer whose backward has more than this fraction of
its T x B x n entries live, as the forward counts them, keeps its masked surrogate dense and
runs the dense backward, the faster there; default None: the crossover measured on this
machine, `profile()["sparse_backward_max_live"]`; 1.0: never),
`on_overflow`
("error", default, or "grow": recompile with larger buffers or a larger trace,
each grown apart, and redo the step).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from .. import _native
from .. import losses as _losses
from .._checks import one_of, positive_int
from ..defaults import RUN
from ..layers import Alpha, Lapicque, RLeaky
from ..reference import _tau_alpha
from ..validation import check_batch, check_learning_rate, check_params, check_sizes, param_shapes

__all__ = [
    "EngineBackend",
    "SpikeBufferOverflow",
    "NetworkDoesNotFit",
    "codelets_path",
]

SpikeBufferOverflow = _native.SpikeBufferOverflow
NetworkDoesNotFit = _native.NetworkDoesNotFit


def _fraction(name, value, meaning) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ValueError(f"{name} must be a number in (0, 1] ({meaning}), got {value!r}")
    return float(value)


_DEVICE_OPTIONS = (
    "num_ipus",
    "tiles_per_ipu",
    "memory_bytes_per_tile",
    "max_activity",
    "trace_activity",
    "spike_activity",
    "grad_list_activity",
    "input_activity",
    "sparse_backward_max_live",
    "on_overflow",
)

# [T, B, N] input listed by its non-zeros (input_activity None): the list holds this many
# times the first such batch's non-zero fraction (the engine grows it for a denser batch).
INPUT_LIST_HEADROOM = 1.5


def codelets_path() -> Path:
    """The codelet object built with the package (graph.addCodelets loads it)."""
    return Path(__file__).resolve().parents[1] / "lib" / "popsnn_codelets.gp"


def _layer_spec(lin, neuron) -> dict:
    spec = {
        "inputs": lin.in_features,
        "outputs": lin.out_features,
        "bias": lin.bias,
        "neuron": type(neuron).__name__,
        "beta": neuron.beta,
        "threshold": neuron.threshold,
        "reset": neuron.reset_mechanism,
        "surrogate": neuron.surrogate.name,
        "surrogate_param": neuron.surrogate.param,
        "sparse": "none" if neuron.sparse is None else neuron.sparse.kind,
        "sparse_value": 0.0 if neuron.sparse is None else neuron.sparse.value,
        # Constants one per neuron are lists; learned ones live in the parameters.
        "learn_beta": "beta" in neuron.learned(),
        "learn_threshold": "threshold" in neuron.learned(),
    }
    if "alpha" in neuron.constants():  # Synaptic's and Alpha's second decay
        spec["alpha"] = neuron.alpha
    if isinstance(neuron, Alpha) and not neuron.learned() and not neuron.per_neuron_constants():
        # U = tau_alpha (E + H), in float32 as the reference's (per neuron or learned, the
        # vertices compute it from alpha and the clamped beta)
        spec["gain"] = float(_tau_alpha(np.float32(neuron.alpha), np.float32(neuron.beta)))
    if isinstance(neuron, RLeaky):
        spec["all_to_all"] = neuron.all_to_all
    if isinstance(neuron, Lapicque):  # U = decay U + gain I: the two constants it steps with
        spec["beta"], spec["gain"] = neuron.decay, neuron.gain
    return spec


def _loss_spec(loss, num_outputs) -> dict:
    if not isinstance(loss, _losses.Loss):
        raise TypeError(f"loss must be a popsnn.losses loss, got {loss!r}")
    spec = {"name": loss.name}
    if loss.population_code:
        spec["num_classes"] = loss.num_classes
    elif loss.num_classes is not None and loss.num_classes != num_outputs:
        raise ValueError(
            f"loss num_classes={loss.num_classes} but the output layer has "
            f"{num_outputs} neurons; pass population_code=True to pool blocks"
        )
    for key in ("correct_rate", "incorrect_rate", "on_target", "off_target"):
        if hasattr(loss, key):
            spec[key] = getattr(loss, key)
    return spec


def _optimizer_spec(optimizer) -> dict:
    name = getattr(optimizer, "name", None)
    if name not in ("sgd", "adam", "adamw"):
        raise TypeError(f"optimizer must be popsnn.optim.SGD, Adam or AdamW, got {optimizer!r}")
    h = dict(optimizer.hyper)
    spec = {"name": name, "lr": h["lr"], "weight_decay": h.get("weight_decay", 0.0)}
    if name == "sgd":
        spec.update(momentum=h["momentum"], dampening=h["dampening"], nesterov=h["nesterov"])
    else:
        spec.update(beta1=h["betas"][0], beta2=h["betas"][1], eps=h["eps"])
    return spec


def _check_device(device, device_options) -> None:
    unknown = sorted(set(device_options) - set(_DEVICE_OPTIONS))
    if unknown:
        raise ValueError(f"unknown device option(s) {unknown}; valid: {', '.join(_DEVICE_OPTIONS)}")
    one_of("device", device, ("cpu", "ipu-model", "ipu"))
    if device == "cpu" and set(device_options) & {
        "num_ipus",
        "tiles_per_ipu",
        "memory_bytes_per_tile",
    }:
        raise ValueError(
            "num_ipus, tiles_per_ipu and memory_bytes_per_tile describe an "
            "IPU geometry: use them with device='ipu-model', not 'cpu'"
        )


class EngineBackend:
    """A network compiled once into a Poplar engine; see the module docstring."""

    def __init__(
        self,
        net,
        params,
        loss,
        optimizer,
        *,
        num_steps,
        batch_size,
        device="cpu",
        loss_scaler=None,
        **device_options,
    ):
        _check_device(device, device_options)
        self.net, self.loss, self.optimizer = net, loss, optimizer
        self.num_steps, self.batch_size = check_sizes(net, num_steps, batch_size)
        self.device = device
        self.on_overflow = one_of(
            "on_overflow", device_options.get("on_overflow", "error"), ("error", "grow")
        )
        self.max_activity = _fraction(
            "max_activity",
            device_options.get("max_activity", RUN["max_activity"]),
            "the spike-buffer capacity as a fraction of a tile's neurons",
        )
        # The traces kept over all steps: None (the default) measures the gradient trace on the
        # first minibatch, and the id trace with it (else it is max_activity's size).
        self.trace_activity, self.spike_activity, self.grad_list_activity, max_live = (
            RUN[key]
            if device_options.get(key) is None
            else _fraction(
                key,
                device_options[key],
                f"{what} as a fraction of a tile's steps x samples x neurons; None: the default",
            )
            for key, what in (
                ("trace_activity", "the gradient trace's size"),
                ("spike_activity", "the id trace's size"),
                ("grad_list_activity", "the dL/dI lists' size"),
                ("sparse_backward_max_live", "above it a rule's layer runs the dense backward"),
            )
        )
        self.input_activity = device_options.get("input_activity")
        if self.input_activity is not None:
            self.input_activity = _fraction(
                "input_activity",
                self.input_activity,
                "the [T, B, N] input list's size as a fraction of its entries; None: measured",
            )
        self._device = {"type": device, "codelets": str(codelets_path())}
        for key in ("num_ipus", "tiles_per_ipu", "memory_bytes_per_tile"):
            if key in device_options:
                self._device[key] = positive_int(key, device_options[key])
        check_params(net, params)
        self._spec = {
            "layers": [_layer_spec(lin, n) for lin, n in net.pairs],
            "loss": _loss_spec(loss, net.num_outputs),
            "optimizer": _optimizer_spec(optimizer),
            "batch_size": self.batch_size,
            "num_steps": self.num_steps,
            "max_activity": self.max_activity,
            "trace_activity": self.trace_activity,
            "spike_activity": self.spike_activity,
            "grad_list_activity": self.grad_list_activity,
            "sparse_backward_max_live": max_live,
            # float16 (a LossScaler given, popsnn.precision): half storage on the device
            "dtype": "float32" if loss_scaler is None else "float16",
        }
        self.loss_scaler = loss_scaler
        # One engine per input layout, each compiled the first time its layout is used and
        # kept: alternating [B, N] and [T, B, N] inputs costs a state hand-over, not a build.
        self._engines: dict = {}
        self.engine_builds = 0
        self._engine = None  # the engine holding the current weights and optimiser state
        self._mode = None
        self._seconds = 0.0
        self._train_steps = 0
        # Direct-current input is the common case: compile for it now, so that a
        # network that does not fit fails at construction.
        self._engine_for("direct").set_params(self._as_float32(params))

    # -- engines ---------------------------------------------------------------

    @staticmethod
    def _as_float32(params):
        return [
            {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in p.items()} for p in params
        ]

    def _engine_for(self, mode, input_grad=False):
        """The engine for input `mode` ("direct" [B, N] or "per_step" [T, B, N]), holding the
        current weights, optimiser state and learning rate (handed over from the engine used
        last; host copies, no recompile once both layouts have been seen). Per-step input with
        `input_grad` has an engine of its own ("per_step_input_grad"), which keeps the first
        layer's dL/dI of every step; once built it serves all per-step calls."""
        if mode == "per_step" and (input_grad or self._mode == "per_step_input_grad"):
            mode = "per_step_input_grad"
        if self._mode == mode:
            return self._engine
        engine = self._engines.get(mode)
        if engine is None:
            per_step_grad = mode == "per_step_input_grad"
            spec = dict(
                self._spec, input="per_step" if per_step_grad else mode, input_grad=per_step_grad
            )
            engine = _native.Network(spec, self._device, self.on_overflow)
            self._engines[mode] = engine
            self.engine_builds += 1
        if self._engine is not None:
            engine.set_params(self._engine.get_params())
            engine.set_optimizer_state(*self._engine.get_optimizer_state())
            engine.set_learning_rate(self._spec["optimizer"]["lr"])
        self._engine, self._mode = engine, mode
        return engine

    def _input_activity(self, x) -> float:
        """The [T, B, N] input list's size for engines built from now on (once per engine)."""
        if self.input_activity is None:
            # at least one entry: 0 would mean the dense block
            listed = max(1.0, INPUT_LIST_HEADROOM * np.count_nonzero(x))
            self.input_activity = min(1.0, listed / x.size)
        return self.input_activity

    def _prepare(self, x, y=None, input_grad=False):
        """(engine, padded x, padded labels, valid count). NaN and inf are counted by the
        engine (one pass over x, with the input list). uint8 and bool input stay bytes (the
        engine lists them without a float copy); other real numbers become float32."""
        dtype = np.uint8 if getattr(x, "dtype", None) in (np.uint8, np.bool_) else np.float32
        x, direct, batch = check_batch(
            self.net, x, self.num_steps, self.batch_size, dtype, check_finite=False
        )
        if not direct and "input_activity" not in self._spec:
            self._spec["input_activity"] = self._input_activity(x)
        engine = self._engine_for("direct" if direct else "per_step", input_grad)
        if self.loss_scaler is not None and engine.loss_scale != self.loss_scaler.scale:
            engine.set_loss_scale(self.loss_scaler.scale)  # device state, no rebuild
        if batch < self.batch_size:
            # A last, partial batch: padding rows are computed but weigh nothing in the
            # loss and gradients, and are cut from the outputs.
            pad = [(0, self.batch_size - batch)] + [(0, 0)]
            if not direct:
                pad = [(0, 0)] + pad
            x = np.pad(x, pad)
        labels = None
        if y is not None:
            k = self._spec["loss"].get("num_classes", self.net.num_outputs)
            y = _losses.check_targets(y, batch, k)
            labels = np.zeros(self.batch_size, dtype=np.int32)
            labels[:batch] = y
        return engine, np.ascontiguousarray(x), labels, batch

    # -- the protocol ------------------------------------------------------------

    def _counted(self, run, *args):
        """run(*args), counted as a training step (forward and backward) in profile(): the
        optimiser step may be on the device (train_step) or on the host (data-parallel
        training, popsnn.torch), the device's part of the step is the same."""
        start = time.perf_counter()
        out = run(*args)
        self._seconds += time.perf_counter() - start
        self._train_steps += 1
        return out

    def train_step(self, x, y):
        engine, x, labels, valid = self._prepare(x, y)
        loss, spikes = self._counted(engine.train_step, x, labels, valid)
        if self.loss_scaler is not None:  # the device skipped a step whose gradients overflowed
            self.loss_scaler.update_finite(engine.last_step_applied)
        return float(loss), spikes[:, :valid]

    def loss_and_grad(self, x, y):
        engine, x, labels, valid = self._prepare(x, y)
        loss, grads, _ = self._counted(engine.loss_and_grad, x, labels, valid)
        return float(loss), grads

    def loss_and_input_grad(self, x, y):
        """(loss, grads, dL/dx shaped as x): the device keeps the first layer's dL/dI (direct
        input x [B, N_in]: its sum over the steps, per shard and chunk of samples), the host
        multiplies by that layer's W (host/src/Network.cpp, readInputGrad). Per-step input
        x [T, B, N_in] runs on an engine that keeps dL/dI of every step: [T, B, N_1] more
        per chunk of samples on the first layer's tiles, built the first time it is asked
        for (`engine_builds` counts it)."""
        engine, x, labels, valid = self._prepare(x, y, input_grad=True)
        loss, grads, _, d_x = self._counted(engine.loss_and_input_grad, x, labels, valid)
        return float(loss), grads, (d_x[:valid] if d_x.ndim == 2 else d_x[:, :valid])

    def loss_grad_and_spikes(self, x, y):
        engine, x, labels, valid = self._prepare(x, y)
        loss, grads, spikes = self._counted(engine.loss_and_grad, x, labels, valid)
        return float(loss), grads, spikes[:, :valid]

    def infer(self, x):
        engine, x, _, valid = self._prepare(x)
        return engine.infer(x)[:, :valid]

    def get_params(self):
        return self._engine.get_params()

    def set_params(self, params):
        check_params(self.net, params)
        self._engine.set_params(self._as_float32(params))

    def optimizer_state(self) -> dict:
        """In popsnn.optim's state_dict format, so either backend can load it."""
        steps, first, second = self._engine.get_optimizer_state()
        name = self._spec["optimizer"]["name"]
        state = []
        if steps:
            for l, (f, s) in enumerate(zip(first, second)):
                for key in self.net.init_params(0)[l]:
                    if name == "sgd":
                        if key in f:
                            state.append([l, key, {"momentum_buffer": f[key]}])
                    else:
                        state.append(
                            [l, key, {"step": int(steps), "exp_avg": f[key], "exp_avg_sq": s[key]}]
                        )
        state.sort(key=lambda entry: (entry[0], entry[1]))  # popsnn.optim's order
        return {"name": name, "hyper": dict(self.optimizer.hyper), "state": state}

    def load_optimizer_state(self, state) -> None:
        """Checked in full (popsnn.optim's check_state_dict) before the engine is touched."""
        hyper, entries = self.optimizer.check_state_dict(state, param_shapes(self.net))
        layers = len(self.net)
        first = [dict() for _ in range(layers)]
        second = [dict() for _ in range(layers)]
        steps = 0
        for (l, key), s in entries.items():
            if "momentum_buffer" in s:
                first[l][key] = np.asarray(s["momentum_buffer"], np.float32)
                steps = max(steps, 1)
            elif "exp_avg" in s:
                first[l][key] = np.asarray(s["exp_avg"], np.float32)
                second[l][key] = np.asarray(s["exp_avg_sq"], np.float32)
                steps = max(steps, s["step"])
        if self._spec["optimizer"]["name"] == "sgd" and not self._spec["optimizer"]["momentum"]:
            steps = 0  # plain SGD has no state
        lr = check_learning_rate(hyper["lr"]) if "lr" in hyper else None
        self._engine.set_optimizer_state(steps, first, second)
        if lr is not None:  # as popsnn.optim's load_state_dict: the saved rate comes back too
            self.set_learning_rate(lr)

    def set_learning_rate(self, lr) -> None:
        """The optimiser's learning rate from the next step on: one float of device state
        per tile, written from the host -- no recompile (train.py's per-epoch decay uses it)."""
        lr = check_learning_rate(lr)
        self._engine.set_learning_rate(lr)
        # The other layout's engine gets it at the hand-over; engines built later start from it.
        self._spec["optimizer"]["lr"] = lr
        self.optimizer.hyper["lr"] = lr

    def profile(self) -> dict:
        """Wall-clock time of train steps here, each engine program's measured time on this
        CPU (`program{k}_*`), and the runtime's ESTIMATES of IPU cycles (labelled
        `estimate_*`; never measured on an IPU)."""
        out = {
            "device": self.device,
            "train_steps": self._train_steps,
            "train_seconds": self._seconds,
            "engine_builds": self.engine_builds,  # one per input layout used, never more
            "dtype": self._spec["dtype"],
        }
        if self.loss_scaler is not None:
            out["loss_scale"] = self.loss_scaler.scale
            out["skipped_steps"] = self.loss_scaler.skipped_steps
        out.update(self._engine.layout())
        out.update(self._engine.profile())
        out["estimate_summary"] = self._engine.profile_summary()
        return out
