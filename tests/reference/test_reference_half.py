"""The reference in half storage (storage="float16", docs/numerics.md section 8): the rounding
points hold, a step recomputed from the stored state gives the stored result, results stay
within half's tolerance of float32 for every neuron model with and without a sparse rule, and
a loss scale keeps gradients that half would flush to zero."""

import numpy as np
import pytest
from _reference_nets import MODELS, N_IN, T_STEPS, active_params, two_layer_net

import popsnn
from popsnn import losses, reference, sparse

RULES = {"dense": None, "window": sparse.window(0.5), "one_sided": sparse.one_sided(0.4)}


def _representable_in_half(a) -> bool:
    return np.array_equal(a, a.astype(np.float16).astype(np.float32))


def _case(model, rule=None, reset="subtract", seed=0):
    net = two_layer_net(model, reset, "fast_sigmoid", rule)
    params = active_params(net, seed, np.float32)
    rng = np.random.default_rng(seed + 100)
    x = rng.random((3, N_IN), dtype=np.float32) * 1.5
    return net, params, x


@pytest.mark.parametrize("reset", ["subtract", "zero", "none"])
@pytest.mark.parametrize("model", MODELS)
def test_stored_values_are_half_and_spikes_come_from_them(model, reset):
    net, params, x = _case(model, reset=reset)
    rec = reference.forward(net, params, x, T_STEPS, storage="float16")
    for l, (_, neuron) in enumerate(net.pairs):
        U, S = rec.membranes[l], rec.spikes[l]
        assert U.dtype == np.float32 and _representable_in_half(U)
        if rec.currents[l] is not None:
            assert _representable_in_half(rec.currents[l])
        np.testing.assert_array_equal(S, (U > neuron.threshold).astype(np.float32))
        assert 0 < S.mean() < 1  # the case exercises both sides of the threshold


def test_leaky_step_recomputed_from_the_stored_state():
    """U[t] = half(beta U[t-1] + half(W_h x + b_h) - R theta), in float32, W_h = half(W)."""
    net, params, x = _case("leaky")
    rec = reference.forward(net, params, x, T_STEPS, storage="float16")
    half = popsnn.precision.rounding("float16")
    w, b = half(params[0]["weight"]), half(params[0]["bias"])
    current = half(half(x) @ w.T + b)
    beta, theta = np.float32(net.pairs[0][1].beta), np.float32(1.0)
    u_prev = np.zeros_like(current)
    for t in range(T_STEPS):
        reset = (u_prev > theta).astype(np.float32)
        u_prev = half(beta * u_prev + current - reset * theta)
        np.testing.assert_array_equal(rec.membranes[0][t], u_prev)


HALF_ULP_AT_ONE = 2.0**-10


def _decisions_agree(net, r32, r16) -> bool:
    """True if spikes and sparse-rule masks are identical; False if they differ, after
    checking that the first difference is a membrane at a decision edge (threshold or the
    rule's bound) to within a few half ulps of it, where rounding may go either way."""
    for l, (_, neuron) in enumerate(net.pairs):
        U32, theta = r32.membranes[l], np.float32(neuron.threshold)
        edge = 8 * HALF_ULP_AT_ONE * np.maximum(1.0, np.abs(U32))
        flips = r32.spikes[l] != r16.spikes[l]
        if neuron.sparse is not None:
            flips |= r32.grad_masks[l] != r16.grad_masks[l]
        if not flips.any():
            continue
        t = np.argwhere(flips)[0][0]  # first step with a difference; earlier ones agree
        at = flips[t]
        near_spike = (U32[t] - edge[t] < theta) & (U32[t] + edge[t] > theta)
        near_rule = np.zeros_like(near_spike)
        if neuron.sparse is not None:
            below = neuron.sparse.mask(U32[t] - edge[t], theta)
            above = neuron.sparse.mask(U32[t] + edge[t], theta)
            near_rule = below != above
        assert np.all((near_spike | near_rule)[at]), f"layer {l} step {t}: far from an edge"
        return False
    return True


@pytest.mark.parametrize("rule", list(RULES))
@pytest.mark.parametrize("model", MODELS)
def test_half_stays_within_tolerance_of_float32(model, rule):
    """Half rounds U to 11 significant bits: a spike or a sparse-rule mask entry flips only
    where float32's membrane sits within a few half ulps of the decision's edge; with the
    decisions identical, membranes, loss and gradients agree within half's tolerance
    (docs/numerics.md section 8). Seeds are tried until one has identical decisions (the
    test fails if none of 5 has)."""
    y = np.array([0, 3, 1])
    loss = losses.ce_count_loss()
    for seed in range(5):
        net, params, x = _case(model, RULES[rule], seed=seed)
        v32, g32, r32 = reference.loss_and_grad(net, params, x, y, loss, T_STEPS)
        v16, g16, r16 = reference.loss_and_grad(
            net, params, x, y, loss, T_STEPS, storage="float16", loss_scale=1024.0
        )
        if _decisions_agree(net, r32, r16):
            break
    else:
        pytest.fail(f"{model}/{rule}: no seed of 5 with identical spikes and masks")
    for u32, u16 in zip(r32.membranes, r16.membranes):
        np.testing.assert_allclose(u16, u32, atol=2e-2)
    assert abs(v16 - v32) <= 1e-2 * abs(v32) + 1e-3
    # Relative to the largest gradient of the network: a layer whose gradient is a sum that
    # nearly cancels (a small dL/dW below a large one) keeps half's absolute error.
    largest = max(np.abs(g).max() for p in g32 for g in p.values())
    for p32, p16 in zip(g32, g16):
        for key in p32:
            assert np.abs(p16[key] - p32[key]).max() <= 1e-2 * largest, key
            assert np.all(p16[key][p32[key] == 0] == 0)  # masked-out stays exactly zero


def test_loss_scale_keeps_gradients_half_would_flush_to_zero():
    net, params, x = _case("leaky")
    rec32 = reference.forward(net, params, x, T_STEPS)
    rec16 = reference.forward(net, params, x, T_STEPS, storage="float16")
    tiny = np.random.default_rng(1).normal(0, 1e-8, rec32.spikes[-1].shape).astype(np.float32)
    g32 = reference.backward(net, params, rec32, tiny)
    unscaled = reference.backward(net, params, rec16, tiny, storage="float16")
    scale = np.float32(2.0**16)
    scaled = reference.backward(net, params, rec16, tiny * scale, storage="float16")
    assert all(not np.any(g) for p in unscaled for g in p.values())  # flushed to zero
    for p32, p16 in zip(g32, scaled):
        for key in p32:
            np.testing.assert_allclose(
                p16[key] / scale, p32[key], rtol=0, atol=3e-2 * np.abs(p32[key]).max()
            )


def test_half_storage_needs_float32_parameters():
    net, params, x = _case("leaky")
    params64 = [{k: v.astype(np.float64) for k, v in p.items()} for p in params]
    with pytest.raises(
        ValueError, match="half storage rounds float32 arithmetic; the parameters are float64"
    ):
        reference.forward(net, params64, x, T_STEPS, storage="float16")
    with pytest.raises(
        ValueError, match="storage must be None, 'float32' or 'float16', got 'int8'"
    ):
        reference.forward(net, params, x, T_STEPS, storage="int8")
