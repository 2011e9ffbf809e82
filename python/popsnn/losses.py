"""Losses on the output layer's spikes or membranes, with their gradients (docs/numerics.md).

Names and semantics are snnTorch's (`snntorch.functional`), checked against it
in tests/reference. Every loss takes `spikes` and `membranes` of shape
[T, B, C] (the one it does not use may be None) and integer `targets` [B],
averages over the batch, and returns a Python float; `loss.backward` returns
(dL/dspikes, dL/dmembranes), both [T, B, C], zeros for the unused one.

Population code (ce_count, mse_count, accuracy): C outputs for K = num_classes
classes, C % K == 0; class k owns the contiguous block [k*C/K, (k+1)*C/K) and
its count is the sum of the block's spikes over time.

Differences from snnTorch, on purpose:
* mse_membrane with off_target < 0 < on_target: snnTorch builds the target
  with clamp(one_hot * on, min=off), which turns a negative off target into 0;
  popsnn uses off_target as given (docs/numerics.md: "MSE(U[t], one-hot)" with on/off).
* ce_rate has no population code (snnTorch's is broken: it needs a weight).
* Class weights and reduction="none" are not supported.
"""

from __future__ import annotations

import numbers

import numpy as np

from ._checks import finite_real

__all__ = [
    "Loss",
    "ce_count_loss",
    "ce_rate_loss",
    "mse_count_loss",
    "mse_membrane_loss",
    "ce_max_membrane_loss",
    "accuracy",
    "get",
    "NAMES",
    "class_counts",
    "check_targets",
]


def _check_outputs(name, array) -> np.ndarray:
    if not isinstance(array, np.ndarray):
        array = np.asarray(array)
    if array.ndim != 3 or 0 in array.shape:
        raise ValueError(f"{name} must be a [T, B, C] array, got shape {array.shape}")
    if array.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers, got dtype {array.dtype}")
    if array.dtype.kind != "f":
        array = array.astype(np.float64)
    return array


def check_targets(targets, batch: int, num_classes: int) -> np.ndarray:
    """Integer class labels [B] in [0, num_classes)."""
    t = np.asarray(targets)
    if t.dtype.kind not in "iu":
        raise TypeError(
            f"targets must be integer class labels, got dtype {t.dtype}; "
            f"e.g. np.asarray(labels, dtype=np.int64)"
        )
    if t.shape != (batch,):
        raise ValueError(
            f"targets has shape {t.shape}, expected ({batch},): one label per sample of the batch"
        )
    if t.size and (t.min() < 0 or t.max() >= num_classes):
        bad = t[(t < 0) | (t >= num_classes)][0]
        raise ValueError(
            f"targets must lie in [0, {num_classes}), got label {bad}; the "
            f"output layer codes {num_classes} classes"
        )
    return t.astype(np.int64)


def _check_rate(name, value) -> float:
    value = finite_real(name, value)
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must lie in [0, 1], got {value}")
    return value


def _resolve_classes(num_classes, population_code, num_outputs) -> int:
    """K for C outputs: K = C without a population code."""
    if num_classes is None:
        if population_code:
            raise ValueError(
                "num_classes is required with population_code=True, got None; "
                "e.g. num_classes=10 for 10 classes"
            )
        return num_outputs
    if population_code:
        if num_outputs % num_classes:
            raise ValueError(
                f"population code: the output layer has {num_outputs} neurons, "
                f"which num_classes={num_classes} does not divide; use a width "
                f"that is a multiple of num_classes"
            )
        return num_classes
    if num_classes != num_outputs:
        raise ValueError(
            f"num_classes={num_classes} but the output layer has {num_outputs} "
            f"neurons; pass population_code=True to pool blocks of neurons"
        )
    return num_classes


