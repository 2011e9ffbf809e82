"""Bad input raises, naming the argument, what it got and what it expects."""

from __future__ import annotations

import numpy as np
import pytest
from _reference_nets import active_params, sequence_input, targets, two_layer_net

import popsnn
from popsnn import losses, optim, reference


@pytest.fixture
def case():
    net = two_layer_net("rleaky_all")
    return net, active_params(net), sequence_input(), targets()


def raises(exc, *fragments):
    """pytest.raises that also checks each fragment appears in the message."""

    class Check:
        def __enter__(self):
            self.ctx = pytest.raises(exc)
            self.info = self.ctx.__enter__()
            return self.info

        def __exit__(self, *args):
            out = self.ctx.__exit__(*args)
            msg = str(self.info.value)
            for f in fragments:
                assert f in msg, f"{f!r} not in {msg!r}"
            return out

    return Check()


def test_input_with_the_wrong_width(case):
    net, params, x, _ = case
    with raises(ValueError, "x has shape (6, 3, 4)", "takes 3 inputs", "[T, B, 3]"):
        reference.forward(net, params, np.zeros((6, 3, 4)))
    with raises(ValueError, "x has shape (3, 7)", "[B, 3]"):
        reference.forward(net, params, np.zeros((3, 7)), num_steps=4)
    with raises(ValueError, "x must be [T, B, 3] or [B, 3]", "(3,)"):
        reference.forward(net, params, np.zeros(3), num_steps=4)


def test_direct_input_needs_num_steps(case):
    net, params, x, _ = case
    with raises(ValueError, "num_steps is required", "shape (3, 3)", "num_steps=T"):
        reference.forward(net, params, x[0])


def test_num_steps_that_contradicts_the_input(case):
    net, params, x, _ = case
    with raises(ValueError, "num_steps=4", "6 time steps"):
        reference.forward(net, params, x, num_steps=4)
    with raises(ValueError, "num_steps must be a positive integer, got 0"):
        reference.forward(net, params, x[0], num_steps=0)


def test_nan_or_inf_in_the_input_or_the_params(case):
    net, params, x, _ = case
    x = x.copy()
    x[0, 0, 0] = np.nan
    with raises(ValueError, "x contains 1 NaN or inf"):
        reference.forward(net, params, x)
    params[1]["recurrent_weight"][0, 0] = np.inf
    with raises(ValueError, "params[1]['recurrent_weight'] contains 1 NaN or inf"):
        reference.forward(net, params, sequence_input())


def test_params_that_do_not_fit_the_net(case):
    net, params, x, _ = case
    with raises(ValueError, "params has 1 layer dict(s), the net has 2"):
        reference.forward(net, params[:1], x)
    bad = [dict(params[0]), params[1]]
    del bad[0]["recurrent_bias"]
    with raises(ValueError, "params[0] has keys", "expected", "recurrent_bias"):
        reference.forward(net, bad, x)
    bad = [dict(params[0]), params[1]]
    bad[0]["weight"] = np.zeros((3, 5))
    with raises(ValueError, "params[0]['weight'] has shape (3, 5), expected (5, 3)"):
        reference.forward(net, bad, x)
    bad = [dict(params[0]), params[1]]
    bad[0]["bias"] = bad[0]["bias"].astype(np.float32)
    with raises(TypeError, "params[0]['bias'] has dtype float32", "use one dtype"):
        reference.forward(net, bad, x)
    with raises(TypeError, "params must be a list", "got dict"):
        reference.forward(net, params[0], x)


def test_net_that_is_not_a_sequential(case):
    _, params, x, _ = case
    with raises(TypeError, "net must be a popsnn.Sequential, got list"):
        reference.forward([popsnn.Linear(3, 4)], params, x)


def test_targets_out_of_range_or_misshapen(case):
    net, params, x, _ = case
    with raises(ValueError, "targets must lie in [0, 4), got label 4"):
        reference.loss_and_grad(net, params, x, np.array([0, 4, 1]), "ce_count")
    with raises(ValueError, "targets has shape (2,), expected (3,)"):
        reference.loss_and_grad(net, params, x, np.array([0, 1]), "ce_count")
    with raises(TypeError, "targets must be integer class labels, got dtype float64"):
        reference.loss_and_grad(net, params, x, np.array([0.0, 1.0, 2.0]), "ce_count")
    with raises(ValueError, "targets must lie in [0, 2), got label 3"):
        losses.ce_count_loss(True, 2)(np.zeros((2, 3, 4)), None, np.array([0, 3, 1]))


def test_population_that_does_not_divide_the_outputs():
    with raises(ValueError, "4 neurons", "num_classes=3 does not divide"):
        losses.ce_count_loss(population_code=True, num_classes=3)(
            np.zeros((2, 1, 4)), None, np.array([0])
        )
    with raises(ValueError, "num_classes is required with population_code=True"):
        losses.mse_count_loss(population_code=True)(np.zeros((2, 1, 4)), None, np.array([0]))
    with raises(ValueError, "num_classes=3 but the output layer has 4 neurons"):
        losses.ce_count_loss(num_classes=3)(np.zeros((2, 1, 4)), None, np.array([0]))


def test_unknown_names():
    with raises(ValueError, "unknown loss 'ce_cnt'", "ce_count"):
        losses.get("ce_cnt")
    with raises(ValueError, "unknown optimiser 'adagrad'", "adamw"):
        optim.get("adagrad", lr=0.1)
    with raises(ValueError, "surrogate must be", "'fast_sigmoid'", "got 'tanh'"):
        popsnn.Leaky(beta=0.9, surrogate="tanh")
    net = two_layer_net("leaky")
    with raises(ValueError, "unknown loss 'hinge'"):
        reference.loss_and_grad(net, active_params(net), sequence_input(), targets(), "hinge")


def test_bad_loss_and_optimiser_arguments():
    with raises(ValueError, "correct_rate must lie in [0, 1], got 1.5"):
        losses.mse_count_loss(correct_rate=1.5)
    with raises(ValueError, "spikes must be a [T, B, C] array, got shape (3, 4)"):
        losses.ce_count_loss()(np.zeros((3, 4)), None, np.array([0, 1, 2]))
    with raises(ValueError, "lr must be a finite number >= 0, got -0.1"):
        optim.SGD(-0.1)
    with raises(ValueError, "nesterov=True needs momentum > 0 and dampening = 0"):
        optim.SGD(0.1, nesterov=True)
    with raises(ValueError, "betas[1] must lie in [0, 1), got 1.0"):
        optim.Adam(betas=(0.9, 1.0))
    with raises(ValueError, "state_dict is for optimiser 'sgd', this one is 'adam'"):
        optim.Adam().load_state_dict(optim.SGD(0.1).state_dict())


def test_grads_that_do_not_match_params():
    params = [{"weight": np.zeros((2, 2))}]
    with raises(ValueError, "grads[0]['weight'] has shape (3,), params[0]['weight'] has (2, 2)"):
        optim.SGD(0.1).step(params, [{"weight": np.zeros(3)}])
    with raises(ValueError, "grads[0] has keys ['bias']"):
        optim.SGD(0.1).step(params, [{"bias": np.zeros(2)}])


def test_out_of_range_decay_is_refused():
    with raises(ValueError, "beta must lie in [0, 1], got 1.1", "popsnn refuses"):
        popsnn.Leaky(beta=1.1)
    with raises(ValueError, "alpha must lie in [0, 1], got -0.1"):
        popsnn.Synaptic(alpha=-0.1, beta=0.5)
