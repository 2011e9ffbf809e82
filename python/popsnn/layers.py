"""The network description: snnTorch's names, popsnn's checks.

A network is a `Sequential` of stages, each one weighted layer (Linear or Conv2d, with any
pooling / Flatten around it, popsnn.conv) and a spiking neuron, e.g.

    net = popsnn.Sequential(popsnn.Linear(784, 1000), popsnn.Leaky(beta=0.9),
                            popsnn.Linear(1000, 10), popsnn.Leaky(beta=0.9))

The description holds no weights: `net.init_params(seed)` makes them, as a
list with one dict of NumPy arrays per stage. Every engine
(the dense NumPy reference, the cpu / ipu-model runtime, the IPU) takes the
same description and the same parameter layout:

    "weight"            [out, in]    PyTorch's nn.Linear layout; [C_out, C_in, kH, kW] (Conv2d)
    "bias"              [out]        [C_out] for Conv2d (absent when bias=False)
    "recurrent_weight"  [out, out]   RLeaky(all_to_all=True), V; [out] when one-to-one
    "recurrent_bias"    [out]        RLeaky(all_to_all=True) only, b_V
    "beta"              [] or [out]  learn_beta=True: the trained beta (one per layer or neuron)
    "threshold"         [] or [out]  learn_threshold=True: the trained threshold

A neuron constant given as a 1-D array (e.g. `Leaky(beta=np.array([...]))`) is per neuron,
as snnTorch takes a tensor; the layer keeps it as a tuple of floats (hashable, immutable).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

import numpy as np

from . import surrogate as _surrogate
from ._checks import finite_real, one_of, positive_int, positive_real, unit_interval
from .conv import SHAPE_LAYERS, Conv2d
from .defaults import NEURON
from .sparse import SparseRule

RESET_MECHANISMS = ("subtract", "zero", "none")


@dataclass(frozen=True)
class Linear:
    """A dense layer `I = x @ weight.T + bias`, initialised like PyTorch's nn.Linear."""

    in_features: int
    out_features: int
    bias: bool = NEURON["bias"]

    def __post_init__(self):
        positive_int("in_features", self.in_features)
        positive_int("out_features", self.out_features)


def per_neuron(name: str, value, check):
    """A neuron constant: a float (one per layer) or, from a 1-D array, a tuple of floats
    (one per neuron), each passed through `check(name, float)`."""
    if np.ndim(value) == 0:
        return check(name, value.item() if hasattr(value, "item") else value)
    array = np.asarray(value)
    if array.ndim != 1 or array.size == 0 or array.dtype.kind not in "iuf":
        raise ValueError(
            f"{name} must be a number or a 1-D array with one real value per neuron, got "
            f"shape {array.shape} dtype {array.dtype}"
        )
    return tuple(check(f"{name}[{i}]", float(v)) for i, v in enumerate(array))


def _threshold(name: str, value) -> float:
    value = finite_real(name, value)
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    return value


