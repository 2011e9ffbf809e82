"""Per-neuron and learnable beta / threshold (and Synaptic's per-neuron alpha) on the engine
devices, against the float32 dense reference (docs/numerics.md section 2): every neuron model
and reset, constants one per neuron or learned (one per layer or per neuron), the sparse rules
(the reference's masked surrogate), multi-tile geometries (a layer-wide learned constant's
gradient summed over shards), sample chunks, beta's clamp, and training side by side with the
reference's optimisers. See engine_helpers for the tolerances."""

import numpy as np
import pytest
from engine_helpers import (
    assert_equals_reference,
    labels_for,
    make_input,
    sgd_backend,
    sharded_case,
    train_like_the_reference,
)

import popsnn
from popsnn import losses, optim, sparse
from popsnn.engine import EngineBackend

BATCH, STEPS = 5, 8

MODELS = {
    "leaky-subtract": (popsnn.Leaky, {}),
    "leaky-zero": (popsnn.Leaky, dict(reset_mechanism="zero")),
    "leaky-none": (popsnn.Leaky, dict(reset_mechanism="none")),
    "synaptic-subtract": (popsnn.Synaptic, {}),
    "synaptic-zero": (popsnn.Synaptic, dict(reset_mechanism="zero")),
    "rleaky-all-subtract": (popsnn.RLeaky, {}),
    "rleaky-all-zero": (popsnn.RLeaky, dict(reset_mechanism="zero")),
    "rleaky-one-subtract": (popsnn.RLeaky, dict(all_to_all=False)),
    "rleaky-one-zero": (popsnn.RLeaky, dict(all_to_all=False, reset_mechanism="zero")),
    "lapicque-subtract": (popsnn.Lapicque, {}),
    "lapicque-zero": (popsnn.Lapicque, dict(reset_mechanism="zero")),
    "alpha-subtract": (popsnn.Alpha, dict(reset_mechanism="subtract")),
    "alpha-zero": (popsnn.Alpha, {}),
    "alpha-none": (popsnn.Alpha, dict(reset_mechanism="none")),
}

# How the constants are given: one per neuron (fixed), or learned one per layer / per neuron.
MODES = ("per-neuron", "learn-layer", "learn-neuron")


def neuron(model, mode, n, rule=None):
    cls, kw = MODELS[model]
    per_neuron = mode != "learn-layer"
    threshold = np.linspace(0.8, 1.2, n) if per_neuron else 0.95
    kw = dict(kw, threshold=threshold, sparse=rule)
    if mode != "per-neuron":
        kw["learn_threshold"] = True
    if cls is popsnn.Lapicque:  # steps with R and C: only its threshold is per neuron
        return cls(beta=0.85, C=0.5, **kw)
    kw["beta"] = np.linspace(0.6, 0.95, n) if per_neuron else 0.85
    if mode != "per-neuron":
        kw["learn_beta"] = True
    if cls is popsnn.Synaptic:
        kw["alpha"] = np.linspace(0.5, 0.7, n) if per_neuron else 0.6
    if cls is popsnn.Alpha:  # 0 < beta < alpha; tau_alpha per neuron from both
        kw["beta"] = np.linspace(0.6, 0.8, n) if per_neuron else 0.75
        kw["alpha"] = np.linspace(0.85, 0.95, n) if per_neuron else 0.9
        kw["threshold"] = kw["threshold"] * 0.5  # its membrane is smaller: fire all the same
    return cls(**kw)


def net_of(model, mode, rule=None, sizes=(7, 12, 4)):
    """Two layers of the model, both with the constants (the output layer's own path too)."""
    n_in, hidden, out = sizes
    return popsnn.Sequential(
        popsnn.Linear(n_in, hidden),
        neuron(model, mode, hidden, rule),
        popsnn.Linear(hidden, out),
        neuron(model, mode, out, rule),
    )


def check(net, direct, loss=None, seed=3, params=None, **options):
    loss = loss or losses.ce_count_loss()
    x, raw = make_input(net, BATCH, STEPS, direct, seed=seed, scale=2.0, density=0.6)
    y = labels_for(loss, net, raw)
    params = params if params is not None else net.init_params(seed + 1)
    backend = sgd_backend(net, params, loss, steps=STEPS, batch=BATCH, **options)
    assert_equals_reference(backend, net, params, loss, x, y, STEPS)
    return backend


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("model", sorted(MODELS))
def test_constants_equal_the_reference(model, mode):
    net = net_of(model, mode)
    check(net, direct=model < "n")  # both input layouts over the models
    learned = [set(p) & {"beta", "threshold"} for p in net.init_params(0)]
    assert learned[0] == (set() if mode == "per-neuron" else set(net.pairs[0][1].learned()))


