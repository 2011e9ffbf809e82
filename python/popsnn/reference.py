"""The dense NumPy reference: forward pass and hand-written BPTT (docs/numerics.md).

This is the oracle every popsnn engine is checked against, and the dense
baseline of the benchmarks. Pure NumPy, no autograd: every gradient path is
written out below, so it can be read against the contract.

Conventions
-----------
* Time-major: inputs, spikes, membranes and currents are `[T, B, N]`.
* The dtype of the parameters (float32 or float64, the same for all of them)
  is the dtype of the whole computation; the input is cast to it.
* `x` is either `[T, B, N_in]` (one tensor per step, e.g. spikes) or
  `[B, N_in]` (direct current: the same input at every step; `num_steps` is
  then required). With direct current the first layer's `W x + b` and its
  weight gradient `sum_t dI[t]^T x` are computed once, not T times.
* Initial state is zero. The reset of step t is decided by the previous
  membrane, `R[t] = H(U[t-1] - threshold)`, and is a constant in BPTT (as
  snnTorch, which detaches it). `H(x) = x > 0`. The membrane a layer reports
  is the pre-reset one: the subtraction for a spike at t lands at t + 1.
* Lapicque: `U = decay*U_prev + gain*I` (decay = 1 - dt/(RC), gain = dt/C), the
  reset applied to the whole update (zero: `(1-R)*(...)`, as snnTorch).
* Zero reset: Leaky `U = beta*(1-R)*U_prev + I`; Synaptic
  `U = (1-R)*(beta*U_prev + J)` with J never reset; RLeaky
  `U = (1-R)*(beta*U_prev + I + V S_prev + b_V)`. The RLeaky form is
  snnTorch's (it zeroes the whole update, input included), as docs/numerics.md
  records.
* Backward: `dS/dU` is the layer's surrogate at `U - threshold`, multiplied by
  the layer's sparse-rule mask when it has one (entries off the mask carry
  exactly zero). The recurrent path of RLeaky carries gradient through
  S[t-1] (not detached, as snnTorch).

Convolutional stages (popsnn.conv: Conv2d, pooling, Flatten before the neuron) compute their
current with popsnn.conv_ops and keep their neurons' state flat, [T, B, C*H*W]
(docs/convolution.md); their BPTT through the neuron is the same as a Linear stage's.

Parameters follow `layers.py`: one dict per stage (a Linear pair shown) with
"weight" [out, in], "bias" [out] (unless Linear(bias=False)),
"recurrent_weight" [out, out] (all-to-all) or [out] (one-to-one) and
"recurrent_bias" [out] (all-to-all only) for RLeaky.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import conv_ops
from .layers import Lapicque, Leaky, RLeaky, Sequential, Synaptic

# The argument checks live in popsnn.validation (every device uses them); re-exported here.
from .validation import check_input, check_params, param_shapes

__all__ = [
    "Record",
    "forward",
    "loss_and_grad",
    "backward",
    "check_params",
    "check_input",
    "param_shapes",
]


@dataclass
class Record:
    """What a forward pass recorded, one entry per (Linear, neuron) pair.

    spikes[l], membranes[l]: [T, B, N_l] (membranes are the pre-reset U that
    snnTorch returns); currents[l]: the synaptic current J [T, B, N_l] for a
    Synaptic layer, None otherwise; grad_masks[l]: [T, B, N_l] bool, the
    entries whose surrogate gradient the backward uses (all True without a
    sparse rule).
    """

    spikes: list[np.ndarray]
    membranes: list[np.ndarray]
    currents: list[np.ndarray | None]
    grad_masks: list[np.ndarray]
    num_steps: int = 0
    direct_input: bool = False
    # The cast input, kept for the backward's weight gradient of layer 0.
    _input: np.ndarray | None = field(default=None, repr=False)


# --------------------------------------------------------------------------- forward


def _decay(neuron) -> float:
    """The factor on U[t-1]: beta, or Lapicque's 1 - dt/(R*C)."""
    return neuron.decay if isinstance(neuron, Lapicque) else neuron.beta


