"""Convolutional layers in the reference: the descriptions' checks, shape inference, and the
hand-written BPTT through Conv2d / MaxPool2d / AvgPool2d / Flatten against float64 central
differences (the smooth-spike forward of test_reference_gradients.py, whose exact gradient
the hand BPTT is).

The finite differences need a trajectory clear of every kink: no membrane within CLEARANCE
of the threshold (the reset is a step), and no max-pool window whose two largest entries
are within CLEARANCE (the max switches there). `_clear` checks both, and the tests use the
first seed that passes, so a pass is never luck.
"""

from __future__ import annotations

import numpy as np
import pytest
from _reference_nets import smooth_spike_fn

import popsnn
from popsnn import conv_ops, losses, reference, sparse
from popsnn.conv import MaxPool2d

STEP = 1e-6
CLEARANCE = 1e-4


def csnn():
    return popsnn.Sequential(
        popsnn.Conv2d(1, 12, 5),
        popsnn.MaxPool2d(2),
        popsnn.Leaky(beta=0.5),
        popsnn.Conv2d(12, 64, 5),
        popsnn.MaxPool2d(2),
        popsnn.Leaky(beta=0.5),
        popsnn.Flatten(),
        popsnn.Linear(64 * 4 * 4, 10),
        popsnn.Leaky(beta=0.5),
        input_shape=(1, 28, 28),
    )


def test_csnn_shapes_are_inferred():
    net = csnn()
    assert [s.out_shape for s in net.stages] == [(12, 12, 12), (64, 4, 4), (10,)]
    assert net.num_inputs == 784 and net.num_outputs == 10 and not net.is_linear
    shapes = [{k: v.shape for k, v in p.items()} for p in net.init_params(0)]
    assert shapes[0] == {"weight": (12, 1, 5, 5), "bias": (12,)}
    assert shapes[1] == {"weight": (64, 12, 5, 5), "bias": (64,)}
    assert shapes[2] == {"weight": (10, 1024), "bias": (10,)}


@pytest.mark.parametrize(
    "make, fragment",
    [
        (lambda: popsnn.Conv2d(1, 2, 3, dilation=2), "dilation=(2, 2) is not supported"),
        (lambda: popsnn.Conv2d(2, 2, 3, groups=2), "groups=2 is not supported"),
        (lambda: popsnn.Conv2d(1, 2, 3, padding="same"), "padding='same' is not supported"),
        (lambda: popsnn.Conv2d(1, 2, 0), "kernel_size must be >= 1"),
        (lambda: popsnn.MaxPool2d(2, ceil_mode=True), "ceil_mode=True is not supported"),
        (lambda: popsnn.MaxPool2d(2, padding=2), "at most half the kernel_size"),
        (lambda: popsnn.AvgPool2d(2, count_include_pad=False), "count_include_pad=False"),
        (lambda: popsnn.Flatten(start_dim=0), "only Flatten()"),
        (
            lambda: popsnn.Sequential(popsnn.Conv2d(1, 2, 3), popsnn.Leaky(beta=0.5)),
            "needs input_shape",
        ),
        (
            lambda: popsnn.Sequential(
                popsnn.Conv2d(3, 2, 3), popsnn.Leaky(beta=0.5), input_shape=(1, 8, 8)
            ),
            "set in_channels=1",
        ),
        (
            lambda: popsnn.Sequential(
                popsnn.Conv2d(1, 2, 9), popsnn.Leaky(beta=0.5), input_shape=(1, 8, 8)
            ),
            "layer 0: Conv2d: input H=8 (padding 0) is smaller than the kernel (9)",
        ),
        (
            lambda: popsnn.Sequential(
                popsnn.Conv2d(1, 2, 3),
                popsnn.Leaky(beta=0.5),
                popsnn.Linear(72, 10),
                popsnn.Leaky(beta=0.5),
                input_shape=(1, 8, 8),
            ),
            "put popsnn.Flatten() before it",
        ),
        (
            lambda: popsnn.Sequential(
                popsnn.Conv2d(1, 2, 3), popsnn.MaxPool2d(2), input_shape=(1, 8, 8)
            ),
            "must end with a spiking neuron",
        ),
        (
            lambda: popsnn.Sequential(
                popsnn.Conv2d(1, 2, 3), popsnn.RLeaky(beta=0.5), input_shape=(1, 8, 8)
            ),
            "RLeaky after a convolution is not supported",
        ),
        (
            lambda: popsnn.Sequential(
                popsnn.MaxPool2d(2), popsnn.Leaky(beta=0.5), input_shape=(1, 8, 8)
            ),
            "needs exactly one Linear or Conv2d",
        ),
    ],
)
def test_bad_layers_are_refused_in_one_line(make, fragment):
    with pytest.raises((ValueError, TypeError)) as err:
        make()
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_input_shapes():
    net = small_net()
    params = net.init_params(0, np.float64)
    x = np.ones((3, 2, 2, 7, 7))
    flat = reference.forward(net, params, x.reshape(3, 2, -1)).spikes[-1]
    np.testing.assert_array_equal(reference.forward(net, params, x).spikes[-1], flat)
    with pytest.raises(ValueError, match=r"sample axes \(2, 6, 7\) are not the net's"):
        reference.forward(net, params, np.ones((3, 2, 2, 6, 7)))
    with pytest.raises(ValueError, match="pass num_steps=T"):
        reference.forward(net, params, np.ones((2, 2, 7, 7)))


