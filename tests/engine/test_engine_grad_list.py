"""dL/dI between two layers with compressed gradient traces crosses tiles as lists of the live
neurons' values (LayerShape::gradList), sized by a measured fraction of the entries instead of
the dense [T, B, n] block. The forward counts what each list will need before any backward runs
(codes::GRAD_LIST_NEEDED), so a list that does not fit is an error or grows and the step is
redone: never truncated. Every case is checked against the masked reference."""

import numpy as np
import pytest
from engine_helpers import assert_grads_close, make_input, sgd_backend

import popsnn
from popsnn import losses, reference, sparse
from popsnn.engine import SpikeBufferOverflow

BATCH, STEPS = 4, 8
DEVICES = {"cpu": {}, "ipu-model": {"num_ipus": 1, "tiles_per_ipu": 4}}


def net_with_rule(rule):
    """Three hidden layers with the rule: layers 1 and 2 send dL/dI as lists."""
    return popsnn.Sequential(
        popsnn.Linear(30, 40),
        popsnn.Leaky(beta=0.9, sparse=rule),
        popsnn.Linear(40, 24),
        popsnn.Synaptic(alpha=0.8, beta=0.9, sparse=rule),
        popsnn.Linear(24, 16),
        popsnn.Leaky(beta=0.9, reset_mechanism="zero", sparse=rule),
        popsnn.Linear(16, 3),
        popsnn.Leaky(beta=0.9),
    )


def live_need(mask, shard_size):
    """Per shard, what its dL/dI list needs: the neurons with an entry at step t or later
    (the backward's live list at t), summed over (t, b)."""
    live = np.logical_or.accumulate(mask[::-1], axis=0)[::-1]
    width = mask.shape[-1]
    return [int(live[..., k : k + shard_size].sum()) for k in range(0, width, shard_size)]


def backend_for(rule, device="cpu", direct=True, seed=4, **options):
    net = net_with_rule(rule)
    x, raw = make_input(net, BATCH, STEPS, direct, seed=seed)
    params = net.init_params(5)
    backend = sgd_backend(
        net,
        params,
        losses.ce_count_loss(),
        steps=STEPS,
        batch=BATCH,
        device=device,
        **DEVICES[device],
        **{"sparse_backward_max_live": 1.0, **options},  # the lists however live
    )
    return net, params, x, raw % 3, backend


def check_against_reference(net, params, x, y, backend):
    value, grads = backend.loss_and_grad(x, y)
    ref_value, ref_grads, rec = reference.loss_and_grad(
        net, params, x, y, losses.ce_count_loss(), num_steps=STEPS
    )
    assert value == pytest.approx(ref_value, rel=2e-5, abs=1e-7)
    assert_grads_close(grads, ref_grads)
    return rec


def list_capacities(prof, rec):
    """Layers 1 and 2 send lists (the first sends no dL/dI, the output's membrane loss keeps
    its dense) each holding its busiest shard's need."""
    rows = STEPS * BATCH
    assert prof["layer0_grad_list_capacity"] == 0
    assert prof["layer3_grad_list_capacity"] == 0
    needs = []
    for l in (1, 2):
        size = int(prof[f"layer{l}_shard_size"])
        capacity = int(prof[f"layer{l}_grad_list_capacity"])
        assert capacity == int(np.ceil(prof["grad_list_activity"] * size * rows))
        assert capacity >= max(live_need(rec.grad_masks[l], size))
        needs.append(max(live_need(rec.grad_masks[l], size)) / (rows * size))
    return max(needs)


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "per_step"])
@pytest.mark.parametrize("device", sorted(DEVICES))
@pytest.mark.parametrize(
    "rule", [sparse.window(0.3), sparse.one_sided(0.9)], ids=["window", "one_sided"]
)
def test_dldi_lists_equal_the_masked_reference(rule, device, direct):
    # Sized by hand below the dense layout's 45%: the lists carry dL/dI on every such edge.
    net, params, x, y, backend = backend_for(
        rule, device, direct, trace_activity=0.4, grad_list_activity=0.44
    )
    rec = check_against_reference(net, params, x, y, backend)
    prof = backend.profile()
    list_capacities(prof, rec)
    assert prof["grad_list_rebuilds"] == 0
    # The lists carry the dense blocks' values; the layer before sums them over the list's
    # entries where that is cheaper (test_engine_list_dots.py), in another order: the dense
    # exchange's results to float rounding.
    *_, dense = backend_for(rule, device, direct, trace_activity=0.4, grad_list_activity=1.0)
    assert dense.profile()["layer1_grad_list_capacity"] == 0
    (value, grads), (dense_value, dense_grads) = (
        backend.loss_and_grad(x, y),
        dense.loss_and_grad(x, y),
    )
    assert value == pytest.approx(dense_value, rel=1e-6)
    assert_grads_close(grads, dense_grads, rel=1e-5)


