"""[T, B, N] input as a list of its non-zeros (the `input_activity` device option): the host
lists a batch once, in the pass that counts NaN and inf, and the first layer reads the list
instead of scanning the dense block. Both sides of the choice give the same results bit for
bit and the reference's (the masked surrogate with a sparse rule); a denser batch grows the
list (never truncated), up into the dense block; NaN and inf are one clear line."""

import numpy as np
import pytest
from engine_helpers import assert_grads_close, big_net, labels_for, sgd_backend

import popsnn
from popsnn import losses, reference, sparse

STEPS, BATCH = 10, 6


def _net(rule=None):
    return popsnn.Sequential(
        popsnn.Linear(40, 30),
        popsnn.Leaky(beta=0.9, sparse=rule),
        popsnn.Linear(30, 24),
        popsnn.Leaky(beta=0.85, sparse=rule),
        popsnn.Linear(24, 5),
        popsnn.Leaky(beta=0.8),
    )


def _input(density, seed=0, shape=(STEPS, BATCH, 40)):
    """Spikes of real, signed values (not only 1s), and -0.0 where nothing spiked."""
    rng = np.random.default_rng(seed)
    x = np.where(rng.random(shape) < density, rng.uniform(-0.5, 2.0, shape), -0.0)
    return x.astype(np.float32)


def _params(net):
    params = net.init_params(4)
    for p in params:
        p["weight"] *= 3.0  # every layer spikes
    return params


def _run(net, params, x, y, **options):
    backend = sgd_backend(net, params, losses.ce_count_loss(), steps=STEPS, batch=BATCH, **options)
    value, grads = backend.loss_and_grad(x, y)
    return backend, value, grads, backend.infer(x)


@pytest.mark.parametrize("rule", [None, sparse.window(0.3)], ids=["no-rule", "window"])
def test_listed_input_equals_the_dense_block_bit_for_bit_and_the_reference(rule):
    net = _net(rule)
    params = _params(net)
    x = _input(0.08)
    y = np.arange(BATCH) % 5
    listed, value, grads, spikes = _run(net, params, x, y)
    layout = listed.profile()
    assert 0 < layout["input_list_capacity"] < STEPS * BATCH * 40
    assert layout["input_activity"] == pytest.approx(1.5 * np.count_nonzero(x) / x.size)
    dense, d_value, d_grads, d_spikes = _run(net, params, x, y, input_activity=1.0)
    assert dense.profile()["input_list_capacity"] == 0
    assert value == d_value
    np.testing.assert_array_equal(spikes, d_spikes)
    for g, d in zip(grads, d_grads):
        for key in d:
            np.testing.assert_array_equal(g[key], d[key], err_msg=key)
    ref_value, ref_grads, rec = reference.loss_and_grad(net, params, x, y, losses.ce_count_loss())
    assert all(s.sum() > 0 for s in rec.spikes)
    np.testing.assert_array_equal(spikes, rec.spikes[-1])
    assert value == pytest.approx(ref_value, rel=2e-5)
    assert_grads_close(grads, ref_grads)


def test_a_denser_batch_grows_the_list_then_the_dense_block_and_equals_the_reference():
    net = _net(sparse.window(0.3))
    params = _params(net)
    y = np.arange(BATCH) % 5
    backend = sgd_backend(net, params, losses.ce_count_loss(), steps=STEPS, batch=BATCH)
    for density, grows, listed in ((0.05, 0, True), (0.2, 1, True), (0.9, 2, False)):
        x = _input(density, seed=int(100 * density))
        value, grads = backend.loss_and_grad(x, y)
        layout = backend.profile()
        assert layout["input_list_grows"] == grows, density
        assert (layout["input_list_capacity"] > 0) == listed, density
        if listed:
            assert layout["input_list_capacity"] >= np.count_nonzero(x)
        ref_value, ref_grads, _ = reference.loss_and_grad(net, params, x, y, losses.ce_count_loss())
        assert value == pytest.approx(ref_value, rel=2e-5)
        assert_grads_close(grads, ref_grads)


