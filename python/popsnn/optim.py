"""Optimisers with PyTorch's update formulas and defaults, in NumPy (SPEC section 1).

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
    if not isinstance(value, numbers.Real) or isinstance(value, bool) or not np.isfinite(value) \
            or value < 0:
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
        self.state: dict = {}     # (layer, key) -> {name: array or number}

    def step(self, params, grads) -> None:
        """Update params in place from grads (same structure)."""
        self._check(params, grads)
        for l, (p, g) in enumerate(zip(params, grads)):
            for key in p:
                if p[key].dtype.kind != "f":
                    raise TypeError(f"params[{l}][{key!r}] must be a float array to update in "
                                    f"place, got dtype {p[key].dtype}")
                grad = np.asarray(g[key], dtype=p[key].dtype)
                self._update(p[key], grad, self.state.setdefault((l, key), {}))

    def _update(self, param, grad, state):
        raise NotImplementedError

    @staticmethod
    def _check(params, grads):
        if not isinstance(params, (list, tuple)) or not isinstance(grads, (list, tuple)):
            raise TypeError(f"params and grads must be lists of dicts of arrays, got "
                            f"{type(params).__name__} and {type(grads).__name__}")
        if len(params) != len(grads):
            raise ValueError(f"grads has {len(grads)} layer dict(s), params has {len(params)}")
        for l, (p, g) in enumerate(zip(params, grads)):
            if set(p) != set(g):
                raise ValueError(f"grads[{l}] has keys {sorted(g)}, params[{l}] has "
                                 f"{sorted(p)}; they must match")
            for key in p:
                if np.shape(g[key]) != np.shape(p[key]):
                    raise ValueError(f"grads[{l}][{key!r}] has shape {np.shape(g[key])}, "
                                     f"params[{l}][{key!r}] has {np.shape(p[key])}")
                if not isinstance(p[key], np.ndarray):
                    raise TypeError(f"params[{l}][{key!r}] must be a NumPy array (updated in "
                                    f"place), got {type(p[key]).__name__}")

    def state_dict(self) -> dict:
        """{"name", "hyper", "state": [[layer, key, {name: value}], ...]} (copies)."""
        return {"name": self.name, "hyper": dict(self.hyper),
                "state": [[l, k, copy.deepcopy(s)] for (l, k), s in sorted(self.state.items())]}

    def load_state_dict(self, d: dict) -> None:
        if not isinstance(d, dict) or d.get("name") != self.name:
            got = d.get("name") if isinstance(d, dict) else type(d).__name__
            raise ValueError(f"state_dict is for optimiser {got!r}, this one is "
                             f"{self.name!r}")
        type(self)(**d["hyper"])              # validates the hyperparameters
        self.hyper = dict(d["hyper"])
        self.state = {(int(l), str(k)): copy.deepcopy(s) for l, k, s in d["state"]}

    def __repr__(self):
        args = ", ".join(f"{k}={v}" for k, v in self.hyper.items())
        return f"popsnn.optim.{type(self).__name__}({args})"


class SGD(Optimizer):
    """torch.optim.SGD: g += wd*p; buf = momentum*buf + (1-dampening)*g (buf = g at the
    first step); g = g + momentum*buf (nesterov) or buf; p -= lr*g."""

    name = "sgd"

    def __init__(self, lr, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False):
        lr, momentum = _nonneg("lr", lr), _nonneg("momentum", momentum)
        dampening, weight_decay = _nonneg("dampening", dampening), \
            _nonneg("weight_decay", weight_decay)
        if not isinstance(nesterov, bool):
            raise TypeError(f"nesterov must be True or False, got {nesterov!r}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError(f"nesterov=True needs momentum > 0 and dampening = 0, got "
                             f"momentum={momentum}, dampening={dampening}")
        super().__init__(lr=lr, momentum=momentum, dampening=dampening,
                         weight_decay=weight_decay, nesterov=nesterov)

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

    def __init__(self, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        lr, eps = _nonneg("lr", lr), _nonneg("eps", eps)
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise ValueError(f"betas must be a pair (beta1, beta2), got {betas!r}")
        betas = (_beta("betas[0]", betas[0]), _beta("betas[1]", betas[1]))
        super().__init__(lr=lr, betas=betas, eps=eps,
                         weight_decay=_nonneg("weight_decay", weight_decay))

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
        m += f(1 - beta1) * (grad - m)                 # torch's lerp
        v *= f(beta2)
        v += f(1 - beta2) * grad * grad
        step_size = lr / (1 - beta1 ** step)
        denom = np.sqrt(v) / f(np.sqrt(1 - beta2 ** step)) + f(h["eps"])
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
