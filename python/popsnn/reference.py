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
* Alpha: `E = alpha*E_prev + I`, `H = beta*H_prev - I`, `U = tau_alpha*(E + H)`;
  zero reset multiplies all three by (1-R); subtract takes `R*threshold` off E, zeroes H
  and adds `R*H_prev` to U (snnTorch's `_base_sub`, read literally).
* Half storage (`storage="float16"`, docs/numerics.md section 8): float32
  arithmetic, rounded to half where the device stores a value -- the
  parameters (weights, and beta/threshold when learned), the synaptic current
  I[t], U[t] and J[t] (Alpha: E[t], H[t]) after each update (spikes and resets
  come from the stored U), the surrogate trace, and the values exchanged
  between layers (direct-current input, dL/dS, dL/dU, dL/dI).
* beta and threshold are a number or one per neuron ([N], broadcast over the batch). A
  layer that learns them (learn_beta / learn_threshold) reads them from its params
  ("beta", "threshold"), beta clamped to [0, 1] where it is used, as snnTorch does.
* Backward: `dS/dU` is the layer's surrogate at `U - threshold`, multiplied by
  the layer's sparse-rule mask when it has one (entries off the mask carry
  exactly zero). The recurrent path of RLeaky carries gradient through
  S[t-1] (not detached, as snnTorch).

Parameters follow `layers.py`: one dict per (Linear, neuron) pair with
"weight" [out, in], "bias" [out] (unless Linear(bias=False)),
"recurrent_weight" [out, out] (all-to-all) or [out] (one-to-one) and
"recurrent_bias" [out] (all-to-all only) for RLeaky.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import conv_ops
from .layers import Alpha, Lapicque, Leaky, RLeaky, Sequential, Synaptic
from .precision import rounding, store_params

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
    Synaptic layer, the inhibitory current H (after its reset) for an Alpha layer, None
    otherwise; grad_masks[l]: [T, B, N_l] bool, the
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


def _constants(neuron, p, dtype) -> tuple:
    """(decay, threshold) as arrays that broadcast over [B, N]: the trained values when the
    layer learns them (beta clamped to [0, 1] where it is used, as snnTorch), else the
    layer's (one value, or one per neuron)."""
    decay = np.clip(p["beta"], 0, 1) if "beta" in p else _decay(neuron)
    return np.asarray(decay, dtype), np.asarray(p.get("threshold", neuron.threshold), dtype)


def _heaviside(x: np.ndarray) -> np.ndarray:
    return (x > 0).astype(x.dtype)


def forward(net: Sequential, params, x, num_steps=None, storage=None) -> Record:
    """Run the net on x; return a Record of spikes, membranes, currents and grad masks.
    `storage="float16"`: half storage of float32 parameters (see the module docstring)."""
    dtype = check_params(net, params)
    _check_storage(storage, dtype)
    x, num_steps, direct = check_input(net, x, num_steps, dtype)
    return _simulate(net, store_params(params, storage), x, num_steps, direct, storage=storage)


def _check_storage(storage, dtype) -> None:
    if storage not in (None, "float32", "float16"):
        raise ValueError(f"storage must be None, 'float32' or 'float16', got {storage!r}")
    if storage == "float16" and dtype != np.float32:
        raise ValueError(
            f"half storage rounds float32 arithmetic; the parameters are {dtype}: pass "
            f"float32 parameters (e.g. net.init_params(seed, np.float32))"
        )


def _stage_current(stage, p, x: np.ndarray) -> np.ndarray:
    """The stage's synaptic current [M, N] for flat input [M, N_in]."""
    if not stage.is_linear:
        return conv_ops.ops_forward(stage, p, x)
    current = x @ p["weight"].T
    if "bias" in p:
        current += p["bias"]
    return current


