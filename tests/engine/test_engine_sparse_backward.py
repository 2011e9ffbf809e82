"""The first layer's weight gradient on spike-step input finds the non-zero inputs 16 at a
time (codelets/SparseBackward.hpp): every value that is not exactly zero counts, -0.0 does
not, and the inputs past the last whole block of 16 are visited one by one. Checked against
the dense reference, with and without a sparse rule (the rule's reference masks its
surrogate the same way)."""

import platform
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from engine_helpers import assert_grads_close, engine_and_reference

import popsnn
from popsnn import losses, optim, reference, sparse
from popsnn.engine import EngineBackend

CODELETS = Path(__file__).resolve().parents[2] / "codelets"
BATCH, STEPS, INPUTS = 5, 9, 37  # 37 = two blocks of 16 and a tail of 5


def spike_steps_with_odd_values(seed=3):
    """Mostly zeros, some ones, and the values a branch-free test could get wrong: -0.0,
    a denormal, a negative value, a value in the tail past the last block of 16."""
    rng = np.random.default_rng(seed)
    x = (rng.random((STEPS, BATCH, INPUTS)) < 0.15).astype(np.float32)
    x[..., [3, 21]] = 0.0  # never fire (input 3 only -0.0)
    x[0, 0, 3] = -0.0
    x[1, 1, 17] = np.float32(1e-39)  # denormal: not zero
    x[2, 2, 20] = -0.75
    x[3, 3, 36] = 1.0  # the tail
    x[4, 4, 32] = 2.0  # the tail's first input
    return x


@pytest.mark.parametrize("rule", [None, sparse.window(0.4)], ids=["dense", "window"])
def test_weight_gradient_on_spike_steps_matches_the_reference(rule):
    net = popsnn.Sequential(
        popsnn.Linear(INPUTS, 20),
        popsnn.Leaky(beta=0.9, sparse=rule),
        popsnn.Linear(20, 3),
        popsnn.Leaky(beta=0.9),
    )
    x = spike_steps_with_odd_values()
    y = np.arange(BATCH) % 3
    _, value, grads, spikes, (ref_value, ref_grads, rec) = engine_and_reference(
        net, losses.ce_count_loss(), x, y, batch=BATCH, steps=STEPS, seed=2
    )
    np.testing.assert_array_equal(spikes, rec.spikes[-1])
    assert value == pytest.approx(ref_value, rel=2e-5, abs=1e-7)
    assert_grads_close(grads, ref_grads)
    # Inputs that are zero at every (step, sample) get exactly zero weight gradient, and the
    # odd values above do reach the gradient.
    never = np.all(x == 0, axis=(0, 1))
    assert never[[3, 21]].all()
    assert np.all(grads[0]["weight"][:, never] == 0)
    assert np.any(grads[0]["weight"][:, 36] != 0)


KERNEL_CHECK = r"""
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include "SparseBackward.hpp"
int main() {
  // Every length 0..70 (whole blocks of 16 and tails), zeros, -0.0, NaN, a denormal,
  // infinities and ordinary values at pseudo-random places.
  const float odd[] = {0.0f, -0.0f, 1.0f, -2.5f, 1e-39f, std::numeric_limits<float>::quiet_NaN(),
                       std::numeric_limits<float>::infinity(), 0.0f, 0.0f, 0.0f};
  unsigned seed = 12345, failures = 0;
  float x[70];
  for (unsigned n = 0; n <= 70; ++n)
    for (unsigned trial = 0; trial < 20; ++trial) {
      for (unsigned i = 0; i < n; ++i) {
        seed = seed * 1103515245u + 12345u;
        x[i] = odd[(seed >> 16) % 10];
      }
      unsigned expected[70], count = 0, got = 0;
      for (unsigned i = 0; i < n; ++i)
        if (x[i] != 0.0f)
          expected[count++] = i;
      bool same = true;
      popsnn::lif::forEachNonzero(x, n, [&](unsigned i, float v) {
        same = same && got < count && expected[got] == i && std::memcmp(&v, &x[i], 4) == 0;
        ++got;
      });
      failures += !(same && got == count);
    }
  std::printf("%u\n", failures);
  return failures != 0;
}
"""


