"""The graph builder's planner is a pure function of the spec and the target: these tests
run it without building a graph (popsnn._native.plan), and check that the engine's layout
is the plan's."""

import math

import numpy as np
import pytest

import popsnn
from popsnn import _native, optim
from popsnn.engine import EngineBackend

INPUT_SPIKE_IDS, INPUT_PARTIAL_CURRENT = 2, 3  # include/popsnn/VertexEnums.hpp
BUFFER_HEADER = 2


def spec(sizes, batch=4, steps=3, max_activity=1.0):
    layers = [{"inputs": a, "outputs": b, "neuron": "Leaky"} for a, b in zip(sizes, sizes[1:])]
    return {
        "layers": layers,
        "loss": {"name": "ce_count"},
        "optimizer": {"name": "sgd"},
        "batch_size": batch,
        "num_steps": steps,
        "max_activity": max_activity,
    }


@pytest.mark.parametrize("tiles", [1, 7, 64, 1472])
@pytest.mark.parametrize("max_activity", [1.0, 0.3, 0.01])
def test_shards_cover_every_neuron_once_with_buffers_of_the_asked_capacity(tiles, max_activity):
    plan = _native.plan(spec([50, 300, 130, 20], max_activity=max_activity), tiles)
    for layer, n in zip(plan["layers"], [300, 130, 20]):
        shards = layer["shards"]
        assert [first for _, first, _, _ in shards] == [
            sum(size for _, _, size, _ in shards[:k]) for k in range(len(shards))
        ]
        assert sum(size for _, _, size, _ in shards) == n
        assert all(0 < size <= layer["shard_size"] for _, _, size, _ in shards)
        assert all(tile < tiles for tile, _, _, _ in shards)
        for _, _, size, capacity in shards:
            # max_activity is a float32 on the C++ side: 0.3 is 0.30000001.
            assert capacity == min(size, max(1, math.ceil(float(np.float32(max_activity)) * size)))
        assert layer["stride"] == BUFFER_HEADER + max(c for _, _, _, c in shards)


def test_a_wide_layer_pushes_to_a_narrow_readout_in_the_layer_major_schedule():
    plan = _native.plan(spec([784, 1000, 10]), 1472)
    hidden, readout = plan["layers"]
    assert hidden["push"] and not readout["push"]
    assert readout["input_mode"] == INPUT_PARTIAL_CURRENT
    # Shards just wide enough for their id buffers to hold the 10 outputs' worth.
    assert hidden["stride"] >= 10
    last_pusher_tile = hidden["shards"][-1][0]
    assert [t for t, _, _, _ in readout["shards"]] == list(
        range(last_pusher_tile + 1, last_pusher_tile + 1 + len(readout["shards"]))
    )
    step_major = _native.plan(spec([784, 1000, 10]), 1472, step_major=True)
    assert not step_major["layers"][0]["push"]
    assert step_major["layers"][1]["input_mode"] == INPUT_SPIKE_IDS


def test_spread_halves_the_shards_and_chunks_divide_the_batch():
    full = _native.plan(spec([20, 64, 10]), 64)
    half = _native.plan(spec([20, 64, 10]), 64, step_major=True, spread=2)
    assert len(full["layers"][0]["shards"]) == 64
    assert len(half["layers"][0]["shards"]) == 32
    assert _native.plan(spec([20, 64, 10], batch=12), 8, chunks=3)["chunk_batch"] == 4
    with pytest.raises(ValueError, match="chunks must divide the batch of 12, got 5"):
        _native.plan(spec([20, 64, 10], batch=12), 8, chunks=5)


def test_the_first_layers_weight_step_fuses_only_where_its_gradient_need_not_be_whole():
    """The optimiser steps direct-input weights as it computes their gradient on the cpu device,
    in float, with the batch at once; half storage, chunks and IPU targets write it whole."""
    direct = dict(spec([20, 30, 10], batch=8), input="direct")
    assert _native.plan(direct, 4)["fused_weight_step"]
    assert not _native.plan(dict(direct, input="per_step"), 4)["fused_weight_step"]
    assert not _native.plan(dict(direct, dtype="float16"), 4)["fused_weight_step"]
    assert not _native.plan(direct, 4, chunks=2)["fused_weight_step"]
    assert not _native.plan(direct, 64, ipu=True)["fused_weight_step"]


def test_loss_groups_one_per_16_ipu_tiles_from_the_last_tile_down():
    plan = _native.plan(spec([20, 30, 10], batch=8), 64, ipu=True)
    assert plan["loss_tile"] == 63
    assert plan["loss_groups"] == [(0, 2, 63), (2, 4, 62), (4, 6, 61), (6, 8, 60)]
    assert _native.plan(spec([20, 30, 10], batch=8), 64)["loss_groups"] == [(0, 8, 63)]


def test_the_planner_validates_the_spec_first():
    bad = spec([20, 30, 10])
    bad["layers"][0].update(surrogate="fast_sigmoid", surrogate_param=float("nan"))
    with pytest.raises(ValueError, match="layer 0: the surrogate's slope must be a finite"):
        _native.plan(bad, 4)