def _layer_inputs(stage, p, layer_in, direct, T):
    """(iterator over I[t] = W x[t] + b (or the stage's convolution), batch size)."""
    if direct:
        current = _stage_current(stage, p, layer_in)  # [B, N]: once for all steps
        return (current for _ in range(T)), layer_in.shape[0]
    batch = layer_in.shape[1]
    flat = _stage_current(stage, p, layer_in.reshape(T * batch, -1))
    return iter(flat.reshape(T, batch, -1)), batch


def _simulate(net, params, x, num_steps, direct, spike_fns=None, storage=None) -> Record:
    """The forward pass proper, on checked arguments.

    Layer l's spikes are `spike_fns[l](U - threshold)`. That is H except in the
    gradient tests, which swap in smooth functions whose derivative is the
    surrogate, so that finite differences can check the backward. The reset
    always uses H, as the contract says.
    """
    T = num_steps
    store = rounding(storage)
    x = store(x)
    rec = Record([], [], [], [], num_steps=T, direct_input=direct, _input=x)
    layer_in = x
    for l, (stage, p) in enumerate(zip(net.stages, params)):
        neuron = stage.neuron
        inputs, batch = _layer_inputs(stage, p, layer_in, direct and l == 0, T)
        inputs = (store(i_t) for i_t in inputs)
        spike_fn = _heaviside if spike_fns is None else spike_fns[l]
        shape = (T, batch, stage.num_neurons)
        U, S, J = _layer_forward(neuron, p, inputs, shape, spike_fn, store)
        theta = _constants(neuron, p, x.dtype)[1]
        rec.spikes.append(S)
        rec.membranes.append(U)
        rec.currents.append(J)
        if neuron.sparse is None:
            rec.grad_masks.append(np.ones(U.shape, dtype=bool))
        else:
            rec.grad_masks.append(neuron.sparse.mask(U, theta))
        layer_in = S
    return rec


def _layer_forward(neuron, p, inputs, shape, spike_fn, store) -> tuple:
    """(U, S, J) [T, B, N] of one layer; J is Synaptic's current (Alpha's H), else None.
    `store` rounds the states where the device stores them (half storage)."""
    dtype = p["weight"].dtype
    beta, theta = _constants(neuron, p, dtype)
    mode = neuron.reset_mechanism
    U, S = np.empty(shape, dtype), np.empty(shape, dtype)
    J = np.empty(shape, dtype) if isinstance(neuron, (Synaptic, Alpha)) else None
    u_prev, s_prev = np.zeros(shape[1:], dtype), np.zeros(shape[1:], dtype)
    state = [np.zeros(shape[1:], dtype), np.zeros(shape[1:], dtype)]  # J, or Alpha's E and H
    if isinstance(neuron, (Synaptic, Alpha)):
        alpha = np.asarray(neuron.alpha, dtype)
    for t, i_t in enumerate(inputs):
        reset = (u_prev > theta).astype(dtype)
        if isinstance(neuron, Leaky):
            u = beta * (1 - reset) * u_prev + i_t if mode == "zero" else beta * u_prev + i_t
        elif isinstance(neuron, Lapicque):
            u = beta * u_prev + dtype.type(neuron.gain) * i_t
        elif isinstance(neuron, Synaptic):
            state[0] = store(alpha * state[0] + i_t)
            J[t] = state[0]
            u = beta * u_prev + state[0]
        elif isinstance(neuron, Alpha):
            u = _alpha_step(neuron, alpha, beta, theta, state, i_t, reset, store)
            J[t] = state[1]
        else:  # RLeaky
            v = p["recurrent_weight"]
            rec_in = s_prev @ v.T + p["recurrent_bias"] if neuron.all_to_all else s_prev * v
            u = beta * u_prev + i_t + rec_in
        if mode == "zero" and not isinstance(neuron, (Leaky, Alpha)):
            u = (1 - reset) * u
        if mode == "subtract" and not isinstance(neuron, Alpha):
            u = u - reset * theta
        u = store(u)
        s = spike_fn(u - theta)
        U[t], S[t] = u, s
        u_prev, s_prev = u, s
    return U, S, J


