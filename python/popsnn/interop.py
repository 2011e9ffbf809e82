"""snnTorch interop: a PyTorch `nn.Sequential` of `nn.Linear` / `nn.Conv2d` (with `nn.MaxPool2d`,
`nn.AvgPool2d`, `nn.Flatten`) and `snn.Leaky` / `snn.Synaptic` / `snn.RLeaky` / `snn.Lapicque` /
`snn.Alpha` layers to a popsnn network and its parameters, and back.

    net, params = popsnn.interop.from_snntorch(torch_model)
    torch_model = popsnn.interop.to_snntorch(net, params)
    spikes = popsnn.interop.run_snntorch(torch_model, x, num_steps=25)   # [T, B, C] NumPy
    net, params = popsnn.interop.from_snntorch(csnn_model, input_shape=(1, 28, 28))

Weights and neuron parameters (beta, alpha, Lapicque's R, C and time step, threshold, reset
mechanism, surrogate, recurrent weights) are copied, one value per layer or one per neuron
(a per-neuron tensor of equal values, as snnTorch's NIR export writes, is that one value
unless the layer learns it); learn_beta / learn_threshold become the layer's flags with the
trained values in its params.
Anything popsnn cannot express the same way (other layer types, a learnable alpha, a learnable
beta on Lapicque, a frozen recurrence, inhibition, graded spikes, immediate reset
`reset_delay=False`, an unknown surrogate) raises `InteropError` naming the layer and the
setting, rather than converting approximately. The parameters keep the model's dtype
(float32 or float64) unless `dtype` is given.
torch and snntorch are imported only when these functions are called.
"""

from __future__ import annotations

import numpy as np

from . import conv as _conv
from . import layers as _layers
from . import surrogate as _surrogate
from .reference import check_input, check_params


class InteropError(ValueError):
    """A model that cannot be converted exactly; the message names the layer and the fix."""


def _import_torch():
    try:
        import snntorch
        import torch
    except ImportError:
        raise ImportError(
            "snnTorch interop needs torch and snntorch: pip install 'popsnn[crosscheck]'"
        ) from None
    return torch, snntorch


# snnTorch's surrogate factories return closures named "<factory>.<locals>.inner"; their
# one parameter is the closure's free variable of that name.
_SURROGATE_PARAMS = {"fast_sigmoid": "slope", "atan": "alpha", "sigmoid": "slope"}


def _surrogate_from_torch(fn, where: str) -> _surrogate.Surrogate:
    factory = getattr(fn, "__qualname__", "").split(".")[0]
    if factory == "straight_through_estimator":
        return _surrogate.straight_through()
    if factory in _SURROGATE_PARAMS:
        names = fn.__code__.co_freevars
        cells = dict(zip(names, (c.cell_contents for c in fn.__closure__ or ())))
        param = cells.get(_SURROGATE_PARAMS[factory])
        if param is not None:
            return getattr(_surrogate, factory)(float(param))
    raise InteropError(
        f"{where}: surrogate {getattr(fn, '__qualname__', fn)!r} has no popsnn "
        f"equivalent; use snntorch.surrogate.fast_sigmoid, atan, sigmoid or "
        f"straight_through_estimator"
    )


def snntorch_surrogate(sur: _surrogate.Surrogate):
    """snnTorch's spike_grad function for a popsnn surrogate (same name and parameter)."""
    _, snntorch = _import_torch()
    s = snntorch.surrogate
    if sur.name == "fast_sigmoid":
        return s.fast_sigmoid(slope=sur.param)
    if sur.name == "atan":
        return s.atan(alpha=sur.param)
    if sur.name == "sigmoid":
        return s.sigmoid(slope=sur.param)
    return s.straight_through_estimator()


def _scalar(layer, name: str, where: str) -> float:
    """The layer's one value of `name`. A per-neuron tensor of equal values is that value:
    snnTorch's NIR export needs per-neuron tensors, so models written for it convert too."""
    value = getattr(layer, name)
    array = value.detach().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)
    flat = array.ravel()
    if flat.size == 0 or not np.all(flat == flat[0]):
        raise InteropError(
            f"{where}: {name} has {flat.size} different values (one per neuron); popsnn "
            f"takes one {name} per layer: give the layer a single value"
        )
    return float(flat[0])


