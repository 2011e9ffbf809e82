"""Argument checks of a training run, shared by every device (the dense reference and the
engines alike), so that each device accepts and refuses exactly the same calls.

Each error is one line naming the argument, what it got and how to fix it.
"""

from __future__ import annotations

import numbers
import os

import numpy as np

from ._checks import finite_array, positive_int
from .conv import Conv2d
from .layers import RLeaky, Sequential

__all__ = [
    "param_shapes",
    "check_params",
    "check_input",
    "check_batch",
    "check_sizes",
    "check_learning_rate",
    "MAX_COUNT",
]

# Sizes cross into C++ as 32-bit signed integers.
MAX_COUNT = 2**31 - 1


def param_shapes(net: Sequential) -> list:
    """The expected {name: shape} of every layer's parameters, in order."""
    _check_net(net)
    shapes = []
    for stage in net.stages:
        syn, neuron = stage.synapse, stage.neuron
        if isinstance(syn, Conv2d):
            s = {"weight": syn.weight_shape()}
            if syn.bias:
                s["bias"] = (syn.out_channels,)
            shapes.append(s)
            continue
        s = {"weight": (syn.out_features, syn.in_features)}
        if syn.bias:
            s["bias"] = (syn.out_features,)
        if isinstance(neuron, RLeaky):
            n = syn.out_features
            if neuron.all_to_all:
                s["recurrent_weight"] = (n, n)
                s["recurrent_bias"] = (n,)
            else:
                s["recurrent_weight"] = (n,)
        for name in neuron.learned():  # [] for one per layer, [out] for one per neuron
            s[name] = np.shape(getattr(neuron, name))
        shapes.append(s)
    return shapes


def _check_net(net):
    if not isinstance(net, Sequential):
        raise TypeError(
            f"net must be a popsnn.Sequential, got {type(net).__name__}; "
            f"e.g. Sequential(Linear(784, 10), Leaky(beta=0.9))"
        )


def check_params(net: Sequential, params, name: str = "params") -> np.dtype:
    """Check `params` against `net` (structure, shapes, dtype, finiteness); return the dtype."""
    shapes = param_shapes(net)
    if not isinstance(params, (list, tuple)):
        raise TypeError(
            f"{name} must be a list with one dict of arrays per (Linear or Conv2d, "
            f"neuron) stage, got {type(params).__name__}; make one with net.init_params()"
        )
    if len(params) != len(shapes):
        raise ValueError(
            f"{name} has {len(params)} layer dict(s), the net has {len(shapes)} "
            f"(Linear or Conv2d, neuron) stage(s); make matching ones with net.init_params()"
        )
    dtype = None
    for l, (p, expect) in enumerate(zip(params, shapes)):
        if not isinstance(p, dict):
            raise TypeError(f"{name}[{l}] must be a dict of arrays, got {type(p).__name__}")
        if set(p) != set(expect):
            raise ValueError(
                f"{name}[{l}] has keys {sorted(p)}, expected {sorted(expect)} "
                f"for layer {l} of the net"
            )
        for key, shape in expect.items():
            a = p[key]
            if not isinstance(a, np.ndarray):
                raise TypeError(
                    f"{name}[{l}][{key!r}] must be a NumPy array, got {type(a).__name__}"
                )
            if a.shape != shape:
                raise ValueError(f"{name}[{l}][{key!r}] has shape {a.shape}, expected {shape}")
            if a.dtype not in (np.float32, np.float64):
                raise TypeError(
                    f"{name}[{l}][{key!r}] has dtype {a.dtype}, expected float32 or float64"
                )
            if dtype is None:
                dtype = a.dtype
            elif a.dtype != dtype:
                raise TypeError(
                    f"{name}[{l}][{key!r}] has dtype {a.dtype} but earlier "
                    f"parameters are {dtype}; use one dtype for all parameters"
                )
            finite_array(f"{name}[{l}][{key!r}]", a)
    return np.dtype(dtype)


def _flatten_sample_axes(net: Sequential, x: np.ndarray) -> np.ndarray:
    """x with its per-sample axes (C, H, W) flattened to N_in, when given that way."""
    shape = net.input_shape
    k = len(shape)
    if k > 1 and x.ndim in (k + 1, k + 2) and tuple(x.shape[-k:]) == shape:
        return x.reshape(*x.shape[:-k], net.num_inputs)
    if k > 1 and x.ndim in (k + 1, k + 2):
        raise ValueError(
            f"x has shape {x.shape}: its sample axes {tuple(x.shape[-k:])} are not the "
            f"net's input_shape {shape}; expected [T, B, {', '.join(map(str, shape))}] "
            f"or [B, {', '.join(map(str, shape))}]"
        )
    return x


