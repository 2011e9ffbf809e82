"""Shared builders for the reference tests: small nets, params with activity, smooth spikes.

Kept in a module with an unlikely name (tests/ has no packages) so it cannot
shadow another room's helper.
"""

from __future__ import annotations

import numpy as np

import popsnn
from popsnn import losses, surrogate

T_STEPS = 6
BATCH = 3
N_IN, N_HID, N_OUT = 3, 5, 4
NUM_CLASSES_POP = 2  # N_OUT = 4 outputs -> 2 classes of 2 neurons

MODELS = (
    "leaky",
    "synaptic",
    "rleaky_all",
    "rleaky_one",
    "lapicque",
    "alpha",
    "leaky_learn",
    "synaptic_learn",
    "rleaky_learn",
)
RESETS = ("subtract", "zero", "none")
SURROGATES = ("fast_sigmoid", "atan", "sigmoid", "straight_through")


def make_surrogate(name):
    return {
        "fast_sigmoid": surrogate.fast_sigmoid(5.0),
        "atan": surrogate.atan(2.0),
        "sigmoid": surrogate.sigmoid(5.0),
        "straight_through": surrogate.straight_through(),
    }[name]


def neuron(model, reset="subtract", sur="atan", rule=None, threshold=1.0, n=N_HID):
    """`n`: the layer's size, for the models with one beta / threshold per neuron."""
    kw = dict(
        reset_mechanism=reset, surrogate=make_surrogate(sur), sparse=rule, threshold=threshold
    )
    spread = np.linspace(-0.05, 0.05, n)
    if model == "leaky_learn":  # per-neuron beta and threshold, both trained
        kw["threshold"] = threshold + spread
        return popsnn.Leaky(beta=0.8 + spread, learn_beta=True, learn_threshold=True, **kw)
    if model == "synaptic_learn":  # one trained beta and threshold per layer
        return popsnn.Synaptic(alpha=0.6, beta=0.7, learn_beta=True, learn_threshold=True, **kw)
    if model == "rleaky_learn":  # per-neuron trained beta, fixed per-neuron threshold
        kw["threshold"] = threshold + spread
        return popsnn.RLeaky(beta=0.75 + spread, all_to_all=True, learn_beta=True, **kw)
    if model == "alpha_learn":  # per-neuron alpha, trained per-neuron beta (test_alpha.py)
        kw["threshold"] = threshold + spread
        return popsnn.Alpha(alpha=0.85 + spread, beta=0.6 + spread, learn_beta=True, **kw)
    if model == "alpha":  # tau_alpha = ln 0.85 / (ln 0.6 - ln 0.85) + 1 = 1.47
        return popsnn.Alpha(alpha=0.85, beta=0.6, learn_beta=True, learn_threshold=True, **kw)
    if model == "leaky":
        return popsnn.Leaky(beta=0.8, **kw)
    if model == "synaptic":
        return popsnn.Synaptic(alpha=0.6, beta=0.7, **kw)
    if model == "rleaky_all":
        return popsnn.RLeaky(beta=0.75, all_to_all=True, **kw)
    if model == "rleaky_one":
        return popsnn.RLeaky(beta=0.75, all_to_all=False, **kw)
    if model == "lapicque":  # decay 1 - 1/(R C) = 0.8, gain dt/C = 0.8
        return popsnn.Lapicque(R=4.0, C=1.25, **kw)
    raise ValueError(model)


def two_layer_net(model, reset="subtract", sur="atan", rule=None, n_out=N_OUT):
    return popsnn.Sequential(
        popsnn.Linear(N_IN, N_HID),
        neuron(model, reset, sur, rule, n=N_HID),
        popsnn.Linear(N_HID, n_out),
        neuron(model, reset, sur, rule, n=n_out),
    )


def mixed_net(sur="atan"):
    """Three layers, three neuron models, three resets, one Linear without bias."""
    return popsnn.Sequential(
        popsnn.Linear(N_IN, N_HID, bias=False),
        neuron("rleaky_all", "zero", sur),
        popsnn.Linear(N_HID, N_HID),
        neuron("synaptic", "subtract", sur),
        popsnn.Linear(N_HID, N_OUT),
        neuron("leaky", "zero", sur),
    )


def active_params(net, seed=0, dtype=np.float64):
    """Parameters large enough that every layer fires and resets within a few steps."""
    rng = np.random.default_rng(seed)
    params = net.init_params(rng, dtype=dtype)
    for p in params:
        p["weight"] = rng.normal(0.0, 1.2, p["weight"].shape).astype(dtype)
        if "bias" in p:
            p["bias"] = rng.normal(0.4, 0.3, p["bias"].shape).astype(dtype)
        if "recurrent_weight" in p:
            p["recurrent_weight"] = rng.normal(0.0, 0.5, p["recurrent_weight"].shape).astype(dtype)
        if "recurrent_bias" in p:
            p["recurrent_bias"] = rng.normal(0.0, 0.2, p["recurrent_bias"].shape).astype(dtype)
    return params


def sequence_input(seed=1, steps=T_STEPS, batch=BATCH, n_in=N_IN, dtype=np.float64):
    return np.random.default_rng(seed).uniform(0.0, 1.5, (steps, batch, n_in)).astype(dtype)


def targets(seed=2, batch=BATCH, num_classes=N_OUT):
    return np.random.default_rng(seed).integers(0, num_classes, batch)


LOSS_CASES = {
    "ce_count": lambda: losses.ce_count_loss(),
    "ce_count_pop": lambda: losses.ce_count_loss(population_code=True, num_classes=NUM_CLASSES_POP),
    "ce_rate": lambda: losses.ce_rate_loss(),
    "mse_count": lambda: losses.mse_count_loss(correct_rate=0.8, incorrect_rate=0.2),
    "mse_count_pop": lambda: losses.mse_count_loss(
        correct_rate=0.8, incorrect_rate=0.2, population_code=True, num_classes=NUM_CLASSES_POP
    ),
    "mse_membrane": lambda: losses.mse_membrane_loss(on_target=1.2, off_target=0.1),
    "ce_max_membrane": lambda: losses.ce_max_membrane_loss(),
}


def loss_classes(loss):
    return loss.num_classes or N_OUT


# ----------------------------------------------------------------- smooth spike functions


def antiderivative(sur):
    """F with F' = sur.grad: the smooth spike function whose exact gradient is the surrogate."""
    k = sur.param
    if sur.name == "fast_sigmoid":
        return lambda x: x / (1.0 + k * np.abs(x))
    if sur.name == "atan":
        return lambda x: np.arctan(np.pi * k * x / 2) / np.pi
    if sur.name == "sigmoid":
        return lambda x: 0.5 * (1.0 + np.tanh(0.5 * k * x))
    if sur.name == "straight_through":
        return lambda x: x.copy()
    raise ValueError(sur.name)


def smooth_spike_fn(neuron_):
    """The spike function f(x), x = U - threshold, with f' = surrogate * sparse mask.

    Masking the derivative by |x| < b (window) or x >= theta_grad - threshold
    (one-sided) is the same as clipping x into that region before F.
    """
    F = antiderivative(neuron_.surrogate)
    rule = neuron_.sparse
    if rule is None:
        return F
    if rule.kind == "window":
        return lambda x: F(np.clip(x, -rule.value, rule.value))
    lo = rule.value - np.asarray(neuron_.threshold)
    return lambda x: F(np.maximum(x, lo))