def _constant(layer, name: str, where: str, learned: bool = False):
    """A neuron constant as popsnn's layer takes it: a float, or a 1-D array (one per neuron).
    Equal per-neuron values are one value (see _scalar), unless the layer learns them: a
    trained per-neuron tensor stays per neuron, as it trains apart."""
    value = getattr(layer, name)
    array = value.detach().cpu().numpy() if hasattr(value, "detach") else np.asarray(value)
    flat = array.ravel()
    if flat.size == 1 or (not learned and flat.size and np.all(flat == flat[0])):
        return float(flat[0])
    if array.ndim != 1:
        raise InteropError(
            f"{where}: {name} has shape {tuple(array.shape)}; popsnn takes one {name} per "
            f"layer or a 1-D array with one per neuron"
        )
    return array.astype(np.float64)


def _numpy(tensor, dtype) -> np.ndarray:
    return tensor.detach().cpu().numpy().astype(dtype)


def _learned(layer, torch) -> dict:
    """{name: trainable nn.Parameter} of the layer's neuron constants (snnTorch keeps one as a
    Parameter when its learn_* flag is set)."""
    out = {}
    for name in ("alpha", "beta", "threshold"):
        value = getattr(layer, name, None)
        if isinstance(value, torch.nn.Parameter) and value.requires_grad:
            out[name] = value
    return out


def _check_trainability(layer, where: str, torch, snntorch) -> None:
    learned = _learned(layer, torch)
    if "alpha" in learned:
        raise InteropError(
            f"{where}: learn_alpha=True makes alpha trainable, which popsnn does not support; "
            f"build the layer with learn_alpha=False"
        )
    if "beta" in learned and isinstance(layer, snntorch.Lapicque):
        raise InteropError(
            f"{where}: learn_beta=True on Lapicque is not supported by popsnn (its update "
            f"uses R and C); build the layer with learn_beta=False"
        )
    # Anything else trainable (learn_graded_spikes_factor, a future snnTorch parameter)
    # would silently stop training after conversion.
    carried = {"beta", "threshold", "V"}
    for name, param in layer.named_parameters():
        if param.requires_grad and name not in carried and not name.startswith("recurrent."):
            raise InteropError(
                f"{where}: its trainable parameter {name!r} has no popsnn equivalent; "
                f"build the layer without learning {name}"
            )
    recurrent = [p for n, p in layer.named_parameters() if n.startswith("recurrent.")]
    frozen = getattr(layer, "V", None) is not None and not getattr(layer, "all_to_all", True)
    frozen = frozen and not isinstance(layer.V, torch.nn.Parameter)
    if any(not p.requires_grad for p in recurrent) or frozen:
        raise InteropError(
            f"{where}: learn_recurrent=False freezes the recurrent weights, but popsnn trains "
            f"them; build the layer with learn_recurrent=True"
        )


def _neuron_from_torch(layer, where: str):
    torch, snntorch = _import_torch()
    _check_trainability(layer, where, torch, snntorch)
    for flag, meaning in (("inhibition", "inhibition=True"), ("state_quant", "state_quant")):
        if getattr(layer, flag, False):
            raise InteropError(
                f"{where}: {meaning} is not supported by popsnn; build the layer without it"
            )
    if not getattr(layer, "reset_delay", True):
        raise InteropError(
            f"{where}: reset_delay=False (immediate reset) is not popsnn's "
            f"semantics, which apply the reset one step later as snnTorch's "
            f"default; build the layer with reset_delay=True"
        )
    if _scalar(layer, "graded_spikes_factor", where) != 1.0:
        raise InteropError(
            f"{where}: graded spikes (graded_spikes_factor != 1) are not "
            f"supported; use graded_spikes_factor=1"
        )
    if getattr(layer, "surrogate_disable", False):
        raise InteropError(f"{where}: surrogate_disable=True has no popsnn equivalent")
    learned = _learned(layer, torch)
    threshold = _constant(layer, "threshold", where, "threshold" in learned)
    common = dict(
        threshold=threshold,
        learn_threshold="threshold" in learned,
        reset_mechanism=layer.reset_mechanism,
        surrogate=_surrogate_from_torch(layer.spike_grad, where),
    )
    # A trained beta may have left [0, 1] (snnTorch clamps where it is used): the layer
    # keeps the clamped start value, the params the trained one.
    beta = _constant(layer, "beta", where, "beta" in learned)
    beta = np.clip(beta, 0.0, 1.0) if "beta" in learned else beta
    learn = dict(learn_beta="beta" in learned)
    try:
        if isinstance(layer, snntorch.Lapicque):  # its update uses R, C and time_step only
            return _layers.Lapicque(
                R=_scalar(layer, "R", where),
                C=_scalar(layer, "C", where),
                time_step=_scalar(layer, "time_step", where),
                **common,
            )
        if isinstance(layer, snntorch.RLeaky):
            return _layers.RLeaky(beta=beta, all_to_all=bool(layer.all_to_all), **learn, **common)
        # Every other model: popsnn's class of the same name, its constants read by name
        # (Leaky's beta; Synaptic's and Alpha's alpha and beta).
        cls = _neuron_classes()[type(layer).__name__]
        given = {name: _constant(layer, name, where) for name in cls.constants() if name != "beta"}
        return cls(beta=beta, **given, **learn, **common)
    except ValueError as err:
        raise InteropError(f"{where}: {err}") from None