def _tau_alpha(alpha, beta):
    """Alpha's factor from E + H to U, ln(alpha)/(ln(beta) - ln(alpha)) + 1 (snnTorch's)."""
    return np.log(alpha) / (np.log(beta) - np.log(alpha)) + 1


def _alpha_step(neuron, alpha, beta, theta, state, i_t, reset, store):
    """One step of snnTorch's Alpha: updates state = [E, H] in place (stored after the
    reset, as U is), returns U."""
    e_prev, h_prev = state
    e = alpha * e_prev + i_t
    h = beta * h_prev - i_t
    u = _tau_alpha(alpha, beta) * (e + h)
    if neuron.reset_mechanism == "zero":
        e, h, u = (1 - reset) * e, (1 - reset) * h, (1 - reset) * u
    elif neuron.reset_mechanism == "subtract":
        u = u + reset * h_prev
        e, h = e - reset * theta, (1 - reset) * h
    state[0], state[1] = store(e), store(h)
    return u


# --------------------------------------------------------------------------- backward


def backward(
    net: Sequential,
    params,
    rec: Record,
    d_spikes,
    d_membranes=None,
    input_grad: bool = False,
    storage=None,
):
    """BPTT by hand: gradients (same structure as params) from dL/dS and dL/dU of the
    output layer ([T, B, N_out] each; d_membranes may be None). With `input_grad`, returns
    (grads, dL/dx) with dL/dx shaped as the input, flat per sample ([B, N_in] or
    [T, B, N_in]; for layers upstream, e.g. in PyTorch).
    `storage` must be the forward's."""
    dtype = check_params(net, params)
    _check_storage(storage, dtype)
    shape = rec.spikes[-1].shape
    for name, g in (("d_spikes", d_spikes), ("d_membranes", d_membranes)):
        if g is not None and np.shape(g) != shape:
            raise ValueError(
                f"{name} has shape {np.shape(g)}, expected the output layer's {shape} [T, B, N_out]"
            )
    d_spikes = np.asarray(d_spikes, dtype)
    if d_membranes is not None:
        d_membranes = np.asarray(d_membranes, dtype)
    params = store_params(params, storage)
    return _backward(net, params, rec, d_spikes, d_membranes, input_grad, storage)


@dataclass
class _LayerGrad:
    """One layer's BPTT: dL/dI (`d_input`), dL/dU[t] of the whole graph (`d_mem`), the part
    that reached U through the spike (`d_fire` = dL/dS * dS/dU), and dL/d(the state the
    subtract reset takes threshold from) (`d_sub`: U, or Alpha's E)."""

    d_input: np.ndarray
    d_mem: np.ndarray
    d_fire: np.ndarray
    d_sub: np.ndarray
    # dL/dbeta per entry when it is not the common d_mem (1-R) U[t-1] (Alpha's).
    d_beta: np.ndarray | None = None


def _add_input_grads(g, p, d_input, layer_in, direct):
    """dL/dW (and dL/db) of the layer's input projection from dL/dI, into g."""
    n = d_input.shape[-1]
    if direct:
        g["weight"] = d_input.sum(axis=0).T @ layer_in  # sum_t dI[t]^T x, once
    else:
        g["weight"] = d_input.reshape(-1, n).T @ layer_in.reshape(-1, layer_in.shape[-1])
    if "bias" in p:
        g["bias"] = d_input.sum(axis=(0, 1))


