"""The reference's convolutional layers against PyTorch and snnTorch in float64.

The kernels alone (conv, max pool with tied maxima and overlapping windows, average pool,
stride and padding variants) against torch.nn.functional, values and gradients; then whole
CSNNs against an snnTorch twin (torch.nn.Conv2d / MaxPool2d / AvgPool2d / Flatten / Linear
with snn.Leaky / snn.Synaptic): spikes identical, membranes, loss and every gradient to 1e-9.
snnTorch is run in float64 as in test_reference_snntorch_crosscheck.py (its surrogate output
cast back to the input dtype; float64 default dtype).
"""

from __future__ import annotations

import numpy as np
import pytest

import popsnn
from popsnn import conv_ops, reference

torch = pytest.importorskip("torch", reason="the cross-check needs torch ('.[crosscheck]')")
snn = pytest.importorskip("snntorch", reason="the cross-check needs snntorch")
import snntorch.functional as SF  # noqa: E402
import snntorch.functional.loss as snn_loss  # noqa: E402
import snntorch.surrogate as snn_surrogate  # noqa: E402

F = torch.nn.functional
TOL = 1e-9


@pytest.fixture(autouse=True)
def float64_torch(monkeypatch):
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    monkeypatch.setattr(snn_loss, "dtype", torch.float64)
    yield
    torch.set_default_dtype(before)


def _grad_of(fn, *arrays):
    """(fn(*tensors), [grad of sum(out * probe) per array], probe) in float64."""
    tensors = [torch.tensor(a, requires_grad=True) for a in arrays]
    out = fn(*tensors)
    probe = torch.tensor(np.random.default_rng(7).normal(size=tuple(out.shape)))
    (out * probe).sum().backward()
    return out.detach().numpy(), [t.grad.numpy() for t in tensors], probe.numpy()


@pytest.mark.parametrize(
    "kernel, stride, padding",
    [((3, 3), (1, 1), (0, 0)), ((5, 5), (1, 1), (2, 2)), ((3, 2), (2, 3), (1, 0))],
)
def test_conv2d_kernel_matches_torch(kernel, stride, padding):
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, 2, 9, 8))
    w = rng.normal(size=(4, 2, *kernel))
    b = rng.normal(size=4)
    want, (dx, dw, db), probe = _grad_of(
        lambda x_, w_, b_: F.conv2d(x_, w_, b_, stride=stride, padding=padding), x, w, b
    )
    got = conv_ops.conv2d_forward(x, w, b, stride, padding)
    np.testing.assert_allclose(got, want, atol=TOL)
    g_w, g_b, g_x = conv_ops.conv2d_backward(x, w, probe, stride, padding, need_dx=True)
    np.testing.assert_allclose(g_w, dw, atol=TOL)
    np.testing.assert_allclose(g_b, db, atol=TOL)
    np.testing.assert_allclose(g_x, dx, atol=TOL)


@pytest.mark.parametrize(
    "kernel, stride, padding",
    [((2, 2), (2, 2), (0, 0)), ((3, 3), (1, 1), (1, 1)), ((3, 2), (2, 1), (1, 0))],
)
@pytest.mark.parametrize("binary", [False, True])
def test_pools_match_torch_including_ties(kernel, stride, padding, binary):
    """Binary input (spikes) makes tied maxima everywhere: PyTorch sends a window's gradient
    to its first maximum in row-major order, and so must the reference."""
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 3, 7, 6))
    if binary:
        x = (x > 0.3).astype(np.float64)
    want, (dx,), probe = _grad_of(lambda x_: F.max_pool2d(x_, kernel, stride, padding), x)
    got, argmax = conv_ops.max_pool_forward(x, kernel, stride, padding)
    np.testing.assert_array_equal(got, want)
    got_dx = conv_ops.max_pool_backward(probe, argmax, x.shape, kernel, stride, padding)
    np.testing.assert_allclose(got_dx, dx, atol=TOL)

    want, (dx,), probe = _grad_of(lambda x_: F.avg_pool2d(x_, kernel, stride, padding), x)
    np.testing.assert_allclose(
        conv_ops.avg_pool_forward(x, kernel, stride, padding), want, atol=TOL
    )
    got_dx = conv_ops.avg_pool_backward(probe, x.shape, kernel, stride, padding)
    np.testing.assert_allclose(got_dx, dx, atol=TOL)


# ----------------------------------------------------------------------------- whole nets


def _same_dtype(function_class):
    class SameDtype(function_class):
        @staticmethod
        def forward(ctx, input_, *args):
            return function_class.forward(ctx, input_, *args).to(input_.dtype)

    return SameDtype


def _spike_grad(sur):
    fn = _same_dtype(
        {"atan": snn_surrogate.ATan, "fast_sigmoid": snn_surrogate.FastSigmoid}[sur.name]
    )
    return lambda x: fn.apply(x, sur.param)