def _neuron_classes() -> dict:
    """popsnn's neuron models by name: snnTorch's class of each has the same name."""
    return {cls.__name__: cls for cls in _layers.NEURON_TYPES}


_SUPPORTED = "nn.Linear, nn.Conv2d, nn.MaxPool2d, nn.AvgPool2d, nn.Flatten, " + ", ".join(
    f"snn.{name}" for name in _neuron_classes()
)


def _shape_layer_from_torch(m, where: str, torch):
    """The popsnn layer for an nn.Conv2d / MaxPool2d / AvgPool2d / Flatten (None otherwise);
    options popsnn does not run are refused by the layer's own checks."""
    nn = torch.nn
    try:
        if type(m) is nn.Conv2d:
            return _conv.Conv2d(
                m.in_channels,
                m.out_channels,
                m.kernel_size,
                m.stride,
                m.padding,
                m.dilation,
                m.groups,
                m.bias is not None,
                m.padding_mode,
            )
        if type(m) is nn.MaxPool2d:
            return _conv.MaxPool2d(
                m.kernel_size, m.stride, m.padding, m.dilation, m.return_indices, m.ceil_mode
            )
        if type(m) is nn.AvgPool2d:
            return _conv.AvgPool2d(
                m.kernel_size,
                m.stride,
                m.padding,
                m.ceil_mode,
                m.count_include_pad,
                m.divisor_override,
            )
        if type(m) is nn.Flatten:
            return _conv.Flatten(m.start_dim, m.end_dim)
    except (ValueError, TypeError) as err:
        raise InteropError(f"{where}: {err}") from None
    return None


def _recurrent_params(m, neuron, n: int, where: str, dtype, torch) -> dict:
    if neuron.all_to_all:
        rec = m.recurrent
        if type(rec) is not torch.nn.Linear or rec.in_features != n:
            raise InteropError(
                f"{where}: all-to-all RLeaky needs linear_features={n} (a Linear recurrence)"
            )
        bias = _numpy(rec.bias, dtype) if rec.bias is not None else np.zeros(n, dtype)
        return {"recurrent_weight": _numpy(rec.weight, dtype), "recurrent_bias": bias}
    v = m.V.detach().cpu().numpy().astype(dtype)
    return {"recurrent_weight": np.broadcast_to(v, (n,)).copy()}


