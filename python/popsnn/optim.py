"""Optimisers with PyTorch's update formulas and defaults, in NumPy (docs/numerics.md).

`opt.step(params, grads)` updates `params` (a list of dicts of arrays, the
layout of `Sequential.init_params`) in place. State is kept per (layer, name)
and is plain NumPy arrays and numbers, so `state_dict()` can be saved with
np.savez or pickle. Arithmetic runs in each parameter's dtype, in
PyTorch's order of operations (for float32 runs that track torch closely).
"""

from __future__ import annotations

import copy
import numbers

import numpy as np

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "get", "NAMES"]


def _nonneg(name, value) -> float:
    if (
        not isinstance(value, numbers.Real)
        or isinstance(value, bool)
        or not np.isfinite(value)
        or value < 0
    ):
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def _beta(name, value) -> float:
    value = _nonneg(name, value)
    if value >= 1:
        raise ValueError(f"{name} must lie in [0, 1), got {value}")
    return value


class Optimizer:
    """Base: hyperparameters in `self.hyper`, state per (layer index, parameter name)."""

    name = ""

    def __init__(self, **hyper):
        self.hyper = hyper
        self.state: dict = {}  # (layer, key) -> {name: array or number}

    def step(self, params, grads) -> None:
        """Update params in place from grads (same structure)."""
        self._check(params, grads)
        for l, (p, g) in enumerate(zip(params, grads)):
            for key in p:
                if p[key].dtype.kind != "f":
                    raise TypeError(
                        f"params[{l}][{key!r}] must be a float array to update in "
                        f"place, got dtype {p[key].dtype}"
                    )
                grad = np.asarray(g[key], dtype=p[key].dtype)
                self._update(p[key], grad, self.state.setdefault((l, key), {}))

    def _update(self, param, grad, state):
        raise NotImplementedError

    @staticmethod
    def _check(params, grads):
        if not isinstance(params, (list, tuple)) or not isinstance(grads, (list, tuple)):
            raise TypeError(
                f"params and grads must be lists of dicts of arrays, got "
                f"{type(params).__name__} and {type(grads).__name__}"
            )
        if len(params) != len(grads):
            raise ValueError(f"grads has {len(grads)} layer dict(s), params has {len(params)}")
        for l, (p, g) in enumerate(zip(params, grads)):
            if set(p) != set(g):
                raise ValueError(
                    f"grads[{l}] has keys {sorted(g)}, params[{l}] has {sorted(p)}; they must match"
                )
            for key in p:
                if np.shape(g[key]) != np.shape(p[key]):
                    raise ValueError(
                        f"grads[{l}][{key!r}] has shape {np.shape(g[key])}, "
                        f"params[{l}][{key!r}] has {np.shape(p[key])}"
                    )
                if not isinstance(p[key], np.ndarray):
                    raise TypeError(
                        f"params[{l}][{key!r}] must be a NumPy array (updated in "
                        f"place), got {type(p[key]).__name__}"
                    )

    def state_dict(self) -> dict:
        """{"name", "hyper", "state": [[layer, key, {name: value}], ...]} (copies)."""
        return {
            "name": self.name,
            "hyper": dict(self.hyper),
            "state": [[l, k, copy.deepcopy(s)] for (l, k), s in sorted(self.state.items())],
        }

    # The per-parameter state of each optimiser: array fields (parameter-shaped) and counts.
    _STATE_ARRAYS: tuple = ()
    _STATE_COUNTS: tuple = ()

    def check_state_dict(self, d, shapes=None) -> tuple:
        """Validate a `state_dict()` fully, changing nothing: returns (hyper, state) ready to
        commit. `shapes`: the parameters' {name: shape} per layer (param_shapes(net)); with
        it, every entry's layer, name and array shapes are checked too."""
        if not isinstance(d, dict) or d.get("name") != self.name:
            got = d.get("name") if isinstance(d, dict) else type(d).__name__
            raise ValueError(f"state_dict is for optimiser {got!r}, this one is {self.name!r}")
        hyper, entries = d.get("hyper"), d.get("state")
        if not isinstance(hyper, dict) or not isinstance(entries, (list, tuple)):
            raise ValueError(
                "optimizer state needs a 'hyper' dict and a 'state' list, as "
                "state_dict() writes them"
            )
        try:
            type(self)(**hyper)  # validates the hyperparameters
        except TypeError as err:
            raise ValueError(f"optimizer state has bad hyperparameters: {err}") from None
        state = {}
        for i, entry in enumerate(entries):
            where = f"optimizer state entry {i}"
            if (
                not isinstance(entry, (list, tuple))
                or len(entry) != 3
                or not isinstance(entry[2], dict)
            ):
                raise ValueError(
                    f"{where} must be [layer, name, {{field: value}}], got {type(entry).__name__}"
                )
            layer, key, fields = entry
            if (
                isinstance(layer, bool)
                or not isinstance(layer, numbers.Integral)
                or not isinstance(key, str)
                or (int(layer), key) in state
            ):
                raise ValueError(
                    f"{where}: ({layer!r}, {key!r}) is not a new (layer index, parameter name) pair"
                )
            shape = None
            if shapes is not None:
                if not 0 <= layer < len(shapes) or key not in shapes[layer]:
                    raise ValueError(
                        f"{where}: the network has no parameter {key!r} in "
                        f"layer {layer}; the state is for another network"
                    )
                shape = tuple(shapes[layer][key])
            state[(int(layer), key)] = self._check_fields(where, fields, shape)
        if shapes is not None and state:
            # After any step every parameter has state (one step count for all of them).
            missing = [(l, k) for l, s in enumerate(shapes) for k in s if (l, k) not in state]
            if missing:
                raise ValueError(
                    f"optimizer state has no entry for parameter(s) {missing}; "
                    f"the state is incomplete or for another network"
                )
        return dict(hyper), state

    def _check_fields(self, where, fields, shape) -> dict:
        allowed = set(self._STATE_ARRAYS) | set(self._STATE_COUNTS)
        if set(fields) - allowed or (fields and set(fields) != allowed and self._STATE_COUNTS):
            raise ValueError(
                f"{where} has fields {sorted(fields)}, {self.name} keeps {sorted(allowed)}"
            )
        out = {}
        for name in self._STATE_COUNTS:
            if name in fields:
                v = fields[name]
                if (
                    isinstance(v, bool)
                    or not isinstance(v, numbers.Integral)
                    or not 1 <= v <= 2**31 - 1
                ):
                    raise ValueError(f"{where}: {name} must be an integer in [1, 2^31), got {v!r}")
                out[name] = int(v)
        for name in self._STATE_ARRAYS:
            if name not in fields:
                continue
            a = fields[name]
            if (
                not isinstance(a, np.ndarray)
                or a.dtype.kind != "f"
                or (shape is not None and a.shape != shape)
            ):
                got = f"{a.dtype} {a.shape}" if isinstance(a, np.ndarray) else type(a).__name__
                raise ValueError(
                    f"{where}: {name} must be a float array of shape "
                    f"{shape if shape is not None else 'the parameter'}, got {got}"
                )
            if not np.all(np.isfinite(a)) or (name == "exp_avg_sq" and np.any(a < 0)):
                raise ValueError(
                    f"{where}: {name} holds NaN, inf or (for exp_avg_sq) negative "
                    f"values; the state is damaged"
                )
            out[name] = a.copy()
        return out

    def load_state_dict(self, d: dict, shapes=None) -> None:
        """Load a `state_dict()`: everything is checked first (`check_state_dict`), so a bad
        state raises and leaves this optimiser as it was."""
        self.hyper, self.state = self.check_state_dict(d, shapes)

    def __repr__(self):
        args = ", ".join(f"{k}={v}" for k, v in self.hyper.items())
        return f"popsnn.optim.{type(self).__name__}({args})"


