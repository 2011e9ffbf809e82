"""Shared helpers of the engine tests: build a backend, run the float32 reference.

Tolerances. The engine computes in float32 and so does the reference it is
compared with (float32 parameters make `popsnn.reference` run in float32), so
both make the same spike decisions except where a membrane lands within a few
float32 ulps of the threshold; the fixed seeds below avoid that, and spikes
must match exactly. Gradients and losses differ only in the order of float32
sums (matrix products vs. per-tile loops): relative errors of order 1e-6 of
the largest entry. We allow 1e-4 of each array's largest entry, far below any
real mistake (a missing or doubled term moves entries by O(1) of the scale).
"""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import popsnn
from popsnn import losses, optim, reference
from popsnn.engine import EngineBackend


def cpu_flags() -> frozenset[str]:
    """This CPU's feature flags (the codelets are built -march=native, so they decide which
    kernel paths exist); empty where /proc/cpuinfo is missing."""
    cpu = Path("/proc/cpuinfo")
    lines = cpu.read_text().splitlines() if cpu.is_file() else []
    flags = next((ln.split(":", 1)[1] for ln in lines if ln.startswith("flags")), "")
    return frozenset(flags.split())


# The CMake projects built in this test session: source folder -> build folder.
_BUILT: dict[Path, Path] = {}


def build_against_installed(source: Path, build: Path) -> Path:
    """Configures and builds the CMake project at `source` against the installed popsnn
    package (found with `python -m popsnn --cmakedir`) into `build`; returns `build`. Once a
    session: a later call for the same project returns the first build folder (the tests only
    run its programs), so modules that share a project do not build it again."""
    if shutil.which("cmake") is None:
        pytest.skip("cmake is not installed")
    if Path(source).resolve() in _BUILT:
        return _BUILT[Path(source).resolve()]
    cmakedir = subprocess.run(
        [sys.executable, "-m", "popsnn", "--cmakedir"], check=True, capture_output=True, text=True
    ).stdout.strip()
    configure = ["cmake", "-S", str(source), "-B", str(build), f"-Dpopsnn_DIR={cmakedir}"]
    # Every core: the codelet objects' LIF instantiations take minutes on one.
    jobs = ["--parallel", str(os.cpu_count() or 1)]
    for cmd in (
        configure + ["-DCMAKE_BUILD_TYPE=Release"],
        ["cmake", "--build", str(build), *jobs],
    ):
        run = subprocess.run(cmd, capture_output=True, text=True)
        assert run.returncode == 0, run.stdout + run.stderr
    _BUILT[Path(source).resolve()] = build
    return build


def make_input(net, batch, steps, direct, seed=0, scale=1.5, density=0.5):
    rng = np.random.default_rng(seed)
    shape = (batch, net.num_inputs) if direct else (steps, batch, net.num_inputs)
    if direct:
        x = rng.uniform(0, scale, shape) * (rng.random(shape) < density)
    else:
        x = (rng.random(shape) < density * 0.5).astype(np.float32)
    y = rng.integers(0, 10_000, batch)
    return x.astype(np.float32), y


def labels_for(loss, net, raw):
    k = loss.num_classes if loss.population_code else net.num_outputs
    return (raw % k).astype(np.int64)


def assert_close(actual, expected, what, rel=1e-4):
    actual = np.asarray(actual, np.float64)
    expected = np.asarray(expected, np.float64)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    scale = max(np.max(np.abs(expected)), 1e-30)
    err = np.max(np.abs(actual - expected)) if actual.size else 0.0
    assert err <= rel * scale + 1e-12, (
        f"{what}: max error {err:.3g} exceeds {rel:g} x scale {scale:.3g}"
    )


def assert_grads_close(grads, ref_grads, rel=1e-4):
    assert len(grads) == len(ref_grads)
    for l, (g, r) in enumerate(zip(grads, ref_grads)):
        assert set(g) == set(r), f"layer {l}: keys {sorted(g)} != {sorted(r)}"
        for key in r:
            assert_close(g[key], r[key], f"grad layer {l} {key}", rel)


def assert_second_call_equal(backend, x, y, value, grads):
    """A second loss_and_grad on the same batch equals the first bit for bit: nothing the
    first call left behind (state, carries, a rebuild's choice) changes the result."""
    again, again_grads = backend.loss_and_grad(x, y)
    assert again == value
    for layer, layer_again in zip(grads, again_grads):
        for key in layer:
            np.testing.assert_array_equal(layer_again[key], layer[key], err_msg=key)


def sgd_backend(net, params, loss, *, steps, batch, lr=0.1, device="cpu", **options):
    """The engine the tests mostly build: plain SGD, the given shape, any backend options."""
    return EngineBackend(
        net,
        params,
        loss,
        optim.SGD(lr=lr),
        num_steps=steps,
        batch_size=batch,
        device=device,
        **options,
    )


def list_backend(
    net, params, loss, *, steps, batch, device, grad_list_activity=0.44, max_live=1.0, **options
):
    """An SGD engine whose sparse layers keep compressed gradient traces (0.4 of the entries)
    and send dL/dI as lists (`grad_list_activity` < 1), growing on overflow; `max_live` 1.0:
    however live, no layer takes the dense backward (None: the engine's crossover)."""
    return sgd_backend(
        net,
        params,
        loss,
        steps=steps,
        batch=batch,
        device=device,
        trace_activity=0.4,
        grad_list_activity=grad_list_activity,
        sparse_backward_max_live=max_live,
        on_overflow="grow",
        **options,
    )


