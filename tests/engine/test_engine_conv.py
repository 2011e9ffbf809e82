"""The engine's convolutional stage (codelets/Conv.cpp, ConvNeuron.cpp, host/src/ConvPlan.cpp,
ConvStage.cpp) against the reference. Without neurons, against its ops (popsnn.conv_ops, in
float64): the current, and from its gradient dL/dI the weight, bias and input gradients.
Both sides of the density choice (spike input: the event path; dense input: the gather),
stride and padding, max and average pooling, several tile geometries (channel and row
groups). With Leaky neurons, against popsnn.reference on a one-stage net in float32: spikes
identical, membranes and every gradient to tolerance, each reset, and the sparse rules
against the reference's masked surrogate.

Tolerance: the engine sums in float32 in its own order; 1e-5 of each array's largest entry
(a missing or doubled term moves entries by O(1) of it). The planner is checked without a
graph (popsnn._native.conv_plan)."""

from __future__ import annotations

import numpy as np
import pytest

import popsnn
from popsnn import _native, conv_ops, reference, sparse
from popsnn.engine import codelets_path

REL = 1e-5


def stage_spec(rows, in_shape, out_channels, kernel, stride=1, padding=0, pools=(), grad=True):
    pair = lambda v: (v, v) if isinstance(v, int) else tuple(v)  # noqa: E731
    return {
        "rows": rows,
        "in_shape": in_shape,
        "out_channels": out_channels,
        "conv": {"kernel_size": pair(kernel), "stride": pair(stride), "padding": pair(padding)},
        "pools": [
            {"kind": kind, "kernel_size": pair(k), "stride": pair(s), "padding": pair(p)}
            for kind, k, s, p in pools
        ],
        "input_grad": grad,
    }


def reference_stage(spec, x, weight, bias, d_out):
    """(current, d_weight, d_bias, d_x, dL/d of the convolution's output) of the reference's
    ops in float64; the current alone without d_out."""
    x, weight, bias = (np.asarray(a, np.float64) for a in (x, weight, bias))
    c = spec["conv"]
    h = conv_ops.conv2d_forward(x, weight, bias, c["stride"], c["padding"])
    trail = []
    for p in spec["pools"]:
        k, s, pad = p["kernel_size"], p["stride"], p["padding"]
        if p["kind"] == "max":
            y, argmax = conv_ops.max_pool_forward(h, k, s, pad)
            trail.append(
                lambda dy, h=h, a=argmax, k=k, s=s, pad=pad: conv_ops.max_pool_backward(
                    dy, a, h.shape, k, s, pad
                )
            )
        else:
            y = conv_ops.avg_pool_forward(h, k, s, pad)
            trail.append(
                lambda dy, h=h, k=k, s=s, pad=pad: conv_ops.avg_pool_backward(
                    dy, h.shape, k, s, pad
                )
            )
        h = y
    if d_out is None:
        return h
    dy = np.asarray(d_out, np.float64).reshape(h.shape)
    for back in reversed(trail):
        dy = back(dy)
    dw, db, dx = conv_ops.conv2d_backward(x, weight, dy, c["stride"], c["padding"], True)
    return h, dw, db, dx, dy


def assert_close(actual, expected, what):
    expected = np.asarray(expected, np.float64).ravel()
    scale = max(np.abs(expected).max(), 1e-30)
    err = np.abs(np.asarray(actual, np.float64).ravel() - expected).max()
    assert err <= REL * scale, f"{what}: max error {err:.3g} of scale {scale:.3g}"


def run(spec, x, weight, bias, d_out, **device):
    device = {"codelets": str(codelets_path()), **device}
    return _native.conv_stage(spec, x, weight, bias, d_out, device=device)