def _backward(
    net, params, rec, g_spikes, g_membranes, input_grad=False, storage=None, hidden_grads=None
):
    """BPTT on the parameters as stored (store_params) and the forward's record.
    `hidden_grads[l]`: a further dL/dS of hidden layer l (a regulariser's), or None."""
    store = rounding(storage)
    g_spikes = store(g_spikes)
    g_membranes = None if g_membranes is None else store(g_membranes)
    grads = [None] * len(net)
    for l in reversed(range(len(net))):
        if hidden_grads is not None and hidden_grads[l] is not None:
            g_spikes = store(g_spikes + hidden_grads[l])
        stage = net.stages[l]
        neuron = stage.neuron
        p = params[l]
        U = rec.membranes[l]
        beta, theta = _constants(neuron, p, U.dtype)
        # dS/dU, zero wherever the sparse rule says so.
        dsdu = store(neuron.surrogate.grad(U - theta))
        if neuron.sparse is not None:
            dsdu = dsdu * rec.grad_masks[l]
        keep = np.ones_like(U)  # keep[t] = 1 - R[t], R[t] = H(U[t-1] - theta)
        keep[1:] = U[:-1] <= theta
        g = {}
        args = (neuron, p, U, beta, dsdu, keep, g_spikes, g_membranes)
        if isinstance(neuron, Alpha):
            lg = _bptt_alpha(*args, rec.currents[l])
        elif isinstance(neuron, RLeaky):
            lg = _bptt_rleaky(*args, rec.spikes[l], g)
        else:
            lg = _bptt_leaky(*args)
        g.update(_constant_grads(neuron, p, U, keep, lg))
        d_input = lg.d_input
        layer_in = rec._input if l == 0 else rec.spikes[l - 1]
        if rec.direct_input and l == 0:
            d_input = d_input.sum(axis=0)  # the current is the same at every step: sum first
        # dL/dI blocks are exchanged (stored) on their way to the layer below.
        sent = store(d_input) if l > 0 else d_input
        g_weights, d_layer_in = _stage_backward(
            stage, p, layer_in, d_input, sent, l > 0 or input_grad
        )
        g.update(g_weights)
        grads[l] = {k: g[k] for k in p}  # params' key order
        g_spikes, g_membranes = d_layer_in, None
    if input_grad:  # dL/dx as the input was given, flat per sample
        return grads, g_spikes
    return grads


def _stage_backward(stage, p, layer_in, d_current, d_sent, need_dx: bool):
    """(weight and bias grads, dL/dlayer_in or None) of a stage's synaptic current, for
    layer_in [.., N_in] and d_current [.., N] (leading axes [T, B] or [B]); the input gradient
    of a Linear stage is taken from d_sent (d_current as exchanged)."""
    lead = d_current.shape[:-1]
    x = layer_in.reshape(-1, layer_in.shape[-1])
    d = d_current.reshape(-1, d_current.shape[-1])
    if stage.is_linear:
        g = {"weight": d.T @ x}
        if "bias" in p:
            g["bias"] = d.sum(axis=0)
        d_x = d_sent.reshape(d.shape) @ p["weight"] if need_dx else None
    else:
        g, d_x = conv_ops.ops_backward(stage, p, x, d, need_dx)
    return g, None if d_x is None else d_x.reshape(*lead, -1)


def _bptt_leaky(neuron, p, U, beta, dsdu, keep, g_spikes, g_membranes) -> _LayerGrad:
    """Leaky, Synaptic and Lapicque: dU[t] += dU[t+1] * dU[t+1]/dU[t] (beta, or beta*(1-R[t+1])
    under the zero reset), then dL/dI through J (Synaptic) or Lapicque's gain."""
    zero_reset = neuron.reset_mechanism == "zero"
    d_fire = dsdu * g_spikes
    dU = d_fire + g_membranes if g_membranes is not None else d_fire.copy()
    for t in range(U.shape[0] - 2, -1, -1):
        carry = beta * dU[t + 1]
        dU[t] += carry * keep[t + 1] if zero_reset else carry
    d_input = dU
    if isinstance(neuron, Synaptic):
        # U[t] depends on J[t] with factor 1, or (1-R[t]) under zero reset.
        alpha = np.asarray(neuron.alpha, U.dtype)
        dJ = dU * keep if zero_reset else dU.copy()
        for t in range(U.shape[0] - 2, -1, -1):
            dJ[t] += alpha * dJ[t + 1]
        d_input = dJ
    elif isinstance(neuron, Lapicque):
        # U[t] = keep[t] (decay U[t-1] + gain I[t]) under the zero reset.
        d_input = U.dtype.type(neuron.gain) * (dU * keep if zero_reset else dU)
    return _LayerGrad(d_input, dU, d_fire, dU)


