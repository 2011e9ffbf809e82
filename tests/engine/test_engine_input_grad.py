"""The engine's input gradient dL/dx for direct-current input x [B, N_in]: the device sums
dL/dI over the steps per shard (and chunk of samples), the host multiplies by the first
layer's W. Checked against the reference's `backward(..., input_grad=True)` in float32 (see
engine_helpers for the tolerances): tile geometries, both schedules, sparse rules on and
off, the batch in chunks of samples, a partial batch. [T, B, N_in] input has no input
gradient on the engine: one clear error."""

import numpy as np
import pytest
from engine_helpers import assert_close, assert_grads_close, labels_for, make_input, sgd_backend

import popsnn
from popsnn import losses, reference, sparse

BATCH, STEPS = 4, 8


def big_net(rule=None):
    return popsnn.Sequential(
        popsnn.Linear(40, 48),
        popsnn.Leaky(beta=0.9, sparse=rule),
        popsnn.Linear(48, 36),
        popsnn.RLeaky(beta=0.85, sparse=rule),
        popsnn.Linear(36, 20),
        popsnn.Synaptic(alpha=0.6, beta=0.85, sparse=rule),
    )


def reference_input_grad(net, params, x, y, loss):
    """(loss, grads, dL/dx) of the float32 reference."""
    rec = reference.forward(net, params, x, STEPS)
    spikes, membranes = rec.spikes[-1], rec.membranes[-1]
    d_s, d_u = loss.backward(spikes, membranes, y)
    grads, d_x = reference.backward(net, params, rec, d_s, d_u, input_grad=True)
    return loss(spikes, membranes, y), grads, d_x


# (device options, sample chunks expected, schedule expected: 1 step-major)
GEOMETRIES = {
    "cpu": ({}, 1, 0),
    "1x16": (dict(num_ipus=1, tiles_per_ipu=16), 1, 0),
    "2x8": (dict(num_ipus=2, tiles_per_ipu=8), 1, 0),
    "2x8-32KiB": (dict(num_ipus=2, tiles_per_ipu=8, memory_bytes_per_tile=32 * 1024), 1, 1),
}


def check_input_grad(backend, net, params, loss, x, y):
    value, grads, d_x = backend.loss_and_input_grad(x, y)
    ref_value, ref_grads, ref_d_x = reference_input_grad(net, params, x, y, loss)
    assert np.abs(ref_d_x).max() > 0
    assert d_x.shape == x.shape and d_x.dtype == np.float32
    assert value == pytest.approx(ref_value, rel=2e-5)
    assert_grads_close(grads, ref_grads)
    assert_close(d_x, ref_d_x, "dL/dx")


@pytest.mark.parametrize("rule", [None, sparse.window(0.5)], ids=["dense", "window"])
@pytest.mark.parametrize("geometry", sorted(GEOMETRIES))
def test_input_grad_equals_the_reference(geometry, rule):
    options, chunks, step_major = GEOMETRIES[geometry]
    net = big_net(rule)
    loss = losses.ce_count_loss(population_code=True, num_classes=5)
    x, raw = make_input(net, BATCH, STEPS, True, seed=11)
    y = labels_for(loss, net, raw)
    params = net.init_params(12)
    device = "cpu" if geometry == "cpu" else "ipu-model"
    backend = sgd_backend(net, params, loss, steps=STEPS, batch=BATCH, device=device, **options)
    layout = backend.profile()
    assert (layout["sample_chunks"], layout["step_major"]) == (chunks, step_major)
    check_input_grad(backend, net, params, loss, x, y)
    # A partial batch: dL/dx of the valid samples only.
    check_input_grad(backend, net, params, loss, x[:3], y[:3])


@pytest.mark.parametrize("kib", [24, 32])
@pytest.mark.parametrize("rule", [None, sparse.window(0.5)], ids=["dense", "window"])
def test_input_grad_of_a_batch_in_chunks_equals_the_reference(kib, rule):
    net = big_net(rule)
    batch = 12
    loss = losses.ce_count_loss(population_code=True, num_classes=5)
    x, raw = make_input(net, batch, STEPS, True, seed=11)
    y = labels_for(loss, net, raw)
    params = net.init_params(12)
    geometry = dict(num_ipus=2, tiles_per_ipu=8, memory_bytes_per_tile=kib * 1024)
    backend = sgd_backend(
        net, params, loss, steps=STEPS, batch=batch, device="ipu-model", **geometry
    )
    assert backend.profile()["sample_chunks"] > 1
    check_input_grad(backend, net, params, loss, x, y)
    # A partial batch: the padding samples, in whichever chunk they fall, are cut off.
    check_input_grad(backend, net, params, loss, x[:5], y[:5])


def test_input_grad_after_training_steps_uses_the_current_weights():
    net = big_net()
    loss = losses.ce_count_loss(population_code=True, num_classes=5)
    x, raw = make_input(net, BATCH, STEPS, True, seed=3)
    y = labels_for(loss, net, raw)
    backend = sgd_backend(net, net.init_params(1), loss, steps=STEPS, batch=BATCH, lr=0.5)
    backend.train_step(x, y)
    check_input_grad(backend, net, backend.get_params(), loss, x, y)


def test_per_step_input_has_no_input_grad_on_the_engine():
    net = big_net()
    loss = losses.ce_count_loss(population_code=True, num_classes=5)
    x, raw = make_input(net, BATCH, STEPS, False, seed=11)
    backend = sgd_backend(net, net.init_params(0), loss, steps=STEPS, batch=BATCH)
    with pytest.raises(ValueError, match=r"needs direct-current input \[B, N_in\]") as err:
        backend.loss_and_input_grad(x, labels_for(loss, net, raw))
    assert "\n" not in str(err.value)