def test_linear_only_paths_refuse_conv_in_one_line():
    net = small_net()
    with pytest.raises(ValueError, match="this linear-layer path does not run; use popsnn.Model"):
        net.pairs  # noqa: B018 -- every linear-only code path reads this first


# ----------------------------------------------------------------------------- gradients


def small_net(sparse_rule=None, reset="subtract"):
    """Conv (stride 1, padding 1) -> MaxPool (overlapping windows) -> Leaky -> AvgPool on
    spikes -> Conv (stride 2) -> Synaptic -> Flatten -> Linear -> Leaky."""
    return popsnn.Sequential(
        popsnn.Conv2d(2, 3, 3, padding=1),
        popsnn.MaxPool2d(3, stride=2, padding=1),
        popsnn.Leaky(beta=0.8, sparse=sparse_rule, reset_mechanism=reset),
        popsnn.AvgPool2d(2, stride=1),
        popsnn.Conv2d(3, 4, (2, 3), stride=(2, 1), padding=(1, 0)),
        popsnn.Synaptic(alpha=0.6, beta=0.7, reset_mechanism=reset),
        popsnn.Flatten(),
        popsnn.Linear(4 * 2 * 1, 3),
        popsnn.Leaky(beta=0.9),
        input_shape=(2, 7, 7),
    )


def _smooth_record(net, params, x, num_steps):
    x, num_steps, direct = reference.check_input(net, x, num_steps, np.float64)
    fns = [smooth_spike_fn(stage.neuron) for stage in net.stages]
    return reference._simulate(net, params, x, num_steps, direct, fns)


def _max_pool_gaps(net, params, rec):
    """The smallest gap between a max-pool window's largest and second-largest entry."""
    gaps = [np.inf]
    for l, (stage, p) in enumerate(zip(net.stages, params)):
        h = (rec._input if l == 0 else rec.spikes[l - 1]).reshape(-1, *stage.in_shape)
        for op in stage.ops:
            if isinstance(op, MaxPool2d):
                padded = conv_ops._pad(h, op.padding, -np.inf)
                out_hw = conv_ops._out_hw(h.shape[2:], op.kernel_size, op.stride, op.padding)
                win = conv_ops._windows(padded, op.kernel_size, op.stride, out_hw)
                top = np.sort(win.reshape(*win.shape[:4], -1), axis=-1)[..., -2:]
                gaps.append(np.min(top[..., 1] - top[..., 0]))
            h, _ = conv_ops._op_forward(op, p, h)
    return min(gaps)


