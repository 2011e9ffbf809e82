"""The direct-input vertices over half storage (DirectCurrent<half>, DirectWeightGrad<half>),
run alone on popsnn's CPU runtime (tests/engine/half_vertices, built against the installed
package) against float64 sums of the same stored values, with docs/numerics.md section 8's
rounding points: x, W and b read from half, summed in float, I rounded to half once; dL/dW a
float sum. The float vertices under their templated names are checked the same way."""

import subprocess
from pathlib import Path

import numpy as np
import pytest
from engine_helpers import build_against_installed

from popsnn import losses

SOURCE = Path(__file__).resolve().parent / "half_vertices"


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    build = build_against_installed(SOURCE, tmp_path_factory.mktemp("half_vertices"))
    return build / "half_vertices"


def _inputs(rng, batch, n_in, n, density):
    x = rng.uniform(0.0, 1.5, (batch, n_in)) * (rng.random((batch, n_in)) < density)
    x[0] = 0.0  # a sample without input: its current is the bias exactly
    w = rng.normal(0.0, 0.3, (n_in, n))
    bias = rng.normal(0.0, 0.5, n)
    grad = rng.normal(0.0, 1e-3, (batch, n))
    return x, w, bias, grad.astype(np.float32)


def _run(harness, tmp_path, stored, x, w, bias, grad):
    """(I as stored, dL/dW) from the vertices; x, w, bias rounded to `stored` first."""
    dtype = np.float16 if stored == "half" else np.float32
    arrays = {"x": x.astype(dtype), "w": w.astype(dtype), "bias": bias.astype(dtype)}
    for name, a in {**arrays, "grad": grad}.items():
        a.tofile(tmp_path / f"{name}.bin")
    batch, n_in = x.shape
    n = w.shape[1]
    cmd = [str(harness), stored, str(tmp_path), str(batch), str(n_in), str(n)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    current = np.fromfile(tmp_path / "current.bin", dtype).reshape(batch, n)
    grad_w = np.fromfile(tmp_path / "grad_weights.bin", np.float32).reshape(n_in, n)
    return arrays, current, grad_w


def _float_sum_bound(x, w):
    """Bound on a float32 sum's error against the exact one: terms * 2^-23 * sum |terms|
    (any order of addition, fused or not)."""
    terms = np.count_nonzero(x, axis=1)[:, None] + 1
    return terms * 2.0**-23 * (np.abs(x) @ np.abs(w))


@pytest.mark.parametrize(("batch", "n_in", "n", "density"), [(5, 37, 21, 0.3), (8, 64, 40, 1.0)])
def test_half_direct_current_rounds_once_after_float_sum(
    harness, tmp_path, batch, n_in, n, density
):
    rng = np.random.default_rng(batch * n_in)
    x, w, bias, grad = _inputs(rng, batch, n_in, n, density)
    stored, current, _ = _run(harness, tmp_path, "half", x, w, bias, grad)
    xs, ws, bs = (stored[k].astype(np.float64) for k in ("x", "w", "bias"))
    exact = xs @ ws + bs
    err = _float_sum_bound(xs, ws) + 2.0**-23 * np.abs(bs)
    low, high = (exact - err).astype(np.float16), (exact + err).astype(np.float16)
    # Rounding to half is monotone: the float sum rounded lies between these two (the same
    # half wherever the exact sum is not within the float sum's error of a half tie).
    assert np.all((current >= low) & (current <= high))
    # The reference's value (NumPy's float32 sum of the stored values, rounded to half):
    # the same but where the two float sums' orders part at a half tie.
    reference = (stored["x"].astype(np.float32) @ stored["w"].astype(np.float32)) + stored[
        "bias"
    ].astype(np.float32)
    assert np.mean(current == reference.astype(np.float16)) > 0.95
    np.testing.assert_array_equal(current[0], stored["bias"])  # no input: the stored bias


@pytest.mark.parametrize("density", [0.3, 1.0])
def test_half_direct_weight_grad_is_a_float_sum_of_stored_inputs(harness, tmp_path, density):
    rng = np.random.default_rng(7)
    x, w, bias, grad = _inputs(rng, 6, 45, 19, density)
    stored, _, grad_w = _run(harness, tmp_path, "half", x, w, bias, grad)
    xs = stored["x"].astype(np.float64)
    exact = xs.T @ grad.astype(np.float64)
    bound = (np.count_nonzero(xs, axis=0)[:, None] + 1) * 2.0**-23 * (np.abs(xs.T) @ np.abs(grad))
    assert np.all(np.abs(grad_w - exact) <= bound)
    assert np.all(grad_w[np.all(xs == 0, axis=0)] == 0.0)  # an input never seen: exactly 0


def test_float_vertices_under_their_stored_type_names(harness, tmp_path):
    rng = np.random.default_rng(3)
    x, w, bias, grad = _inputs(rng, 4, 30, 17, 0.5)
    stored, current, grad_w = _run(harness, tmp_path, "float", x, w, bias, grad)
    xs, ws, bs = (stored[k].astype(np.float64) for k in ("x", "w", "bias"))
    assert np.all(np.abs(current - (xs @ ws + bs)) <= _float_sum_bound(xs, ws) + 1e-7)
    exact_w = xs.T @ grad.astype(np.float64)
    np.testing.assert_allclose(grad_w, exact_w, rtol=1e-5, atol=1e-9)


def test_half_storage_differs_from_float_only_by_half_rounding(harness, tmp_path):
    """The same unrounded inputs through both: half's current is float's within the rounding of
    x, W, b and I to 11 significant bits (about 2^-11 of the sum of |terms| per entry)."""
    rng = np.random.default_rng(11)
    x, w, bias, grad = _inputs(rng, 6, 50, 23, 0.4)
    _, half_current, _ = _run(harness, tmp_path, "half", x, w, bias, grad)
    _, float_current, _ = _run(harness, tmp_path, "float", x, w, bias, grad)
    scale = np.abs(x) @ np.abs(w) + np.abs(bias)
    diff = np.abs(half_current.astype(np.float64) - float_current)
    assert np.all(diff <= 2.0**-9 * scale)
    assert np.any(diff > 0)  # half really rounds


# --------------------------------------------------------------------------- push vertices


def _blocks(a, shard):
    """[rows, N] -> the next layer's shards' blocks one after the other, [rows, n_k] each."""
    return np.concatenate([a[:, f : f + shard].ravel() for f in range(0, a.shape[1], shard)])


def _unblocks(flat, rows, n_next, shard):
    out, at = np.empty((rows, n_next), flat.dtype), 0
    for f in range(0, n_next, shard):
        size = min(shard, n_next - f)
        out[:, f : f + size] = flat[at : at + rows * size].reshape(rows, size)
        at += rows * size
    return out


def _id_trace(spikes, offset):
    """The shard's id trace (include/popsnn/VertexEnums.hpp): T*B+1 starts, then per (step,
    sample) a buffer [count, count, ids...] of layer-wide neuron ids."""
    rows = spikes.reshape(-1, spikes.shape[-1])
    starts, buffers, at = [], [], len(rows) + 1
    for row in rows:
        ids = np.flatnonzero(row) + offset
        starts.append(at)
        buffers += [len(ids), len(ids), *ids]
        at += 2 + len(ids)
    return np.array(starts + [at] + buffers, np.int32)


def _run_push(harness, tmp_path, stored, spikes, offset, w, grad, shard):
    """(W_next.S [T*B, N_next] as stored, dL/dW_next [n, N_next]) from PushSpikes<stored> and
    PushGrads<stored>; w [n, N_next] and grad [T*B, N_next] rounded to `stored` first."""
    dtype = np.float16 if stored == "half" else np.float32
    steps, batch, n = spikes.shape
    n_next = w.shape[1]
    trace = _id_trace(spikes, offset)
    stored_w, stored_grad = w.astype(dtype), grad.astype(dtype)
    trace.tofile(tmp_path / "trace.bin")
    _blocks(stored_w, shard).tofile(tmp_path / "w.bin")
    _blocks(stored_grad, shard).tofile(tmp_path / "grad.bin")
    sizes = [steps, batch, n, offset, shard, n_next, len(trace)]
    cmd = [str(harness.parent / "push_vertices"), stored, str(tmp_path), *map(str, sizes)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = steps * batch
    current = _unblocks(np.fromfile(tmp_path / "current.bin", dtype), rows, n_next, shard)
    grad_w = _unblocks(np.fromfile(tmp_path / "grad_weights.bin", np.float32), n, n_next, shard)
    return stored_w, stored_grad, current, grad_w


@pytest.mark.parametrize("stored", ["half", "float"])
def test_push_vertices_sum_stored_rows_in_float(harness, tmp_path, stored):
    rng = np.random.default_rng(5)
    steps, batch, n, n_next, shard, offset = 3, 4, 7, 21, 8, 10
    spikes = rng.random((steps, batch, n)) < 0.4
    spikes[0, 0] = False  # a (step, sample) without spikes pushes exact zeros
    w = rng.normal(0.0, 0.3, (n, n_next))
    grad = rng.normal(0.0, 1e-3, (steps * batch, n_next))
    sw, sg, current, grad_w = _run_push(harness, tmp_path, stored, spikes, offset, w, grad, shard)
    s = spikes.reshape(steps * batch, n).astype(np.float64)
    exact = s @ sw.astype(np.float64)
    err = (s.sum(axis=1, keepdims=True) + 1) * 2.0**-23 * (s @ np.abs(sw.astype(np.float64)))
    dtype = current.dtype
    low, high = (exact - err).astype(dtype), (exact + err).astype(dtype)
    assert np.all((current >= low) & (current <= high))
    assert np.all(current[0] == 0.0)
    exact_w = s.T @ sg.astype(np.float64)
    bound = (s.sum(axis=0)[:, None] + 1) * 2.0**-23 * (s.T @ np.abs(sg.astype(np.float64)))
    assert np.all(np.abs(grad_w - exact_w) <= bound)


# --------------------------------------------------------------------------- loss vertex

LOSS_KINDS = {  # popsnn::loss tag, popsnn.losses constructor, the vertex's on/off targets at T
    "ce_count": ("CeCount", lambda: losses.ce_count_loss(), (0.0, 0.0)),
    "ce_rate": ("CeRate", lambda: losses.ce_rate_loss(), (0.0, 0.0)),
    "mse_count": (
        "MseCount",
        lambda: losses.mse_count_loss(0.8, 0.1),
        (int(6 * 0.8), int(6 * 0.1)),
    ),
    "mse_membrane": ("MseMembrane", lambda: losses.mse_membrane_loss(1.0, 0.0), (1.0, 0.0)),
    "ce_max_membrane": ("CeMaxMembrane", lambda: losses.ce_max_membrane_loss(), (0.0, 0.0)),
}


def _run_loss(harness, tmp_path, stored, kind, spikes, membranes, labels, scale):
    dtype = np.float16 if stored == "half" else np.float32
    steps, batch, outputs = spikes.shape
    spikes.astype(dtype).tofile(tmp_path / "spikes.bin")
    membranes.astype(dtype).tofile(tmp_path / "membranes.bin")
    labels.astype(np.int32).tofile(tmp_path / "labels.bin")
    np.full(batch, 1.0 / batch, np.float32).tofile(tmp_path / "weights.bin")
    tag, _, (on, off) = LOSS_KINDS[kind]
    sizes = [tag, steps, batch, outputs, outputs, on, off, scale]
    cmd = [str(harness.parent / "loss_vertex"), stored, str(tmp_path), *map(str, sizes)]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    read = lambda name, t: np.fromfile(tmp_path / f"{name}.bin", t)  # noqa: E731
    shape = spikes.shape
    return (
        float(read("loss", np.float32)[0]),
        read("grad_spikes", dtype).reshape(shape),
        read("grad_membranes", dtype).reshape(shape),
    )


@pytest.mark.parametrize("kind", sorted(LOSS_KINDS))
def test_half_loss_stores_scaled_gradients_once(harness, tmp_path, kind):
    """OutputLoss<half> against popsnn.losses on the stored records: the loss as float32's,
    dL/dS and dL/dU multiplied by the loss scale and rounded to half once (the reference's
    `store(d * scale)`), within one half spacing where the float orders of operation part."""
    rng = np.random.default_rng(len(kind))
    steps, batch, outputs, scale = 6, 5, 4, 1024.0
    spikes = (rng.random((steps, batch, outputs)) < 0.4).astype(np.float32)
    membranes = rng.normal(0.5, 0.6, (steps, batch, outputs)).astype(np.float16)
    membranes = membranes.astype(np.float32)  # the stored U trace
    labels = rng.integers(0, outputs, batch)
    value, grad_s, grad_u = _run_loss(
        harness, tmp_path, "half", kind, spikes, membranes, labels, scale
    )
    loss = LOSS_KINDS[kind][1]()
    expected_value = loss(spikes, membranes, labels)
    d_spikes, d_membranes = loss.backward(spikes, membranes, labels)
    assert value == pytest.approx(expected_value, rel=1e-5)
    for got, want in ((grad_s, d_spikes), (grad_u, d_membranes)):
        want = (want * np.float32(scale)).astype(np.float16)
        spacing = np.spacing(np.abs(want)).astype(np.float64)
        assert np.all(np.abs(got.astype(np.float64) - want) <= spacing)
        assert np.mean(got == want) > 0.9
        assert np.all((got == 0) == (want == 0))  # no gradient where float32 has none


def test_loss_scale_keeps_gradients_half_would_flush(harness, tmp_path):
    """mse_membrane near its targets at T 25, B 4,096, 10 outputs: dL/dU = diff * 2/(T*B*C)
    ~ 2e-8, below half's smallest subnormal (6e-8): unscaled most store as zero, scaled by
    2^16 they keep their value to half's precision."""
    rng = np.random.default_rng(2)
    steps, batch, outputs = 25, 4096, 10
    labels = rng.integers(0, outputs, batch)
    target = np.zeros((batch, outputs), np.float32)
    target[np.arange(batch), labels] = 1.0
    membranes = (target + rng.normal(0.0, 0.01, (steps, batch, outputs))).astype(np.float16)
    membranes = membranes.astype(np.float32)
    spikes = np.zeros_like(membranes)
    loss = losses.mse_membrane_loss(1.0, 0.0)
    d_membranes = loss.backward(spikes, membranes, labels)[1]
    args = (harness, tmp_path, "half", "mse_membrane", spikes, membranes, labels)
    _, _, flushed = _run_loss(*args, 1)
    _, _, kept = _run_loss(*args, 2**16)
    assert np.count_nonzero(flushed) < 0.2 * np.count_nonzero(d_membranes)
    # Half's precision: 2^-11 relative, and its subnormal spacing (2^-24) where the scaled
    # value is still below half's normals.
    unscaled = kept.astype(np.float64) / 2**16
    np.testing.assert_allclose(unscaled, d_membranes, rtol=2.0**-11, atol=2.0**-24 / 2**16)


@pytest.mark.parametrize("kind", ["ce_count", "mse_membrane"])
def test_float_loss_without_scale_edge(harness, tmp_path, kind):
    rng = np.random.default_rng(9)
    spikes = (rng.random((5, 3, 4)) < 0.5).astype(np.float32)
    membranes = rng.normal(0.5, 0.6, spikes.shape).astype(np.float32)
    labels = rng.integers(0, 4, 3)
    value, grad_s, grad_u = _run_loss(
        harness, tmp_path, "float", kind, spikes, membranes, labels, 0
    )
    loss = LOSS_KINDS[kind][1]()
    d_spikes, d_membranes = loss.backward(spikes, membranes, labels)
    assert value == pytest.approx(loss(spikes, membranes, labels), rel=1e-6)
    np.testing.assert_allclose(grad_s, d_spikes, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(grad_u, d_membranes, rtol=1e-6, atol=1e-9)
