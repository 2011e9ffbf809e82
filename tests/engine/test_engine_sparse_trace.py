"""With a sparse rule, the forward keeps the surrogate only for the entries inside the rule,
in a gradient trace compressed over all (step, sample) rows, so its size follows the mean
activity rather than the peak of one row; the spike buffers hold spikes only. An entry that
does not fit is counted and surfaced (docs/numerics.md, section 7), never dropped: an error,
or the trace grows (apart from the spike buffers) and the step is redone."""

import numpy as np
import pytest
from engine_helpers import assert_grads_close, make_input, sgd_backend

import popsnn
from popsnn import losses, optim, reference, sparse
from popsnn.engine import EngineBackend, SpikeBufferOverflow

BATCH, STEPS = 4, 8


def net_with_rule(rule):
    return popsnn.Sequential(
        popsnn.Linear(30, 40),
        popsnn.Leaky(beta=0.9, sparse=rule),
        popsnn.Linear(40, 24),
        popsnn.Leaky(beta=0.9, sparse=rule),
        popsnn.Linear(24, 3),
        popsnn.Leaky(beta=0.9),
    )


def shard_entries(mask, shard_size):
    """Entries inside the rule per shard of `shard_size` neurons, over all (step, sample)."""
    width = mask.shape[-1]
    return [int(mask[..., k : k + shard_size].sum()) for k in range(0, width, shard_size)]


def test_sparse_trace_equals_the_masked_reference_and_is_sized_by_activity():
    net = net_with_rule(sparse.window(0.3))
    loss = losses.ce_count_loss()
    x, raw = make_input(net, BATCH, STEPS, True, seed=4)
    y = raw % 3
    params = net.init_params(5)
    backend = sgd_backend(
        net,
        params,
        loss,
        steps=STEPS,
        batch=BATCH,
        device="cpu",
        max_activity=0.5,
        trace_activity=0.3,  # below the dense layout's 45% (host/src/Plan.cpp)
        sparse_backward_max_live=1.0,  # compressed however live
        on_overflow="grow",
    )
    value, grads = backend.loss_and_grad(x, y)
    ref_value, ref_grads, rec = reference.loss_and_grad(net, params, x, y, loss, num_steps=STEPS)
    np.testing.assert_array_equal(backend.infer(x), rec.spikes[-1])
    assert value == pytest.approx(ref_value, rel=2e-5, abs=1e-7)
    assert_grads_close(grads, ref_grads)
    assert all(0 < m.mean() < 0.5 for m in rec.grad_masks[:2])
    prof = backend.profile()
    rows = STEPS * BATCH
    for l, width in enumerate((40, 24)):
        shards, size = int(prof[f"layer{l}_shards"]), int(prof[f"layer{l}_shard_size"])
        trace = int(prof[f"layer{l}_trace_capacity"])
        # The trace holds every entry inside the rule (the reference's mask: the fast
        # sigmoid is never 0), sized from max_activity over all rows, not per row.
        assert trace >= max(shard_entries(rec.grad_masks[l], size))
        assert trace == int(np.ceil(prof["trace_activity"] * size * rows))
        assert prof[f"layer{l}_surrogate_trace_bytes"] == shards * trace * 4
        assert shards * size == width  # equal shards: one capacity each
        # The id trace: starts, a header per row and the spike ids of all rows, sized like
        # the gradient trace (a total, not a capacity per row); then the gradient trace's
        # starts (32-bit) and neuron ids (16-bit).
        spikes = int(prof[f"layer{l}_spike_capacity"])
        assert spikes == int(np.ceil(prof["spike_activity"] * size * rows))
        id_trace = shards * (rows + 1 + 2 * rows + spikes) * 4
        starts_and_ids = shards * ((rows + 1) * 4 + trace * 2)
        assert prof[f"layer{l}_id_trace_bytes"] == id_trace + starts_and_ids
        assert (
            prof[f"layer{l}_trace_bytes"]
            == prof[f"layer{l}_surrogate_trace_bytes"] + prof[f"layer{l}_id_trace_bytes"]
        )
        # Dense: a surrogate per entry and id buffers of the whole shard.
        assert prof[f"layer{l}_trace_bytes"] < rows * (2 * width + 2 * shards) * 4
    # No rule on the output layer: its surrogate trace is dense.
    assert prof["layer2_surrogate_trace_bytes"] == STEPS * BATCH * 3 * 4


def overflow_backend(rule, **options):
    """The overflow cases' engine: net_with_rule(rule), SGD, any trace options."""
    net = net_with_rule(rule)
    x, raw = make_input(net, BATCH, STEPS, True, seed=4)
    params = net.init_params(5)
    backend = sgd_backend(net, params, losses.ce_count_loss(), steps=STEPS, batch=BATCH, **options)
    return net, params, x, raw % 3, backend


