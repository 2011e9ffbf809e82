"""The reference forward on hand-computed trajectories, edge cases and dtypes."""

from __future__ import annotations

import numpy as np
import pytest
from _reference_nets import MODELS, active_params, sequence_input, targets, two_layer_net

import popsnn
from popsnn import reference


def one_neuron(neuron):
    """A single neuron whose input current is exactly x (W = 1, no bias)."""
    net = popsnn.Sequential(popsnn.Linear(1, 1, bias=False), neuron)
    params = net.init_params(0, dtype=np.float64)
    params[0]["weight"][:] = 1.0
    return net, params


def run(neuron, currents):
    net, params = one_neuron(neuron)
    x = np.asarray(currents, dtype=np.float64)[:, None, None]
    rec = reference.forward(net, params, x)
    return rec.membranes[0][:, 0, 0], rec.spikes[0][:, 0, 0], rec


def test_leaky_subtract_by_hand():
    u, s, _ = run(popsnn.Leaky(beta=0.5), [0.8, 0.8, 0.8, 0.0])
    # U0 = .8; U1 = .4 + .8 = 1.2 (spike); U2 = .6 + .8 - 1 = .4; U3 = .2
    np.testing.assert_allclose(u, [0.8, 1.2, 0.4, 0.2])
    np.testing.assert_array_equal(s, [0, 1, 0, 0])


def test_leaky_zero_and_none_by_hand():
    u, s, _ = run(popsnn.Leaky(beta=0.5, reset_mechanism="zero"), [0.8, 0.8, 0.8, 0.0])
    np.testing.assert_allclose(u, [0.8, 1.2, 0.8, 0.4])  # U2 = 0.5*0*1.2 + .8
    np.testing.assert_array_equal(s, [0, 1, 0, 0])
    u, s, _ = run(popsnn.Leaky(beta=0.5, reset_mechanism="none"), [0.8, 0.8, 0.8, 0.0])
    np.testing.assert_allclose(u, [0.8, 1.2, 1.4, 0.7])
    np.testing.assert_array_equal(s, [0, 1, 1, 0])


def test_threshold_equality_neither_spikes_nor_resets():
    # H(0) = 0: U == threshold is no spike, so no reset at the next step either.
    u, s, _ = run(popsnn.Leaky(beta=1.0), [1.0, 0.0, 0.5])
    np.testing.assert_array_equal(u, [1.0, 1.0, 1.5])
    np.testing.assert_array_equal(s, [0, 0, 1])


def test_synaptic_by_hand():
    u, s, rec = run(popsnn.Synaptic(alpha=0.5, beta=0.5), [1.0, 0.5, 0.0])
    # J = 1, 1, .5 ; U0 = 1 (no spike: equal), U1 = .5 + 1 = 1.5 (spike), U2 = .75 + .5 - 1
    np.testing.assert_allclose(rec.currents[0][:, 0, 0], [1.0, 1.0, 0.5])
    np.testing.assert_allclose(u, [1.0, 1.5, 0.25])
    np.testing.assert_array_equal(s, [0, 1, 0])


def test_synaptic_zero_reset_keeps_the_current():
    u, _, rec = run(popsnn.Synaptic(alpha=0.5, beta=0.5, reset_mechanism="zero"), [1.0, 0.5, 0.0])
    np.testing.assert_allclose(rec.currents[0][:, 0, 0], [1.0, 1.0, 0.5])
    np.testing.assert_allclose(u, [1.0, 1.5, 0.0])  # (1 - R)(beta U + J) with R = 1


def test_rleaky_one_to_one_by_hand():
    net, params = one_neuron(popsnn.RLeaky(beta=0.5, all_to_all=False))
    params[0]["recurrent_weight"][:] = 0.25
    x = np.array([1.5, 0.0, 0.0])[:, None, None]
    u = reference.forward(net, params, x).membranes[0][:, 0, 0]
    # U0 = 1.5 (spike); U1 = .75 + 0 + .25*1 - 1 = 0; U2 = 0
    np.testing.assert_allclose(u, [1.5, 0.0, 0.0])


