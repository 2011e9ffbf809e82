"""The network description: snnTorch's names, popsnn's checks.

A network is a `Sequential` of (Linear, neuron) pairs, e.g.

    net = popsnn.Sequential(popsnn.Linear(784, 1000), popsnn.Leaky(beta=0.9),
                            popsnn.Linear(1000, 10), popsnn.Leaky(beta=0.9))

The description holds no weights: `net.init_params(seed)` makes them, as a
list with one dict of NumPy arrays per (Linear, neuron) pair. Every engine
(the dense NumPy reference, the cpu / ipu-model runtime, the IPU) takes the
same description and the same parameter layout:

    "weight"            [out, in]    PyTorch's nn.Linear layout
    "bias"              [out]        (absent when Linear(bias=False))
    "recurrent_weight"  [out, out]   RLeaky(all_to_all=True), V; [out] when one-to-one
    "recurrent_bias"    [out]        RLeaky(all_to_all=True) only, b_V
    "beta"              [] or [out]  learn_beta=True: the trained beta (one per layer or neuron)
    "threshold"         [] or [out]  learn_threshold=True: the trained threshold

A neuron constant given as a 1-D array (e.g. `Leaky(beta=np.array([...]))`) is per neuron,
as snnTorch takes a tensor; the layer keeps it as a tuple of floats (hashable, immutable).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import surrogate as _surrogate
from ._checks import finite_real, one_of, positive_int, positive_real, unit_interval
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


class Sequential:
    """A stack of (Linear, neuron) pairs; the last pair is the output layer."""

    def __init__(self, *layers):
        if len(layers) == 1 and isinstance(layers[0], (list, tuple)):
            layers = tuple(layers[0])
        if not layers or len(layers) % 2:
            raise ValueError(
                f"Sequential needs (Linear, neuron) pairs, got {len(layers)} "
                f"layer(s); e.g. Sequential(Linear(784, 10), Leaky(beta=0.9))"
            )
        pairs = []
        for i in range(0, len(layers), 2):
            lin, neuron = layers[i], layers[i + 1]
            if not isinstance(lin, Linear):
                raise TypeError(f"layer {i} must be popsnn.Linear, got {type(lin).__name__}")
            if not isinstance(neuron, NEURON_TYPES):
                raise TypeError(
                    f"layer {i + 1} must be Leaky, Synaptic, RLeaky, Lapicque or Alpha, got "
                    f"{type(neuron).__name__}"
                )
            for name, length in neuron.per_neuron_constants().items():
                if length != lin.out_features:
                    raise ValueError(
                        f"layer {i + 1} ({type(neuron).__name__}) has {length} {name} values, "
                        f"its Linear has {lin.out_features} neurons; give one per neuron"
                    )
            if pairs and pairs[-1][0].out_features != lin.in_features:
                raise ValueError(
                    f"layer {i} Linear.in_features={lin.in_features} does not match "
                    f"the previous Linear.out_features={pairs[-1][0].out_features}"
                )
            pairs.append((lin, neuron))
        self.pairs: tuple = tuple(pairs)

    @property
    def layers(self) -> tuple:
        return tuple(x for pair in self.pairs for x in pair)

    @property
    def num_inputs(self) -> int:
        return self.pairs[0][0].in_features

    @property
    def num_outputs(self) -> int:
        return self.pairs[-1][0].out_features

    def __len__(self) -> int:
        return len(self.pairs)

    def __repr__(self) -> str:
        inner = ",\n  ".join(repr(x) for x in self.layers)
        return f"Sequential(\n  {inner})"

    def init_params(self, seed: int | np.random.Generator | None = 0, dtype=np.float32) -> list:
        """Fresh parameters, uniform in +-1/sqrt(fan_in) as PyTorch's nn.Linear."""
        rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
        params = []
        for lin, neuron in self.pairs:
            bound = 1.0 / np.sqrt(lin.in_features)
            p = {"weight": rng.uniform(-bound, bound, (lin.out_features, lin.in_features))}
            if lin.bias:
                p["bias"] = rng.uniform(-bound, bound, lin.out_features)
            if isinstance(neuron, RLeaky):
                n = lin.out_features
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