def _bptt_rleaky(neuron, p, U, beta, dsdu, keep, g_spikes, g_membranes, S, g) -> _LayerGrad:
    """RLeaky: the bracket beta U[t-1] + I[t] + V S[t-1] + b_V, gated by 1-R[t] under the
    zero reset; S[t] feeds U[t+1] through V (not detached, as snnTorch)."""
    zero_reset = neuron.reset_mechanism == "zero"
    v = p["recurrent_weight"]
    d_base = np.empty_like(U)  # dL/d(bracket)
    d_mem, d_fire = np.empty_like(U), np.empty_like(U)
    next_base = np.zeros(U.shape[1:], U.dtype)
    for t in range(U.shape[0] - 1, -1, -1):
        rec_grad = next_base @ v if neuron.all_to_all else next_base * v
        d_fire[t] = dsdu[t] * (g_spikes[t] + rec_grad)
        du = d_fire[t] + beta * next_base
        if g_membranes is not None:
            du += g_membranes[t]
        d_mem[t] = du
        next_base = du * keep[t] if zero_reset else du
        d_base[t] = next_base
    flat_base = d_base[1:].reshape(-1, d_base.shape[-1])
    flat_prev = S[:-1].reshape(-1, S.shape[-1])
    if neuron.all_to_all:
        g["recurrent_weight"] = flat_base.T @ flat_prev
        g["recurrent_bias"] = d_base.sum(axis=(0, 1))  # b_V enters every step
    else:
        g["recurrent_weight"] = (flat_base * flat_prev).sum(axis=0)
    return _LayerGrad(d_base, d_mem, d_fire, d_mem)


def _bptt_alpha(neuron, p, U, beta, dsdu, keep, g_spikes, g_membranes, H) -> _LayerGrad:
    """Alpha (see _alpha_step): E'[t] = a E[t-1] + I, H'[t] = b H[t-1] - I, U = k (E' + H').
    Zero/none: E, H, U = g E', g H', g U (g = 1-R[t] or 1). Subtract: E = E' - R theta,
    H = (1-R) H', U = k (E' + H') + R H[t-1]. dL/dI = dL/dE' - dL/dH'."""
    dtype = U.dtype
    a = np.asarray(neuron.alpha, dtype)
    k = _tau_alpha(a, beta)
    subtract = neuron.reset_mechanism == "subtract"
    gate = keep if neuron.reset_mechanism == "zero" else np.ones_like(U)
    d_fire = dsdu * g_spikes
    dU = d_fire + g_membranes if g_membranes is not None else d_fire
    d_e_pre, d_h_pre, d_e = (np.zeros_like(U) for _ in range(3))
    next_e = next_h = np.zeros(U.shape[1:], dtype)  # dL/dE'[t+1], dL/dH'[t+1]
    for t in range(U.shape[0] - 1, -1, -1):
        d_e[t] = a * next_e  # dL/dE[t]
        d_h = beta * next_h  # dL/dH[t]
        if subtract:
            if t + 1 < U.shape[0]:
                d_h = d_h + (1 - keep[t + 1]) * dU[t + 1]
            d_e_pre[t] = k * dU[t] + d_e[t]
            d_h_pre[t] = k * dU[t] + keep[t] * d_h
        else:
            d_e_pre[t] = gate[t] * (k * dU[t] + d_e[t])
            d_h_pre[t] = gate[t] * (k * dU[t] + d_h)
        next_e, next_h = d_e_pre[t], d_h_pre[t]
    lg = _LayerGrad(d_e_pre - d_h_pre, dU, d_fire, d_e)
    if "beta" in p:
        # b enters H' = b H[t-1] - I and k; g (E' + H') = (U - [subtract] R H[t-1]) / k.
        h_prev = np.concatenate([np.zeros_like(H[:1]), H[:-1]])
        base = U - (1 - keep) * h_prev if subtract else U
        log_a, log_b = np.log(a), np.log(beta)
        dk_db = -log_a / ((log_b - log_a) ** 2 * beta)
        lg.d_beta = d_h_pre * h_prev + dU * base / k * dk_db
    return lg