def float64_reference_same_masks(net, params, x, y, loss, steps):
    """The float64 reference's (loss, gradients, record), after checking that its spikes and
    masks equal the float32 reference's: the gradients are then the same sums, exactly added."""
    _, _, rec32 = reference.loss_and_grad(net, params, x, y, loss, num_steps=steps)
    params64 = [{k: v.astype(np.float64) for k, v in p.items()} for p in params]
    value, grads, rec = reference.loss_and_grad(
        net, params64, x.astype(np.float64), y, loss, num_steps=steps
    )
    for a, b in zip(rec.spikes + rec.grad_masks, rec32.spikes + rec32.grad_masks):
        np.testing.assert_array_equal(a, b)
    return value, grads, rec


def engine_and_reference(
    net, loss, x, y, *, batch, steps, device="cpu", optimizer=None, seed=0, **options
):
    """(engine loss, engine grads, engine spikes, reference (value, grads, record))."""
    params = net.init_params(seed)
    optimizer = optimizer or optim.SGD(lr=0.1)
    backend = EngineBackend(
        net, params, loss, optimizer, num_steps=steps, batch_size=batch, device=device, **options
    )
    value, grads = backend.loss_and_grad(x, y)
    spikes = backend.infer(x)
    ref = reference.loss_and_grad(net, params, x, y, loss, num_steps=steps if x.ndim == 2 else None)
    return backend, value, grads, spikes, ref


def train_like_the_reference(
    backend,
    net,
    params,
    loss,
    ref_opt,
    x,
    y,
    *,
    rates=(None,) * 3,
    rel_loss=2e-5,
    every_step=False,
    what="",
):
    """One engine train step per entry of `rates` (None keeps the rate; a number is set on both
    sides first) beside the same step of `ref_opt` on the float32 reference: spikes identical,
    losses to `rel_loss`, weights to 1e-5 of scale after the last step (after every step with
    `every_step`). Returns the reference's parameters."""
    ref_params = copy.deepcopy(params)
    num_steps = backend.num_steps if x.ndim == 2 else None
    for step, rate in enumerate(rates):
        if rate is not None:
            backend.set_learning_rate(rate)
            ref_opt.hyper["lr"] = rate
        value, spikes = backend.train_step(x, y)
        ref_value, ref_grads, rec = reference.loss_and_grad(
            net, ref_params, x, y, loss, num_steps=num_steps
        )
        ref_opt.step(ref_params, ref_grads)
        np.testing.assert_array_equal(spikes, rec.spikes[-1], err_msg=f"{what} step {step}")
        assert value == pytest.approx(ref_value, rel=rel_loss), f"{what} step {step}"
        if every_step or step == len(rates) - 1:
            for l, (p, r) in enumerate(zip(backend.get_params(), ref_params)):
                for key in r:
                    assert_close(p[key], r[key], f"{what} step {step}: layer {l} {key}", rel=1e-5)
    return ref_params


def big_net(rule=None):
    """The sharded-network cases' net: three layers (Leaky, RLeaky, Synaptic) wide enough to
    span many tiles of a small IPU geometry."""
    return popsnn.Sequential(
        popsnn.Linear(40, 48),
        popsnn.Leaky(beta=0.9, sparse=rule),
        popsnn.Linear(48, 36),
        popsnn.RLeaky(beta=0.85, sparse=rule),
        popsnn.Linear(36, 20),
        popsnn.Synaptic(alpha=0.6, beta=0.85, sparse=rule),
    )


def sharded_case(net, direct, *, batch, steps, **options):
    """The sharded-network cases' set-up: ce_count over 5 classes (population code), input of
    seed 11, parameters of seed 12, an SGD engine on the IPU model with `options`.
    Returns (backend, params, loss, x, y)."""
    loss = losses.ce_count_loss(population_code=True, num_classes=5)
    x, raw = make_input(net, batch, steps, direct, seed=11)
    y = labels_for(loss, net, raw)
    params = net.init_params(12)
    backend = sgd_backend(
        net, params, loss, steps=steps, batch=batch, device="ipu-model", **options
    )
    return backend, params, loss, x, y


def assert_equals_reference(backend, net, params, loss, x, y, steps):
    """The engine's loss, gradients and output spikes against the float32 reference, on a
    case where every layer spikes."""
    value, grads = backend.loss_and_grad(x, y)
    ref_value, ref_grads, rec = reference.loss_and_grad(
        net, params, x, y, loss, num_steps=steps if x.ndim == 2 else None
    )
    assert all(s.sum() > 0 for s in rec.spikes)
    np.testing.assert_array_equal(backend.infer(x), rec.spikes[-1])
    assert value == pytest.approx(ref_value, rel=2e-5)
    assert_grads_close(grads, ref_grads)


def assert_grown_equals_reference(backend, net, params, loss, x, y, steps):
    """After an overflow with on_overflow='grow': the buffers grew past 5% and the step's
    loss and gradients equal the float32 reference's."""
    value, grads = backend.loss_and_grad(x, y)
    assert backend.profile()["max_activity"] > 0.05
    ref_value, ref_grads, _ = reference.loss_and_grad(net, params, x, y, loss, num_steps=steps)
    assert value == pytest.approx(ref_value, rel=1e-5)
    assert_grads_close(grads, ref_grads)