def make(spec, seed, spikes, grad_density=1.0):
    rng = np.random.default_rng(seed)
    cin, h, w = spec["in_shape"]
    kh, kw = spec["conv"]["kernel_size"]
    cout, rows = spec["out_channels"], spec["rows"]
    if spikes:
        x = (rng.random((rows, cin, h, w)) < 0.15).astype(np.float32)
    else:
        x = rng.normal(size=(rows, cin, h, w)).astype(np.float32)
    bound = 1 / np.sqrt(cin * kh * kw)
    weight = rng.uniform(-bound, bound, (cout, cin, kh, kw)).astype(np.float32)
    bias = rng.uniform(-bound, bound, cout).astype(np.float32)
    plan = _native.conv_plan(spec, 1)
    oh, ow = plan["maps"][-1]
    d_out = rng.normal(size=(rows, cout, oh, ow)).astype(np.float32)
    d_out *= rng.random(d_out.shape) < grad_density  # a sparse rule's zeros
    return x, weight, bias, d_out


def check_stage(spec, seed=0, spikes=True, grad_density=1.0, **device):
    x, weight, bias, d_out = make(spec, seed, spikes, grad_density)
    got = run(spec, x, weight, bias, d_out, **device)
    cur, dw, db, dx, d_conv = reference_stage(spec, x, weight, bias, d_out)
    assert_close(got["output"], cur, "current")
    assert_close(got["grad_weight"], dw, "dL/dW")
    assert_close(got["grad_bias"], db, "dL/db")
    assert_close(got["grad_input"], dx, "dL/dx")
    # The backward visits only dL/dI's non-zero entries at the convolution's output.
    assert got["active_grads"] == np.count_nonzero(d_conv)
    return got