def test_an_empty_batch_lists_nothing_and_equals_the_reference():
    net = _net()
    params = _params(net)
    x = np.zeros((STEPS, BATCH, 40), np.float32)
    y = np.arange(BATCH) % 5
    backend, value, grads, _ = _run(net, params, x, y)
    assert backend.profile()["input_list_capacity"] >= 1
    ref_value, ref_grads, _ = reference.loss_and_grad(net, params, x, y, losses.ce_count_loss())
    assert value == pytest.approx(ref_value, rel=1e-6)
    assert_grads_close(grads, ref_grads)


def test_chunked_batches_list_each_chunk_and_equal_the_reference():
    net = big_net(sparse.window(0.5))
    loss = losses.ce_count_loss(population_code=True, num_classes=5)
    params = net.init_params(12)
    for p in params:
        p["weight"] *= 3.0
    x = _input(0.1, seed=11, shape=(8, 12, 40))
    y = labels_for(loss, net, np.arange(12))
    backend = sgd_backend(
        net,
        params,
        loss,
        steps=8,
        batch=12,
        device="ipu-model",
        num_ipus=2,
        tiles_per_ipu=8,
        memory_bytes_per_tile=24 * 1024,
        max_activity=1.0,
    )
    value, grads = backend.loss_and_grad(x, y)
    layout = backend.profile()
    assert layout["sample_chunks"] > 1 and layout["input_list_capacity"] > 0
    ref_value, ref_grads, _ = reference.loss_and_grad(net, params, x, y, loss)
    assert value == pytest.approx(ref_value, rel=2e-5)
    assert_grads_close(grads, ref_grads)