def from_snntorch(model, dtype=None, input_shape=None) -> tuple:
    """(popsnn.Sequential, params) from an `nn.Sequential` of stages, each one nn.Linear or
    nn.Conv2d (with nn.MaxPool2d / nn.AvgPool2d / nn.Flatten around it) and an snnTorch
    Leaky / Synaptic / RLeaky / Lapicque / Alpha. A leading `nn.Flatten` is dropped (popsnn
    takes [B, N] input flat); a model starting with nn.Conv2d needs `input_shape=(C, H, W)`.
    `dtype`: the parameters' (np.float32 or np.float64); default the model's."""
    torch, snntorch = _import_torch()
    neurons = tuple(getattr(snntorch, name) for name in _neuron_classes())
    modules = list(model.children()) if isinstance(model, torch.nn.Sequential) else None
    if modules is None:
        raise InteropError(
            f"expected a torch.nn.Sequential, got {type(model).__name__}; put "
            f"the layers in nn.Sequential(nn.Linear, snn.Leaky, ...)"
        )
    dtype = _model_dtype(model, torch) if dtype is None else np.dtype(dtype)
    if modules and isinstance(modules[0], torch.nn.Flatten) and input_shape is None:
        modules = modules[1:]
    layers, params = [], []
    for i, m in enumerate(modules):
        where = f"layer {i} ({type(m).__name__})"
        if type(m) is torch.nn.Linear:
            layers.append(_layers.Linear(m.in_features, m.out_features, bias=m.bias is not None))
        elif type(m) in neurons:
            neuron = _neuron_from_torch(m, where)
            layers.append(neuron)
            if not params:
                continue  # Sequential names the missing weighted layer
            if isinstance(neuron, _layers.RLeaky):
                n = params[-1]["weight"].shape[0]
                params[-1].update(_recurrent_params(m, neuron, n, where, dtype, torch))
            for name, value in _learned(m, torch).items():  # the trained values, unclamped
                params[-1][name] = _numpy(value, dtype).reshape(np.shape(getattr(neuron, name)))
            continue
        else:
            layer = _shape_layer_from_torch(m, where, torch)
            if layer is None:
                raise InteropError(
                    f"{where}: {type(m).__name__} is not supported by popsnn; supported "
                    f"layers: {_SUPPORTED}"
                )
            layers.append(layer)
        if hasattr(m, "weight"):  # a weighted layer starts a stage's parameters
            p = {"weight": _numpy(m.weight, dtype)}
            if m.bias is not None:
                p["bias"] = _numpy(m.bias, dtype)
            params.append(p)
    try:
        net = _layers.Sequential(*layers, input_shape=input_shape)
    except (ValueError, TypeError) as err:
        fix = (
            "; pass from_snntorch(model, input_shape=(C, H, W))"
            if "input_shape" in str(err)
            else ""
        )
        raise InteropError(f"{err}{fix}") from None
    check_params(net, params)
    return net, params


def _model_dtype(model, torch) -> np.dtype:
    """The dtype of the model's first nn.Linear / nn.Conv2d weight (float32 or float64)."""
    weighted = [m for m in model.children() if type(m) in (torch.nn.Linear, torch.nn.Conv2d)]
    weight_dtype = weighted[0].weight.dtype if weighted else torch.float32
    if weight_dtype not in (torch.float32, torch.float64):
        raise InteropError(
            f"the model's weights are {weight_dtype}; popsnn converts float32 or float64 "
            f"models: call model.float() or model.double() first"
        )
    return np.dtype(np.float64 if weight_dtype == torch.float64 else np.float32)


def _torch_module(op, p, tdtype, torch):
    """The torch module for a popsnn Linear / Conv2d / pooling / Flatten, holding p's weights."""
    nn = torch.nn
    if isinstance(op, _conv.MaxPool2d):
        return nn.MaxPool2d(op.kernel_size, op.stride, op.padding)
    if isinstance(op, _conv.AvgPool2d):
        return nn.AvgPool2d(op.kernel_size, op.stride, op.padding)
    if isinstance(op, _conv.Flatten):
        return nn.Flatten()
    if isinstance(op, _conv.Conv2d):
        m = nn.Conv2d(
            op.in_channels, op.out_channels, op.kernel_size, op.stride, op.padding,
            bias=op.bias, dtype=tdtype,
        )  # fmt: skip
    else:
        m = nn.Linear(op.in_features, op.out_features, bias=op.bias, dtype=tdtype)
    with torch.no_grad():
        m.weight.copy_(torch.from_numpy(p["weight"]))
        if op.bias:
            m.bias.copy_(torch.from_numpy(p["bias"]))
    return m