def _heaviside(x: np.ndarray) -> np.ndarray:
    return (x > 0).astype(x.dtype)


def _stage_current(stage, p, x: np.ndarray) -> np.ndarray:
    """The stage's synaptic current [M, N] for flat input [M, N_in]."""
    if not stage.is_linear:
        return conv_ops.ops_forward(stage, p, x)
    current = x @ p["weight"].T
    if "bias" in p:
        current += p["bias"]
    return current


def forward(net: Sequential, params, x, num_steps=None) -> Record:
    """Run the net on x; return a Record of spikes, membranes, currents and grad masks."""
    dtype = check_params(net, params)
    x, num_steps, direct = check_input(net, x, num_steps, dtype)
    return _simulate(net, params, x, num_steps, direct)


def _simulate(net, params, x, num_steps, direct, spike_fns=None) -> Record:
    """The forward pass proper, on checked arguments.

    Layer l's spikes are `spike_fns[l](U - threshold)`. That is H except in the
    gradient tests, which swap in smooth functions whose derivative is the
    surrogate, so that finite differences can check the backward. The reset
    always uses H, as the contract says.
    """
    T = num_steps
    dtype = x.dtype
    rec = Record([], [], [], [], num_steps=T, direct_input=direct, _input=x)
    layer_in = x
    for l, (stage, p) in enumerate(zip(net.stages, params)):
        neuron = stage.neuron
        if direct and l == 0:
            current = _stage_current(stage, p, layer_in)  # [B, N]: once for all steps
            inputs = (current for _ in range(T))
            batch = layer_in.shape[0]
        else:
            batch = layer_in.shape[1]
            flat = _stage_current(stage, p, layer_in.reshape(T * batch, -1))
            inputs = iter(flat.reshape(T, batch, -1))
        n = stage.num_neurons
        theta = dtype.type(neuron.threshold)
        beta = dtype.type(_decay(neuron))
        mode = neuron.reset_mechanism
        U = np.empty((T, batch, n), dtype)
        S = np.empty((T, batch, n), dtype)
        J = np.empty((T, batch, n), dtype) if isinstance(neuron, Synaptic) else None
        u_prev = np.zeros((batch, n), dtype)
        s_prev = np.zeros((batch, n), dtype)
        j_prev = np.zeros((batch, n), dtype)
        if isinstance(neuron, Synaptic):
            alpha = dtype.type(neuron.alpha)
        if isinstance(neuron, RLeaky):
            v = p["recurrent_weight"]
            b_v = p.get("recurrent_bias")
        spike_fn = _heaviside if spike_fns is None else spike_fns[l]
        for t, i_t in enumerate(inputs):
            reset = (u_prev > theta).astype(dtype)
            if isinstance(neuron, Leaky):
                if mode == "zero":
                    u = beta * (1 - reset) * u_prev + i_t
                else:
                    u = beta * u_prev + i_t
            elif isinstance(neuron, Lapicque):
                u = beta * u_prev + dtype.type(neuron.gain) * i_t
                if mode == "zero":
                    u = (1 - reset) * u
            elif isinstance(neuron, Synaptic):
                j_prev = alpha * j_prev + i_t
                J[t] = j_prev
                u = beta * u_prev + j_prev
                if mode == "zero":
                    u = (1 - reset) * u
            else:  # RLeaky
                if neuron.all_to_all:
                    u = beta * u_prev + i_t + (s_prev @ v.T + b_v)
                else:
                    u = beta * u_prev + i_t + s_prev * v
                if mode == "zero":
                    u = (1 - reset) * u
            if mode == "subtract":
                u = u - reset * theta
            s = spike_fn(u - theta)
            U[t], S[t] = u, s
            u_prev, s_prev = u, s
        rec.spikes.append(S)
        rec.membranes.append(U)
        rec.currents.append(J)
        if neuron.sparse is None:
            rec.grad_masks.append(np.ones(U.shape, dtype=bool))
        else:
            rec.grad_masks.append(neuron.sparse.mask(U, theta))
        layer_in = S
    return rec


