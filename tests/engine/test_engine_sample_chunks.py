"""A batch that does not fit the tiles at once runs in chunks of samples (the builder's last
resort, after the schedules and tile spreads): every chunk a whole forward and backward pass,
the weight gradients summed over the chunks, one optimiser step. The results equal the
reference's for the whole batch (see engine_helpers for the tolerances)."""

import numpy as np
import pytest
from engine_helpers import (
    assert_equals_reference,
    assert_grads_close,
    assert_grown_equals_reference,
    big_net,
    labels_for,
    make_input,
    sgd_backend,
    sharded_case,
    train_like_the_reference,
)

import popsnn
from popsnn import losses, optim, reference, sparse
from popsnn.engine import EngineBackend, SpikeBufferOverflow

BATCH, STEPS = 12, 8


def geometry(kib):
    return dict(num_ipus=2, tiles_per_ipu=8, memory_bytes_per_tile=kib * 1024)


# (input, KiB per tile): too little memory for the whole batch at once.
CASES = [("direct", 24), ("direct", 32), ("per-step", 24), ("per-step", 36)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}KiB")
def test_chunked_batch_equals_the_reference(case):
    mode, kib = case
    direct = mode == "direct"
    net = big_net()
    backend, params, loss, x, y = sharded_case(
        net, direct, batch=BATCH, steps=STEPS, **geometry(kib)
    )
    layout = backend.profile()
    assert layout["sample_chunks"] > 1
    assert layout["chunk_batch"] * layout["sample_chunks"] == BATCH
    assert_equals_reference(backend, net, params, loss, x, y, STEPS)
    # A partial batch: the padding samples weigh nothing, in whichever chunk they fall.
    value, grads = backend.loss_and_grad(x[:5] if direct else x[:, :5], y[:5])
    ref_value, ref_grads, _ = reference.loss_and_grad(
        net, params, x[:5] if direct else x[:, :5], y[:5], loss, num_steps=STEPS if direct else None
    )
    assert value == pytest.approx(ref_value, rel=2e-5)
    assert_grads_close(grads, ref_grads)


def test_chunked_adam_steps_equal_the_reference():
    net = big_net()
    loss = losses.ce_count_loss()
    x, raw = make_input(net, BATCH, STEPS, True, seed=5)
    y = raw % 20
    params = net.init_params(6)
    backend = EngineBackend(
        net,
        params,
        loss,
        optim.Adam(lr=0.01),
        num_steps=STEPS,
        batch_size=BATCH,
        device="ipu-model",
        **geometry(24),
    )
    assert backend.profile()["sample_chunks"] > 1
    train_like_the_reference(
        backend, net, params, loss, optim.Adam(lr=0.01), x, y, rates=(0.01, 0.005, 0.01)
    )


def overflow_case(**options):
    """A sparse layer whose buffers hold 5% of a shard, and a batch in which only the last
    samples (the last chunk) spike enough to overflow them."""
    net = popsnn.Sequential(
        popsnn.Linear(10, 16),
        popsnn.Leaky(beta=0.9, sparse=sparse.window(0.5)),
        popsnn.Linear(16, 3),
        popsnn.Leaky(beta=0.9),
    )
    x, raw = make_input(net, 8, STEPS, True, seed=13, scale=3.0, density=0.9)
    params = net.init_params(0)
    backend = EngineBackend(
        net,
        params,
        losses.ce_count_loss(),
        optim.SGD(lr=0.1),
        num_steps=STEPS,
        batch_size=8,
        device="ipu-model",
        tiles_per_ipu=4,
        memory_bytes_per_tile=8 * 1024,
        max_activity=0.05,
        **options,
    )
    layout = backend.profile()
    assert layout["sample_chunks"] > 1
    x[: 8 - int(layout["chunk_batch"])] = 0.0  # all but the last chunk stay silent
    return net, x, raw % 3, params, backend


def test_overflow_in_any_chunk_is_an_error_and_nothing_is_updated():
    net, x, y, params, backend = overflow_case()
    with pytest.raises(SpikeBufferOverflow, match=r"layer 0 at step \d+.*needed \d+.*holds \d+"):
        backend.train_step(x, y)
    for p, b in zip(backend.get_params(), params):
        for key in b:
            np.testing.assert_array_equal(p[key], b[key])
    with pytest.raises(SpikeBufferOverflow):
        backend.infer(x)


def test_overflow_grow_in_a_chunk_equals_the_masked_reference():
    net, x, y, params, backend = overflow_case(on_overflow="grow")
    assert_grown_equals_reference(backend, net, params, losses.ce_count_loss(), x, y, STEPS)


