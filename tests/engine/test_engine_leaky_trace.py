"""The whole-trace Leaky and Synaptic backward (codelets/LeakyTrace.hpp, AVX-512 and AVX2 + FMA
hosts): a
Leaky or Synaptic layer on direct current without a sparse rule runs each sample's T steps at
once, its state in registers, recomputing the forward's surrogates instead of reading the
trace (neither model's forward writes it then); every other case takes the per-step kernels.
Both sides against the float32 reference, both models: every surrogate (sigmoid stays
per-step) and reset, with and without a sparse rule (per-step), direct and per-step input
(per-step), T past the kernels' 64 steps (per-step), a learned beta (per-step), widths whose
blocks end in partial vectors, a next layer of one or several shards, and the id buffers'
overflow (the error names the first step that overflowed). Where the kernels run (the cpu
device with AVX-512 or AVX2 + FMA codelets), the hidden layer's surrogate trace is sized for
the spike masks alone; everywhere else it is the dense [T, B, n]. See engine_helpers for the
tolerances."""

import numpy as np
import pytest
from engine_helpers import (
    assert_grads_close,
    assert_second_call_equal,
    cpu_flags,
    labels_for,
    make_input,
    sgd_backend,
)

import popsnn
from popsnn import losses, reference, sparse
from popsnn.engine import SpikeBufferOverflow

BATCH, STEPS = 5, 9

SURROGATES = {
    "fast_sigmoid": lambda: popsnn.surrogate.fast_sigmoid(10.0),
    "atan": lambda: popsnn.surrogate.atan(2.0),
    "sigmoid": lambda: popsnn.surrogate.sigmoid(5.0),
    "straight_through": lambda: popsnn.surrogate.straight_through(),
}
RESETS = ["subtract", "zero", "none"]


# The hidden layer's model; Synaptic's J sums about 1 / (1 - alpha) steps of the input, so
# its input is scaled down to spike about as often as Leaky's.
MODELS = {
    "Leaky": (lambda **kw: popsnn.Leaky(beta=0.9, **kw), 2.0),
    "Synaptic": (lambda **kw: popsnn.Synaptic(alpha=0.8, beta=0.9, **kw), 0.6),
}


def hidden_net(model, inputs, hidden, **kw):
    return popsnn.Sequential(
        popsnn.Linear(inputs, hidden),
        MODELS[model][0](**kw),
        popsnn.Linear(hidden, 10),
        popsnn.Leaky(beta=0.9),
    )


def codelets_have_the_kernels() -> bool:
    # The package's codelets are built with -march=native: AVX-512, or AVX2 and FMA, where
    # the CPU has them (codelets/Lanes16.hpp).
    flags = cpu_flags()
    return "avx512f" in flags or {"avx2", "fma"} <= flags


