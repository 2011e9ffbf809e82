"""The training step's fused first-layer weight step (DirectWeightAdamStep / DirectWeightSgdStep:
the weight gradient computed a group of rows at a time and those weights stepped at once, on the
cpu device with float storage and the whole batch at once) against the reference's optimiser,
and against the separate path (DirectWeightGrad, then AdamStep / SgdStep), which the IPU model,
chunked batches and the gradients-only program keep. Both sides of the weight gradient's density
choice (sparse rows below half the entries non-zero, the dense product above), batches 1, 8
and 128, sparse rules off and on. The kernels' bit-identity with the separate passes:
test_kernel_units (fused_step_*)."""

import copy

import numpy as np
import pytest
from engine_helpers import assert_close, make_input, train_like_the_reference

import popsnn
from popsnn import losses, optim, reference, sparse
from popsnn.engine import EngineBackend

STEPS = 6
OPTIMIZERS = {
    "adam": lambda: optim.Adam(lr=1e-3, weight_decay=0.01),
    "adamw": lambda: optim.AdamW(lr=1e-3, weight_decay=0.05),
    "sgd-momentum": lambda: optim.SGD(lr=0.05, momentum=0.9, nesterov=True, weight_decay=0.01),
    "sgd": lambda: optim.SGD(lr=0.05),
}
DENSITIES = {"sparse-rows": 0.2, "dense-product": 0.9}


def make_net(rule):
    return popsnn.Sequential(
        popsnn.Linear(40, 30),
        popsnn.Leaky(beta=0.9, sparse=rule),
        popsnn.Linear(30, 5),
        popsnn.Leaky(beta=0.9, sparse=rule),
    )


def case(rule, batch, density, seed=3):
    net = make_net(rule)
    x, raw = make_input(net, batch, STEPS, True, seed=seed, scale=2.0, density=density)
    return net, x, raw % 5, net.init_params(seed + 1), losses.ce_count_loss()


def backend_for(net, params, loss, opt, batch, device, **options):
    if device == "ipu-model":
        options.setdefault("tiles_per_ipu", 4)
    return EngineBackend(
        net, params, loss, opt, num_steps=STEPS, batch_size=batch, device=device, **options
    )


def weight_grad_runs(backend):
    """How often DirectWeightGrad's compute set ran (the profile summary's execs column)."""
    lines = backend.profile()["estimate_summary"].splitlines()
    return sum(int(line.split()[2]) for line in lines if "Execute(direct_weight_grad)" in line)


@pytest.mark.parametrize("rule", [None, sparse.window(0.5)], ids=["no-rule", "window"])
@pytest.mark.parametrize("density", list(DENSITIES.values()), ids=list(DENSITIES))
@pytest.mark.parametrize("batch", [1, 8, 128])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_fused_step_equals_the_reference(name, batch, density, rule):
    """Three cpu train steps (the fused weight step) beside the reference's optimiser."""
    net, x, y, params, loss = case(rule, batch, density)
    backend = backend_for(net, params, loss, OPTIMIZERS[name](), batch, "cpu")
    train_like_the_reference(
        backend, net, params, loss, OPTIMIZERS[name](), x, y, what=f"{name} B {batch}"
    )


@pytest.mark.parametrize("rule", [None, sparse.window(0.5)], ids=["no-rule", "window"])
@pytest.mark.parametrize("density", list(DENSITIES.values()), ids=list(DENSITIES))
@pytest.mark.parametrize("name", ["adam", "sgd-momentum"])
def test_fused_step_equals_the_separate_path(name, density, rule):
    """The cpu device's fused step and the IPU model's separate vertices (DirectWeightGrad over
    its workers, then the optimiser) train to the same weights: the same sums and the same
    per-entry arithmetic, to float rounding of the layers' other sums."""
    batch = 8
    net, x, y, params, loss = case(rule, batch, density, seed=5)
    results = []
    for device in ("cpu", "ipu-model"):
        backend = backend_for(net, copy.deepcopy(params), loss, OPTIMIZERS[name](), batch, device)
        for _ in range(3):
            backend.train_step(x, y)
        # Only the separate path runs DirectWeightGrad's compute set in a train step (counted
        # since the engine's last build: a grown buffer rebuilds it).
        assert (weight_grad_runs(backend) > 0) == (device == "ipu-model"), device
        results.append(backend.get_params())
    for l, (fused, separate) in enumerate(zip(*results)):
        for key in separate:
            assert_close(fused[key], separate[key], f"layer {l} {key}", rel=1e-6)


def test_gradients_after_fused_steps_equal_the_reference():
    """The gradients-only program still writes the first layer's weight gradient (the fused
    training step leaves it unwritten): loss_and_grad after two train steps equals the
    reference at the trained parameters."""
    net, x, y, params, loss = case(None, 8, 0.3)
    backend = backend_for(net, params, loss, optim.Adam(lr=0.01), 8, "cpu")
    for _ in range(2):
        backend.train_step(x, y)
    value, grads = backend.loss_and_grad(x, y)
    assert weight_grad_runs(backend) == 1
    trained = backend.get_params()
    ref_value, ref_grads, _ = reference.loss_and_grad(net, trained, x, y, loss, num_steps=STEPS)
    assert value == pytest.approx(ref_value, rel=2e-5)
    assert np.abs(ref_grads[0]["weight"]).max() > 0
    for l, (g, r) in enumerate(zip(grads, ref_grads)):
        for key in r:
            assert_close(g[key], r[key], f"grad layer {l} {key}")