RULES = {"window": sparse.window(0.6), "one-sided": sparse.one_sided(0.3)}


@pytest.mark.parametrize("rule", sorted(RULES))
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "model", ["leaky-subtract", "synaptic-zero", "rleaky-all-subtract", "alpha-subtract"]
)
def test_sparse_rules_equal_the_masked_reference(model, mode, rule):
    """With a rule, only the entries inside it carry gradient, to the learned constants too:
    the engine equals the reference's masked surrogate (exact for the rule)."""
    check(net_of(model, mode, RULES[rule]), direct=rule == "window")


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "per-step"])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "model", ["leaky-subtract", "synaptic-zero", "rleaky-all-subtract", "alpha-zero"]
)
def test_a_narrow_rule_keeps_the_compressed_trace_and_equals_the_masked_reference(
    model, mode, direct
):
    """The rules above fill most of the trace, so the plan keeps it dense; a narrow window in
    a small trace stays compressed (the live-list Leaky path included) and must agree too."""
    net = net_of(model, mode, sparse.window(0.1))
    backend = check(
        net,
        direct=direct,
        trace_activity=0.05,
        on_overflow="grow",
        sparse_backward_max_live=1.0,  # compressed however live (the dense side: its own test)
    )
    prof = backend.profile()
    assert [prof[f"layer{l}_compressed_trace"] for l in range(2)] == [1, 1]


@pytest.mark.parametrize("model", ["leaky-subtract", "alpha-subtract"])
def test_membrane_loss_reaches_the_learned_constants(model):
    net = net_of(model, "learn-neuron")
    check(net, direct=True, loss=losses.mse_membrane_loss())


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "per-step"])
@pytest.mark.parametrize("reset", ["subtract", "zero"])
@pytest.mark.parametrize("per_neuron", [True, False], ids=["per-neuron", "per-layer"])
def test_a_learned_beta_alone_takes_the_fused_leaky_pass_and_equals_the_reference(
    per_neuron, reset, direct
):
    """A Leaky layer feeding another whose beta is learned and threshold not: the fused
    backward pass with beta as a row, its gradient's terms added after (LifBackward's step1)."""
    beta = np.linspace(0.6, 0.95, 12) if per_neuron else 0.85
    net = popsnn.Sequential(
        popsnn.Linear(7, 12),
        popsnn.Leaky(beta=beta, learn_beta=True, reset_mechanism=reset),
        popsnn.Linear(12, 4),
        popsnn.Leaky(beta=0.85, threshold=0.5),
    )
    check(net, direct=direct)
    assert set(net.init_params(0)[0]) == {"weight", "bias", "beta"}


def test_beta_outside_the_clamp_passes_no_gradient():
    """As snnTorch: the update uses clamp(beta, 0, 1) and no gradient passes where the clamp
    is active (an optimiser may move a learned beta out of [0, 1])."""
    net = net_of("leaky-zero", "learn-neuron")
    params = net.init_params(4)
    params[0]["beta"][:3] = [1.25, -0.1, 1.0]  # clamped, clamped, on the closed interval
    params[1]["beta"] = np.full(4, 1.5, np.float32)
    backend = check(net, direct=True, params=params)
    grads = backend.loss_and_grad(*make_case(net))[1]
    assert grads[0]["beta"][0] == 0 and grads[0]["beta"][1] == 0 and grads[0]["beta"][2] != 0
    assert np.all(grads[1]["beta"] == 0)


def make_case(net, seed=3):
    x, raw = make_input(net, BATCH, STEPS, True, seed=seed, scale=2.0, density=0.6)
    return x, labels_for(losses.ce_count_loss(), net, raw)


def sharded_net(mode, rule=None):
    """The sharded cases' three layers (Leaky, RLeaky, Synaptic) with the constants."""
    return popsnn.Sequential(
        popsnn.Linear(40, 48),
        neuron("leaky-subtract", mode, 48, rule),
        popsnn.Linear(48, 36),
        neuron("rleaky-all-zero", mode, 36, rule),
        popsnn.Linear(36, 20),
        neuron("synaptic-subtract", mode, 20, rule),
    )