# The devices a stage test runs on: the cpu device, and the ipu-model on one tile (six
# workers share it) or six.
ON_DEVICES = pytest.mark.parametrize(
    "device",
    [
        dict(type="cpu"),
        dict(type="ipu-model", tiles_per_ipu=1),
        dict(type="ipu-model", tiles_per_ipu=6),
    ],
    ids=["cpu", "ipu_model_1_tile", "ipu_model_6_tiles"],
)
CSNN_FIRST = dict(in_shape=(1, 12, 12), out_channels=6, kernel=5, pools=[("max", 2, 2, 0)])
VARIANTS = {
    "csnn_first": CSNN_FIRST,
    "stride2_pad1": dict(in_shape=(3, 9, 8), out_channels=5, kernel=3, stride=2, padding=1),
    "rect_kernel_pad": dict(in_shape=(2, 7, 9), out_channels=4, kernel=(3, 2), padding=(1, 0)),
    "avg_pool_pad": dict(in_shape=(2, 10, 10), out_channels=3, kernel=3, pools=[("avg", 3, 2, 1)]),
    "max_overlap_then_avg": dict(
        in_shape=(2, 11, 11), out_channels=4, kernel=2, pools=[("max", 3, 2, 1), ("avg", 2, 1, 0)]
    ),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("spikes", [True, False], ids=["events", "dense"])
def test_stage_equals_the_reference_on_both_sides_of_the_density_choice(variant, spikes):
    spec = stage_spec(6, **VARIANTS[variant])
    got = check_stage(spec, seed=1, spikes=spikes, type="ipu-model", tiles_per_ipu=4)
    shards = len(got["plan"]["shards"])
    rows_per_shard = [r for *_, r in got["plan"]["shards"]]
    # Spikes at 15% take the event path on every row, dense input the gather on every row.
    assert got["dense_rows"] == (0 if spikes else sum(rows_per_shard)), shards


@pytest.mark.parametrize("tiles", [1, 3, 6, 12, 16])
def test_every_tile_geometry_gives_the_same_stage(tiles):
    spec = stage_spec(8, **CSNN_FIRST)
    got = check_stage(spec, seed=2, type="ipu-model", tiles_per_ipu=tiles)
    plan = got["plan"]
    assert plan["channel_groups"] * plan["row_groups"] <= tiles
    if tiles >= 12:  # both sums over tiles in play: dL/dW over rows, dL/dx over channels
        assert plan["channel_groups"] > 1 and plan["row_groups"] > 1
    # A shard's rows over the tile's workers (an IPU's six), as many as it has rows.
    rows = max(r for *_, r in plan["shards"])
    assert plan["workers"] == min(6, rows)


def test_sparse_dl_di_carries_gradient_only_at_its_non_zero_entries():
    spec = stage_spec(6, in_shape=(2, 8, 8), out_channels=4, kernel=3, padding=1)
    got = check_stage(spec, seed=3, grad_density=0.1, type="ipu-model", tiles_per_ipu=4)
    assert 0 < got["active_grads"] < 0.2 * 6 * 4 * 8 * 8


@pytest.mark.parametrize("density", [1.0, 0.5, 0.1])
@pytest.mark.parametrize("tiles", [1, 6])
def test_input_gradient_on_both_sides_of_its_density_choice(density, tiles):
    # ConvInputGrad forms dL/dx by the blocked dense product from 30% non-zero dL/dI entries
    # per (shard, row) up, else one weight row per non-zero entry: both against the reference.
    spec = stage_spec(6, in_shape=(3, 9, 9), out_channels=8, kernel=3, padding=1)
    got = check_stage(spec, seed=5, grad_density=density, type="ipu-model", tiles_per_ipu=tiles)
    pairs = sum(r for *_, r in got["plan"]["shards"])
    want = {1.0: pairs, 0.5: pairs, 0.1: 0}[density]
    assert got["input_grad_dense_rows"] == want


@pytest.mark.parametrize(
    "geometry",
    [
        dict(in_shape=(3, 9, 9), out_channels=8, kernel=3),  # window runs
        dict(in_shape=(2, 9, 8), out_channels=5, kernel=(3, 2), stride=2, padding=(1, 0)),  # runs
        dict(in_shape=(3, 9, 9), out_channels=8, kernel=3, padding=(0, 1)),  # col row + col2im
        # runs of 13 x 5 = 65 floats: a whole block of 64 held in registers, then a vector
        # whose lanes past the run keep dL/dx's entries (planar, and the max pool's layout)
        dict(in_shape=(13, 9, 9), out_channels=8, kernel=5),
        dict(in_shape=(13, 12, 12), out_channels=8, kernel=5, pools=[("max", 2, 2, 0)]),
    ],
    ids=["runs", "runs_stride2_pad_rows", "col_pad_columns", "wide_runs", "wide_runs_pooled"],
)
@pytest.mark.parametrize("density", [0.2, 0.6])
@pytest.mark.parametrize("tiles", [1, 6])
def test_sparse_input_gradient_by_window_runs_and_by_col_rows(geometry, density, tiles):
    # Below the product's density, without column padding dL/dx is formed channels-last by
    # window runs (product from 50% on AVX-512 hosts, 30% on others), with it by one col row
    # per position and col2im (product from 30%): both sides against the reference. After
    # the max pool dL/dI is at most 25% non-zero (the pool's 60% is 15% of dL/dI): runs.
    spec = stage_spec(6, **geometry)
    got = check_stage(spec, seed=7, grad_density=density, type="ipu-model", tiles_per_ipu=tiles)
    pairs = sum(r for *_, r in got["plan"]["shards"])
    pooled = bool(geometry.get("pools"))
    assert got["input_grad_dense_rows"] == (0 if pooled or density < 0.3 else pairs)


def test_first_stage_without_input_gradient_and_without_bias():
    spec = stage_spec(4, in_shape=(1, 6, 6), out_channels=3, kernel=3, grad=False)
    x, weight, _, d_out = make(spec, 4, True)
    got = run(spec, x, weight, None, d_out, type="cpu")
    cur, dw, _, _, _ = reference_stage(spec, x, weight, np.zeros(3), d_out)
    assert_close(got["output"], cur, "current")
    assert_close(got["grad_weight"], dw, "dL/dW")
    assert "grad_input" not in got


@pytest.mark.parametrize("variant", ["csnn_first", "stride2_pad1"])
@pytest.mark.parametrize("spikes", [True, False], ids=["events", "dense"])
def test_a_shard_with_fewer_rows_than_workers(variant, spikes):
    # 7 rows on 2 tiles: 4 workers per shard (its rows), the second shard's 3 rows leave one
    # worker none; its forward, gradients and the workers' counters must still add up.
    spec = stage_spec(7, **VARIANTS[variant])
    got = check_stage(spec, seed=3, spikes=spikes, type="ipu-model", tiles_per_ipu=2)
    assert got["plan"]["workers"] == 4
    assert [r for *_, r in got["plan"]["shards"]] == [4, 3]
    assert got["dense_rows"] == (0 if spikes else 7)  # every row's path, summed over workers


def test_forward_only_and_the_cost_model_estimate():
    spec = stage_spec(4, **CSNN_FIRST)
    x, weight, bias, _ = make(spec, 5, True)
    got = run(spec, x, weight, bias, None, type="ipu-model", tiles_per_ipu=8)
    assert_close(got["output"], reference_stage(spec, x, weight, bias, None), "current")
    assert got["estimate"]["estimate_compute_cycles"] > 0
    assert "grad_weight" not in got


# ----------------------------------------------------------------------------- the planner


@pytest.mark.parametrize("tiles", [1, 5, 12, 64, 1472])
def test_plan_covers_every_channel_and_row_once(tiles):
    spec = stage_spec(3200, in_shape=(12, 12, 12), out_channels=64, kernel=5)
    plan = _native.conv_plan(spec, tiles)
    assert len(plan["shards"]) == plan["channel_groups"] * plan["row_groups"] <= tiles
    cover = np.zeros((64, 3200), int)
    for _tile, c0, c, r0, r in plan["shards"]:
        cover[c0 : c0 + c, r0 : r0 + r] += 1
    assert (cover == 1).all()
    assert len({s[0] for s in plan["shards"]}) == len(plan["shards"])  # a tile each
    assert plan["maps"] == [(12, 12), (8, 8)]


def test_plan_bytes_fall_with_tiles_and_a_stage_too_big_is_refused_in_one_line():
    spec = stage_spec(
        3200, in_shape=(12, 12, 12), out_channels=64, kernel=5, pools=[("max", 2, 2, 0)]
    )
    few, many = (_native.conv_plan(spec, t)["tile_bytes"] for t in (16, 1472))
    assert many < few
    # Sun et al.'s second convolution at B 128, T 25 fits a Mk2 (1,472 tiles of 624 KiB).
    assert _native.conv_plan(spec, 1472, 624 * 1024)["tile_bytes"] <= 624 * 1024
    # On an IPU's six workers each takes its own work: fewer workers where six do not fit.
    six = _native.conv_plan(spec, 1472, 0, workers=6)
    assert six["workers"] == 6 and six["tile_bytes"] > many
    limit = (many + six["tile_bytes"]) // 2
    fewer = _native.conv_plan(spec, 1472, limit, workers=6)
    assert 1 <= fewer["workers"] < 6 and fewer["tile_bytes"] <= limit
    assert _native.conv_plan(spec, 1472, many, workers=6)["workers"] == 1
    with pytest.raises(
        ValueError,
        match=r"^the convolutional stage needs \d+ bytes on a tile .*"
        r"use more tiles \(tiles_per_ipu, num_ipus\) or a smaller batch$",
    ):
        _native.conv_plan(spec, 16, 624 * 1024)


def test_a_kernel_larger_than_its_padded_input_is_refused():
    with pytest.raises(ValueError, match="Conv2d: kernel 7x7 is larger than its padded input 6x6"):
        _native.conv_plan(stage_spec(2, in_shape=(1, 6, 6), out_channels=2, kernel=7), 4)


def test_bad_array_sizes_are_refused_before_the_run():
    spec = stage_spec(2, in_shape=(1, 6, 6), out_channels=2, kernel=3)
    x, weight, bias, d_out = make(spec, 6, True)
    with pytest.raises(ValueError, match="^grad_out has 2 elements, the stage needs 64$"):
        run(spec, x, weight, bias, d_out[:1, :1, :1, :2])


# ----------------------------------------------------------------------- with Leaky neurons


def neuron_net(reset="subtract", rule=None, surrogate=None, pool="max"):
    pools = {"max": popsnn.MaxPool2d(2), "avg": popsnn.AvgPool2d(2)}
    return popsnn.Sequential(
        popsnn.Conv2d(2, 4, 3, padding=1),
        pools[pool],
        popsnn.Leaky(
            beta=0.8,
            threshold=0.5,
            reset_mechanism=reset,
            sparse=rule,
            **({"surrogate": surrogate} if surrogate else {}),
        ),
        input_shape=(2, 8, 8),
    )


def neuron_spec(net, steps, batch):
    leaky = net.stages[0].neuron
    return stage_spec(steps * batch, (2, 8, 8), 4, 3, padding=1, grad=True) | {
        "steps": steps,
        "pools": [
            {
                "kind": "max" if isinstance(net.stages[0].ops[1], popsnn.MaxPool2d) else "avg",
                "kernel_size": (2, 2),
                "stride": (2, 2),
                "padding": (0, 0),
            }
        ],
        "neuron": {
            "beta": leaky.beta,
            "threshold": leaky.threshold,
            "reset": leaky.reset_mechanism,
            "surrogate": leaky.surrogate.name,
            "surrogate_param": leaky.surrogate.param,
            "sparse": "none" if leaky.sparse is None else leaky.sparse.kind,
            "sparse_value": 0.0 if leaky.sparse is None else leaky.sparse.value,
        },
    }


def check_neuron_stage(net, steps=5, batch=3, seed=0, membrane_grads=True, **device):
    rng = np.random.default_rng(seed)
    params = net.init_params(seed)
    x = (rng.random((steps, batch, 2 * 8 * 8)) < 0.3).astype(np.float32)
    rec = reference.forward(net, params, x)
    d_spikes = rng.normal(size=rec.spikes[0].shape).astype(np.float32)
    d_mem = rng.normal(size=rec.spikes[0].shape).astype(np.float32) if membrane_grads else None
    grads, dx = reference.backward(net, params, rec, d_spikes, d_mem, input_grad=True)
    spec = neuron_spec(net, steps, batch)
    device = {"codelets": str(codelets_path()), **device}
    p = params[0]
    got = _native.conv_stage(spec, x, p["weight"], p["bias"], d_spikes, d_mem, device)
    assert 0 < rec.spikes[0].mean() < 0.9  # spikes on both sides of the threshold
    np.testing.assert_array_equal(got["output"].reshape(rec.spikes[0].shape), rec.spikes[0])
    assert_close(got["membranes"], rec.membranes[0], "membranes")
    assert_close(got["grad_weight"], grads[0]["weight"], "dL/dW")
    assert_close(got["grad_bias"], grads[0]["bias"], "dL/db")
    assert_close(got["grad_input"], dx, "dL/dx")
    return got, rec


@pytest.mark.parametrize("reset", ["subtract", "zero", "none"])
@pytest.mark.parametrize("pool", ["max", "avg"])
def test_leaky_stage_equals_the_reference(reset, pool):
    check_neuron_stage(neuron_net(reset, pool=pool), type="ipu-model", tiles_per_ipu=6)


@pytest.mark.parametrize(
    "rule", [sparse.window(0.3), sparse.one_sided(0.3)], ids=["window", "one_sided"]
)
def test_sparse_rules_equal_the_reference_masked_surrogate(rule):
    net = neuron_net(rule=rule)
    got, rec = check_neuron_stage(
        net, seed=1, membrane_grads=False, type="ipu-model", tiles_per_ipu=4
    )
    # dL/dI[t] is non-zero where the rule kept an entry at t or later (the leak path carries
    # it back; subtract reset, beta > 0); the max pool routes each to one convolution output.
    # The convolution's backward visits those entries only.
    mask = rec.grad_masks[0]
    reached = np.flip(np.logical_or.accumulate(np.flip(mask, 0), axis=0), 0)
    assert got["active_grads"] == reached.sum() < mask.size
    assert mask.sum() < mask.size  # the rule drops entries


@pytest.mark.parametrize("surrogate", ["atan", "sigmoid", "straight_through"])
def test_every_surrogate(surrogate):
    check_neuron_stage(neuron_net(surrogate=surrogate), seed=2, type="cpu")


def test_neurons_other_than_leaky_are_refused_in_one_line():
    spec = neuron_spec(neuron_net(), 2, 1)
    spec["neuron"]["neuron"] = "Synaptic"
    with pytest.raises(
        ValueError, match="Leaky neurons only, got Synaptic; use device='reference'"
    ):
        _native.conv_plan(spec, 4)