def engine_40_100_10(**device_options):
    """A 40-100-10 Leaky network on a 32-tile ipu-model, T 3, B 4."""
    net = popsnn.Sequential(
        popsnn.Linear(40, 100),
        popsnn.Leaky(beta=0.9),
        popsnn.Linear(100, 10),
        popsnn.Leaky(beta=0.9),
    )
    return EngineBackend(
        net,
        net.init_params(0),
        popsnn.losses.ce_count_loss(),
        optim.SGD(lr=0.1),
        num_steps=3,
        batch_size=4,
        device="ipu-model",
        tiles_per_ipu=32,
        **device_options,
    )


def test_the_engine_builds_the_plan():
    backend = engine_40_100_10(max_activity=0.5)
    layout = backend._engine.layout()
    plan = _native.plan(
        dict(backend._spec, input="direct"),
        int(layout["tiles"]),
        ipu=True,
        step_major=bool(layout["step_major"]),
        chunks=int(layout["sample_chunks"]),
    )
    for l, layer in enumerate(plan["layers"]):
        assert layout[f"layer{l}_shards"] == len(layer["shards"])
        assert layout[f"layer{l}_shard_size"] == layer["shard_size"]
        assert layout[f"layer{l}_buffer_capacity"] == layer["stride"] - BUFFER_HEADER
        assert layout[f"layer{l}_pushes"] == layer["push"]
    assert np.isfinite(layout["tiles"])


def test_the_plans_memory_grows_with_the_batch_and_steps_and_decides_the_schedule():
    small = _native.plan(spec([40, 100, 10], batch=4, steps=3), 32, ipu=True)["tile_bytes"]
    wider = _native.plan(spec([40, 100, 10], batch=8, steps=3), 32, ipu=True)["tile_bytes"]
    longer = _native.plan(spec([40, 100, 10], batch=4, steps=6), 32, ipu=True)["tile_bytes"]
    assert len(small) == 32 and min(small) > 0
    assert all(w > s for w, s in zip(wider, small)) and sum(longer) > sum(small)
    # A tile with less memory than the plan needs: the engine settles on another mapping.
    backend = engine_40_100_10(memory_bytes_per_tile=max(small) - 4)
    layout = backend._engine.layout()
    assert (
        layout["step_major"]
        or layout["sample_chunks"] > 1
        or layout["layer0_shards"]
        < len(_native.plan(spec([40, 100, 10]), 32)["layers"][0]["shards"])
    )


@pytest.mark.parametrize(
    "trace_activity, compressed", [(0.05, True), (0.44, True), (0.45, False), (1.0, False)]
)
def test_a_rule_keeps_its_surrogate_dense_where_a_compressed_trace_would_be_as_large(
    trace_activity, compressed
):
    # A compressed entry costs 6 bytes (16-bit id and value), a dense one 4, and one dot per
    # entry: from 45% of the entries the plan keeps the rule's masked surrogate dense
    # (host/src/Plan.cpp).
    s = spec([30, 40, 3])
    s["trace_activity"] = trace_activity
    s["layers"][0].update(sparse="window", sparse_value=0.3)
    hidden, readout = _native.plan(s, 4)["layers"]
    assert hidden["compressed_trace"] == compressed
    assert not readout["compressed_trace"]  # no rule: always dense


@pytest.mark.parametrize("tiles, compressed", [(1, False), (2, True)])
def test_a_shard_whose_ids_do_not_fit_16_bits_keeps_the_dense_layout(tiles, compressed):
    # The compressed trace keeps 16-bit neuron ids: 70,000 neurons on one tile do not fit them
    # (the dense layout), on two tiles (35,000 each) they do.
    s = spec([4, 70000, 3])
    s["trace_activity"] = 0.05
    s["layers"][0].update(sparse="window", sparse_value=0.3)
    hidden = _native.plan(s, tiles)["layers"][0]
    assert hidden["shard_size"] == 70000 // tiles
    assert hidden["compressed_trace"] == compressed


def test_layers_narrower_than_the_machine_are_packed_over_the_tiles_and_wrap():
    # 3 x 64 tiles: each 100-neuron layer has 64 shards of 2 and starts where the previous
    # one ended, the third wrapping past the last tile; every tile holds some layer.
    plan = _native.plan(spec([50, 100, 100, 100, 100]), 64 * 3)
    starts = [layer["shards"][0][0] for layer in plan["layers"]]
    counts = [len(layer["shards"]) for layer in plan["layers"]]
    assert starts[0] == 0
    for l in range(1, len(starts)):
        assert starts[l] == (starts[l - 1] + counts[l - 1]) % 192
    for layer in plan["layers"]:
        tiles = [t for t, _, _, _ in layer["shards"]]
        assert tiles == [(tiles[0] + k) % 192 for k in range(len(tiles))]
    used = {t for layer in plan["layers"] for t, _, _, _ in layer["shards"]}
    assert used == set(range(192))