GEOMETRIES = {
    "1x16": dict(num_ipus=1, tiles_per_ipu=16),
    # 32 KiB per tile: the step-major schedule.
    "2x8-32KiB": dict(num_ipus=2, tiles_per_ipu=8, memory_bytes_per_tile=32 * 1024),
}


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "per-step"])
@pytest.mark.parametrize("geometry", sorted(GEOMETRIES))
@pytest.mark.parametrize("mode", ["learn-layer", "learn-neuron"])
def test_sharded_layers_sum_the_gradients_over_shards(mode, geometry, direct):
    net = sharded_net(mode, sparse.window(0.5) if direct else None)
    backend, params, loss, x, y = sharded_case(
        net, direct, batch=4, steps=STEPS, **GEOMETRIES[geometry]
    )
    layout = backend.profile()
    assert all(layout[f"layer{l}_shards"] >= 10 for l in range(3))
    assert layout["step_major"] == (1 if "KiB" in geometry else 0)
    assert_equals_reference(backend, net, params, loss, x, y, STEPS)


def test_sample_chunks_sum_the_learned_constants_gradients():
    net = sharded_net("learn-layer")
    backend, params, loss, x, y = sharded_case(
        net,
        True,
        batch=12,
        steps=STEPS,
        num_ipus=2,
        tiles_per_ipu=8,
        memory_bytes_per_tile=24 * 1024,
    )
    assert backend.profile()["sample_chunks"] > 1
    assert_equals_reference(backend, net, params, loss, x, y, STEPS)


OPTIMIZERS = {
    "sgd-momentum": lambda: optim.SGD(lr=0.05, momentum=0.9, weight_decay=1e-3),
    "adam": lambda: optim.Adam(lr=0.02),
    "adamw": lambda: optim.AdamW(lr=0.02, weight_decay=0.05),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("mode", ["learn-layer", "learn-neuron"])
def test_training_steps_equal_the_reference_trainer(mode, name):
    """A few optimiser steps side by side with popsnn.optim on the reference: the learned
    beta and threshold move like the weights (the same formulas, weight decay included)."""
    net = net_of("synaptic-subtract" if name == "adam" else "leaky-zero", mode)
    loss = losses.ce_count_loss()
    x, raw = make_input(net, BATCH, STEPS, True, seed=5, scale=2.0, density=0.6)
    y = labels_for(loss, net, raw)
    params = net.init_params(6)
    backend = EngineBackend(
        net, params, loss, OPTIMIZERS[name](), num_steps=STEPS, batch_size=BATCH, device="cpu"
    )
    ref = train_like_the_reference(
        backend, net, params, loss, OPTIMIZERS[name](), x, y, every_step=True, what=name
    )
    moved = backend.get_params()[0]
    assert not np.array_equal(moved["beta"], params[0]["beta"])
    assert np.shape(moved["threshold"]) == np.shape(ref[0]["threshold"])
    keys = {(l, key) for l, key, _ in backend.optimizer_state()["state"]}
    assert {(0, "beta"), (0, "threshold"), (1, "beta")} <= keys


@pytest.mark.parametrize("mode", ["learn-layer", "learn-neuron"])
def test_alpha_training_steps_equal_the_reference_trainer(mode):
    """Alpha's learned beta moves tau_alpha too (as snnTorch): a few Adam steps on the engine
    side by side with the reference, tau_alpha recomputed from the moved beta each step."""
    net = net_of("alpha-subtract", mode)
    loss = losses.ce_count_loss()
    x, raw = make_input(net, BATCH, STEPS, True, seed=5, scale=2.0, density=0.6)
    y = labels_for(loss, net, raw)
    params = net.init_params(6)
    backend = EngineBackend(
        net, params, loss, optim.Adam(lr=0.02), num_steps=STEPS, batch_size=BATCH, device="cpu"
    )
    train_like_the_reference(
        backend, net, params, loss, optim.Adam(lr=0.02), x, y, every_step=True, what=mode
    )
    moved = backend.get_params()
    assert not np.array_equal(moved[0]["beta"], params[0]["beta"])
    assert not np.array_equal(moved[1]["threshold"], params[1]["threshold"])


def test_cpp_checks_alphas_constants_neuron_by_neuron_in_one_line():
    """A C++ user's spec (the binding's dict here): 0 < beta < alpha for every neuron."""
    from popsnn import _native

    layer = {"inputs": 4, "outputs": 3, "neuron": "Alpha", "alpha": 0.9}
    spec = {"layers": [layer], "loss": {"name": "ce_count"}, "optimizer": {"name": "sgd"}}
    spec.update(batch_size=2, num_steps=3)
    layer["beta"] = np.array([0.5, 0.95, 0.6], np.float32)
    with pytest.raises(ValueError) as err:
        _native.plan(spec, 16)
    assert "Alpha needs 0 < beta < alpha" in str(err.value) and "at neuron 1" in str(err.value)
    assert "\n" not in str(err.value)
    layer["beta"] = np.array([0.5, 0.85, 0.6], np.float32)
    assert _native.plan(spec, 16)["layers"]