def check_input(net: Sequential, x, num_steps=None, dtype=np.float32, check_finite=True):
    """Check and cast the input; return (x, num_steps, direct) with x in `dtype`.

    x is [T, B, N_in] (num_steps None or equal to T) or [B, N_in] direct
    current (num_steps required). A net with input_shape (C, H, W) also takes
    [T, B, C, H, W] and [B, C, H, W]; x comes back flat, [.., N_in] row-major.
    `check_finite=False`: the caller counts NaN and inf itself (popsnn's engine, in the pass
    that lists the input's non-zeros), with the same message.
    """
    _check_net(net)
    if isinstance(x, (list, tuple)):
        x = np.asarray(x)
    if not isinstance(x, np.ndarray):
        raise TypeError(
            f"x must be a NumPy array, [T, B, {net.num_inputs}] or "
            f"[B, {net.num_inputs}], got {type(x).__name__}"
        )
    if x.dtype.kind not in "biuf":
        raise TypeError(f"x must hold real numbers, got dtype {x.dtype}")
    x = _flatten_sample_axes(net, x)
    if num_steps is not None:
        num_steps = positive_int("num_steps", num_steps)
    n_in = net.num_inputs
    if x.ndim == 3:
        if x.shape[2] != n_in:
            raise ValueError(
                f"x has shape {x.shape}: its last axis is {x.shape[2]}, the net "
                f"takes {n_in} inputs; expected [T, B, {n_in}]"
            )
        if num_steps is not None and num_steps != x.shape[0]:
            raise ValueError(
                f"num_steps={num_steps} but x has {x.shape[0]} time steps "
                f"(shape {x.shape}); give x {num_steps} steps (the reference "
                f"functions also take num_steps=None: T from x)"
            )
        direct = False
        num_steps = x.shape[0]
    elif x.ndim == 2:
        if x.shape[1] != n_in:
            raise ValueError(
                f"x has shape {x.shape}: its last axis is {x.shape[1]}, the net "
                f"takes {n_in} inputs; expected [B, {n_in}]"
            )
        if num_steps is None:
            raise ValueError(
                f"num_steps is required for direct-current input x of shape "
                f"{x.shape} ([B, N_in], the same input at every step); pass "
                f"num_steps=T, or give x as [T, B, N_in]"
            )
        direct = True
    else:
        raise ValueError(f"x must be [T, B, {n_in}] or [B, {n_in}], got shape {x.shape}")
    if 0 in x.shape:
        raise ValueError(
            f"x has an empty axis, shape {x.shape}; expected at least one step and one sample"
        )
    x = np.asarray(x, dtype=dtype)
    if check_finite:
        finite_array("x", x)
    return x, num_steps, direct


def check_learning_rate(lr) -> float:
    """`lr` as a float, or a ValueError saying what a learning rate may be."""
    if isinstance(lr, bool) or not isinstance(lr, numbers.Real) or not np.isfinite(lr) or lr < 0:
        raise ValueError(f"the learning rate must be a finite number >= 0, got {lr!r}")
    return float(lr)


def _physical_memory_bytes():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not every platform reports it
        return None


def check_sizes(net: Sequential, num_steps, batch_size, bytes_per_neuron_step: int = 4):
    """(num_steps, batch_size) as ints, refused before anything is allocated when a count does
    not fit a 32-bit integer or one step's state of every neuron (`bytes_per_neuron_step`
    per neuron, step and sample; the output spikes alone take 4) exceeds this machine's memory."""
    _check_net(net)
    num_steps = positive_int("num_steps", num_steps)
    batch_size = positive_int("batch_size", batch_size)
    for name, value in (("num_steps", num_steps), ("batch_size", batch_size)):
        if value > MAX_COUNT:
            raise ValueError(
                f"{name}={value} is larger than {MAX_COUNT}, the largest count "
                f"popsnn supports; use a smaller {name}"
            )
    neurons = sum(stage.num_neurons for stage in net.stages)
    needed = num_steps * batch_size * neurons * bytes_per_neuron_step
    memory = _physical_memory_bytes()
    if memory and needed > memory:
        raise ValueError(
            f"num_steps={num_steps} x batch_size={batch_size} x {neurons} neurons "
            f"needs about {needed / 2**30:.1f} GiB of state, more than this "
            f"machine's {memory / 2**30:.1f} GiB; lower num_steps or batch_size"
        )
    return num_steps, batch_size


def check_batch(
    net: Sequential, x, num_steps: int, batch_size: int, dtype=np.float32, check_finite=True
):
    """A minibatch for a model built for (num_steps, batch_size): x [B, N_in] (direct current
    for num_steps steps) or [T, B, N_in] with T == num_steps, and B <= batch_size.
    Returns (x in `dtype`, direct, B)."""
    x, _, direct = check_input(net, x, num_steps, dtype, check_finite)
    batch = x.shape[0] if direct else x.shape[1]
    if batch > batch_size:
        raise ValueError(
            f"x holds {batch} samples, more than the model's batch_size="
            f"{batch_size}; split it, or build the Model with a larger batch_size"
        )
    return x, direct, batch
