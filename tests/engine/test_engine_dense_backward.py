"""A sparse rule never makes the backward slower than dense code: a rule's layer whose measured
live fraction (an entry at that step or a later one, so its carry is non-zero; counted by the
forward, largest over shards) reaches the crossover (profile's `sparse_backward_max_live`)
keeps the rule's masked surrogate dense and runs the dense backward on it, chosen per layer;
the others keep the compressed trace. Both sides are checked against the masked reference at
float tolerance and in float64, on 1 and several tiles, with window and one-sided rules;
without a rule the engine equals the dense reference."""

import numpy as np
import pytest
from engine_helpers import (
    assert_grads_close,
    assert_second_call_equal,
    float64_reference_same_masks,
    list_backend,
    sgd_backend,
)

import popsnn
from popsnn import losses, reference, sparse

BATCH, STEPS, INPUTS = 8, 12, 30
DEVICES = {"cpu": {}, "ipu-model": {"num_ipus": 1, "tiles_per_ipu": 4}}
# (first hidden layer's rule: ~43% live; second's: 6-23% live) on these weights and inputs.
RULES = {
    "window": (sparse.window(0.3), sparse.window(0.02)),
    "one_sided": (sparse.one_sided(0.8), sparse.one_sided(0.99)),
}


def make_net(rules):
    wide, narrow = rules
    return popsnn.Sequential(
        popsnn.Linear(INPUTS, 40),
        popsnn.Leaky(beta=0.9, sparse=wide),
        popsnn.Linear(40, 48),
        popsnn.Leaky(beta=0.9, sparse=narrow),
        popsnn.Linear(48, 3),
        popsnn.Leaky(beta=0.9),
    )


def make_input(seed):
    rng = np.random.default_rng(seed)
    return (rng.random((STEPS, BATCH, INPUTS)) < 0.2).astype(np.float32), np.arange(BATCH) % 3


def live_fractions(rec, prof):
    """Per hidden layer: the largest fraction of a shard's (t, b, j) live, from the masks."""
    out = []
    for l in range(2):
        mask = rec.grad_masks[l]  # [T, B, N]
        live = np.logical_or.accumulate(mask[::-1], axis=0)[::-1]
        size = int(prof[f"layer{l}_shard_size"])
        out.append(max(live[..., k : k + size].mean() for k in range(0, mask.shape[-1], size)))
    return out


def run(rules, device, x, y):
    net = make_net(rules) if rules else make_net((None, None))
    params = net.init_params(4)
    for p in params:
        p["weight"] = p["weight"] * np.float32(1.5)
    loss = losses.ce_count_loss()
    backend = list_backend(
        net, params, loss, steps=STEPS, batch=BATCH, device=device, max_live=None, **DEVICES[device]
    )
    value, grads = backend.loss_and_grad(x, y)
    return net, params, loss, backend, value, grads


def assert_chosen_per_layer(rec, prof):
    """The layer at or above the crossover runs dense, the one below keeps the lists' form."""
    limit = prof["sparse_backward_max_live"]
    live = live_fractions(rec, prof)
    assert live[0] >= limit > live[1], f"live {live}, crossover {limit}"
    for l, fraction in enumerate(live):
        dense = fraction >= limit
        assert prof[f"layer{l}_dense_backward"] == dense
        assert prof[f"layer{l}_compressed_trace"] == (not dense)
        assert prof[f"layer{l}_live_fraction"] == pytest.approx(fraction, rel=1e-6)


@pytest.mark.parametrize("device", sorted(DEVICES))
@pytest.mark.parametrize("rule", sorted(RULES))
def test_too_live_layer_runs_dense_and_equals_the_masked_reference(rule, device):
    x, y = make_input(3)
    net, params, loss, backend, value, grads = run(RULES[rule], device, x, y)
    ref_value, ref_grads, rec = reference.loss_and_grad(net, params, x, y, loss, num_steps=STEPS)
    assert_chosen_per_layer(rec, backend.profile())
    assert value == pytest.approx(ref_value, rel=2e-5, abs=1e-7)
    assert_grads_close(grads, ref_grads)
    # The choice is kept: a second call (no rebuild) gives the same gradients.
    assert_second_call_equal(backend, x, y, value, grads)


