"""Multi-tile and multi-IPU geometries on the ipu-model device (layers sharded
over many tiles, spike ids and gradients crossing tiles and IPUs), the spike
buffer overflow, and the network that does not fit."""

import numpy as np
import pytest
from engine_helpers import (
    assert_equals_reference,
    assert_grown_equals_reference,
    big_net,
    make_input,
    sgd_backend,
    sharded_case,
)

import popsnn
from popsnn import losses, optim, sparse
from popsnn.engine import EngineBackend, NetworkDoesNotFit, SpikeBufferOverflow

BATCH, STEPS = 4, 8


GEOMETRIES = {
    "1x16": dict(num_ipus=1, tiles_per_ipu=16),
    "2x8": dict(num_ipus=2, tiles_per_ipu=8),
    # 28 KiB per tile: the layer-major schedule (T steps of input buffers per tile) does
    # not fit, the step-major one does.
    "2x8-28KiB": dict(num_ipus=2, tiles_per_ipu=8, memory_bytes_per_tile=28 * 1024),
}


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "per-step"])
@pytest.mark.parametrize("geometry", sorted(GEOMETRIES))
def test_sharded_network_equals_the_reference(geometry, direct):
    rule = sparse.window(0.5) if direct else None
    net = big_net(rule)
    backend, params, loss, x, y = sharded_case(
        net, direct, batch=BATCH, steps=STEPS, **GEOMETRIES[geometry]
    )
    layout = backend.profile()
    assert layout["tiles"] == 16
    assert layout["step_major"] == (1 if "KiB" in geometry else 0)
    # Every layer spans several tiles (and so both IPUs of the 2 x 8 geometry).
    assert all(layout[f"layer{l}_shards"] >= 10 for l in range(3))
    assert_equals_reference(backend, net, params, loss, x, y, STEPS)
    profile = backend.profile()
    assert profile["estimate_total_cycles"] > 0
    if geometry.startswith("2x8"):
        assert profile["estimate_exchange_bytes_between_ipus"] > 0


def overflow_setup():
    net = popsnn.Sequential(
        popsnn.Linear(10, 16), popsnn.Leaky(beta=0.9), popsnn.Linear(16, 3), popsnn.Leaky(beta=0.9)
    )
    x, raw = make_input(net, BATCH, STEPS, True, seed=13, scale=3.0, density=0.9)
    return net, x, raw % 3, net.init_params(0)


def test_overflow_is_an_error_naming_layer_step_count_and_capacity():
    net, x, y, params = overflow_setup()
    backend = EngineBackend(
        net,
        params,
        losses.ce_count_loss(),
        optim.SGD(lr=0.1),
        num_steps=STEPS,
        batch_size=BATCH,
        device="cpu",
        max_activity=0.05,
    )
    before = backend.get_params()
    with pytest.raises(
        SpikeBufferOverflow,
        match=r"layer 0 at step \d+.*needed \d+.*holds \d+"
        r".*max_activity.*on_overflow='grow'",
    ) as info:
        backend.train_step(x, y)
    assert info.value.layer == 0 and info.value.needed > info.value.capacity
    # Nothing was updated.
    for p, b in zip(backend.get_params(), before):
        for key in b:
            np.testing.assert_array_equal(p[key], b[key])


def test_overflow_grow_recompiles_and_equals_the_reference():
    net, x, y, params = overflow_setup()
    loss = losses.ce_count_loss()
    backend = sgd_backend(
        net,
        params,
        loss,
        steps=STEPS,
        batch=BATCH,
        device="cpu",
        max_activity=0.05,
        on_overflow="grow",
    )
    assert_grown_equals_reference(backend, net, params, loss, x, y, STEPS)


def test_network_that_does_not_fit_names_the_layer_and_the_fix():
    net = popsnn.Sequential(
        popsnn.Linear(784, 64),
        popsnn.Leaky(beta=0.9),
        popsnn.Linear(64, 10),
        popsnn.Leaky(beta=0.9),
    )
    with pytest.raises(
        NetworkDoesNotFit,
        match=r"needs \d+ bytes.*has 65536.*layer \d \(Leaky, \d+ -> \d+ neurons"
        r".*takes \d+.*Fix: more tiles",
    ):
        EngineBackend(
            net,
            net.init_params(0),
            losses.ce_count_loss(),
            optim.SGD(lr=0.1),
            num_steps=25,
            batch_size=128,
            device="ipu-model",
            num_ipus=1,
            tiles_per_ipu=4,
            memory_bytes_per_tile=64 * 1024,
        )


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "per-step"])
def test_layers_packed_across_two_ipus_and_wrapping_equal_the_reference(direct):
    # 2 IPUs x 32 tiles, one neuron a shard: layer 0 on tiles 0-47, layer 1 on 48-63 and
    # (wrapping) 0-19, layer 2 on 20-39; ids and gradients cross both IPUs.
    net = big_net(sparse.window(0.5) if direct else None)
    backend, params, loss, x, y = sharded_case(
        net, direct, batch=BATCH, steps=STEPS, num_ipus=2, tiles_per_ipu=32
    )
    layout = backend.profile()
    assert layout["tiles"] == 64
    assert [layout[f"layer{l}_shards"] for l in range(3)] == [48, 36, 20]
    assert_equals_reference(backend, net, params, loss, x, y, STEPS)
    assert backend.profile()["estimate_exchange_bytes_between_ipus"] > 0
