"""The engine's input gradient dL/dx: the device keeps the first layer's dL/dI (for
direct-current input x [B, N_in] its sum over the steps; for x [T, B, N_in] every step's,
on an engine built for it), per shard and chunk of samples; the host multiplies by that
layer's W. Checked against the reference's `backward(..., input_grad=True)` in float32 (see
engine_helpers for the tolerances): both input layouts, tile geometries, both schedules,
sparse rules on and off, the batch in chunks of samples, a partial batch."""

import numpy as np
import pytest
from engine_helpers import (
    assert_close,
    assert_grads_close,
    big_net,
    labels_for,
    make_input,
    sgd_backend,
    sharded_case,
)

import popsnn
from popsnn import losses, reference, sparse

BATCH, STEPS = 4, 8


def reference_input_grad(net, params, x, y, loss):
    """(loss, grads, dL/dx) of the float32 reference."""
    rec = reference.forward(net, params, x, STEPS if x.ndim == 2 else None)
    spikes, membranes = rec.spikes[-1], rec.membranes[-1]
    d_s, d_u = loss.backward(spikes, membranes, y)
    grads, d_x = reference.backward(net, params, rec, d_s, d_u, input_grad=True)
    return loss(spikes, membranes, y), grads, d_x


# The id trace at the whole shard's size (not measured on the first minibatch): the tight
# geometries then need the step-major schedule or chunks of samples, the paths checked.
WHOLE_ID_TRACE = dict(spike_activity=1.0)
# (device options, sample chunks expected, schedule expected: 1 step-major)
GEOMETRIES = {
    "cpu": ({}, 1, 0),
    "1x16": (dict(num_ipus=1, tiles_per_ipu=16), 1, 0),
    "2x8": (dict(num_ipus=2, tiles_per_ipu=8), 1, 0),
    "2x8-32KiB": (
        dict(num_ipus=2, tiles_per_ipu=8, memory_bytes_per_tile=32 * 1024, **WHOLE_ID_TRACE),
        1,
        1,
    ),
}


def check_input_grad(backend, net, params, loss, x, y):
    value, grads, d_x = backend.loss_and_input_grad(x, y)
    ref_value, ref_grads, ref_d_x = reference_input_grad(net, params, x, y, loss)
    assert np.abs(ref_d_x).max() > 0
    assert d_x.shape == x.shape and d_x.dtype == np.float32
    assert value == pytest.approx(ref_value, rel=2e-5)
    assert_grads_close(grads, ref_grads)
    assert_close(d_x, ref_d_x, "dL/dx")


def partial(x, n):
    return x[:n] if x.ndim == 2 else x[:, :n]


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "per-step"])
@pytest.mark.parametrize("rule", [None, sparse.window(0.5)], ids=["dense", "window"])
@pytest.mark.parametrize("geometry", sorted(GEOMETRIES))
def test_input_grad_equals_the_reference(geometry, rule, direct):
    options, chunks, step_major = GEOMETRIES[geometry]
    net = big_net(rule)
    loss = losses.ce_count_loss(population_code=True, num_classes=5)
    x, raw = make_input(net, BATCH, STEPS, direct, seed=11)
    y = labels_for(loss, net, raw)
    params = net.init_params(12)
    device = "cpu" if geometry == "cpu" else "ipu-model"
    backend = sgd_backend(net, params, loss, steps=STEPS, batch=BATCH, device=device, **options)
    check_input_grad(backend, net, params, loss, x, y)
    layout = backend.profile()
    assert (layout["sample_chunks"], layout["step_major"]) == (chunks, step_major)
    # A partial batch: dL/dx of the valid samples only.
    check_input_grad(backend, net, params, loss, partial(x, 3), y[:3])


def test_a_measured_id_trace_frees_the_memory_for_the_layer_major_schedule():
    # 28 KiB tiles: with the id trace of the whole shard the plan is step-major; measured on
    # the first minibatch with the rule's gradient trace (the default), the rebuilt graph
    # fits layer-major.
    options = dict(num_ipus=2, tiles_per_ipu=8, memory_bytes_per_tile=28 * 1024)
    net = big_net(sparse.window(0.5))
    backend, params, loss, x, y = sharded_case(net, True, batch=BATCH, steps=STEPS, **options)
    assert backend.profile()["step_major"] == 1
    check_input_grad(backend, net, params, loss, x, y)
    assert backend.profile()["step_major"] == 0 and backend.profile()["spike_activity"] < 1


# (input, KiB per tile): too little memory for the whole batch at once.
CHUNKED = [("direct", 24), ("direct", 32), ("per-step", 24), ("per-step", 40)]


