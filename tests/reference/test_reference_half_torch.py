"""The half-precision reference against PyTorch's own mixed precision: the same snnTorch
network under torch.autocast("cpu", float16) with a scaled backward (GradScaler's recipe).

Autocast rounds where popsnn's half mode does for the synaptic current (a float16 Linear) and
the gradients sent to the layer below, but keeps the membrane in float32 where popsnn stores it
in half; so spikes may flip only at the threshold (checked as in test_reference_half.py) and,
with identical spikes, loss and gradients agree to 1 % (docs/numerics.md section 8)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from _reference_nets import N_IN, T_STEPS, active_params, two_layer_net
from test_reference_half import _decisions_agree

from popsnn import Leaky, losses, reference

torch = pytest.importorskip("torch", reason="needs torch (pip install '.[crosscheck]')")
snn = pytest.importorskip("snntorch", reason="needs snntorch (pip install '.[crosscheck]')")
import snntorch.functional as SF  # noqa: E402
import snntorch.surrogate as snn_surrogate  # noqa: E402

SCALE = 1024.0


def _autocast_run(net, params, x, y):
    """Spikes and membranes per layer, loss and float32 gradients of the snnTorch twin under
    float16 autocast, backward on the loss times SCALE, gradients divided by it."""
    linears, cells, named = [], [], []
    for (lin, neuron), p in zip(net.pairs, params):
        fc = torch.nn.Linear(lin.in_features, lin.out_features)
        with torch.no_grad():
            fc.weight.copy_(torch.from_numpy(p["weight"]))
            fc.bias.copy_(torch.from_numpy(p["bias"]))
        kw = dict(
            threshold=neuron.threshold,
            reset_mechanism=neuron.reset_mechanism,
            spike_grad=snn_surrogate.fast_sigmoid(slope=neuron.surrogate.param),
        )
        if isinstance(neuron, Leaky):
            cell = snn.Leaky(beta=neuron.beta, **kw)
        else:
            cell = snn.Synaptic(alpha=neuron.alpha, beta=neuron.beta, **kw)
        linears.append(fc)
        cells.append(cell)
        named.append({"weight": fc.weight, "bias": fc.bias})
    spikes, membranes = [[] for _ in cells], [[] for _ in cells]
    xt = torch.from_numpy(x)
    with torch.autocast("cpu", dtype=torch.float16):
        for cell in cells:
            cell.reset_hidden()
        for _ in range(T_STEPS):
            inp = xt
            for l, (fc, cell) in enumerate(zip(linears, cells)):
                res = cell(fc(inp))
                spikes[l].append(res[0])
                membranes[l].append(res[-1])
                inp = res[0]
        out = torch.stack(spikes[-1]).float()
        value = SF.ce_count_loss()(out, torch.from_numpy(y))
    (value * SCALE).backward()
    grads = [{k: t.grad.numpy() / SCALE for k, t in d.items()} for d in named]
    record = SimpleNamespace(
        spikes=[torch.stack(s).detach().float().numpy() for s in spikes],
        membranes=[torch.stack(m).detach().float().numpy() for m in membranes],
    )
    return record, float(value.detach()), grads


@pytest.mark.parametrize("model", ["leaky", "synaptic"])
def test_half_reference_matches_torch_autocast_with_a_scaled_backward(model):
    y = np.array([0, 3, 1])
    for seed in range(5):
        net = two_layer_net(model, "subtract", "fast_sigmoid")
        params = active_params(net, seed, np.float32)
        x = np.random.default_rng(seed + 100).random((3, N_IN), dtype=np.float32) * 1.5
        value, grads, rec = reference.loss_and_grad(
            net, params, x, y, losses.ce_count_loss(), T_STEPS, "float16", SCALE
        )
        twin, twin_value, twin_grads = _autocast_run(net, params, x, y)
        twin.grad_masks = rec.grad_masks  # no sparse rule: all True on both sides
        if _decisions_agree(net, twin, rec):
            break
    else:
        pytest.fail(f"{model}: no seed of 5 with identical spikes")
    for u_torch, u_half in zip(twin.membranes, rec.membranes):
        np.testing.assert_allclose(u_half, u_torch, atol=2e-2)
    assert abs(value - twin_value) <= 1e-2 * abs(twin_value) + 1e-3
    largest = max(np.abs(g).max() for p in twin_grads for g in p.values())
    for l, (p_torch, p_half) in enumerate(zip(twin_grads, grads)):
        for key in p_torch:
            err = np.abs(p_half[key] - p_torch[key]).max()
            assert err <= 1e-2 * largest, f"layer {l} {key}: {err} vs largest {largest}"
