"""A sparse rule's backward skips the (step, sample) rows of a shard where nothing is live: no
gradient-trace entry at that step or a later one, so every carry, dL/dI and weight-gradient term
of the row is exactly 0 (codelets/SparseBackward.hpp, skipDeadRow); only the row's dL/dI is
written (an empty list row, or zeros where dL/dI is sent dense). Checked against the masked
reference at float tolerance and in float64, with rows on both sides (dead and live, counted
from the reference's masks per shard), on 1 and several tiles, with dL/dI as lists and dense;
without a rule the engine equals the dense reference."""

import numpy as np
import pytest
from engine_helpers import assert_grads_close, float64_reference_same_masks, list_backend

import popsnn
from popsnn import losses, reference, sparse

BATCH, STEPS, INPUTS = 8, 12, 30
DEVICES = {"cpu": {}, "ipu-model": {"num_ipus": 1, "tiles_per_ipu": 4}}
RULES = {"window": sparse.window(0.2), "one_sided": sparse.one_sided(0.99)}


def make_net(rule):
    """Leaky, Synaptic, a zero-reset Leaky and a one-to-one RLeaky under the rule (the all-to-all
    recurrence keeps every row: its dL/dI[t] feeds the next step)."""
    return popsnn.Sequential(
        popsnn.Linear(INPUTS, 40),
        popsnn.Leaky(beta=0.9, sparse=rule),
        popsnn.Linear(40, 48),
        popsnn.Synaptic(alpha=0.8, beta=0.9, sparse=rule),
        popsnn.Linear(48, 56),
        popsnn.Leaky(beta=0.9, reset_mechanism="zero", sparse=rule),
        popsnn.Linear(56, 64),
        popsnn.RLeaky(beta=0.9, all_to_all=False, sparse=rule),
        popsnn.Linear(64, 3),
        popsnn.Leaky(beta=0.9),
    )


def make_input(seed):
    """Per-step spikes; samples 0 and 1 silent, samples 2 and 3 only in the first steps, so
    whole samples and the late steps of others have nothing live."""
    rng = np.random.default_rng(seed)
    x = (rng.random((STEPS, BATCH, INPUTS)) < 0.15).astype(np.float32)
    x[:, :2] = 0.0
    x[STEPS // 3 :, 2:4] = 0.0
    return x, np.arange(BATCH) % 3


def dead_and_live_rows(rec, prof):
    """(dead, live) (shard, step, sample) rows over the hidden layers, from the masks."""
    counts = np.zeros(2, int)
    for l in range(4):
        mask = rec.grad_masks[l]  # [T, B, N]
        size = int(prof[f"layer{l}_shard_size"])
        for first in range(0, mask.shape[-1], size):
            any_at = mask[..., first : first + size].any(axis=-1)  # [T, B]
            live = np.logical_or.accumulate(any_at[::-1], axis=0)[::-1]  # an entry at t or later
            counts += [int((~live).sum()), int(live.sum())]
    return counts


def run(rule, device, lists, x, y):
    net = make_net(rule)
    params = net.init_params(4)
    for p in params:  # stronger weights, no bias: silent inputs leave nothing live
        p["weight"] = p["weight"] * np.float32(2.5)
        p["bias"] = np.zeros_like(p["bias"])
    loss = losses.ce_count_loss()
    backend = list_backend(
        net,
        params,
        loss,
        steps=STEPS,
        batch=BATCH,
        device=device,
        grad_list_activity=0.44 if lists else 1.0,
        **DEVICES[device],
    )
    value, grads = backend.loss_and_grad(x, y)
    return net, params, loss, backend, value, grads


@pytest.mark.parametrize("lists", [True, False], ids=["lists", "dense_dldi"])
@pytest.mark.parametrize("device", sorted(DEVICES))
@pytest.mark.parametrize("rule", sorted(RULES))
def test_dead_rows_skipped_equal_the_masked_reference(rule, device, lists):
    x, y = make_input(7)
    net, params, loss, backend, value, grads = run(RULES[rule], device, lists, x, y)
    ref_value, ref_grads, rec = reference.loss_and_grad(net, params, x, y, loss, num_steps=STEPS)
    prof = backend.profile()
    with_lists = [prof[f"layer{l}_grad_list_capacity"] > 0 for l in (1, 2, 3)]
    assert all(with_lists) if lists else not any(with_lists)
    assert value == pytest.approx(ref_value, rel=2e-5, abs=1e-7)
    assert_grads_close(grads, ref_grads)
    dead, live = dead_and_live_rows(rec, prof)
    assert dead > 0 and live > 0, f"{dead} dead rows, {live} live"


@pytest.mark.parametrize("rule", sorted(RULES))
def test_dead_rows_skipped_equal_the_float64_reference(rule):
    x, y = make_input(9)
    net, params, loss, backend, value, grads = run(RULES[rule], "cpu", True, x, y)
    ref_value, ref_grads, rec = float64_reference_same_masks(net, params, x, y, loss, STEPS)
    assert value == pytest.approx(ref_value, rel=2e-5)
    assert_grads_close(grads, ref_grads, rel=2e-5)
    dead, live = dead_and_live_rows(rec, backend.profile())
    assert dead > 0 and live > 0


def test_without_a_rule_the_engine_equals_the_dense_reference():
    x, y = make_input(7)
    net, params, loss, backend, value, grads = run(None, "cpu", True, x, y)
    ref_value, ref_grads, _ = reference.loss_and_grad(net, params, x, y, loss, num_steps=STEPS)
    assert value == pytest.approx(ref_value, rel=2e-5, abs=1e-7)
    assert_grads_close(grads, ref_grads)
