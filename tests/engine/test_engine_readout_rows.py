"""A Leaky readout on the pushed W.S blocks of the layer before it, with float storage, one
beta and threshold for the layer and a dense surrogate trace, runs each step for every sample
at once where the codelets have the fused Leaky forward (AVX-512 or AVX2 + FMA: the forward's
LifForward::batchStep, the backward's LifBackward::outputStep); every other readout takes
a step per sample. Both sides against the float32 reference: every surrogate (sigmoid: per
sample) and reset, a window rule's dense and compressed traces (compressed: per sample),
a beta per neuron (per sample), a batch whose rows cross the 1,024-neuron blocks the
forward's pass takes at once, and a readout of several shards. See engine_helpers for the
tolerances."""

import numpy as np
import pytest
from engine_helpers import (
    assert_grads_close,
    assert_second_call_equal,
    labels_for,
    make_input,
    sgd_backend,
)

import popsnn
from popsnn import losses, reference, sparse

STEPS = 8

SURROGATES = {
    "fast_sigmoid": lambda: popsnn.surrogate.fast_sigmoid(10.0),
    "atan": lambda: popsnn.surrogate.atan(2.0),
    "sigmoid": lambda: popsnn.surrogate.sigmoid(5.0),
    "straight_through": lambda: popsnn.surrogate.straight_through(),
}


def readout_net(hidden, outputs, **readout):
    return popsnn.Sequential(
        popsnn.Linear(30, hidden),
        popsnn.Leaky(beta=0.9),
        popsnn.Linear(hidden, outputs),
        popsnn.Leaky(**{"beta": 0.8, **readout}),
    )


def check(net, batch, seed=0, compressed=False, **options):
    """Returns the engine's profile; `compressed`: the readout's trace layout."""
    x, raw = make_input(net, batch, STEPS, True, seed=seed, scale=2.0)
    loss = losses.ce_count_loss()
    y = labels_for(loss, net, raw)
    params = net.init_params(seed + 1)
    params[1]["weight"] = params[1]["weight"] * 3.0  # a readout that spikes
    backend = sgd_backend(net, params, loss, steps=STEPS, batch=batch, **options)
    prof = backend.profile()
    assert prof["layer0_pushes"] == 1, "the readout must read pushed blocks"
    assert prof["layer1_compressed_trace"] == int(compressed)
    value, grads = backend.loss_and_grad(x, y)
    ref_value, ref_grads, rec = reference.loss_and_grad(net, params, x, y, loss, num_steps=STEPS)
    assert 0 < rec.spikes[-1].mean() < 0.9, "the readout must spike, not saturate"
    np.testing.assert_array_equal(backend.infer(x), rec.spikes[-1])
    assert value == pytest.approx(ref_value, rel=2e-5, abs=1e-7)
    assert_grads_close(grads, ref_grads)
    assert_second_call_equal(backend, x, y, value, grads)
    return prof


@pytest.mark.parametrize("reset", ["subtract", "zero", "none"])
@pytest.mark.parametrize("name", sorted(SURROGATES))
def test_every_surrogate_and_reset(name, reset):
    check(readout_net(60, 10, surrogate=SURROGATES[name](), reset_mechanism=reset), batch=5)


@pytest.mark.parametrize("rule", ["window", "one_sided"])
@pytest.mark.parametrize("layout", ["dense", "compressed"])
def test_a_sparse_rules_dense_and_compressed_traces(rule, layout):
    make = sparse.window(0.5) if rule == "window" else sparse.one_sided(0.6)
    # The plan keeps a rule's masked surrogate dense where it expects most entries kept.
    activity = {"dense": 1.0, "compressed": 0.3}[layout]
    net = readout_net(60, 10, sparse=make)
    check(net, 5, 3, layout == "compressed", trace_activity=activity, on_overflow="grow")


def test_a_beta_per_neuron_takes_the_step_per_sample():
    check(readout_net(60, 10, beta=np.linspace(0.7, 0.95, 10)), batch=5, seed=4)


@pytest.mark.parametrize("batch", [14, 40])
def test_rows_across_the_forwards_blocks(batch):
    # 150 readout neurons in 2 shards of 75: 13 samples a 1,024-neuron block, the last block
    # of 1 or 1 of 4.
    prof = check(readout_net(400, 150), batch=batch, seed=5)
    assert batch > 1024 // prof["layer1_shard_size"]


def test_a_readout_of_several_shards():
    prof = check(readout_net(200, 24), batch=6, seed=6, device="ipu-model", tiles_per_ipu=8)
    assert prof["layer1_shards"] > 2