@pytest.mark.parametrize("device", sorted(DEVICES))
def test_unset_lists_are_measured_by_the_forward(device):
    # Measured on the first minibatch (after the gradient trace's own measurement): the busiest
    # shard's exact need x 1.25, so the forward counts what the backward's live lists hold.
    net, params, x, y, backend = backend_for(sparse.window(0.1), device)
    rec = check_against_reference(net, params, x, y, backend)
    prof = backend.profile()
    need = list_capacities(prof, rec)
    assert prof["grad_list_activity"] == pytest.approx(1.25 * need, rel=1e-5)
    assert prof["grad_list_rebuilds"] == 1
    # A second minibatch on the same engine: no rebuild, the same reference.
    check_against_reference(net, params, x, y, backend)
    assert backend.profile()["grad_list_rebuilds"] == 1


def test_without_a_rule_dldi_stays_dense():
    net, params, x, y, backend = backend_for(None)
    check_against_reference(net, params, x, y, backend)
    prof = backend.profile()
    assert prof["grad_list_activity"] == 1.0 and prof["grad_list_rebuilds"] == 0
    assert all(prof[f"layer{l}_grad_list_capacity"] == 0 for l in range(4))


def test_a_dldi_list_that_does_not_fit_is_an_error():
    _, params, x, y, backend = backend_for(
        sparse.window(0.3), grad_list_activity=0.001, trace_activity=0.4, on_overflow="error"
    )
    with pytest.raises(SpikeBufferOverflow, match="dL/dI list overflow in layer 1") as info:
        backend.loss_and_grad(x, y)
    assert "grad_list_activity" in str(info.value) and "on_overflow='grow'" in str(info.value)
    assert info.value.needed > info.value.capacity
    for p, before in zip(backend.get_params(), params):  # nothing was updated
        for key in before:
            np.testing.assert_array_equal(p[key], before[key])


def test_a_dldi_list_that_does_not_fit_grows_and_equals_the_reference():
    net, params, x, y, backend = backend_for(
        sparse.window(0.1), grad_list_activity=0.001, trace_activity=0.4, on_overflow="grow"
    )
    rec = check_against_reference(net, params, x, y, backend)
    prof = backend.profile()
    assert 0.001 < prof["grad_list_activity"] < 0.45
    assert prof["grad_list_rebuilds"] == 1
    for l in (1, 2):
        size = int(prof[f"layer{l}_shard_size"])
        assert prof[f"layer{l}_grad_list_capacity"] >= max(live_need(rec.grad_masks[l], size))


def test_measured_lists_grow_for_a_busier_minibatch_whatever_the_policy():
    net, params, x, y, backend = backend_for(sparse.window(0.1), on_overflow="error")
    # A quiet minibatch sizes them; the live sets of a busier one do not fit.
    check_against_reference(net, params, x * 0.1, y, backend)
    first = backend.profile()["grad_list_activity"]
    rec = check_against_reference(net, params, x, y, backend)
    prof = backend.profile()
    assert prof["grad_list_activity"] > first, "the busier minibatch must have grown the lists"
    assert prof["grad_list_rebuilds"] >= 2
    for l in (1, 2):
        size = int(prof[f"layer{l}_shard_size"])
        if prof[f"layer{l}_grad_list_capacity"]:
            assert prof[f"layer{l}_grad_list_capacity"] >= max(live_need(rec.grad_masks[l], size))