def wide_window_backend(on_overflow):
    """A wide window makes almost every neuron a gradient candidate: the trace, sized at
    30% of the entries, overflows while the spike buffers hold the spikes."""
    return overflow_backend(
        sparse.window(5.0), max_activity=0.3, trace_activity=0.3, on_overflow=on_overflow
    )


def test_a_gradient_trace_that_does_not_fit_is_an_error():
    _, params, x, y, backend = wide_window_backend("error")
    with pytest.raises(SpikeBufferOverflow, match="gradient trace overflow in layer 0") as info:
        backend.loss_and_grad(x, y)
    assert "spikes + gradient candidates" in str(info.value)
    assert "on_overflow='grow'" in str(info.value)
    assert info.value.needed > info.value.capacity
    for p, before in zip(backend.get_params(), params):  # nothing was updated
        for key in before:
            np.testing.assert_array_equal(p[key], before[key])


def test_a_gradient_trace_that_does_not_fit_grows_apart_from_the_spike_buffers():
    net, params, x, y, backend = wide_window_backend("grow")
    loss = losses.ce_count_loss()
    value, grads = backend.loss_and_grad(x, y)
    ref_value, ref_grads, rec = reference.loss_and_grad(net, params, x, y, loss, num_steps=STEPS)
    assert value == pytest.approx(ref_value, rel=2e-5, abs=1e-7)
    assert_grads_close(grads, ref_grads)
    prof = backend.profile()
    assert prof["trace_activity"] > 0.3
    assert prof["max_activity"] == pytest.approx(0.3)  # the spikes fitted
    # Grown past 45% of the entries, the trace is kept dense (masked), as a compressed one
    # would be larger: every entry's surrogate, no capacity left to overflow.
    assert prof["trace_activity"] >= 0.45
    assert prof["layer0_compressed_trace"] == 0 and prof["layer0_trace_capacity"] == 0
    shards = int(prof["layer0_shards"])
    assert prof["layer0_surrogate_trace_bytes"] == shards * int(prof["layer0_shard_size"]) * (
        STEPS * BATCH * 4
    )


def test_a_gradient_trace_that_grows_below_the_dense_layout_stays_compressed():
    # A narrow window in a trace sized far too small: it grows to its need (x 1.25), below
    # the dense layout's 45%, and stays compressed, holding every entry inside the rule.
    net, params, x, y, backend = overflow_backend(
        sparse.window(0.1), trace_activity=0.005, on_overflow="grow"
    )
    value, grads = backend.loss_and_grad(x, y)
    ref_value, ref_grads, rec = reference.loss_and_grad(
        net, params, x, y, losses.ce_count_loss(), num_steps=STEPS
    )
    assert value == pytest.approx(ref_value, rel=2e-5, abs=1e-7)
    assert_grads_close(grads, ref_grads)
    prof = backend.profile()
    assert 0.005 < prof["trace_activity"] < 0.45
    for l in range(2):
        assert prof[f"layer{l}_compressed_trace"] == 1
        size = int(prof[f"layer{l}_shard_size"])
        assert prof[f"layer{l}_trace_capacity"] >= max(shard_entries(rec.grad_masks[l], size))


def measured_need(masks, prof):
    """The fraction of a shard's entries the busiest shard of the rule's layers needs."""
    rows = STEPS * BATCH
    return max(
        max(shard_entries(m, size)) / (rows * size)
        for m, size in ((m, int(prof[f"layer{l}_shard_size"])) for l, m in enumerate(masks))
    )


def checked_step(backend, net, params, x, y):
    """loss_and_grad of the engine against the reference's; returns (engine profile, record)."""
    loss = losses.ce_count_loss()
    value, grads = backend.loss_and_grad(x, y)
    ref_value, ref_grads, rec = reference.loss_and_grad(net, params, x, y, loss, num_steps=STEPS)
    assert value == pytest.approx(ref_value, rel=2e-5, abs=1e-7)
    assert_grads_close(grads, ref_grads)
    return backend.profile(), rec


def test_the_default_trace_is_measured_on_the_first_minibatch_then_grows():
    # trace_activity left unset: the first minibatch counts the entries inside the rule on a
    # small trace, the engine rebuilds at that plus headroom (x 1.25) and redoes the step;
    # a busier minibatch later grows it (the engine's own size: "error" is for sizes the
    # user chose). Both results are the masked reference's.
    net, params, x, y, backend = overflow_backend(sparse.window(0.1), on_overflow="error")
    for gain in (0.5, 2.0):
        prof, rec = checked_step(backend, net, params, x * gain, y)
        need = measured_need(rec.grad_masks[:2], prof)
        if gain == 0.5:
            assert prof["trace_activity"] == pytest.approx(1.25 * need, rel=1e-5)
            first = prof["trace_activity"]
        assert prof["trace_activity"] >= need
        assert all(prof[f"layer{l}_compressed_trace"] == 1 for l in range(2))
    assert prof["trace_activity"] > first, "the busier minibatch must have grown the trace"