def test_rleaky_zero_reset_zeroes_the_whole_update_as_snntorch():
    net, params = one_neuron(popsnn.RLeaky(beta=0.5, all_to_all=False, reset_mechanism="zero"))
    params[0]["recurrent_weight"][:] = 0.25
    x = np.array([1.5, 0.7, 0.7])[:, None, None]
    u = reference.forward(net, params, x).membranes[0][:, 0, 0]
    # U1 = (1 - 1) * (...) = 0, input included (Leaky would give 0.7)
    np.testing.assert_allclose(u, [1.5, 0.0, 0.7])


def test_rleaky_all_to_all_bias_enters_from_the_first_step():
    net = popsnn.Sequential(popsnn.Linear(1, 2, bias=False), popsnn.RLeaky(beta=0.0))
    params = net.init_params(0, dtype=np.float64)
    params[0]["weight"][:] = [[2.0], [0.0]]
    params[0]["recurrent_weight"][:] = [[0.0, 0.0], [0.5, 0.0]]
    params[0]["recurrent_bias"][:] = [0.1, 0.2]
    x = np.array([1.0, 0.0])[:, None, None]
    u = reference.forward(net, params, x).membranes[0][:, 0]
    # t0: U = W x + b_V = [2.1, 0.2]; t1: [0.1 - 1, 0.2 + 0.5 * 1]
    np.testing.assert_allclose(u, [[2.1, 0.2], [-0.9, 0.7]])


@pytest.mark.parametrize("model", MODELS)
def test_direct_current_equals_the_repeated_sequence(model):
    net = two_layer_net(model, "zero")
    params = active_params(net, 4)
    x = sequence_input(5)[0]
    y = targets(6)
    v1, g1, r1 = reference.loss_and_grad(net, params, x, y, "ce_count", num_steps=7)
    v2, g2, r2 = reference.loss_and_grad(net, params, np.repeat(x[None], 7, 0), y, "ce_count")
    assert v1 == pytest.approx(v2, abs=1e-12)
    for a, b in zip(r1.membranes + r1.spikes, r2.membranes + r2.spikes):
        np.testing.assert_allclose(a, b, atol=1e-12)
    for a, b in zip(g1, g2):
        for k in a:
            np.testing.assert_allclose(a[k], b[k], atol=1e-12)


@pytest.mark.parametrize("model", MODELS)
def test_float32_follows_float64(model):
    net = two_layer_net(model)
    p64 = active_params(net, 7)
    p32 = [{k: v.astype(np.float32) for k, v in p.items()} for p in p64]
    x, y = sequence_input(8), targets(9)
    v64, g64, r64 = reference.loss_and_grad(net, p64, x, y, "mse_membrane")
    v32, g32, r32 = reference.loss_and_grad(net, p32, x, y, "mse_membrane")
    assert all(a.dtype == np.float32 for a in r32.membranes + r32.spikes)
    assert all(g[k].dtype == np.float32 for g in g32 for k in g)
    if all(np.array_equal(a, b) for a, b in zip(r32.spikes, r64.spikes)):
        assert v32 == pytest.approx(v64, rel=1e-5)
        for a, b in zip(g32, g64):
            for k in a:
                np.testing.assert_allclose(a[k], b[k], rtol=1e-4, atol=1e-5)


def test_record_shapes_and_masks_without_rule():
    net = two_layer_net("synaptic")
    params = active_params(net)
    rec = reference.forward(net, params, sequence_input())
    assert [s.shape for s in rec.spikes] == [(6, 3, 5), (6, 3, 4)]
    assert rec.currents[0].shape == (6, 3, 5)
    assert all(m.dtype == bool and m.all() for m in rec.grad_masks)
    net = two_layer_net("leaky")
    rec = reference.forward(net, active_params(net), sequence_input())
    assert rec.currents == [None, None]


def test_dsnn_size_runs_and_returns_float32():
    net = popsnn.Sequential(
        popsnn.Linear(784, 1000),
        popsnn.Leaky(beta=0.9),
        popsnn.Linear(1000, 10),
        popsnn.Leaky(beta=0.9),
    )
    params = net.init_params(0)
    x = np.random.default_rng(0).random((128, 784), dtype=np.float32)
    value, grads, rec = reference.loss_and_grad(
        net, params, x, np.arange(128) % 10, "ce_count", num_steps=25
    )
    assert np.isfinite(value) and grads[0]["weight"].dtype == np.float32
    assert rec.spikes[0].shape == (25, 128, 1000)
