"""LifBackward over half storage (LifBackward<Neuron, Reset, Trace, half>, docs/numerics.md
section 8 step 4's backward), run alone on popsnn's CPU runtime after the half forward
(tests/engine/half_vertices/lif_forward with its backward on): two layers, direct current then
spike ids, from the output layer's dL/dS and dL/dU, against
popsnn.reference.backward(..., storage="float16") on the same forward, for every neuron model,
reset and dense trace layout. The float form under the same harness against the float32
reference."""

import numpy as np
import pytest
from test_engine_half_forward import (
    N0,
    N1,
    N_IN,
    NEURONS,
    B,
    T,
    _case,
    _run,
    harness,  # noqa: F401 (the module's fixture)
)

import popsnn
from popsnn import reference


def _loss_grads(seed):
    """dL/dS and dL/dU of the output layer, as half holds them (the reference stores them)."""
    rng = np.random.default_rng(seed + 100)
    d_s = rng.normal(0.0, 0.2, (T, B, N1))
    d_u = rng.normal(0.0, 0.05, (T, B, N1))
    return [a.astype(np.float16).astype(np.float32) for a in (d_s, d_u)]


def read_grads(tmp_path, x, recurrence, learned=False):
    """The engine's gradients in popsnn.reference's layout (float32), per layer."""

    def read(name, shape):
        return np.fromfile(tmp_path / f"{name}.bin", np.float32).reshape(shape)

    # Layer 0's weight gradient is DirectWeightGrad's: sum_t dL/dI [B, n0] against x.
    d_current = read("l0_current_grad_sum", (B, N0))
    grads = [
        {"weight": d_current.T @ x, "bias": read("l0_grad_b", (N0,))},
        {"weight": read("l1_grad_w", (N0, N1)).T, "bias": read("l1_grad_b", (N1,))},
    ]
    for l, n in ((0, N0), (1, N1)):
        if recurrence == 1:  # V by source neuron [N, n]: the reference's [n, N] transposed
            grads[l]["recurrent_weight"] = read(f"l{l}_grad_v", (n, n)).T
            grads[l]["recurrent_bias"] = read(f"l{l}_grad_c", (n,))
        elif recurrence == 2:
            grads[l]["recurrent_weight"] = read(f"l{l}_grad_v", (n,))
        if learned:
            grads[l]["beta"] = read(f"l{l}_grad_beta", (n,))
            grads[l]["threshold"] = read(f"l{l}_grad_threshold", (n,))
    return grads


def _recurrence(net):
    neuron = net.stages[0].neuron
    if type(neuron).__name__ != "RLeaky":
        return 0
    return 1 if neuron.all_to_all else 2


def _reference(net, params, x, loss_grads, engine, storage):
    """popsnn.reference's gradients on the forward the engine ran: where no state but U is
    kept (not Alpha) and no rule masks the surrogate, its stored spikes and membranes replace
    the reference's (a spike whose U lies a half ulp from the threshold may be decided
    differently: docs/numerics.md section 8); otherwise they must agree."""
    rec = reference.forward(net, params, x, T, storage)
    neuron = net.stages[0].neuron
    for l, (spikes, membranes, _) in enumerate(engine):
        if type(neuron).__name__ != "Alpha" and neuron.sparse is None:
            rec.spikes[l] = spikes.astype(np.float32)
            rec.membranes[l] = membranes.astype(np.float32)
        else:
            np.testing.assert_array_equal(spikes, rec.spikes[l])
    return reference.backward(net, params, rec, *loss_grads, storage=storage)


def _check(grads, want, rel):
    """Every gradient within `rel` of the network's largest reference entry. (RLeaky's
    one-to-one V has no gradient under the zero reset: S[t-1] = 1 gates its own path.)"""
    largest = max(float(np.abs(g).max()) for p in want for g in p.values())
    for l, (got, ref) in enumerate(zip(grads, want)):
        assert set(got) == set(ref)
        assert np.abs(ref["weight"]).max() > 0, f"layer {l}: no gradient reached it"
        for k in ref:
            np.testing.assert_allclose(
                got[k], ref[k], rtol=0, atol=rel * largest, err_msg=f"{l} {k}"
            )


CASES = sorted(NEURONS)


