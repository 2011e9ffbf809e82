"""Convolutional networks trained on the engine devices (popsnn.backends.conv_engine,
host/src/ConvNetwork.cpp) against popsnn.reference in float32: every stage's spikes identical,
the output membranes, loss and every gradient to tolerance, for [Conv2d, pool, Leaky]* then
Flatten, Linear, Leaky; max and average pooling, resets, sparse rules (the reference's masked
surrogate), direct and per-step input, several tile geometries (channel and row groups);
a few Adam steps side by side with the reference, checkpoints, and the one-line refusals.

Tolerance: the engine sums in float32 in its own order (per row, then over tiles); 1e-4 of
each array's largest entry after three training steps, 1e-5 for one backward."""

from __future__ import annotations

import numpy as np
import pytest

import popsnn
from popsnn import checkpoint, reference, sparse

REL = 1e-5


def assert_close(got, want, what, rel=REL):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, what
    scale = max(np.abs(want).max(), 1e-12)
    err = np.abs(got - want).max() / scale
    assert err < rel, f"{what}: relative error {err:.2e}"


def csnn(reset="subtract", rule=None, pool="max", channels=(3, 4)):
    pools = {"max": popsnn.MaxPool2d, "avg": popsnn.AvgPool2d}

    def leaky():
        return popsnn.Leaky(beta=0.8, threshold=0.5, reset_mechanism=reset, sparse=rule)

    c1, c2 = channels
    return popsnn.Sequential(
        popsnn.Conv2d(1, c1, 3, padding=1),
        pools[pool](2),
        leaky(),
        popsnn.Conv2d(c1, c2, 3),
        pools[pool](2),
        leaky(),
        popsnn.Flatten(),
        popsnn.Linear(c2 * 3 * 3, 5),
        leaky(),
        input_shape=(1, 16, 16),
    )


def batch(steps, size, seed, direct=False):
    rng = np.random.default_rng(seed)
    if direct:
        return rng.random((size, 256)).astype(np.float32) * 2, rng.integers(0, 5, size)
    x = (rng.random((steps, size, 256)) < 0.4).astype(np.float32)
    return x, rng.integers(0, 5, size)


def engine_model(net, params, steps, size, **device):
    device.setdefault("device", "cpu")
    return popsnn.Model(
        net,
        loss="ce_count",
        optimizer=popsnn.optim.Adam(lr=2e-3),
        num_steps=steps,
        batch_size=size,
        params=params,
        **device,
    )


def check_against_reference(net, steps=4, size=3, seed=0, direct=False, **device):
    params = net.init_params(seed)
    x, y = batch(steps, size, seed, direct)
    model = engine_model(net, params, steps, size, **device)
    spikes, membranes = model.backend.record(x)
    rec = reference.forward(net, params, x, steps if direct else None)
    for l in range(len(net.stages)):
        np.testing.assert_array_equal(spikes[l], rec.spikes[l], err_msg=f"stage {l} spikes")
        assert 0 < rec.spikes[l].mean() < 0.9, f"stage {l} spikes on both sides"
    assert_close(membranes[-1], rec.membranes[-1], "output membranes")
    value, grads = model.loss_and_grad(x, y)
    want_value, want_grads, _ = reference.loss_and_grad(
        net, params, x, y, "ce_count", steps if direct else None
    )
    assert value == pytest.approx(want_value, rel=1e-6)
    for l, (g, w) in enumerate(zip(grads, want_grads)):
        assert list(g) == list(w)
        for k in w:
            assert np.abs(w[k]).max() > 0, f"stage {l} {k}: a gradient to compare"
            assert_close(g[k], w[k], f"stage {l} d{k}")
    return model


@pytest.mark.parametrize("reset", ["subtract", "zero"])
@pytest.mark.parametrize("pool", ["max", "avg"])
def test_csnn_forward_and_gradients_equal_the_reference(reset, pool):
    model = check_against_reference(csnn(reset, pool=pool))
    # dL/dx of the second convolution: through a 2x2 max pool at most 1 in 4 dL/dI entries
    # is non-zero (the one-weight-row-per-entry path), through an average pool all are (the
    # dense product); the readout's 5 dense entries take the product.
    dense = model.backend.profile()["input_grad_dense_rows"]
    assert dense[0] == 0  # the first stage forms no dL/dx
    assert (dense[1] > 0) == (pool == "avg") and dense[2] > 0, dense


@pytest.mark.parametrize("pool, seed", [("max", 3), ("avg", 6)])
def test_direct_input(pool, seed):
    # The first stage's convolution and pool run once per sample, dL/dW from dL/dI summed
    # over the steps; per-step input through the same model builds the other graph.
    model = check_against_reference(csnn(pool=pool), direct=True, seed=seed)
    x, y = batch(4, 3, seed)
    want = reference.loss_and_grad(model.net, model.get_params(), x, y, "ce_count")[0]
    assert model.loss_and_grad(x, y)[0] == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize("tiles", [3, 7, 16])
def test_tile_geometries(tiles):
    model = check_against_reference(
        csnn(channels=(4, 6)), device="ipu-model", tiles_per_ipu=tiles, seed=1
    )
    plans = model.backend.plans()
    used = [sh[0] for plan in plans for sh in plan["shards"]]
    assert max(used) < tiles
    # stages on tile ranges of their own on an IPU target
    ranges = [{sh[0] for sh in plan["shards"]} for plan in plans]
    assert all(a.isdisjoint(b) for i, a in enumerate(ranges) for b in ranges[i + 1 :])
    if tiles == 16:
        assert any(p["channel_groups"] > 1 or p["row_groups"] > 1 for p in plans)
    # Each shard's rows split over the tile's workers (up to an IPU's six), the backward too.
    assert any(p["workers"] > 1 for p in plans)
    # and the neurons over the workers (their columns gathered around the compute sets)
    assert any(p["neuron_workers"] > 1 for p in plans)
    assert all(p["workers"] <= min(6, max(sh[4] for sh in p["shards"])) for p in plans)
    assert model.backend.profile()["estimate_total_cycles"] > 0