@pytest.mark.skipif(shutil.which("c++") is None, reason="no C++ compiler")
@pytest.mark.parametrize(
    "flags",
    [["-march=native"], ["-march=x86-64"], ["-DPOPSNN_PLAIN_LOOPS"]],
    ids=["native", "sse2", "plain"],
)
def test_nonzero_scan_visits_exactly_the_non_zero_inputs_in_order(flags, tmp_path):
    if flags[0].startswith("-march") and platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("x86-64 flags")
    src = tmp_path / "check.cpp"
    src.write_text(KERNEL_CHECK)
    exe = tmp_path / "check"
    build = subprocess.run(
        ["c++", "-std=c++17", "-O2", *flags, f"-I{CODELETS}", str(src), "-o", str(exe)],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout.strip() == "0", run.stdout + run.stderr


def live_fractions(mask):
    """Per (step, sample): the fraction of neurons whose carry can be non-zero in the
    backward, those with an entry inside the rule at this step or a later one."""
    live = np.flip(np.logical_or.accumulate(np.flip(mask, 0), axis=0), 0)
    return live.mean(axis=-1)


@pytest.mark.parametrize("b_th", [0.02, 0.1], ids=["narrow", "wide"])
@pytest.mark.parametrize("direct", [True, False], ids=["direct", "per-step"])
def test_the_carry_over_live_neurons_only_equals_the_reference(direct, b_th):
    # A compressed trace on wide layers: the backward carries dL/dU, writes dL/dI and the
    # weight-gradient rows over each sample's live neurons (codelets/LifBackward.cpp), an
    # indexed loop below an eighth of the shard (LiveNeurons' "few", every kind of pass) and a
    # vector pass above, nothing where none is live. The narrow window has (step, sample) rows
    # with none and with fewer than an eighth live, the wide one rows with an eighth or more
    # (and with a quarter or more: the old threshold of the row passes and addList).
    rule = sparse.window(b_th)
    net = popsnn.Sequential(
        popsnn.Linear(INPUTS, 160),
        popsnn.Leaky(beta=0.9, sparse=rule),
        popsnn.Linear(160, 96),
        popsnn.Leaky(beta=0.9, sparse=rule),
        popsnn.Linear(96, 3),
        popsnn.Leaky(beta=0.9),
    )
    steps, batch = 16, 6
    rng = np.random.default_rng(11)
    if direct:
        x = (rng.random((batch, INPUTS)) * 0.6).astype(np.float32)
    else:
        x = (rng.random((steps, batch, INPUTS)) < 0.3).astype(np.float32)
    y = np.arange(batch) % 3
    backend, value, grads, spikes, (ref_value, ref_grads, rec) = engine_and_reference(
        net,
        losses.ce_count_loss(),
        x,
        y,
        batch=batch,
        steps=steps,
        seed=2,
        trace_activity=0.2,
        sparse_backward_max_live=1.0,  # the compressed backward however live (dense: its own test)
        on_overflow="grow",
    )
    np.testing.assert_array_equal(spikes, rec.spikes[-1])
    assert value == pytest.approx(ref_value, rel=2e-5, abs=1e-7)
    assert_grads_close(grads, ref_grads)
    prof = backend.profile()
    assert prof["layer0_compressed_trace"] == prof["layer1_compressed_trace"] == 1
    live = [live_fractions(rec.grad_masks[l]) for l in range(2)]
    if b_th < 0.05:
        assert any((f == 0).any() for f in live)
        assert all(((f > 0) & (f < 0.125)).any() for f in live)
    else:
        assert all((f >= 0.125).any() for f in live)
        assert any((f >= 0.25).any() for f in live)


LIVE_MODELS = {
    "leaky-zero": lambda r: popsnn.Leaky(beta=0.9, reset_mechanism="zero", sparse=r),
    "synaptic-subtract": lambda r: popsnn.Synaptic(alpha=0.6, beta=0.85, sparse=r),
    "synaptic-zero": lambda r: popsnn.Synaptic(
        alpha=0.6, beta=0.85, reset_mechanism="zero", sparse=r
    ),
    "rleaky-all-subtract": lambda r: popsnn.RLeaky(beta=0.85, sparse=r),
    "rleaky-all-zero": lambda r: popsnn.RLeaky(beta=0.85, reset_mechanism="zero", sparse=r),
    "rleaky-one-zero": lambda r: popsnn.RLeaky(
        beta=0.85, all_to_all=False, reset_mechanism="zero", sparse=r
    ),
    "lapicque-subtract": lambda r: popsnn.Lapicque(beta=0.85, C=0.5, sparse=r),
    "lapicque-zero": lambda r: popsnn.Lapicque(beta=0.85, C=0.5, reset_mechanism="zero", sparse=r),
    "alpha-subtract": lambda r: popsnn.Alpha(alpha=0.9, beta=0.75, sparse=r),
    "alpha-zero": lambda r: popsnn.Alpha(alpha=0.9, beta=0.75, reset_mechanism="zero", sparse=r),
    "alpha-none": lambda r: popsnn.Alpha(alpha=0.9, beta=0.75, reset_mechanism="none", sparse=r),
}


@pytest.mark.parametrize("loss", ["ce_count", "mse_membrane"])
@pytest.mark.parametrize("model", sorted(LIVE_MODELS))
def test_every_model_carries_over_live_neurons_only(model, loss):
    # Every neuron model's backward over each sample's live neurons (docs/numerics.md section
    # 4: both states of Synaptic and Alpha, RLeaky's recurrence), on the hidden layers and the
    # output layer (a membrane loss makes every output neuron live where its gradient is not 0).
    make = LIVE_MODELS[model]
    net = popsnn.Sequential(
        popsnn.Linear(INPUTS, 64),
        make(sparse.window(0.15)),
        popsnn.Linear(64, 40),
        make(sparse.window(0.15)),
        popsnn.Linear(40, 3),
        make(sparse.window(0.3)),
    )
    steps, batch = 12, 4
    x = (np.random.default_rng(5).random((steps, batch, INPUTS)) < 0.3).astype(np.float32) * 1.5
    y = np.arange(batch) % 3
    chosen = losses.ce_count_loss() if loss == "ce_count" else losses.mse_membrane_loss()
    params = net.init_params(4)
    for p in params:  # Alpha's two currents need a stronger drive to reach the readout
        p["weight"] *= 5.0 if model.startswith("alpha") else 2.0
    backend = EngineBackend(
        net,
        params,
        chosen,
        optim.SGD(lr=0.1),
        num_steps=steps,
        batch_size=batch,
        device="cpu",
        trace_activity=0.2,
        sparse_backward_max_live=1.0,  # the compressed backward however live (dense: its own test)
        on_overflow="grow",
    )
    value, grads = backend.loss_and_grad(x, y)
    ref_value, ref_grads, rec = reference.loss_and_grad(net, params, x, y, chosen)
    np.testing.assert_array_equal(backend.infer(x), rec.spikes[-1])
    assert value == pytest.approx(ref_value, rel=2e-5, abs=1e-7)
    assert_grads_close(grads, ref_grads)
    prof = backend.profile()
    assert all(prof[f"layer{l}_compressed_trace"] == 1 for l in range(3))
    live = [live_fractions(m) for m in rec.grad_masks]
    assert all(((f > 0) & (f < 1)).any() for f in live), "every layer partly live somewhere"
    assert all(np.abs(g["weight"]).sum() > 0 for g in grads), "no gradient tests nothing"