# --------------------------------------------------------------------------- backward


def backward(
    net: Sequential, params, rec: Record, d_spikes, d_membranes=None, input_grad: bool = False
):
    """BPTT by hand: gradients (same structure as params) from dL/dS and dL/dU of the
    output layer ([T, B, N_out] each; d_membranes may be None). With `input_grad`, returns
    (grads, dL/dx) with dL/dx shaped as the input, flat per sample ([B, N_in] or
    [T, B, N_in]; for layers upstream, e.g. in PyTorch)."""
    dtype = check_params(net, params)
    shape = rec.spikes[-1].shape
    for name, g in (("d_spikes", d_spikes), ("d_membranes", d_membranes)):
        if g is not None and np.shape(g) != shape:
            raise ValueError(
                f"{name} has shape {np.shape(g)}, expected the output layer's {shape} [T, B, N_out]"
            )
    d_spikes = np.asarray(d_spikes, dtype)
    if d_membranes is not None:
        d_membranes = np.asarray(d_membranes, dtype)
    return _backward(net, params, rec, d_spikes, d_membranes, input_grad)


def _backward(net, params, rec, g_spikes, g_membranes, input_grad=False):
    T = rec.num_steps
    grads = [None] * len(net)
    for l in reversed(range(len(net))):
        stage = net.stages[l]
        neuron = stage.neuron
        p = params[l]
        U = rec.membranes[l]
        dtype = U.dtype
        theta = dtype.type(neuron.threshold)
        beta = dtype.type(_decay(neuron))
        zero_reset = neuron.reset_mechanism == "zero"
        # dS/dU, zero wherever the sparse rule says so.
        dsdu = neuron.surrogate.grad(U - theta)
        if neuron.sparse is not None:
            dsdu = dsdu * rec.grad_masks[l]
        if zero_reset:
            keep = np.ones_like(U)  # keep[t] = 1 - R[t], R[t] = H(U[t-1] - theta)
            keep[1:] = U[:-1] <= theta
        g = {}
        # dI[t] = dL/dI[t], the gradient of the layer's synaptic input.
        if isinstance(neuron, Leaky):
            dU = dsdu * g_spikes
            if g_membranes is not None:
                dU += g_membranes
            # dU[t] += dU[t+1] * dU[t+1]/dU[t]; that factor is beta, or beta*(1-R[t+1]).
            for t in range(T - 2, -1, -1):
                carry = beta * dU[t + 1]
                dU[t] += carry * keep[t + 1] if zero_reset else carry
            d_input = dU
        elif isinstance(neuron, Synaptic):
            alpha = dtype.type(neuron.alpha)
            dU = dsdu * g_spikes
            if g_membranes is not None:
                dU += g_membranes
            for t in range(T - 2, -1, -1):
                carry = beta * dU[t + 1]
                dU[t] += carry * keep[t + 1] if zero_reset else carry
            # U[t] depends on J[t] with factor 1, or (1-R[t]) under zero reset.
            dJ = dU * keep if zero_reset else dU.copy()
            for t in range(T - 2, -1, -1):
                dJ[t] += alpha * dJ[t + 1]
            d_input = dJ
        elif isinstance(neuron, Lapicque):
            # U[t] = keep[t] (decay U[t-1] + gain I[t]) under the zero reset: the bracket's
            # gradient is both the carry and, times gain, dL/dI.
            d_base = np.empty_like(U)
            next_base = np.zeros(U.shape[1:], dtype)
            for t in range(T - 1, -1, -1):
                du = dsdu[t] * g_spikes[t] + beta * next_base
                if g_membranes is not None:
                    du += g_membranes[t]
                next_base = du * keep[t] if zero_reset else du
                d_base[t] = next_base
            d_input = dtype.type(neuron.gain) * d_base
        else:  # RLeaky
            v = p["recurrent_weight"]
            g_s = g_spikes
            d_base = np.empty_like(U)  # dL/d(beta U[t-1] + I[t] + V S[t-1] + b_V)
            next_base = np.zeros(U.shape[1:], dtype)
            for t in range(T - 1, -1, -1):
                # S[t] feeds U[t+1] through V: not detached.
                rec_grad = next_base @ v if neuron.all_to_all else next_base * v
                du = dsdu[t] * (g_s[t] + rec_grad) + beta * next_base
                if g_membranes is not None:
                    du += g_membranes[t]
                next_base = du * keep[t] if zero_reset else du
                d_base[t] = next_base
            S = rec.spikes[l]
            flat_base = d_base[1:].reshape(-1, d_base.shape[-1])
            flat_prev = S[:-1].reshape(-1, S.shape[-1])
            if neuron.all_to_all:
                g["recurrent_weight"] = flat_base.T @ flat_prev
                g["recurrent_bias"] = d_base.sum(axis=(0, 1))  # b_V enters every step
            else:
                g["recurrent_weight"] = (flat_base * flat_prev).sum(axis=0)
            d_input = d_base
        layer_in = rec._input if l == 0 else rec.spikes[l - 1]
        need_dx = l > 0 or input_grad
        if rec.direct_input and l == 0:
            d_input = d_input.sum(axis=0)  # the current is the same at every step: sum first
        g_weights, d_layer_in = _stage_backward(stage, p, layer_in, d_input, need_dx)
        g.update(g_weights)
        grads[l] = {k: g[k] for k in p}  # params' key order
        g_spikes, g_membranes = d_layer_in, None
    if input_grad:  # dL/dx shaped as the input was given
        return grads, g_spikes
    return grads