def test_a_measured_trace_of_busy_layers_is_kept_dense():
    # Almost every entry inside a wide window: measured past 45%, the masked surrogate is kept
    # dense (Plan.cpp), without an error under on_overflow="error".
    net, params, x, y, backend = overflow_backend(sparse.window(5.0), on_overflow="error")
    value, grads = backend.loss_and_grad(x, y)
    ref_value, ref_grads, rec = reference.loss_and_grad(
        net, params, x, y, losses.ce_count_loss(), num_steps=STEPS
    )
    assert_grads_close(grads, ref_grads)
    prof = backend.profile()
    assert prof["trace_activity"] >= 0.45
    assert prof["layer0_compressed_trace"] == 0


def test_the_default_id_trace_is_measured_with_the_gradient_trace_then_grows():
    # spike_activity left unset: the first minibatch runs with an id trace of max_activity
    # (1.0: it cannot overflow), and the gradient trace's measuring rebuild sizes it at the
    # busiest shard's spike count plus headroom (x 1.25), at least 1% of the entries; busier
    # minibatches grow it whatever the policy.
    net, params, x, y, backend = overflow_backend(sparse.window(0.1), on_overflow="error")
    for gain in (0.0, 1.0, 3.0):
        prof, rec = checked_step(backend, net, params, x * gain, y)
        need = measured_need(rec.spikes, prof)
        if gain == 0.0:  # a quiet minibatch (the biases' spikes alone): the floor
            assert 1.25 * need < 0.01 and prof["spike_activity"] == pytest.approx(0.01)
            quiet = prof["layer0_id_trace_bytes"]
        assert prof["max_activity"] == 1.0 and prof["spike_activity"] >= need
    assert prof["spike_activity"] < 1.0 and prof["layer0_id_trace_bytes"] > quiet
    full = overflow_backend(sparse.window(0.1), spike_activity=1.0)[4]
    full.loss_and_grad(x, y)
    assert full.profile()["layer0_id_trace_bytes"] > prof["layer0_id_trace_bytes"]


def test_the_first_complete_counts_size_the_id_trace():
    net, params, x, y, backend = overflow_backend(sparse.window(0.1), on_overflow="error")
    prof, rec = checked_step(backend, net, params, x, y)
    need = measured_need(rec.spikes, prof)
    assert 1.25 * need > 0.01  # above the floor: the count itself
    assert prof["spike_activity"] == pytest.approx(1.25 * need, rel=1e-5)


def test_without_a_measured_gradient_trace_the_id_trace_stays_whole():
    # No rule, no gradient trace to measure: no rebuild for the id trace alone (it would
    # rebuild again at each rise of activity while the network learns).
    net, params, x, y, backend = overflow_backend(None, on_overflow="error")
    for gain in (1.0, 3.0):
        prof, _ = checked_step(backend, net, params, x * gain, y)
        assert prof["spike_activity"] == prof["max_activity"] == 1.0


def dense_backend(on_overflow, spike_activity):
    """No rule: the id trace alone, sized at `spike_activity` of the entries while every
    step's buffer could hold the whole shard (max_activity 1)."""
    return overflow_backend(None, spike_activity=spike_activity, on_overflow=on_overflow)


def test_an_id_trace_that_does_not_fit_is_an_error():
    _, params, x, y, backend = dense_backend("error", 0.01)
    with pytest.raises(SpikeBufferOverflow, match="id trace overflow in layer") as info:
        backend.loss_and_grad(x, y)
    assert "spike ids" in str(info.value) and "on_overflow='grow'" in str(info.value)
    assert info.value.needed > info.value.capacity


def test_an_id_trace_that_does_not_fit_grows_and_equals_the_reference():
    net, params, x, y, backend = dense_backend("grow", 0.01)
    loss = losses.ce_count_loss()
    value, grads = backend.loss_and_grad(x, y)
    ref_value, ref_grads, rec = reference.loss_and_grad(net, params, x, y, loss, num_steps=STEPS)
    np.testing.assert_array_equal(backend.infer(x), rec.spikes[-1])
    assert value == pytest.approx(ref_value, rel=2e-5, abs=1e-7)
    assert_grads_close(grads, ref_grads)
    prof = backend.profile()
    assert prof["max_activity"] == 1.0 and prof["spike_activity"] > 0.01
    spikes = max(float(np.mean(s)) for s in rec.spikes[:2])
    assert prof["spike_activity"] >= spikes


@pytest.mark.parametrize("bad", [0, 1.5, True, "0.1"])
@pytest.mark.parametrize("name", ["trace_activity", "spike_activity", "grad_list_activity"])
def test_trace_sizes_must_be_fractions(name, bad):
    net = net_with_rule(None)
    with pytest.raises(ValueError, match=f"{name} must be a number in \\(0, 1\\]"):
        EngineBackend(
            net,
            net.init_params(5),
            losses.ce_count_loss(),
            optim.SGD(lr=0.1),
            num_steps=STEPS,
            batch_size=BATCH,
            device="cpu",
            **{name: bad},
        )