def class_counts(spikes: np.ndarray, num_classes: int) -> np.ndarray:
    """[B, K]: spikes summed over time and over each class's block of C/K neurons."""
    T, B, C = spikes.shape
    return spikes.sum(axis=0).reshape(B, num_classes, C // num_classes).sum(axis=-1)


def _spread(d_counts: np.ndarray, shape) -> np.ndarray:
    """Gradient wrt spikes [T, B, C] of a function of class_counts."""
    T, B, C = shape
    per_neuron = np.repeat(d_counts, C // d_counts.shape[1], axis=1)
    return np.broadcast_to(per_neuron, shape).copy()


def _log_softmax(z: np.ndarray) -> np.ndarray:
    shifted = z - z.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def _cross_entropy(logits, targets):
    """Mean over the batch of -log softmax(logits)[target], and its gradient."""
    B = logits.shape[0]
    logp = _log_softmax(logits)
    rows = np.arange(B)
    value = -logp[rows, targets].sum() / B
    grad = np.exp(logp)
    grad[rows, targets] -= 1
    return value, grad / logits.dtype.type(B)


class Loss:
    """Base of the losses: `loss(spikes, membranes, targets)` and `loss.backward(...)`."""

    name: str = ""
    uses = "spikes"  # or "membranes": which record the loss reads

    def __init__(self, num_classes: int | None = None, population_code: bool = False):
        if not isinstance(population_code, bool):
            raise TypeError(f"population_code must be True or False, got {population_code!r}")
        if num_classes is not None and (
            not isinstance(num_classes, numbers.Integral)
            or isinstance(num_classes, bool)
            or num_classes <= 0
        ):
            raise ValueError(f"num_classes must be a positive integer or None, got {num_classes!r}")
        self.num_classes = None if num_classes is None else int(num_classes)
        self.population_code = population_code

    def _inputs(self, spikes, membranes, targets):
        if self.uses == "spikes":
            if spikes is None:
                raise ValueError(f"{self.name} needs spikes, got None")
            out = _check_outputs("spikes", spikes)
        else:
            if membranes is None:
                raise ValueError(f"{self.name} needs membranes, got None")
            out = _check_outputs("membranes", membranes)
        k = _resolve_classes(self.num_classes, self.population_code, out.shape[2])
        return out, check_targets(targets, out.shape[1], k), k

    def __call__(self, spikes, membranes, targets) -> float:
        out, t, k = self._inputs(spikes, membranes, targets)
        return float(self._value_and_grad(out, t, k)[0])

    def backward(self, spikes, membranes, targets):
        """(dL/dspikes, dL/dmembranes), each [T, B, C]."""
        out, t, k = self._inputs(spikes, membranes, targets)
        grad = self._value_and_grad(out, t, k)[1]
        zeros = np.zeros_like(grad)
        return (grad, zeros) if self.uses == "spikes" else (zeros, grad)

    def _value_and_grad(self, out, targets, num_classes):
        raise NotImplementedError

    def __repr__(self):
        return f"popsnn.losses.{self.name}_loss({self._describe()})"

    def _describe(self):
        if self.population_code:
            return f"population_code=True, num_classes={self.num_classes}"
        return "" if self.num_classes is None else f"num_classes={self.num_classes}"


class ce_count_loss(Loss):
    """Cross-entropy of the (class) spike counts sum_t S[t] taken as logits."""

    name = "ce_count"

    def __init__(self, population_code: bool = False, num_classes: int | None = None):
        super().__init__(num_classes, population_code)

    def _value_and_grad(self, spikes, targets, k):
        value, d_counts = _cross_entropy(class_counts(spikes, k), targets)
        return value, _spread(d_counts, spikes.shape)


class ce_rate_loss(Loss):
    """(1/T) sum_t CE(S[t], y): the cross-entropy of each step's spikes, averaged over time."""

    name = "ce_rate"

    def __init__(self):
        super().__init__(None, False)

    def _value_and_grad(self, spikes, targets, k):
        T, B, C = spikes.shape
        logits = spikes.reshape(T * B, C)
        value, grad = _cross_entropy(logits, np.tile(targets, T))
        # _cross_entropy averaged over T*B rows: exactly (1/T) sum_t mean_b.
        return value, grad.reshape(T, B, C)


class mse_count_loss(Loss):
    """mean((count - target)^2) / T with targets int(T*correct_rate) and int(T*incorrect_rate)
    spikes (times C/K with a population code, as snnTorch), mean over batch and classes."""

    name = "mse_count"

    def __init__(
        self,
        correct_rate: float = 1.0,
        incorrect_rate: float = 0.0,
        population_code: bool = False,
        num_classes: int | None = None,
    ):
        super().__init__(num_classes, population_code)
        self.correct_rate = _check_rate("correct_rate", correct_rate)
        self.incorrect_rate = _check_rate("incorrect_rate", incorrect_rate)

    def _value_and_grad(self, spikes, targets, k):
        T, B, C = spikes.shape
        per_class = C / k if self.population_code else 1
        # int() truncates, in snnTorch's order of operations.
        on = int(T * self.correct_rate * per_class)
        off = int(T * self.incorrect_rate * per_class)
        target = np.full((B, k), off, dtype=spikes.dtype)
        target[np.arange(B), targets] = on
        diff = class_counts(spikes, k) - target
        value = (diff**2).mean() / T
        d_counts = diff * spikes.dtype.type(2.0 / (B * k * T))
        return value, _spread(d_counts, spikes.shape)

    def _describe(self):
        rates = f"correct_rate={self.correct_rate}, incorrect_rate={self.incorrect_rate}"
        rest = super()._describe()
        return f"{rates}, {rest}" if rest else rates


class mse_membrane_loss(Loss):
    """(1/T) sum_t mean((U[t] - target)^2), target on_target for the label, off_target else."""

    name = "mse_membrane"
    uses = "membranes"

    def __init__(self, on_target: float = 1.0, off_target: float = 0.0):
        super().__init__(None, False)
        self.on_target = finite_real("on_target", on_target)
        self.off_target = finite_real("off_target", off_target)

    def _value_and_grad(self, membranes, targets, k):
        T, B, C = membranes.shape
        target = np.full((B, C), self.off_target, dtype=membranes.dtype)
        target[np.arange(B), targets] = self.on_target
        diff = membranes - target
        value = (diff**2).mean()  # = (1/T) sum_t mean over (B, C)
        return value, diff * membranes.dtype.type(2.0 / diff.size)

    def _describe(self):
        return f"on_target={self.on_target}, off_target={self.off_target}"


class ce_max_membrane_loss(Loss):
    """CE(max_t U[t], y); the gradient goes to the first step that attains the max."""

    name = "ce_max_membrane"
    uses = "membranes"

    def __init__(self):
        super().__init__(None, False)

    def _value_and_grad(self, membranes, targets, k):
        first_max = membranes.argmax(axis=0)  # [B, C]
        peak = np.take_along_axis(membranes, first_max[None], axis=0)[0]
        value, d_peak = _cross_entropy(peak, targets)
        grad = np.zeros_like(membranes)
        np.put_along_axis(grad, first_max[None], d_peak[None], axis=0)
        return value, grad


_CONSTRUCTORS = {
    "ce_count": ce_count_loss,
    "ce_rate": ce_rate_loss,
    "mse_count": mse_count_loss,
    "mse_membrane": mse_membrane_loss,
    "ce_max_membrane": ce_max_membrane_loss,
}
NAMES = tuple(_CONSTRUCTORS)


def get(name, **kwargs) -> Loss:
    """A loss by name ("ce_count", "ce_rate", "mse_count", "mse_membrane", "ce_max_membrane";
    snnTorch's "..._loss" spellings work too), built with kwargs."""
    if isinstance(name, Loss):
        if kwargs:
            raise ValueError(
                f"got a loss object {name!r} and keyword arguments {kwargs}; pass one or the other"
            )
        return name
    key = name[:-5] if isinstance(name, str) and name.endswith("_loss") else name
    if key not in _CONSTRUCTORS:
        raise ValueError(f"unknown loss {name!r}; expected one of {list(NAMES)}")
    return _CONSTRUCTORS[key](**kwargs)


def accuracy(spikes, targets, num_classes: int | None = None) -> float:
    """Fraction of samples whose (class) spike count is highest for the label.

    Ties go to the lowest class index. num_classes below the number of outputs
    means a population code.
    """
    spikes = _check_outputs("spikes", spikes)
    C = spikes.shape[2]
    k = _resolve_classes(num_classes, num_classes is not None and num_classes != C, C)
    t = check_targets(targets, spikes.shape[1], k)
    return float(np.mean(class_counts(spikes, k).argmax(axis=1) == t))
