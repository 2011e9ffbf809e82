"""The generic backward's next-layer term of dL/dS on both sides of its kernel choice, against
the float32 dense reference: on the cpu device a dense float trace feeding a layer (every model
but Leaky, whose fused kernels read the next layer's rows themselves) takes it as one blocked
product per step for every sample (LifBackward's stepProduct, into a [B, n] buffer); on an
IPU's tiles (ipu-model), in half storage and for Leaky, one pass per sample over the next
layer's rows (fromFanoutDense). A hidden layer feeding a hidden layer (widths over a register
block and ragged) and one feeding the readout; direct and per-step input; one and several
next shards."""

import pytest
from engine_helpers import assert_equals_reference, make_input, sgd_backend

import popsnn
from popsnn import losses

BATCH, STEPS = 5, 7

NEURONS = {
    "synaptic-subtract": lambda: popsnn.Synaptic(alpha=0.6, beta=0.8),
    "synaptic-zero": lambda: popsnn.Synaptic(alpha=0.6, beta=0.8, reset_mechanism="zero"),
    "rleaky-all": lambda: popsnn.RLeaky(beta=0.8),
    "rleaky-one": lambda: popsnn.RLeaky(beta=0.8, all_to_all=False),
    "lapicque": lambda: popsnn.Lapicque(beta=0.85, C=0.5),
    "alpha": lambda: popsnn.Alpha(alpha=0.9, beta=0.75),
    "leaky": lambda: popsnn.Leaky(beta=0.85),
}

DEVICES = {
    "cpu": dict(device="cpu"),  # stepProduct (Leaky: its fused kernels)
    "ipu-model": dict(device="ipu-model", num_ipus=1, tiles_per_ipu=8),  # fromFanoutDense
}


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "per-step"])
@pytest.mark.parametrize("device", sorted(DEVICES))
@pytest.mark.parametrize("name", sorted(NEURONS))
def test_next_layer_term_equals_the_reference(name, device, direct):
    net = popsnn.Sequential(
        popsnn.Linear(12, 40),
        NEURONS[name](),
        popsnn.Linear(40, 37),
        NEURONS[name](),
        popsnn.Linear(37, 4),
        popsnn.Leaky(beta=0.85),  # a readout that spikes for every model at these weights
    )
    loss = losses.ce_count_loss()
    x, raw = make_input(net, BATCH, STEPS, direct, seed=3)
    params = net.init_params(4)
    for layer in params:  # weights 6x their initial scale: every layer spikes
        layer["weight"] = layer["weight"] * 6.0
    backend = sgd_backend(net, params, loss, steps=STEPS, batch=BATCH, **DEVICES[device])
    if device == "ipu-model":  # the next layers span several tiles: several next shards
        assert backend.profile()["layer1_shards"] > 1
    # Loss, every gradient and the output spikes; every layer spikes (the helper asserts it).
    assert_equals_reference(backend, net, params, loss, x, raw % 4, STEPS)
