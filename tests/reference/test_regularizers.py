"""popsnn.regularizers: values by hand, gradients against finite differences (float64),
the reference's training with one, and the one-line refusals."""

from __future__ import annotations

import numpy as np
import pytest
from _reference_nets import sequence_input, targets, two_layer_net

import popsnn
from popsnn import optim, reference
from popsnn.regularizers import spike_count_bounds


def test_value_by_hand():
    # T 2, B 2, n 3: counts [[2, 0, 1], [0, 0, 0]]; means 1, 0.
    s = np.zeros((2, 2, 3))
    s[:, 0, 0] = 1
    s[1, 0, 2] = 1
    reg = spike_count_bounds(upper=0.5, lambda_upper=2.0, lower=0.5, lambda_lower=3.0)
    value, grad = reg.value_and_grad(s)
    up = 2.0 * (1.0 - 0.5)  # sample 0 only
    low = 3.0 / 3 * (0.5**2 * 1 + 0.5**2 * 3)  # silent neurons: one in sample 0, three in 1
    assert value == pytest.approx((up + low) / 2, rel=1e-15)
    # d/dc: sample 0: 2/(3*2) over the bound; silent neuron: -2*3*0.5/(3*2)
    np.testing.assert_allclose(grad[:, 0], [[1 / 3, 1 / 3 - 0.5, 1 / 3]] * 2, rtol=1e-15)
    np.testing.assert_allclose(grad[:, 1], np.full((2, 3), -0.5), rtol=1e-15)
    assert grad.shape == s.shape and grad.dtype == s.dtype


@pytest.mark.parametrize("power", [1.0, 2.0, 3.5])
def test_gradient_matches_finite_differences(power):
    """The penalty as a function of real-valued S (away from its kinks) in float64."""
    rng = np.random.default_rng(3)
    s = rng.uniform(0, 1, (5, 4, 6))
    reg = spike_count_bounds(
        upper=2.4, lambda_upper=0.7, lower=2.6, lambda_lower=1.3, upper_power=power
    )
    _, grad = reg.value_and_grad(s)
    h = 1e-6
    for idx in [(0, 0, 0), (2, 1, 3), (4, 3, 5), (1, 2, 4)]:
        up, down = s.copy(), s.copy()
        up[idx] += h
        down[idx] -= h
        numeric = (reg(up) - reg(down)) / (2 * h)
        assert grad[idx] == pytest.approx(numeric, rel=1e-6, abs=1e-10)
    assert np.any(grad > 0) and np.any(grad < 0)  # both bounds were active


def test_conv_shaped_spikes_flatten_their_neurons():
    s = (np.random.default_rng(0).uniform(size=(3, 2, 4, 5, 5)) > 0.8).astype(np.float32)
    reg = spike_count_bounds(upper=0.1, lower=0.5)
    value, grad = reg.value_and_grad(s)
    flat_value, flat_grad = reg.value_and_grad(s.reshape(3, 2, -1))
    assert value == flat_value and grad.shape == s.shape
    np.testing.assert_array_equal(grad.reshape(3, 2, -1), flat_grad)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"upper": -1.0}, "upper must be >= 0"),
        ({"lambda_lower": float("nan")}, "lambda_lower must be a finite real"),
        ({"upper_power": 0.5}, "upper_power must be >= 1"),
        ({"lower": "1"}, "lower must be a finite real"),
    ],
)
def test_bad_arguments_are_one_clear_line(kwargs, words):
    with pytest.raises(ValueError, match=words):
        spike_count_bounds(**kwargs)


def test_reference_adds_the_value_of_every_hidden_layer():
    net = two_layer_net("leaky", "subtract", "fast_sigmoid")
    params = net.init_params(0, np.float64)
    for p in params:
        p["weight"] *= 4.0
    x, y = sequence_input(1, steps=6), targets(2, num_classes=net.num_outputs)
    reg = spike_count_bounds(upper=0.2, lower=0.5)
    plain, _, rec = reference.loss_and_grad(net, params, x, y, "ce_count", num_steps=6)
    value, _, _ = reference.loss_and_grad(
        net, params, x, y, "ce_count", num_steps=6, regularizer=reg
    )
    assert value == pytest.approx(plain + reg(rec.spikes[0]), rel=1e-12)
    assert reg(rec.spikes[0]) > 0


def test_model_trains_with_it_on_the_reference_and_the_engine_refuses():
    net = two_layer_net("leaky", "subtract", "fast_sigmoid")
    reg = spike_count_bounds(upper=0.2, lower=0.5)
    model = popsnn.Model(
        net,
        loss="ce_count",
        optimizer=optim.Adam(lr=1e-2),
        device="reference",
        num_steps=6,
        batch_size=4,
        regularizer=reg,
    )
    x, y = sequence_input(1, steps=6, batch=4), targets(2, batch=4, num_classes=net.num_outputs)
    before = model.get_params()[0]["weight"].copy()
    model.train_step(x.astype(np.float32), y)
    assert not np.array_equal(before, model.get_params()[0]["weight"])
    with pytest.raises(TypeError, match="regularizer must be a popsnn.regularizers"):
        popsnn.Model(net, device="reference", regularizer=lambda s: 0.0)
    if "cpu" in popsnn.model.available_devices():
        with pytest.raises(ValueError, match="device='reference' only"):
            popsnn.Model(net, device="cpu", num_steps=6, batch_size=4, regularizer=reg)