@pytest.mark.parametrize(
    "tiles, linked", [("2", [False, True]), ("3", [True, True]), ("7", [False, False])]
)
def test_cpu_stages_in_place_or_copied(tiles, linked, monkeypatch):
    # On the cpu device every stage splits the same rows over all the tiles: where both
    # stages of a pair have one channel group, the next reads the previous one's spikes and
    # writes its dL/dS in place (ConvNetwork.cpp's sameShards), else they are copied.
    monkeypatch.setenv("POPSNN_CPU_TILES", tiles)
    model = check_against_reference(csnn(channels=(4, 6)), seed=2)
    plans = model.backend.plans()
    rows = [[(sh[0], sh[3], sh[4]) for sh in p["shards"]] for p in plans]  # tile, rows
    same = [
        a["channel_groups"] == b["channel_groups"] == 1 and ra == rb
        for a, b, ra, rb in zip(plans, plans[1:], rows, rows[1:])
    ]
    assert same == linked, plans


@pytest.mark.parametrize(
    "rule", [sparse.window(0.3), sparse.one_sided(0.3)], ids=["window", "one_sided"]
)
def test_sparse_rules_equal_the_reference_masked_surrogate(rule):
    model = check_against_reference(csnn(rule=rule), seed=4)
    active = model.backend.profile()["active_grads"]
    dense = check_against_reference(csnn(), seed=4).backend.profile()["active_grads"]
    assert sum(active) < sum(dense)  # the rule leaves dL/dI entries out


def test_training_steps_side_by_side_with_the_reference():
    net = csnn()
    params = net.init_params(5)
    steps, size = 4, 3
    model = engine_model(net, params, steps, size)
    ref = popsnn.Model(
        net,
        loss="ce_count",
        optimizer=popsnn.optim.Adam(lr=2e-3),
        device="reference",
        num_steps=steps,
        batch_size=size,
        params=params,
    )
    for k in range(3):
        x, y = batch(steps, size, 10 + k)
        got, out = model.train_step(x, y)
        want, want_out = ref.train_step(x, y)
        assert got == pytest.approx(want, rel=1e-5)
        np.testing.assert_array_equal(out, want_out)
    for l, (p, q) in enumerate(zip(model.get_params(), ref.get_params())):
        for k in q:
            assert_close(p[k], q[k], f"stage {l} {k} after 3 steps", rel=1e-4)
            assert not np.array_equal(p[k], params[l][k])  # trained


def test_a_smaller_batch_and_a_checkpoint(tmp_path):
    net = csnn()
    model = engine_model(net, net.init_params(0), 4, 3)
    x, y = batch(4, 2, 7)  # fewer samples than batch_size
    model.train_step(x, y)
    np.testing.assert_array_equal(
        model.infer(x), reference.forward(net, model.get_params(), x).spikes[-1]
    )
    path = checkpoint.save(
        tmp_path / "csnn.npz",
        net=net,
        params=model.get_params(),
        optimizer_state=model.optimizer_state(),
    )
    saved = checkpoint.load(path, net)
    resumed = engine_model(saved["network"], saved["params"], 4, 3)
    resumed.load_optimizer_state(saved["optimizer_state"])
    x2, y2 = batch(4, 3, 8)
    assert resumed.train_step(x2, y2)[0] == pytest.approx(model.train_step(x2, y2)[0], rel=1e-6)
    for p, q in zip(resumed.get_params(), model.get_params()):
        for k in q:
            np.testing.assert_array_equal(p[k], q[k])


def test_what_the_engine_does_not_run_is_refused_in_one_line():
    net = popsnn.Sequential(
        popsnn.Conv2d(1, 2, 3),
        popsnn.Synaptic(alpha=0.5, beta=0.8),
        popsnn.Flatten(),
        popsnn.Linear(2 * 14 * 14, 5),
        popsnn.Leaky(beta=0.8),
        input_shape=(1, 16, 16),
    )
    with pytest.raises(ValueError, match=r"^stage 0: Synaptic neurons .* use device='reference'$"):
        popsnn.Model(net, device="cpu", num_steps=2, batch_size=1)
    assert popsnn.Model(net, device="auto", num_steps=2, batch_size=1).device == "reference"
    with pytest.raises(ValueError, match="device options \\['max_activity'\\]"):
        popsnn.Model(csnn(), device="cpu", num_steps=2, batch_size=1, max_activity=0.5)


def test_the_native_network_refuses_a_bad_spec_in_one_line():
    from popsnn import _native
    from popsnn.backends.conv_engine import conv_stage_specs
    from popsnn.engine import codelets_path

    device = {"codelets": str(codelets_path())}
    specs = conv_stage_specs(csnn(), 2, 1)
    with pytest.raises(
        ValueError, match="^stage 1 takes 36 inputs per row, stage 0 gives 192; match the shapes$"
    ):
        _native.ConvNetwork({"stages": [specs[0], specs[2]]}, device)
    with pytest.raises(ValueError, match="^stage 1 has no neurons"):
        _native.ConvNetwork({"stages": [specs[0], {**specs[1], "neuron": None}]}, device)
    with pytest.raises(ValueError, match="same batch and steps$"):
        _native.ConvNetwork({"stages": [specs[0], {**specs[1], "rows": 4}]}, device)
    model = engine_model(csnn(), None, 2, 1)
    with pytest.raises(ValueError, match="do not form dL/dx of their first stage yet"):
        model.loss_and_input_grad(*batch(2, 1, 0))