def _constant_grads(neuron, p, U, keep, lg: _LayerGrad) -> dict:
    """dL/dbeta and dL/dthreshold of a layer that learns them, summed to their shape.

    beta multiplies U[t-1] (times 1-R[t] under the zero reset, in every model's form), so
    dL/dbeta = sum_t dL/dU[t] (1-R[t]) U[t-1], zero where the clamp to [0, 1] is active
    (torch's clamp passes the gradient on the closed interval). threshold enters the spike,
    S = f(U - threshold), and the subtract reset, -R[t] threshold."""
    out = {}

    def reduce(total, shape):
        return total.sum(axis=(0, 1)) if shape else np.asarray(total.sum(), total.dtype)

    if "beta" in p:
        gate = keep if neuron.reset_mechanism == "zero" else 1
        d_beta = (lg.d_mem * gate)[1:] * U[:-1] if lg.d_beta is None else lg.d_beta
        inside = (p["beta"] >= 0) & (p["beta"] <= 1)
        out["beta"] = reduce(d_beta, p["beta"].shape) * inside
    if "threshold" in p:
        d_theta = -lg.d_fire
        if neuron.reset_mechanism == "subtract":
            d_theta = d_theta - (1 - keep) * lg.d_sub
        out["threshold"] = reduce(d_theta, p["threshold"].shape)
    return out


def loss_and_grad(
    net: Sequential,
    params,
    x,
    y,
    loss,
    num_steps=None,
    storage=None,
    loss_scale=1.0,
    regularizer=None,
):
    """Forward, loss and full BPTT: returns (loss value as a float, grads, record).

    `loss` is a popsnn.losses loss object or its name ("ce_count", ...);
    `grads` has the structure of `params`. A `regularizer` (popsnn.regularizers) on the
    hidden layers' spikes adds its value and its dL/dS. With `storage="float16"` the
    backward carries dL/dS times `loss_scale` (so that half does not flush it to zero) and
    the float32 gradients are divided by it again; they hold inf or NaN if half overflowed.
    """
    from . import losses as _losses

    loss = _losses.get(loss) if isinstance(loss, str) else loss
    if not isinstance(loss, _losses.Loss):
        raise TypeError(
            f"loss must be a popsnn.losses loss or its name (one of {_losses.NAMES}), got {loss!r}"
        )
    rec = forward(net, params, x, num_steps, storage)
    value, d_spikes, d_membranes = _loss_terms(loss, rec, y)
    hidden = None
    if regularizer is not None:
        terms = [regularizer.value_and_grad(s) for s in rec.spikes[:-1]]
        value += sum(v for v, _ in terms)
        hidden = [g for _, g in terms] + [None]
    if loss_scale != 1.0:
        scale = d_spikes.dtype.type(loss_scale)
        d_spikes = d_spikes * scale
        d_membranes = None if d_membranes is None else d_membranes * scale
        hidden = None if hidden is None else [g if g is None else g * scale for g in hidden]
    grads = _backward(
        net,
        store_params(params, storage),
        rec,
        d_spikes,
        d_membranes,
        storage=storage,
        hidden_grads=hidden,
    )
    if loss_scale != 1.0:
        with np.errstate(invalid="ignore", over="ignore"):
            grads = [{k: g / scale for k, g in p.items()} for p in grads]
    return value, grads, rec


def _loss_terms(loss, rec, y):
    spikes, membranes = rec.spikes[-1], rec.membranes[-1]
    value = loss(spikes, membranes, y)
    d_spikes, d_membranes = loss.backward(spikes, membranes, y)
    return value, d_spikes, d_membranes