class SGD(Optimizer):
    """torch.optim.SGD: g += wd*p; buf = momentum*buf + (1-dampening)*g (buf = g at the
    first step); g = g + momentum*buf (nesterov) or buf; p -= lr*g."""

    name = "sgd"
    _STATE_ARRAYS = ("momentum_buffer",)

    def __init__(self, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
        lr, momentum = _nonneg("lr", lr), _nonneg("momentum", momentum)
        dampening, weight_decay = (
            _nonneg("dampening", dampening),
            _nonneg("weight_decay", weight_decay),
        )
        if not isinstance(nesterov, bool):
            raise TypeError(f"nesterov must be True or False, got {nesterov!r}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError(
                f"nesterov=True needs momentum > 0 and dampening = 0, got "
                f"momentum={momentum}, dampening={dampening}"
            )
        super().__init__(
            lr=lr,
            momentum=momentum,
            dampening=dampening,
            weight_decay=weight_decay,
            nesterov=nesterov,
        )

    def _update(self, param, grad, state):
        h = self.hyper
        f = param.dtype.type
        if h["weight_decay"]:
            grad = grad + f(h["weight_decay"]) * param
        if h["momentum"]:
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = grad.copy()
            else:
                buf *= f(h["momentum"])
                buf += f(1 - h["dampening"]) * grad
            state["momentum_buffer"] = buf
            grad = grad + f(h["momentum"]) * buf if h["nesterov"] else buf
        param -= f(h["lr"]) * grad


class Adam(Optimizer):
    """torch.optim.Adam (amsgrad=False); weight_decay is L2 added to the gradient."""

    name = "adam"
    _decoupled = False
    _STATE_ARRAYS = ("exp_avg", "exp_avg_sq")
    _STATE_COUNTS = ("step",)

    def __init__(self, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        lr, eps = _nonneg("lr", lr), _nonneg("eps", eps)
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise ValueError(f"betas must be a pair (beta1, beta2), got {betas!r}")
        betas = (_beta("betas[0]", betas[0]), _beta("betas[1]", betas[1]))
        super().__init__(
            lr=lr, betas=betas, eps=eps, weight_decay=_nonneg("weight_decay", weight_decay)
        )

    def _update(self, param, grad, state):
        h = self.hyper
        f = param.dtype.type
        lr, wd = h["lr"], h["weight_decay"]
        beta1, beta2 = h["betas"]
        if "step" not in state:
            state["step"] = 0
            state["exp_avg"] = np.zeros_like(param)
            state["exp_avg_sq"] = np.zeros_like(param)
        if wd:
            if self._decoupled:
                param *= f(1 - lr * wd)
            else:
                grad = grad + f(wd) * param
        state["step"] += 1
        step = state["step"]
        m, v = state["exp_avg"], state["exp_avg_sq"]
        m += f(1 - beta1) * (grad - m)  # torch's lerp
        v *= f(beta2)
        v += f(1 - beta2) * grad * grad
        step_size = lr / (1 - beta1**step)
        denom = np.sqrt(v) / f(np.sqrt(1 - beta2**step)) + f(h["eps"])
        param -= f(step_size) * (m / denom)


class AdamW(Adam):
    """torch.optim.AdamW: decoupled weight decay p *= 1 - lr*wd, then the Adam step."""

    name = "adamw"
    _decoupled = True

    def __init__(self, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        super().__init__(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)


_BY_NAME = {"sgd": SGD, "adam": Adam, "adamw": AdamW}
NAMES = tuple(_BY_NAME)


def get(name: str, **kwargs) -> Optimizer:
    """An optimiser by name ("sgd", "adam", "adamw"; any case) built with kwargs."""
    key = name.lower() if isinstance(name, str) else name
    if key not in _BY_NAME:
        raise ValueError(f"unknown optimiser {name!r}; expected one of {list(NAMES)}")
    return _BY_NAME[key](**kwargs)