def _stage_backward(stage, p, layer_in, d_current, need_dx: bool):
    """(weight and bias grads, dL/dlayer_in or None) of a stage's synaptic current, for
    layer_in [.., N_in] and d_current [.., N] (leading axes [T, B] or [B])."""
    lead = d_current.shape[:-1]
    x = layer_in.reshape(-1, layer_in.shape[-1])
    d = d_current.reshape(-1, d_current.shape[-1])
    if stage.is_linear:
        g = {"weight": d.T @ x}
        if "bias" in p:
            g["bias"] = d.sum(axis=0)
        d_x = d @ p["weight"] if need_dx else None
    else:
        g, d_x = conv_ops.ops_backward(stage, p, x, d, need_dx)
    return g, None if d_x is None else d_x.reshape(*lead, -1)


def loss_and_grad(net: Sequential, params, x, y, loss, num_steps=None):
    """Forward, loss and full BPTT: returns (loss value as a float, grads, record).

    `loss` is a popsnn.losses loss object or its name ("ce_count", ...);
    `grads` has the structure of `params`.
    """
    from . import losses as _losses

    loss = _losses.get(loss) if isinstance(loss, str) else loss
    if not isinstance(loss, _losses.Loss):
        raise TypeError(
            f"loss must be a popsnn.losses loss or its name (one of {_losses.NAMES}), got {loss!r}"
        )
    rec = forward(net, params, x, num_steps)
    value, d_spikes, d_membranes = _loss_terms(loss, rec, y)
    grads = _backward(net, params, rec, d_spikes, d_membranes)
    return value, grads, rec


def _loss_terms(loss, rec, y):
    spikes, membranes = rec.spikes[-1], rec.membranes[-1]
    value = loss(spikes, membranes, y)
    d_spikes, d_membranes = loss.backward(spikes, membranes, y)
    return value, d_spikes, d_membranes
