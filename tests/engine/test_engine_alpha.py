"""snnTorch's Alpha neuron on the engine: its two synaptic states (E, H) in the LIF
vertices and the backward's two current recurrences, against the float32 reference (spikes
identical, gradients to float tolerance), with every reset, both input layouts, the sparse
rules (the reference's masked surrogate) and sharded geometries on the IPU model."""

import pytest
from engine_helpers import (
    assert_equals_reference,
    make_input,
    sharded_case,
    train_like_the_reference,
)
from test_engine_matrix import check

import popsnn
from popsnn import losses, optim, sparse
from popsnn.engine import EngineBackend


def alpha(reset, rule=None, threshold=1.0):
    return popsnn.Alpha(
        alpha=0.9, beta=0.75, reset_mechanism=reset, sparse=rule, threshold=threshold
    )


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "per-step"])
@pytest.mark.parametrize("reset", ["zero", "subtract", "none"])
def test_alpha_equals_the_reference(reset, direct):
    # Alpha in both layers (the hidden one exchanges spike ids), a Leaky between them
    # checks that Alpha's dL/dI reaches the layer below.
    net = popsnn.Sequential(
        popsnn.Linear(12, 16),
        alpha(reset),
        popsnn.Linear(16, 14),
        popsnn.Leaky(beta=0.85),
        popsnn.Linear(14, 4),
        alpha(reset),
    )
    rec = check(net, losses.ce_count_loss(), direct, seed=5)
    assert all(s.sum() > 0 for s in rec.spikes), "a silent layer tests nothing"


@pytest.mark.parametrize("rule", ["window", "one_sided"])
@pytest.mark.parametrize("reset", ["zero", "subtract"])
def test_alpha_sparse_rules_equal_the_masked_reference(reset, rule):
    make = {"window": lambda: sparse.window(0.4), "one_sided": lambda: sparse.one_sided(0.5)}
    net = popsnn.Sequential(
        popsnn.Linear(12, 20),
        alpha(reset, make[rule]()),
        popsnn.Linear(20, 4),
        alpha(reset, make[rule]()),
    )
    rec = check(net, losses.ce_count_loss(), False, seed=4)
    assert 0 < rec.grad_masks[0].mean() < 1, "the rule must cut something and leave something"


def test_alpha_membrane_loss_equals_the_reference():
    net = popsnn.Sequential(
        popsnn.Linear(10, 12), alpha("subtract"), popsnn.Linear(12, 3), alpha("zero")
    )
    check(net, losses.mse_membrane_loss(), True, seed=5)


@pytest.mark.parametrize(
    "geometry",
    [
        dict(num_ipus=1, tiles_per_ipu=16),
        dict(num_ipus=2, tiles_per_ipu=8, memory_bytes_per_tile=32 * 1024),
    ],
    ids=["1x16", "2x8-32KiB"],
)
def test_sharded_alpha_equals_the_reference(geometry):
    # A threshold of 0.5: with the cases' small weights every layer then spikes.
    net = popsnn.Sequential(
        popsnn.Linear(40, 48),
        alpha("zero", threshold=0.5),
        popsnn.Linear(48, 36),
        alpha("subtract", sparse.window(0.3), threshold=0.5),
        popsnn.Linear(36, 20),
        alpha("none", threshold=0.5),
    )
    backend, params, loss, x, y = sharded_case(net, True, batch=4, steps=8, **geometry)
    assert all(backend.profile()[f"layer{l}_shards"] >= 2 for l in range(3))
    assert_equals_reference(backend, net, params, loss, x, y, 8)


def test_alpha_trains_like_the_reference():
    # Three Adam steps: the state (E, H) starts from zero each minibatch, the weights move.
    net = popsnn.Sequential(
        popsnn.Linear(12, 16), alpha("subtract"), popsnn.Linear(16, 4), alpha("zero")
    )
    x, raw = make_input(net, 6, 10, True, seed=5)
    params = net.init_params(6)
    loss = losses.ce_count_loss()
    backend = EngineBackend(
        net, params, loss, optim.Adam(lr=0.01), num_steps=10, batch_size=6, device="cpu"
    )
    train_like_the_reference(backend, net, params, loss, optim.Adam(lr=0.01), x, raw % 4)


def test_alpha_costs_more_than_leaky_in_the_cycle_estimate():
    # Its two extra state blocks are work per neuron in both vertices (an IPU estimate).
    def cycles(neuron):
        net = popsnn.Sequential(popsnn.Linear(40, 48), neuron, popsnn.Linear(48, 20), neuron)
        backend, _, _, x, y = sharded_case(
            net, True, batch=4, steps=8, num_ipus=1, tiles_per_ipu=16
        )
        backend.loss_and_grad(x, y)  # the estimates count executions
        return backend.profile()["estimate_compute_cycles"]

    assert (
        cycles(alpha("zero"))
        > cycles(popsnn.Synaptic(alpha=0.9, beta=0.75))
        > cycles(popsnn.Leaky(beta=0.75))
    )