def test_the_cpu_device_never_chunks():
    net = big_net()
    backend = EngineBackend(
        net,
        net.init_params(0),
        losses.ce_count_loss(),
        optim.SGD(lr=0.1),
        num_steps=STEPS,
        batch_size=64,
        device="cpu",
    )
    assert backend.profile()["sample_chunks"] == 1


def test_seed_000_dsnn_at_batch_128_fits_one_mk2():
    """784-1000-10, B = 128, T = 25, AdamW on the Mk2 geometry (1,472 tiles, 624 KiB each):
    the whole batch does not fit at once; in chunks it does."""
    net = popsnn.Sequential(
        popsnn.Linear(784, 1000),
        popsnn.Leaky(beta=0.9),
        popsnn.Linear(1000, 10),
        popsnn.Leaky(beta=0.9),
    )
    backend = EngineBackend(
        net,
        net.init_params(0),
        losses.ce_count_loss(),
        optim.AdamW(),
        num_steps=25,
        batch_size=128,
        device="ipu-model",
    )
    layout = backend.profile()
    assert layout["tiles"] == 1472 and layout["sample_chunks"] > 1
    assert layout["layer0_pushes"] == 1  # the readout is pushed W.S sums, not sent ids
    assert layout["max_tile_bytes"] <= 624 * 1024


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "per-step"])
def test_wide_layer_pushes_to_a_narrow_readout_on_many_tiles(direct):
    """200 -> 10 on 64 tiles: the planner widens the hidden shards until they push W.S sums to
    the readout (instead of 64 tiny shards' ids), and puts the readout on tiles of its own."""
    net = popsnn.Sequential(
        popsnn.Linear(30, 200),
        popsnn.Leaky(beta=0.9),
        popsnn.Linear(200, 10),
        popsnn.Leaky(beta=0.9),
    )
    loss = losses.ce_count_loss()
    x, raw = make_input(net, 6, STEPS, direct, seed=3)
    y = raw % 10
    params = net.init_params(4)
    backend = sgd_backend(
        net,
        params,
        loss,
        steps=STEPS,
        batch=6,
        device="ipu-model",
        tiles_per_ipu=64,
    )
    value, grads = backend.loss_and_grad(x, y)
    layout = backend.profile()
    assert layout["layer0_pushes"] == 1 and layout["layer0_shard_size"] == 8
    assert layout["layer1_shards"] == 10 and layout["sample_chunks"] == 1
    ref_value, ref_grads, rec = reference.loss_and_grad(
        net, params, x, y, loss, num_steps=STEPS if direct else None
    )
    assert rec.spikes[0].sum() > 0
    np.testing.assert_array_equal(backend.infer(x), rec.spikes[-1])
    assert value == pytest.approx(ref_value, rel=2e-5)
    assert_grads_close(grads, ref_grads)


LOSSES = {
    "ce_count-population": lambda: losses.ce_count_loss(population_code=True, num_classes=5),
    "ce_rate": losses.ce_rate_loss,
    "mse_count": lambda: losses.mse_count_loss(correct_rate=0.8, incorrect_rate=0.1),
    "mse_membrane": losses.mse_membrane_loss,
    "ce_max_membrane": losses.ce_max_membrane_loss,
}


@pytest.mark.parametrize("name", list(LOSSES))
@pytest.mark.parametrize("kib", [None, 14], ids=["whole-batch", "chunked"])
def test_loss_over_groups_of_samples_on_many_tiles(name, kib):
    """On 64 tiles the loss runs as one vertex per group of samples, each group on a tile of
    its own, the parts summed; with little memory the batch is chunked as well."""
    net = popsnn.Sequential(
        popsnn.Linear(30, 200),
        popsnn.Leaky(beta=0.9),
        popsnn.Linear(200, 10),
        popsnn.Leaky(beta=0.9),
    )
    loss = LOSSES[name]()
    x, raw = make_input(net, 8, STEPS, True, seed=9)
    y = labels_for(loss, net, raw)
    params = net.init_params(2)
    memory = {} if kib is None else {"memory_bytes_per_tile": kib * 1024}
    backend = sgd_backend(
        net,
        params,
        loss,
        steps=STEPS,
        batch=8,
        device="ipu-model",
        tiles_per_ipu=64,
        **memory,
    )
    assert (backend.profile()["sample_chunks"] > 1) == (kib is not None)
    value, grads = backend.loss_and_grad(x, y)
    ref_value, ref_grads, rec = reference.loss_and_grad(net, params, x, y, loss, num_steps=STEPS)
    np.testing.assert_array_equal(backend.infer(x), rec.spikes[-1])
    assert value == pytest.approx(ref_value, rel=2e-5)
    assert_grads_close(grads, ref_grads)