@pytest.mark.parametrize("case", CHUNKED, ids=lambda c: f"{c[0]}-{c[1]}KiB")
@pytest.mark.parametrize("rule", [None, sparse.window(0.5)], ids=["dense", "window"])
def test_input_grad_of_a_batch_in_chunks_equals_the_reference(case, rule):
    mode, kib = case
    net = big_net(rule)
    batch = 12
    loss = losses.ce_count_loss(population_code=True, num_classes=5)
    x, raw = make_input(net, batch, STEPS, mode == "direct", seed=11)
    y = labels_for(loss, net, raw)
    params = net.init_params(12)
    geometry = dict(num_ipus=2, tiles_per_ipu=8, memory_bytes_per_tile=kib * 1024)
    backend = sgd_backend(
        net,
        params,
        loss,
        steps=STEPS,
        batch=batch,
        device="ipu-model",
        **geometry,
        **WHOLE_ID_TRACE,
    )
    check_input_grad(backend, net, params, loss, x, y)
    assert backend.profile()["sample_chunks"] > 1
    # A partial batch: the padding samples, in whichever chunk they fall, are cut off.
    check_input_grad(backend, net, params, loss, partial(x, 5), y[:5])


FIRST_LAYERS = {
    "rleaky": lambda: popsnn.RLeaky(beta=0.85),
    "rleaky-one-to-one": lambda: popsnn.RLeaky(beta=0.85, all_to_all=False),
    "synaptic": lambda: popsnn.Synaptic(alpha=0.6, beta=0.85, reset_mechanism="zero"),
    "lapicque": lambda: popsnn.Lapicque(beta=0.9),
    "alpha-zero": lambda: popsnn.Alpha(alpha=0.9, beta=0.75, threshold=0.5),
    "alpha-subtract": lambda: popsnn.Alpha(
        alpha=0.9, beta=0.75, threshold=0.5, reset_mechanism="subtract"
    ),
}


# KiB per tile on the small 2 x 8 geometry at which each first layer needs the step-major
# schedule with the batch in chunks (the all-to-all recurrence's weights need more).
SMALL_KIB = {"rleaky": 16}


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "per-step"])
@pytest.mark.parametrize("small", [False, True], ids=["cpu", "2x8-small"])
@pytest.mark.parametrize("first", sorted(FIRST_LAYERS))
def test_input_grad_through_every_first_layer_model(first, small, direct):
    """The first layer's own path from dL/dU to dL/dI (recurrence, synaptic current, gain,
    Alpha's two currents);
    on small tiles with the batch in chunks (step-major for direct input)."""
    net = popsnn.Sequential(
        popsnn.Linear(40, 48), FIRST_LAYERS[first](), popsnn.Linear(48, 20), popsnn.Leaky(beta=0.9)
    )
    loss = losses.ce_count_loss(population_code=True, num_classes=5)
    x, raw = make_input(net, BATCH, STEPS, direct, seed=5)
    y = labels_for(loss, net, raw)
    params = net.init_params(7)
    kib = SMALL_KIB.get(first, 10)
    options = dict(num_ipus=2, tiles_per_ipu=8, memory_bytes_per_tile=kib * 1024) if small else {}
    device = "ipu-model" if small else "cpu"
    backend = sgd_backend(net, params, loss, steps=STEPS, batch=BATCH, device=device, **options)
    check_input_grad(backend, net, params, loss, x, y)
    layout = backend.profile()
    assert (layout["sample_chunks"] > 1) == small
    if small and direct:  # per-step input fits layer-major in chunks there
        assert layout["step_major"]


def test_input_grad_after_training_steps_uses_the_current_weights():
    net = big_net()
    loss = losses.ce_count_loss(population_code=True, num_classes=5)
    x, raw = make_input(net, BATCH, STEPS, True, seed=3)
    y = labels_for(loss, net, raw)
    backend = sgd_backend(net, net.init_params(1), loss, steps=STEPS, batch=BATCH, lr=0.5)
    backend.train_step(x, y)
    check_input_grad(backend, net, backend.get_params(), loss, x, y)


def test_per_step_input_grad_engine_is_built_once_and_serves_every_per_step_call():
    net = big_net()
    loss = losses.ce_count_loss(population_code=True, num_classes=5)
    x, raw = make_input(net, BATCH, STEPS, False, seed=11)
    y = labels_for(loss, net, raw)
    params = net.init_params(12)
    backend = sgd_backend(net, params, loss, steps=STEPS, batch=BATCH)
    value, grads = backend.loss_and_grad(x, y)  # the per-step engine without dL/dI kept
    assert backend.engine_builds == 2
    # The C++ API refuses the input gradient there, in one line naming the flag.
    plain = backend._engines["per_step"]
    with pytest.raises(ValueError, match=r"NetworkSpec::inputGrad = true") as err:
        plain.loss_and_input_grad(x, y.astype(np.int32), BATCH)
    assert "\n" not in str(err.value)
    check_input_grad(backend, net, params, loss, x, y)  # one that keeps it
    assert backend.engine_builds == 3
    assert backend.loss_and_grad(x, y)[0] == pytest.approx(value, rel=1e-6)
    check_input_grad(backend, net, params, loss, x[:, :2], y[:2])
    assert backend.engine_builds == 3