def _clear(net, params, rec):
    near = min(np.abs(u - s.neuron.threshold).min() for u, s in zip(rec.membranes, net.stages))
    resets = all((u > s.neuron.threshold).any() for u, s in zip(rec.membranes, net.stages))
    return near > CLEARANCE and resets and _max_pool_gaps(net, params, rec) > CLEARANCE


def _case(net, direct, steps=4):
    """The first seed whose smooth trajectory is clear of kinks and resets in every layer."""
    loss = losses.get("ce_count")
    for seed in range(200):
        rng = np.random.default_rng(seed)
        params = [{k: v * 1.5 for k, v in p.items()} for p in net.init_params(rng, np.float64)]
        shape = (2, *net.input_shape) if direct else (steps, 2, *net.input_shape)
        x = rng.uniform(0, 2.5, shape)
        rec = _smooth_record(net, params, x, steps)
        if _clear(net, params, rec):
            return params, x, rng.integers(0, 3, 2), loss
    raise AssertionError("no seed gave a kink-free trajectory")


def _loss(net, params, x, y, loss, steps):
    rec = _smooth_record(net, params, x, steps)
    return loss(rec.spikes[-1], rec.membranes[-1], y)


@pytest.mark.parametrize(
    "rule, reset, direct",
    [
        (None, "subtract", False),
        (None, "zero", False),
        (None, "subtract", True),
        (sparse.window(0.6), "subtract", False),
        (sparse.one_sided(0.5), "subtract", False),
    ],
)
def test_conv_bptt_matches_finite_differences(rule, reset, direct):
    net = small_net(rule, reset)
    steps = 4
    params, x, y, loss = _case(net, direct, steps)
    rec = _smooth_record(net, params, x, steps)
    value, d_s, d_u = reference._loss_terms(loss, rec, y)
    grads, d_x = reference._backward(net, params, rec, d_s, d_u, input_grad=True)
    checked = 0
    for l, p in enumerate(params):
        for key, a in p.items():
            for i in np.ndindex(a.shape):
                keep = a[i]
                a[i] = keep + STEP
                up = _loss(net, params, x, y, loss, steps)
                a[i] = keep - STEP
                down = _loss(net, params, x, y, loss, steps)
                a[i] = keep
                fd = (up - down) / (2 * STEP)
                assert abs(grads[l][key][i] - fd) <= 1e-6 + 1e-5 * abs(fd), (l, key, i)
                checked += 1
    assert checked == sum(a.size for p in params for a in p.values())
    # The input gradient too, on a few entries (it is the stage-0 transposed convolution).
    flat_x = x.reshape(*x.shape[: 1 if direct else 2], -1)
    for i in [(0,) * (flat_x.ndim - 1) + (j,) for j in (0, 17, 50, 97)]:
        keep = flat_x[i]
        flat_x[i] = keep + STEP
        up = _loss(net, params, flat_x, y, loss, steps)
        flat_x[i] = keep - STEP
        down = _loss(net, params, flat_x, y, loss, steps)
        flat_x[i] = keep
        fd = (up - down) / (2 * STEP)
        assert abs(d_x[i] - fd) <= 1e-6 + 1e-5 * abs(fd), i
    assert any(np.abs(g["weight"]).max() > 0 for g in grads)


def test_float32_and_float64_agree():
    net = small_net()
    p64 = net.init_params(3, np.float64)
    p32 = [{k: v.astype(np.float32) for k, v in p.items()} for p in p64]
    x = np.random.default_rng(3).uniform(0, 3, (5, 2, 2, 7, 7))
    y = np.array([0, 2])
    v64, g64, r64 = reference.loss_and_grad(net, p64, x, y, "ce_count")
    v32, g32, r32 = reference.loss_and_grad(net, p32, x, y, "ce_count")
    assert r32.spikes[0].dtype == np.float32 and g32[0]["weight"].dtype == np.float32
    assert abs(v32 - v64) < 1e-5
    for a, b in zip(g32, g64):
        for k in a:
            np.testing.assert_allclose(a[k], b[k], rtol=1e-3, atol=1e-5)