@pytest.mark.parametrize("input_activity", [None, 1.0], ids=["listed", "dense"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_input_is_one_line_before_any_work(input_activity, bad):
    net = _net()
    params = _params(net)
    y = np.arange(BATCH) % 5
    backend = sgd_backend(
        net,
        params,
        losses.ce_count_loss(),
        steps=STEPS,
        batch=BATCH,
        input_activity=input_activity,
    )
    backend.loss_and_grad(_input(0.05), y)  # builds the engine (and sizes the list)
    before = backend.get_params()
    x = _input(0.05, seed=1)
    x[3, 2, 7] = bad
    x[0, 0, 39] = bad
    for call in (lambda: backend.train_step(x, y), lambda: backend.infer(x)):
        with pytest.raises(ValueError) as err:
            call()
        message = str(err.value)
        assert "\n" not in message
        assert message == (
            "x contains 2 NaN or inf value(s); clean or clip the input before passing it to popsnn"
        )
    for p, q in zip(backend.get_params(), before):  # nothing was updated
        for key in q:
            np.testing.assert_array_equal(p[key], q[key])


@pytest.mark.parametrize("value", [0, -0.1, 1.5, True, "0.1"])
def test_input_activity_out_of_range_is_one_line(value):
    net = _net()
    with pytest.raises(ValueError, match=r"^input_activity must be a number in \(0, 1\]"):
        sgd_backend(
            net,
            _params(net),
            losses.ce_count_loss(),
            steps=STEPS,
            batch=BATCH,
            input_activity=value,
        )


def test_non_finite_direct_input_is_the_same_line_from_the_engine():
    # The Python package leaves x's NaN/inf count to the engine for [B, N] input too.
    net = _net()
    backend = sgd_backend(net, _params(net), losses.ce_count_loss(), steps=STEPS, batch=BATCH)
    x = np.ones((BATCH, 40), np.float32)
    x[2, 5] = np.nan
    with pytest.raises(ValueError, match=r"^x contains 1 NaN or inf value\(s\); clean or clip"):
        backend.loss_and_grad(x, np.arange(BATCH) % 5)


@pytest.mark.parametrize("rule", [None, sparse.window(0.4)], ids=["no-rule", "window"])
def test_a_recurrent_first_layer_reads_the_list_one_step_per_call(rule):
    # An all-to-all recurrence runs its steps one per phase: the list's rows are read per step.
    net = popsnn.Sequential(
        popsnn.Linear(40, 24),
        popsnn.RLeaky(beta=0.85, all_to_all=True, sparse=rule),
        popsnn.Linear(24, 5),
        popsnn.Leaky(beta=0.8),
    )
    params = _params(net)
    x = _input(0.08, seed=5)
    y = np.arange(BATCH) % 5
    listed, value, grads, spikes = _run(net, params, x, y)
    assert listed.profile()["input_list_capacity"] > 0
    dense, d_value, d_grads, d_spikes = _run(net, params, x, y, input_activity=1.0)
    assert value == d_value
    np.testing.assert_array_equal(spikes, d_spikes)
    for g, d in zip(grads, d_grads):
        for key in d:
            np.testing.assert_array_equal(g[key], d[key], err_msg=key)
    ref_value, ref_grads, rec = reference.loss_and_grad(net, params, x, y, losses.ce_count_loss())
    assert rec.spikes[0].sum() > 0
    assert value == pytest.approx(ref_value, rel=2e-5)
    assert_grads_close(grads, ref_grads)


def _bytes(density, seed=0, shape=(STEPS, BATCH, 40), counts=False):
    """uint8 input: spikes (1s), or with `counts` small counts up to 255."""
    rng = np.random.default_rng(seed)
    high = rng.integers(1, 256, shape) if counts else 1
    return np.where(rng.random(shape) < density, high, 0).astype(np.uint8)


def _equal_runs(a, b):
    (_, value, grads, spikes), (_, b_value, b_grads, b_spikes) = a, b
    assert value == b_value
    np.testing.assert_array_equal(spikes, b_spikes)
    for g, d in zip(grads, b_grads):
        for key in d:
            np.testing.assert_array_equal(g[key], d[key], err_msg=key)


@pytest.mark.parametrize("input_activity", [None, 1.0], ids=["listed", "dense"])
@pytest.mark.parametrize("kind", ["spikes", "counts", "bool"])
@pytest.mark.parametrize("rule", [None, sparse.window(0.3)], ids=["no-rule", "window"])
def test_byte_input_equals_its_float_copy_bit_for_bit_and_the_reference(rule, kind, input_activity):
    # uint8 (and bool) x is listed as bytes, no float copy; the dense block widens it on the host.
    net = _net(rule)
    params = _params(net)
    x = _bytes(0.08, seed=3, counts=kind == "counts")
    if kind == "bool":
        x = x.astype(bool)
    y = np.arange(BATCH) % 5
    as_bytes = _run(net, params, x, y, input_activity=input_activity)
    _equal_runs(as_bytes, _run(net, params, x.astype(np.float32), y, input_activity=input_activity))
    assert (as_bytes[0].profile()["input_list_capacity"] > 0) == (input_activity is None)
    ref_value, ref_grads, rec = reference.loss_and_grad(net, params, x, y, losses.ce_count_loss())
    assert all(s.sum() > 0 for s in rec.spikes)
    np.testing.assert_array_equal(as_bytes[3], rec.spikes[-1])
    assert as_bytes[1] == pytest.approx(ref_value, rel=2e-5)
    assert_grads_close(as_bytes[2], ref_grads)


def test_direct_byte_input_equals_its_float_copy_and_other_dtypes_are_one_line():
    net = _net()
    params = _params(net)
    x = _bytes(0.3, seed=4, shape=(BATCH, 40), counts=True)
    y = np.arange(BATCH) % 5
    _equal_runs(_run(net, params, x, y), _run(net, params, x.astype(np.float32), y))
    native = sgd_backend(net, params, losses.ce_count_loss(), steps=STEPS, batch=BATCH)
    native.infer(x)  # builds the direct engine
    with pytest.raises(TypeError) as err:
        native._engine.infer(np.zeros((BATCH, 40), np.complex64))
    assert str(err.value) == (
        "x must hold real numbers (float32, or uint8 spikes and counts), got dtype complex64"
    )