@pytest.mark.parametrize("name", CASES)
def test_half_backward_matches_the_half_reference(harness, tmp_path, name):  # noqa: F811
    net, params, x = _case(name)
    x = x.astype(np.float16).astype(np.float32)
    loss_grads = _loss_grads(0)
    engine = _run(harness, tmp_path, "half", net, params, x, False, loss_grads)
    assert engine[0][0].sum() > 0 and engine[1][0].sum() > 0, "silent layers test nothing"
    want = _reference(net, params, x, loss_grads, engine, "float16")
    grads = read_grads(tmp_path, x, _recurrence(net))
    # The same stored values on both sides, the float sums' order apart: measured 3e-8 to 2e-5
    # of the largest entry (against the float32 reference: 1.7e-4 to 2.6e-3).
    _check(grads, want, 5e-5)
    # dL/dI crosses to layer 0 stored: the half the reference sends (an ulp where the two
    # float sums part at a half tie).
    sent = np.fromfile(tmp_path / "l1_grad_out.bin", np.float16).astype(np.float32)
    assert np.all(np.isfinite(sent)) and np.any(sent != 0)
    assert np.array_equal(sent, sent.astype(np.float16).astype(np.float32))


@pytest.mark.parametrize(
    "name",
    [
        "leaky-subtract",
        "synaptic-zero-sigmoid",
        "alpha-subtract",
        "rleaky-all-subtract",
        "rleaky-one-zero",
        "leaky-window",
    ],
)
def test_float_backward_under_its_stored_type_name_matches_float32(harness, tmp_path, name):  # noqa: F811
    net, params, x = _case(name, seed=1)
    loss_grads = _loss_grads(1)
    engine = _run(harness, tmp_path, "float", net, params, x, False, loss_grads)
    want = _reference(net, params, x, loss_grads, engine, None)
    _check(read_grads(tmp_path, x, _recurrence(net)), want, 1e-5)


def test_half_backward_rounds_what_it_sends(harness, tmp_path):  # noqa: F811
    # Against the float32 reference the half backward is further off than against the half
    # one: the rounding of the stored values is there, not a float run under a half name.
    net, params, x = _case("leaky-subtract", seed=2)
    x = x.astype(np.float16).astype(np.float32)
    loss_grads = _loss_grads(2)
    engine = _run(harness, tmp_path, "half", net, params, x, False, loss_grads)
    grads = read_grads(tmp_path, x, 0)
    half = _reference(net, params, x, loss_grads, engine, "float16")
    full = _reference(net, params, x, loss_grads, engine, None)
    err = [np.abs(grads[0]["weight"] - ref[0]["weight"]).max() for ref in (half, full)]
    assert err[0] < err[1] / 4, err


def _halves(lo, hi, n):
    """n values from lo to hi that half holds exactly (a learned constant is stored so)."""
    return np.linspace(lo, hi, n).astype(np.float16).astype(np.float32)


def _learned_alpha(n, **reset):
    return popsnn.Alpha(
        alpha=_halves(0.85, 0.95, n),
        beta=_halves(0.6, 0.8, n),
        threshold=_halves(0.8, 1.2, n),
        learn_beta=True,
        learn_threshold=True,
        **reset,
    )


LEARNED = {  # beta and threshold learned, one per neuron: the U trace (Alpha: and H) in half
    "leaky": lambda n: popsnn.Leaky(
        beta=_halves(0.6, 0.95, n),
        threshold=_halves(0.8, 1.2, n),
        learn_beta=True,
        learn_threshold=True,
    ),
    "alpha-zero": lambda n: _learned_alpha(n, reset_mechanism="zero"),
    "alpha-subtract": lambda n: _learned_alpha(n),
}


@pytest.mark.parametrize("name", sorted(LEARNED))
def test_half_backward_of_learned_constants(harness, tmp_path, name):  # noqa: F811
    make = LEARNED[name]
    net = popsnn.Sequential(popsnn.Linear(N_IN, N0), make(N0), popsnn.Linear(N0, N1), make(N1))
    params = net.init_params(0)
    params[0]["weight"] = params[0]["weight"] * np.float32(2.5)
    _, _, x = _case("leaky-subtract")
    x = x.astype(np.float16).astype(np.float32)
    loss_grads = _loss_grads(3)
    engine = _run(harness, tmp_path, "half", net, params, x, False, loss_grads)
    assert engine[0][0].sum() > 0 and engine[1][0].sum() > 0, "silent layers test nothing"
    want = _reference(net, params, x, loss_grads, engine, "float16")
    grads = read_grads(tmp_path, x, 0, learned=True)
    assert all(np.abs(want[l][k]).max() > 0 for l in (0, 1) for k in ("beta", "threshold"))
    _check(grads, want, 5e-5)