def _flag(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value


@dataclass(frozen=True, kw_only=True)
class _Neuron:
    threshold: float | tuple = NEURON["threshold"]
    learn_threshold: bool = False
    # snnTorch's winner-take-all option; refused until popsnn supports it (an error, not a drop).
    inhibition: bool = False
    reset_mechanism: str = NEURON["reset_mechanism"]
    # snnTorch's default, so the same network means the same gradients in both libraries.
    surrogate: _surrogate.Surrogate = field(
        default_factory=lambda: _surrogate.get(NEURON["surrogate"])
    )
    sparse: SparseRule | None = None

    def _check_common(self):
        object.__setattr__(self, "threshold", per_neuron("threshold", self.threshold, _threshold))
        _flag("learn_threshold", self.learn_threshold)
        if _flag("inhibition", self.inhibition):
            raise ValueError(
                "inhibition=True (winner-take-all firing) is not supported by popsnn yet; "
                "build the layer with inhibition=False"
            )
        one_of("reset_mechanism", self.reset_mechanism, RESET_MECHANISMS)
        object.__setattr__(self, "surrogate", _surrogate.get(self.surrogate))
        if self.sparse is not None and not isinstance(self.sparse, SparseRule):
            raise TypeError(
                f"sparse must be None, popsnn.sparse.window(b_th) or "
                f"popsnn.sparse.one_sided(theta_grad), got {self.sparse!r}"
            )
        if (
            self.sparse is not None
            and self.sparse.kind == "one_sided"
            and self.sparse.value >= np.min(self.threshold)
        ):
            raise ValueError(
                f"one_sided theta_grad must be below the threshold "
                f"({np.min(self.threshold)}), got {self.sparse.value}; e.g. 0.9 * threshold"
            )

    @classmethod
    def constants(cls) -> tuple:
        """The names of the model's own constructor arguments (beside the common threshold,
        reset, surrogate, sparse rule and learn flags): ("beta",) for Leaky, ("alpha",
        "beta") for Synaptic and Alpha. The edges (interop, checkpoints) carry them by name."""
        common = {f.name for f in fields(_Neuron)} | {"learn_beta"}
        return tuple(f.name for f in fields(cls) if f.init and f.name not in common)

    def per_neuron_constants(self) -> dict:
        """{name: length} of the constants given one per neuron."""
        return {
            name: len(getattr(self, name))
            for name in ("alpha", "beta", "threshold")
            if isinstance(getattr(self, name, None), tuple)
        }

    def learned(self) -> tuple:
        """The names of the constants trained as parameters ("beta", "threshold")."""
        flags = (("beta", "learn_beta"), ("threshold", "learn_threshold"))
        return tuple(name for name, flag in flags if getattr(self, flag, False))


@dataclass(frozen=True)
class Leaky(_Neuron):
    """LIF neuron: U[t] = beta*U[t-1] + I[t] - R[t]*threshold (reset 'subtract').

    beta and threshold: one value or one per neuron; learn_beta / learn_threshold train them
    (kept in the parameters, beta clamped to [0, 1] where it is used, as snnTorch)."""

    beta: float | tuple
    learn_beta: bool = False

    def __post_init__(self):
        object.__setattr__(self, "beta", per_neuron("beta", self.beta, unit_interval))
        _flag("learn_beta", self.learn_beta)
        self._check_common()


@dataclass(frozen=True)
class Synaptic(_Neuron):
    """Current-based LIF: J[t] = alpha*J[t-1] + I[t]; U[t] = beta*U[t-1] + J[t] - R[t]*threshold."""

    alpha: float | tuple
    beta: float | tuple
    learn_beta: bool = False

    def __post_init__(self):
        object.__setattr__(self, "alpha", per_neuron("alpha", self.alpha, unit_interval))
        object.__setattr__(self, "beta", per_neuron("beta", self.beta, unit_interval))
        _flag("learn_beta", self.learn_beta)
        self._check_common()


@dataclass(frozen=True)
class RLeaky(_Neuron):
    """Recurrent LIF: U[t] = beta*U[t-1] + I[t] + V(S[t-1]) - R[t]*threshold.

    all_to_all=True: V is an N x N linear map with bias; False: one weight per neuron.
    """

    beta: float | tuple
    all_to_all: bool = NEURON["all_to_all"]
    learn_beta: bool = False

    def __post_init__(self):
        object.__setattr__(self, "beta", per_neuron("beta", self.beta, unit_interval))
        _flag("all_to_all", self.all_to_all)
        _flag("learn_beta", self.learn_beta)
        self._check_common()


@dataclass(frozen=True)
class Lapicque(_Neuron):
    """snnTorch's Lapicque RC neuron, stepped as snnTorch steps it (forward Euler, step dt):
    U[t] = (1 - dt/(R*C))*U[t-1] + (dt/C)*I[t] - R[t]*threshold.

    Give beta (then R = 1 and C = time_step / ln(1/beta)), or R and C, or beta with one of R
    and C (the other is derived), as snnTorch does. `decay` and `gain` are the two constants
    the update uses; the Euler step must not overshoot: time_step <= R*C.
    """

    beta: float | None = None
    R: float | None = None
    C: float | None = None
    time_step: float = 1.0

    def __post_init__(self):
        self._check_common()
        for name in ("beta", "R", "C", "time_step"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, positive_real(name, getattr(self, name)))
        given = tuple(getattr(self, n) is not None for n in ("beta", "R", "C"))
        if given not in (
            (True, False, False),
            (False, True, True),
            (True, True, False),
            (True, False, True),
        ):
            raise ValueError(
                "Lapicque needs beta, or R and C, or beta with one of R and C "
                f"(as snnTorch's), got beta={self.beta}, R={self.R}, C={self.C}"
            )
        if self.beta is not None and self.beta >= 1:
            raise ValueError(f"Lapicque beta must lie in (0, 1), got {self.beta}")
        R, C = self.resistance_capacitance()
        if self.time_step > R * C:
            raise ValueError(
                f"Lapicque time_step/(R*C) = {self.time_step / (R * C):.4g} > 1 overshoots "
                f"(the decay 1 - time_step/(R*C) turns negative); use a smaller time_step, a "
                f"larger R*C, or beta >= 1/e"
            )

    def resistance_capacitance(self) -> tuple:
        """(R, C) as snnTorch's Lapicque derives them from what was given."""
        if self.beta is None:
            return float(self.R), float(self.C)
        log_inv_beta = float(np.log(1.0 / self.beta))
        if self.C is None:
            R = 1.0 if self.R is None else float(self.R)
            return R, self.time_step / (R * log_inv_beta)
        return self.time_step / (self.C * log_inv_beta), float(self.C)

    @property
    def decay(self) -> float:
        """1 - dt/(R*C): the factor on U[t-1]."""
        R, C = self.resistance_capacitance()
        return 1.0 - self.time_step / (R * C)

    @property
    def gain(self) -> float:
        """dt/C: the factor on the input current I[t]."""
        return self.time_step / self.resistance_capacitance()[1]


@dataclass(frozen=True)
class Alpha(_Neuron):
    """snnTorch's Alpha neuron: two synaptic currents, excitatory E (decay alpha) and
    inhibitory H (decay beta), fed the same input with opposite signs; the membrane is
    their sum scaled by tau_alpha = ln(alpha)/(ln(beta) - ln(alpha)) + 1:

        E[t] = alpha*E[t-1] + I[t],  H[t] = beta*H[t-1] - I[t],  U[t] = tau_alpha*(E[t] + H[t])

    Resets as snnTorch's (default "zero", snnTorch's default for Alpha): zero multiplies all
    three by 1 - R[t]; subtract takes threshold off E, zeroes H and adds R[t]*H[t-1] to U.
    Needs 0 < beta < alpha <= 1 (snnTorch: alpha > beta, beta != 1), one value or one per
    neuron. learn_beta / learn_threshold train them (beta then moves tau_alpha too, as in
    snnTorch); a trained alpha is not supported.
    """

    alpha: float | tuple
    beta: float | tuple
    learn_beta: bool = False
    reset_mechanism: str = field(default="zero", kw_only=True)

    def __post_init__(self):
        object.__setattr__(self, "alpha", per_neuron("alpha", self.alpha, unit_interval))
        object.__setattr__(self, "beta", per_neuron("beta", self.beta, unit_interval))
        _flag("learn_beta", self.learn_beta)
        self._check_common()
        alpha, beta = np.asarray(self.alpha), np.asarray(self.beta)
        if np.any(beta <= 0) or np.any(alpha <= beta):
            raise ValueError(
                f"Alpha needs 0 < beta < alpha <= 1 (snnTorch: alpha must be greater than "
                f"beta), got alpha={self.alpha}, beta={self.beta}"
            )

    @property
    def tau_alpha(self):
        """ln(alpha)/(ln(beta) - ln(alpha)) + 1: the factor from E + H to the membrane."""
        log_a, log_b = np.log(self.alpha), np.log(self.beta)
        return log_a / (log_b - log_a) + 1.0


Neuron = Leaky | Synaptic | RLeaky | Lapicque | Alpha
NEURON_TYPES = (Leaky, Synaptic, RLeaky, Lapicque, Alpha)
# What `popsnn` exports from here (its __init__ takes this list): the layers a network is made of.
__all__ = ["Linear", "Sequential", "Leaky", "Synaptic", "RLeaky", "Lapicque", "Alpha"]


@dataclass(frozen=True)
class Stage:
    """One neuron layer and the stateless layers that feed it since the previous neuron:
    `ops` hold exactly one weighted layer (Linear or Conv2d) and any Flatten / pooling
    before or after it. `in_shape` is the per-sample shape the stage takes, `out_shape` its
    neurons' (C, H, W) or (N,); engines and the reference keep a stage's state flat, [.., N]
    with N = prod(out_shape) in row-major order (torch.nn.Flatten's)."""

    ops: tuple
    neuron: Neuron
    in_shape: tuple
    out_shape: tuple

    @property
    def synapse(self):
        """The stage's weighted layer (Linear or Conv2d)."""
        return next(op for op in self.ops if isinstance(op, (Linear, Conv2d)))

    @property
    def num_neurons(self) -> int:
        return int(np.prod(self.out_shape))

    @property
    def num_inputs(self) -> int:
        return int(np.prod(self.in_shape))

    @property
    def is_linear(self) -> bool:
        """A plain (Linear, neuron) pair, the only kind the engines run for now."""
        return len(self.ops) == 1 and isinstance(self.ops[0], Linear)


def _check_input_shape(input_shape) -> tuple:
    shape = tuple(input_shape) if isinstance(input_shape, (tuple, list)) else (input_shape,)
    if len(shape) not in (1, 3):
        raise ValueError(f"input_shape must be (N,) or (C, H, W), got {input_shape!r}")
    for n in shape:
        positive_int("input_shape entries", n)
    return shape


def _next_shape(i: int, layer, shape: tuple) -> tuple:
    """The per-sample shape after layer i, or a one-line error naming layer i."""
    if isinstance(layer, Linear):
        if len(shape) != 1:
            raise ValueError(
                f"layer {i} Linear gets the previous layer's [C, H, W] output {shape}; "
                f"put popsnn.Flatten() before it"
            )
        if shape[0] != layer.in_features:
            raise ValueError(
                f"layer {i} Linear.in_features={layer.in_features} does not match "
                f"the previous layer's {shape[0]} outputs"
            )
        return (layer.out_features,)
    if isinstance(layer, (Conv2d, *SHAPE_LAYERS)):
        try:
            return layer.output_shape(shape)
        except ValueError as err:
            raise ValueError(f"layer {i}: {err}") from None
    raise TypeError(
        f"layer {i} must be Linear, Conv2d, MaxPool2d, AvgPool2d, Flatten or a neuron "
        f"(Leaky, Synaptic, RLeaky, Lapicque, Alpha), got {type(layer).__name__}"
    )


def _build_stages(layers: tuple, input_shape) -> tuple:
    if not layers:
        raise ValueError(
            "Sequential needs at least one stage, e.g. Sequential(Linear(784, 10), Leaky(beta=0.9))"
        )
    if input_shape is None:
        if not isinstance(layers[0], Linear):
            first = type(layers[0]).__name__
            raise ValueError(
                f"Sequential starting with {first} needs input_shape, e.g. "
                f"Sequential(..., input_shape=(1, 28, 28)) for [B, 1, 28, 28] input"
            )
        input_shape = (layers[0].in_features,)
    shape = stage_in = _check_input_shape(input_shape)
    stages, ops = [], []
    for i, layer in enumerate(layers):
        if not isinstance(layer, NEURON_TYPES):
            shape = _next_shape(i, layer, shape)
            ops.append(layer)
            continue
        weighted = sum(isinstance(op, (Linear, Conv2d)) for op in ops)
        if weighted != 1:
            raise ValueError(
                f"layer {i} ({type(layer).__name__}) needs exactly one Linear or Conv2d "
                f"since the previous neuron, got {weighted}; e.g. Linear(784, 10), "
                f"Leaky(beta=0.9)"
            )
        if isinstance(layer, RLeaky) and len(shape) != 1:
            raise ValueError(
                f"layer {i}: RLeaky after a convolution is not supported (its recurrence "
                f"would be dense over C*H*W); use Leaky or Synaptic there"
            )
        n = int(np.prod(shape))
        weighted_layer = next(type(op).__name__ for op in ops if isinstance(op, (Linear, Conv2d)))
        for name, length in layer.per_neuron_constants().items():
            if length != n:
                raise ValueError(
                    f"layer {i} ({type(layer).__name__}) has {length} {name} values, "
                    f"its {weighted_layer} has {n} neurons; give one per neuron"
                )
        stages.append(Stage(tuple(ops), layer, stage_in, shape))
        ops, stage_in = [], shape
    if ops or not stages:
        raise ValueError(
            f"the network must end with a spiking neuron (Leaky, Synaptic, RLeaky or "
            f"Lapicque); got {len(ops)} layer(s) after the last one"
        )
    return tuple(stages)


class Sequential:
    """Layers in order, grouped into stages (one weighted layer, then a neuron); the last
    stage is the output layer. Networks that start with a Conv2d or pooling layer take
    `input_shape=(C, H, W)`; a network of (Linear, neuron) pairs infers it."""

    def __init__(self, *layers, input_shape=None):
        if len(layers) == 1 and isinstance(layers[0], (list, tuple)):
            layers = tuple(layers[0])
        self.stages: tuple = _build_stages(layers, input_shape)
        self.input_shape: tuple = self.stages[0].in_shape

    @property
    def is_linear(self) -> bool:
        """Only (Linear, neuron) pairs: no convolution, pooling or Flatten."""
        return all(stage.is_linear for stage in self.stages)

    @property
    def pairs(self) -> tuple:
        """(Linear, neuron) per stage, for the code paths that run linear networks only."""
        if not self.is_linear:
            raise ValueError(
                "this network has Conv2d / pooling / Flatten layers, which this linear-layer "
                "path does not run; use popsnn.Model(net, ...), which picks the convolutional "
                "engine backend or the reference"
            )
        return tuple((stage.ops[0], stage.neuron) for stage in self.stages)

    @property
    def layers(self) -> tuple:
        return tuple(x for stage in self.stages for x in (*stage.ops, stage.neuron))

    @property
    def num_inputs(self) -> int:
        return self.stages[0].num_inputs

    @property
    def num_outputs(self) -> int:
        return self.stages[-1].num_neurons

    def __len__(self) -> int:
        return len(self.stages)

    def __repr__(self) -> str:
        inner = ",\n  ".join(repr(x) for x in self.layers)
        shape = "" if self.is_linear else f",\n  input_shape={self.input_shape}"
        return f"Sequential(\n  {inner}{shape})"

    def init_params(self, seed: int | np.random.Generator | None = 0, dtype=np.float32) -> list:
        """Fresh parameters, uniform in +-1/sqrt(fan_in) as PyTorch's nn.Linear / nn.Conv2d."""
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        params = []
        for stage in self.stages:
            syn, neuron = stage.synapse, stage.neuron
            if isinstance(syn, Conv2d):
                bound = 1.0 / np.sqrt(syn.fan_in)
                p = {"weight": rng.uniform(-bound, bound, syn.weight_shape())}
                if syn.bias:
                    p["bias"] = rng.uniform(-bound, bound, syn.out_channels)
                for name in neuron.learned():  # starts at the layer's value, as snnTorch's
                    p[name] = np.array(getattr(neuron, name), dtype=np.float64)
                params.append({k: v.astype(dtype) for k, v in p.items()})
                continue
            bound = 1.0 / np.sqrt(syn.in_features)
            p = {"weight": rng.uniform(-bound, bound, (syn.out_features, syn.in_features))}
            if syn.bias:
                p["bias"] = rng.uniform(-bound, bound, syn.out_features)
            if isinstance(neuron, RLeaky):
                n = syn.out_features
                if neuron.all_to_all:
                    rb = 1.0 / np.sqrt(n)
                    p["recurrent_weight"] = rng.uniform(-rb, rb, (n, n))
                    p["recurrent_bias"] = rng.uniform(-rb, rb, n)
                else:
                    # snnTorch's default one-to-one V is 1.0 for every neuron.
                    p["recurrent_weight"] = np.ones(n)
            for name in neuron.learned():  # starts at the layer's value, as snnTorch's
                p[name] = np.array(getattr(neuron, name), dtype=np.float64)
            params.append({k: v.astype(dtype) for k, v in p.items()})
        return params