def assert_trace_size(backend, net, whole, steps):
    """The hidden layer's surrogate trace: 16-bit masks per 16 neurons per (step, sample)
    where the whole-trace kernels run, else a float per entry; per shard."""
    prof = backend.profile()
    size, shards = int(prof["layer0_shard_size"]), int(prof["layer0_shards"])
    sizes = [size] * (shards - 1) + [net.stages[0].num_neurons - size * (shards - 1)]
    rows = steps * BATCH
    masks = sum(-(-2 * rows * (-(-n // 16)) // 4) * 4 for n in sizes)
    assert prof["layer0_leak_trace"] == int(whole)
    if not prof["layer0_compressed_trace"]:  # else the gradient trace's values, sized apart
        assert prof["layer0_surrogate_trace_bytes"] == (masks if whole else rows * sum(sizes) * 4)


def check(net, direct=True, seed=0, scale=2.0, steps=STEPS, whole=False, **options):
    """`whole`: the layer qualifies for the whole-trace kernels (they run if the codelets
    have them, on the cpu device)."""
    x, raw = make_input(net, BATCH, steps, direct, seed=seed, scale=scale)
    loss = losses.ce_count_loss()
    y = labels_for(loss, net, raw)
    params = net.init_params(seed + 1)
    backend = sgd_backend(net, params, loss, steps=steps, batch=BATCH, **options)
    value, grads = backend.loss_and_grad(x, y)
    ref_value, ref_grads, rec = reference.loss_and_grad(
        net, params, x, y, loss, num_steps=steps if direct else None
    )
    assert 0 < rec.spikes[0].mean() < 0.9, "the hidden layer must spike, not saturate"
    np.testing.assert_array_equal(backend.infer(x), rec.spikes[-1])
    assert value == pytest.approx(ref_value, rel=2e-5, abs=1e-7)
    assert_grads_close(grads, ref_grads)
    # A second run equals the first bit for bit: the whole-trace kernels start from the zero
    # state and write their state and carries whole (nothing zeroes them between runs).
    assert_second_call_equal(backend, x, y, value, grads)
    on_cpu = options.get("device", "cpu") == "cpu"
    assert_trace_size(backend, net, whole and on_cpu and codelets_have_the_kernels(), steps)


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("reset", RESETS)
@pytest.mark.parametrize("name", sorted(SURROGATES))
def test_every_surrogate_and_reset(name, reset, model):
    # 200 neurons: on the cpu device's tiles, blocks of 64 (forward) and 128 (backward)
    # neurons and a partial last vector.
    net = hidden_net(model, 30, 200, surrogate=SURROGATES[name](), reset_mechanism=reset)
    check(net, seed=2, scale=MODELS[model][1], whole=name != "sigmoid")


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("hidden", [5, 17, 64, 129, 300])
@pytest.mark.parametrize("direct", [True, False], ids=["direct", "per-step"])
def test_widths_and_input_kinds(hidden, direct, model):
    net = hidden_net(model, 24, hidden)
    check(net, direct=direct, seed=hidden, scale=MODELS[model][1], whole=direct)


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("rule", [None, "window", "one_sided"])
def test_with_and_without_a_sparse_rule(rule, model):
    make = {None: lambda: None, "window": lambda: sparse.window(0.5)}.get(
        rule, lambda: sparse.one_sided(0.9)
    )
    net = hidden_net(model, 30, 150, sparse=make())
    check(net, seed=4, scale=MODELS[model][1], whole=rule is None)


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("steps", [64, 65], ids=["kernels' most steps", "past it"])
def test_steps_on_both_sides_of_the_kernels_limit(steps, model):
    net = hidden_net(model, 20, 40)
    check(net, seed=6, scale=MODELS[model][1] / 2, steps=steps, whole=steps <= 64)


@pytest.mark.parametrize("model", sorted(MODELS))
def test_a_learned_beta_takes_the_per_step_kernels(model):
    check(hidden_net(model, 30, 70, learn_beta=True), seed=7, scale=MODELS[model][1])


@pytest.mark.parametrize("model", sorted(MODELS))
def test_next_layer_of_several_shards(model):
    # On 4 ipu-model tiles the layers are split into several shards: the backward gathers
    # the next layer's dL/dI from its shards' blocks.
    net = popsnn.Sequential(
        popsnn.Linear(30, 120),
        MODELS[model][0](),
        popsnn.Linear(120, 40),
        popsnn.Leaky(beta=0.9),
        popsnn.Linear(40, 6),
        popsnn.Leaky(beta=0.9),
    )
    check(net, seed=5, scale=MODELS[model][1], device="ipu-model", num_ipus=1, tiles_per_ipu=4)


def test_overflow_names_the_first_step_that_overflowed():
    # One tile, so one shard per layer, with buffers of 5% of it (two ids): the error names
    # the earliest step at which a sample of the hidden layer spiked more than that, and
    # the most ids a buffer needed, as the reference says.
    net = popsnn.Sequential(
        popsnn.Linear(10, 40), popsnn.Leaky(beta=0.9), popsnn.Linear(40, 3), popsnn.Leaky(beta=0.9)
    )
    x, raw = make_input(net, BATCH, STEPS, True, seed=13, scale=3.0, density=0.9)
    loss = losses.ce_count_loss()
    params = net.init_params(0)
    backend = sgd_backend(
        net,
        params,
        loss,
        steps=STEPS,
        batch=BATCH,
        max_activity=0.05,
        device="ipu-model",
        num_ipus=1,
        tiles_per_ipu=1,
    )
    capacity = max(1, int(np.ceil(np.float32(0.05) * 40)))
    _, _, rec = reference.loss_and_grad(net, params, x, raw % 3, loss, num_steps=STEPS)
    per_step = rec.spikes[0].sum(axis=2).max(axis=1)  # [T]: the most spikes of a sample
    first = int(np.argmax(per_step > capacity))
    assert per_step[first] > capacity, "the set-up must overflow"
    with pytest.raises(SpikeBufferOverflow, match=rf"layer 0 at step {first}\b") as info:
        backend.train_step(x, raw % 3)
    assert info.value.needed == int(per_step.max())