def _snntorch_neuron(neuron, p, n: int, output: bool, tdtype, torch, snntorch):
    constant = _torch_constants(torch, neuron, p, tdtype)
    common = dict(
        threshold=constant("threshold"),
        learn_threshold=neuron.learn_threshold,
        reset_mechanism=neuron.reset_mechanism,
        spike_grad=snntorch_surrogate(neuron.surrogate),
        init_hidden=True,
        output=output,
    )
    learn = {"learn_beta": True} if getattr(neuron, "learn_beta", False) else {}
    if isinstance(neuron, _layers.RLeaky):
        if neuron.all_to_all:
            cell = snntorch.RLeaky(
                beta=constant("beta"), linear_features=n, all_to_all=True, **learn, **common
            )
            cell.recurrent = cell.recurrent.to(tdtype)
            with torch.no_grad():
                cell.recurrent.weight.copy_(torch.from_numpy(p["recurrent_weight"]))
                cell.recurrent.bias.copy_(torch.from_numpy(p["recurrent_bias"]))
        else:
            v = torch.from_numpy(p["recurrent_weight"].copy())
            cell = snntorch.RLeaky(beta=constant("beta"), all_to_all=False, **learn, V=v, **common)
    elif isinstance(neuron, _layers.Lapicque):
        R, C = (torch.tensor(v, dtype=tdtype) for v in neuron.resistance_capacitance())
        step = torch.tensor(neuron.time_step, dtype=tdtype)
        cell = snntorch.Lapicque(R=R, C=C, time_step=step, **common)
    else:  # snnTorch's class of the same name, given the model's constants by name
        given = {name: constant(name) for name in neuron.constants()}
        cell = getattr(snntorch, type(neuron).__name__)(**given, **learn, **common)
    return cell.to(tdtype)


def to_snntorch(net: _layers.Sequential, params):
    """An `nn.Sequential` with snnTorch layers (init_hidden=True; the last one output=True)
    computing the same as `net` with `params`, in the parameters' dtype."""
    torch, snntorch = _import_torch()
    dtype = check_params(net, params)
    tdtype = torch.float64 if dtype == np.float64 else torch.float32
    modules = []
    index = 0
    for i, (stage, p) in enumerate(zip(net.stages, params)):
        modules += [_torch_module(op, p, tdtype, torch) for op in stage.ops]
        index += len(stage.ops)
        if stage.neuron.sparse is not None:
            raise InteropError(
                f"layer {index}: snnTorch has no sparse-backward rule; set "
                f"sparse=None before converting"
            )
        last = i == len(net.stages) - 1
        neuron = _snntorch_neuron(stage.neuron, p, stage.num_neurons, last, tdtype, torch, snntorch)
        modules.append(neuron)
        index += 1
    return torch.nn.Sequential(*modules)


def _torch_constants(torch, neuron, p, tdtype):
    """constant(name): the layer's neuron constant as a tensor in the model's dtype (a Python
    float would become a float32 tensor: 0.9 would not be 0.9 in a float64 model), the
    trained value from `p` when the layer learns it, 1-D when given per neuron."""

    def constant(name):
        value = p[name] if name in p else getattr(neuron, name)
        return torch.tensor(np.asarray(value, dtype=np.float64), dtype=tdtype)

    return constant


def run_snntorch(model, x, num_steps: int | None = None, input_shape=None) -> np.ndarray:
    """Output spikes [T, B, C] (NumPy) of an snnTorch `nn.Sequential` for popsnn-style input:
    `x` [T, B, N] or [B, N] direct current with `num_steps` ([.., C, H, W] or flat for a
    model with `input_shape`). States start at zero."""
    torch, snntorch = _import_torch()
    # Also checks the model is one popsnn can express.
    net, _ = from_snntorch(model, input_shape=input_shape)
    x, num_steps, direct = check_input(net, x, num_steps, np.float64)
    x = x.reshape(*x.shape[:-1], *net.input_shape)
    dtype = next(model.parameters()).dtype
    modules = list(model.children())
    if modules and isinstance(modules[0], torch.nn.Flatten) and input_shape is None:
        modules = modules[1:]
    for m in modules:
        if hasattr(m, "reset_mem"):
            m.reset_mem()
    out = []
    with torch.no_grad():
        for t in range(num_steps):
            h = torch.as_tensor(x if direct else x[t], dtype=dtype)
            for m in modules:
                h = m(h.to(dtype))  # snnTorch emits float32 spikes whatever the model dtype
                if isinstance(h, tuple):
                    h = h[0]  # (spikes, [current,] membrane): the next layer takes spikes
            out.append(h.reshape(h.shape[0], -1).cpu().numpy())
    return np.stack(out)