def _torch_layer(op, p):
    """The torch module for a popsnn layer, holding p's weights."""
    if isinstance(op, popsnn.Conv2d):
        m = torch.nn.Conv2d(
            op.in_channels, op.out_channels, op.kernel_size, op.stride, op.padding, bias=op.bias
        )
    elif isinstance(op, popsnn.Linear):
        m = torch.nn.Linear(op.in_features, op.out_features, bias=op.bias)
    elif isinstance(op, popsnn.MaxPool2d):
        return torch.nn.MaxPool2d(op.kernel_size, op.stride, op.padding)
    elif isinstance(op, popsnn.AvgPool2d):
        return torch.nn.AvgPool2d(op.kernel_size, op.stride, op.padding)
    else:
        return torch.nn.Flatten()
    with torch.no_grad():
        m.weight.copy_(torch.tensor(p["weight"]))
        if "bias" in p:
            m.bias.copy_(torch.tensor(p["bias"]))
    return m


def _torch_neuron(neuron):
    kw = dict(
        threshold=torch.tensor(neuron.threshold),
        reset_mechanism=neuron.reset_mechanism,
        spike_grad=_spike_grad(neuron.surrogate),
    )
    if isinstance(neuron, popsnn.Synaptic):
        cell = snn.Synaptic(alpha=torch.tensor(neuron.alpha), beta=torch.tensor(neuron.beta), **kw)
    else:
        cell = snn.Leaky(beta=torch.tensor(neuron.beta), **kw)
    return cell.to(torch.float64)


def _run_twin(net, params, x, steps):
    stages = [
        ([_torch_layer(op, p) for op in s.ops], _torch_neuron(s.neuron))
        for s, p in zip(net.stages, params)
    ]
    x = torch.tensor(x)
    spikes, mems = [[] for _ in stages], [[] for _ in stages]
    for t in range(steps):
        h = x if x.dim() == 1 + len(net.input_shape) else x[t]
        for l, (ops, cell) in enumerate(stages):
            for m in ops:
                h = m(h)
            res = cell(h)
            h, mem = res[0], res[-1]
            spikes[l].append(h)
            mems[l].append(mem)
    weights = [[m for m in ops if hasattr(m, "weight")][0] for ops, _ in stages]
    return [torch.stack(s) for s in spikes], [torch.stack(m) for m in mems], weights


def _net(variant):
    if variant == "csnn":  # Sun et al.'s shape, scaled down: 12C5-MP2-64C5-MP2-10 on 16 x 16
        layers = [
            popsnn.Conv2d(1, 6, 5),
            popsnn.MaxPool2d(2),
            popsnn.Leaky(beta=0.5),
            popsnn.Conv2d(6, 8, 3),
            popsnn.MaxPool2d(2),
            popsnn.Leaky(beta=0.5),
            popsnn.Flatten(),
            popsnn.Linear(8 * 2 * 2, 4),
            popsnn.Leaky(beta=0.5),
        ]
        return popsnn.Sequential(*layers, input_shape=(1, 16, 16))
    return popsnn.Sequential(  # padding, stride, pooling on spikes, Synaptic, zero reset
        popsnn.Conv2d(2, 5, 3, stride=2, padding=1),
        popsnn.Leaky(beta=0.8, reset_mechanism="zero"),
        popsnn.AvgPool2d(2, stride=1, padding=1),
        popsnn.Conv2d(5, 6, (3, 2), padding=(1, 0), bias=False),
        popsnn.MaxPool2d(3, stride=2, padding=1),
        popsnn.Synaptic(alpha=0.7, beta=0.85, surrogate=popsnn.surrogate.fast_sigmoid(25)),
        popsnn.Flatten(),
        popsnn.Linear(6 * 3 * 2, 4),
        popsnn.Leaky(beta=0.9),
        input_shape=(2, 9, 7),
    )


def _active_case(net, direct, steps):
    """Weights and input of the first seed where every layer spikes but not always, so that
    spikes, resets and surrogate gradients are all exercised."""
    for seed in range(100):
        rng = np.random.default_rng(seed)
        params = [{k: v * 3.0 for k, v in p.items()} for p in net.init_params(rng, np.float64)]
        shape = (3, *net.input_shape)
        x = rng.uniform(0, 1.5, shape) if direct else (rng.random((steps, *shape)) < 0.4) * 1.0
        rec = reference.forward(net, params, x, steps)
        if all(0.05 < s.mean() < 0.95 for s in rec.spikes):
            return params, x
    raise AssertionError("no seed made every layer spike")


@pytest.mark.parametrize("variant", ["csnn", "strided"])
@pytest.mark.parametrize("direct", [False, True])
def test_conv_net_matches_snntorch(variant, direct):
    net = _net(variant)
    steps = 6
    params, x = _active_case(net, direct, steps)
    y = np.array([0, 3, 1])
    value, grads, rec = reference.loss_and_grad(net, params, x, y, "ce_count", num_steps=steps)

    spikes, mems, weights = _run_twin(net, params, x, steps)
    loss = SF.ce_count_loss()(spikes[-1], torch.as_tensor(y))
    loss.backward()
    assert abs(value - loss.item()) < TOL
    for l in range(len(net)):
        np.testing.assert_array_equal(
            rec.spikes[l], spikes[l].detach().numpy().reshape(steps, 3, -1), err_msg=f"layer {l}"
        )
        np.testing.assert_allclose(
            rec.membranes[l], mems[l].detach().numpy().reshape(steps, 3, -1), atol=TOL
        )
        np.testing.assert_allclose(grads[l]["weight"], weights[l].weight.grad.numpy(), atol=TOL)
        if "bias" in grads[l]:
            np.testing.assert_allclose(grads[l]["bias"], weights[l].bias.grad.numpy(), atol=TOL)
