"""With a sparse rule, the forward keeps the surrogate only beside the id buffers' entries
(spikes, then gradient candidates), so the trace shrinks with the buffers' capacity; an
entry that does not fit is counted and surfaced (docs/numerics.md, section 7), never dropped."""

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


def test_sparse_trace_equals_the_masked_reference_and_is_smaller_than_dense():
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
        on_overflow="grow",
    )
    value, grads = backend.loss_and_grad(x, y)
    ref_value, ref_grads, rec = reference.loss_and_grad(net, params, x, y, loss, num_steps=STEPS)
    np.testing.assert_array_equal(backend.infer(x), rec.spikes[-1])
    assert value == pytest.approx(ref_value, rel=2e-5, abs=1e-7)
    assert_grads_close(grads, ref_grads)
    assert all(0 < m.mean() < 0.5 for m in rec.grad_masks[:2])
    prof = backend.profile()
    for l, width in enumerate((40, 24)):
        capacity = prof[f"layer{l}_buffer_capacity"]
        dense = STEPS * BATCH * width * 4
        assert (
            prof[f"layer{l}_surrogate_trace_bytes"]
            == STEPS * BATCH * capacity * prof[f"layer{l}_shards"] * 4
        )
        assert prof[f"layer{l}_surrogate_trace_bytes"] < dense
        assert (
            prof[f"layer{l}_trace_bytes"]
            == prof[f"layer{l}_surrogate_trace_bytes"] + prof[f"layer{l}_id_trace_bytes"]
        )
    # No rule on the output layer: its surrogate trace is dense.
    assert prof["layer2_surrogate_trace_bytes"] == STEPS * BATCH * 3 * 4


def test_gradient_candidates_that_do_not_fit_are_an_error():
    # A wide window makes almost every neuron a gradient candidate: a small buffer overflows
    # on candidates even where it holds the spikes.
    net = net_with_rule(sparse.window(5.0))
    x, raw = make_input(net, BATCH, STEPS, True, seed=4)
    backend = EngineBackend(
        net,
        net.init_params(5),
        losses.ce_count_loss(),
        optim.SGD(lr=0.1),
        num_steps=STEPS,
        batch_size=BATCH,
        device="cpu",
        max_activity=0.3,
    )
    with pytest.raises(SpikeBufferOverflow, match="spikes \\+ gradient candidates"):
        backend.loss_and_grad(x, raw % 3)