@pytest.mark.parametrize("rule", sorted(RULES))
def test_too_live_layer_runs_dense_and_equals_the_float64_reference(rule):
    x, y = make_input(3)
    net, params, loss, backend, value, grads = run(RULES[rule], "cpu", x, y)
    ref_value, ref_grads, rec = float64_reference_same_masks(net, params, x, y, loss, STEPS)
    assert_chosen_per_layer(rec, backend.profile())
    assert value == pytest.approx(ref_value, rel=2e-5)
    assert_grads_close(grads, ref_grads, rel=2e-5)


def test_without_a_rule_the_engine_equals_the_dense_reference():
    x, y = make_input(3)
    net, params, loss, backend, value, grads = run(None, "cpu", x, y)
    ref_value, ref_grads, _ = reference.loss_and_grad(net, params, x, y, loss, num_steps=STEPS)
    prof = backend.profile()
    assert [prof[f"layer{l}_dense_backward"] for l in range(3)] == [0, 0, 0]
    assert value == pytest.approx(ref_value, rel=2e-5, abs=1e-7)
    assert_grads_close(grads, ref_grads)


@pytest.mark.parametrize("value", [0.0, 1.5, "0.3", True])
def test_max_live_out_of_range_is_one_clear_error(value):
    net = make_net(RULES["window"])
    with pytest.raises(ValueError, match="sparse_backward_max_live must be a number in"):
        list_backend(
            net,
            net.init_params(0),
            losses.ce_count_loss(),
            steps=STEPS,
            batch=BATCH,
            device="cpu",
            max_live=value,
        )


def test_max_live_one_keeps_the_compressed_backward_however_live():
    """The option's other end: 1.0 never switches (the compressed path's own tests use it)."""
    x, y = make_input(3)
    net = make_net(RULES["window"])
    params = net.init_params(4)
    for p in params:
        p["weight"] = p["weight"] * np.float32(1.5)
    loss = losses.ce_count_loss()
    backend = list_backend(net, params, loss, steps=STEPS, batch=BATCH, device="cpu")
    value, grads = backend.loss_and_grad(x, y)
    prof = backend.profile()
    assert prof["sparse_backward_max_live"] == 1.0
    assert prof["layer0_live_fraction"] > 0.35  # the default crossover would have switched it
    assert [prof[f"layer{l}_compressed_trace"] for l in range(2)] == [1, 1]
    ref_value, ref_grads, _ = reference.loss_and_grad(net, params, x, y, loss, num_steps=STEPS)
    assert value == pytest.approx(ref_value, rel=2e-5, abs=1e-7)
    assert_grads_close(grads, ref_grads)


def test_trace_capacity_follows_the_layers_that_keep_the_compressed_trace():
    """Once a layer goes dense its entries no longer size the shared measured trace: the
    capacity follows the compressed layers' own entries (with the measured 25% headroom)."""
    x, y = make_input(3)
    net = make_net(RULES["window"])
    params = net.init_params(4)
    for p in params:
        p["weight"] = p["weight"] * np.float32(1.5)
    options = dict(steps=STEPS, batch=BATCH, device="cpu", grad_list_activity=0.44)
    backend = sgd_backend(net, params, losses.ce_count_loss(), trace_activity=None, **options)
    value, grads = backend.loss_and_grad(x, y)  # measured, then rebuilt with layer 0 dense
    prof = backend.profile()
    ref_value, ref_grads, rec = reference.loss_and_grad(
        net, params, x, y, losses.ce_count_loss(), num_steps=STEPS
    )
    assert value == pytest.approx(ref_value, rel=2e-5, abs=1e-7)
    assert_grads_close(grads, ref_grads)

    def active(l):  # the largest fraction of a shard's entries in the gradient trace
        mask, size = rec.grad_masks[l], int(prof[f"layer{l}_shard_size"])
        return max(mask[..., k : k + size].mean() for k in range(0, mask.shape[-1], size))

    assert [prof[f"layer{l}_dense_backward"] for l in range(2)] == [1, 0]
    assert active(0) > 2 * active(1) > 0
    assert prof["trace_activity"] == pytest.approx(1.25 * active(1), rel=1e-6)
    entries = STEPS * BATCH * int(prof["layer1_shard_size"])
    assert prof["layer1_trace_capacity"] == np.ceil(np.float32(1.25 * active(1)) * entries)
