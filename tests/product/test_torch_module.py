"""popsnn.torch: a popsnn network inside a PyTorch training loop, checked against the same
network in snnTorch in float64. Spikes and membranes agree to rounding; gradients to float32
precision, because snnTorch's spikes are float32 tensors even in a float64 model, so the
gradient through every spike is rounded to float32 on its way back."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
snn = pytest.importorskip("snntorch")

import popsnn  # noqa: E402
import popsnn.torch as ptorch  # noqa: E402
from popsnn import interop, reference, surrogate  # noqa: E402


def mixed_net():
    # Decays exact in float32: snnTorch keeps beta and alpha as float32 buffers, even in a
    # float64 model, so other values would differ by float32 rounding.
    # No RLeaky: snnTorch's RLeaky feeds its float32 spikes to a float64 recurrence and fails
    # in float64 (the reference's RLeaky gradients are checked in tests/reference).
    return popsnn.Sequential(
        popsnn.Linear(6, 10),
        popsnn.Leaky(beta=0.8125, surrogate=surrogate.fast_sigmoid(10)),
        popsnn.Linear(10, 8),
        popsnn.Synaptic(alpha=0.625, beta=0.875, reset_mechanism="zero"),
        popsnn.Linear(8, 7),
        popsnn.Leaky(beta=0.75, reset_mechanism="zero"),
        popsnn.Linear(7, 4),
        popsnn.Leaky(beta=0.9375, threshold=0.5),
    )


def lively_params(net, seed):
    return [{k: 2.5 * v for k, v in p.items()} for p in net.init_params(seed, np.float64)]


def snntorch_outputs(model, x):
    """Output spikes and membranes [T, B, C] of an snnTorch Sequential, with autograd."""
    for m in model.modules():
        if hasattr(m, "reset_mem"):
            m.reset_mem()
    dtype = next(model.parameters()).dtype
    spikes, membranes = [], []
    for t in range(x.shape[0]):
        h = x[t]
        for m in model.children():
            out = m(h.to(dtype))
            h = out[0] if isinstance(out, tuple) else out
        spikes.append(out[0].to(dtype))  # snnTorch emits float32 spikes
        membranes.append(out[-1])
    return torch.stack(spikes), torch.stack(membranes)


def torch_loss(spikes, membranes, y):
    """Any PyTorch loss of spikes and membranes: cross-entropy of counts plus a membrane term."""
    return torch.nn.functional.cross_entropy(spikes.sum(0), y) + 0.1 * (membranes**2).mean()


def pair(seed=0):
    """The same upstream layer + spiking net, once with popsnn.torch, once with snnTorch."""
    net = mixed_net()
    params = lively_params(net, seed)
    torch.manual_seed(seed)
    upstream = torch.nn.Linear(5, 6, dtype=torch.float64)
    ours = torch.nn.ModuleDict(
        {"up": upstream, "snn": ptorch.SpikingNetwork(net, params, dtype=torch.float64)}
    )
    theirs = torch.nn.ModuleDict(
        {"up": torch.nn.Linear(5, 6, dtype=torch.float64), "snn": interop.to_snntorch(net, params)}
    )
    theirs["up"].load_state_dict(upstream.state_dict())
    return net, ours, theirs


def data(seed=0, T=12, B=6):
    rng = np.random.default_rng(seed)
    x = torch.tensor(rng.random((T, B, 5)) * 2, dtype=torch.float64)
    y = torch.tensor(rng.integers(0, 4, B))
    return x, y


def test_gradients_to_upstream_layers_and_own_parameters_match_snntorch():
    net, ours, theirs = pair()
    x, y = data()
    spikes, membranes = ours["snn"](ours["up"](x))
    spikes_t, membranes_t = snntorch_outputs(theirs["snn"], theirs["up"](x))
    assert spikes.sum() > 10 and 0 < spikes.mean() < 1
    torch.testing.assert_close(spikes, spikes_t, rtol=0, atol=0)
    torch.testing.assert_close(membranes, membranes_t, rtol=1e-12, atol=1e-12)
    torch_loss(spikes, membranes, y).backward()
    torch_loss(spikes_t, membranes_t, y).backward()
    # Upstream PyTorch layer: the gradient came through popsnn's input gradient.
    for name in ("weight", "bias"):
        torch.testing.assert_close(
            getattr(ours["up"], name).grad, getattr(theirs["up"], name).grad, rtol=2e-6, atol=1e-9
        )
    # popsnn's own parameters against the snnTorch model's nn.Linear layers 0, 2, 4, 6.
    for l, layer in enumerate(ours["snn"].layers):
        for key, value in layer.named_parameters():
            expect = getattr(theirs["snn"][2 * l], key).grad
            torch.testing.assert_close(value.grad, expect, rtol=2e-6, atol=1e-9)


def test_torch_optimiser_and_scheduler_train_it_like_snntorch():
    net, ours, theirs = pair(seed=1)
    opts = [torch.optim.Adam(m.parameters(), lr=1e-2) for m in (ours, theirs)]
    scheds = [torch.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.5) for o in opts]
    for step in range(4):
        x, y = data(seed=step)
        for m, opt, sched, run in (
            (ours, opts[0], scheds[0], lambda m, x: m["snn"](m["up"](x))),
            (theirs, opts[1], scheds[1], lambda m, x: snntorch_outputs(m["snn"], m["up"](x))),
        ):
            opt.zero_grad()
            torch_loss(*run(m, x), y).backward()
            opt.step()
            sched.step()
    _, theirs_params = interop.from_snntorch(theirs["snn"], dtype=np.float64)
    for got, expect in zip(ours["snn"].get_params(), theirs_params):
        for key in expect:
            np.testing.assert_allclose(got[key], expect[key], rtol=1e-5, atol=1e-7)
    start = lively_params(net, 1)
    assert not np.allclose(ours["snn"].get_params()[0]["weight"], start[0]["weight"])


def test_popsnn_loss_on_the_reference_gives_the_references_gradients():
    net = mixed_net()
    params = lively_params(net, 2)
    module = ptorch.SpikingNetwork(net, params, num_steps=9, loss="ce_count", dtype=torch.float64)
    x = torch.tensor(np.random.default_rng(0).random((6, 6)) * 2, requires_grad=True)
    y = torch.tensor([0, 1, 2, 3, 0, 1])
    loss = module.loss(x, y)
    (2 * loss).backward()
    value, grads, _ = reference.loss_and_grad(
        net, params, x.detach().numpy(), y.numpy(), "ce_count", 9
    )
    assert loss.item() == pytest.approx(value, rel=1e-12)
    for layer, expect in zip(module.layers, grads):
        for key, p in layer.named_parameters():
            np.testing.assert_allclose(p.grad.numpy(), 2 * expect[key], rtol=1e-10, atol=1e-13)
    assert x.grad is not None and x.grad.abs().sum() > 0


def test_engine_device_loss_matches_the_reference_and_refuses_input_gradients():
    pytest.importorskip("popsnn._native")
    net = popsnn.Sequential(
        popsnn.Linear(6, 12), popsnn.Leaky(beta=0.8), popsnn.Linear(12, 4), popsnn.Leaky(beta=0.9)
    )
    params = [{k: 2.5 * v for k, v in p.items()} for p in net.init_params(3)]
    module = ptorch.SpikingNetwork(net, params, num_steps=8, device="cpu", loss="ce_count")
    x = torch.rand(5, 6, generator=torch.Generator().manual_seed(0)) * 2
    y = torch.tensor([0, 1, 2, 3, 0])
    opt = torch.optim.SGD(module.parameters(), lr=0.1)
    for _ in range(2):  # weights updated by torch reach the device
        opt.zero_grad()
        loss = module.loss(x, y)
        loss.backward()
        value, grads, _ = reference.loss_and_grad(
            net, module.get_params(), x.numpy(), y.numpy(), "ce_count", 8
        )
        assert loss.item() == pytest.approx(value, rel=1e-5)
        for layer, expect in zip(module.layers, grads):
            for key, p in layer.named_parameters():
                np.testing.assert_allclose(p.grad.numpy(), expect[key], rtol=1e-4, atol=1e-6)
        opt.step()
    with torch.no_grad():
        spikes, _ = module(x)
    np.testing.assert_array_equal(
        spikes.numpy(), reference.forward(net, module.get_params(), x.numpy(), 8).spikes[-1]
    )
    with pytest.raises(ValueError, match="computes no gradient for the input"):
        module.loss(x.clone().requires_grad_(), y)
    with pytest.raises(ValueError, match="forward\\(\\) is inference"):
        module(x)


def test_bad_inputs_are_one_clear_error():
    module = ptorch.SpikingNetwork(mixed_net())
    with pytest.raises(ValueError, match=r"expected \[T, B, 6\] or \[B, 6\]"):
        module(torch.zeros(3, 4, 5))
    with pytest.raises(ValueError, match="num_steps=T"):
        module(torch.zeros(4, 6))
    with pytest.raises(ValueError, match="needs a popsnn loss"):
        module.loss(torch.zeros(2, 4, 6), torch.zeros(4, dtype=torch.long))
    with pytest.raises(TypeError, match="computes in float32"):
        ptorch.SpikingNetwork(mixed_net(), device="cpu", dtype=torch.float64)
    with pytest.raises(TypeError, match="x must hold real numbers, got torch.complex64"):
        module(torch.zeros(3, 4, 6, dtype=torch.complex64))
    for bad in (0, "10", 2.5):
        with pytest.raises(ValueError, match="num_steps must be a positive integer"):
            ptorch.SpikingNetwork(mixed_net(), num_steps=bad)
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        ptorch.SpikingNetwork(mixed_net(), batch_size=-1)
    # Labels that are not whole class numbers are refused, not truncated.
    with_loss = ptorch.SpikingNetwork(mixed_net(), num_steps=3, loss="ce_count")
    with pytest.raises(TypeError, match="targets must be integer class labels, got dtype float32"):
        with_loss.loss(torch.zeros(4, 6), torch.tensor([0.0, 1.0, 2.0, 0.5]))
    with pytest.raises(ValueError, match=r"targets must lie in \[0, 4\), got label 9"):
        with_loss.loss(torch.zeros(4, 6), torch.tensor([0, 1, 2, 9]))


def test_engine_device_says_how_to_pass_a_batch_larger_than_it_was_compiled_for():
    pytest.importorskip("popsnn._native")
    net = popsnn.Sequential(popsnn.Linear(6, 8), popsnn.Leaky(beta=0.8))
    module = ptorch.SpikingNetwork(net, num_steps=4, device="cpu")
    with torch.no_grad():
        assert module(torch.rand(5, 6))[0].shape == (4, 5, 8)  # compiled for 5 samples
        assert module(torch.rand(3, 6))[0].shape == (4, 3, 8)  # fewer: fine
        with pytest.raises(ValueError, match=r"SpikingNetwork\(\.\.\., batch_size=7\)"):
            module(torch.rand(7, 6))


def test_rleaky_input_and_weight_gradients_match_snntorch_in_float32():
    net = popsnn.Sequential(
        popsnn.Linear(6, 8),
        popsnn.RLeaky(beta=0.75),
        popsnn.Linear(8, 5),
        popsnn.RLeaky(beta=0.875, all_to_all=False),
    )
    params = [{k: (2.5 * v).astype(np.float32) for k, v in p.items()} for p in net.init_params(4)]
    ours = ptorch.SpikingNetwork(net, params)
    theirs = interop.to_snntorch(net, params)
    x = torch.rand(10, 3, 6, generator=torch.Generator().manual_seed(1)) * 2
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    y = torch.tensor([0, 3, 4])
    spikes, membranes = ours(x1)
    spikes_t, membranes_t = snntorch_outputs(theirs, x2)
    assert spikes.sum() > 10
    torch.testing.assert_close(spikes, spikes_t.float(), rtol=0, atol=0)
    torch_loss(spikes, membranes, y).backward()
    torch_loss(spikes_t.float(), membranes_t.float(), y).backward()
    torch.testing.assert_close(x1.grad, x2.grad, rtol=1e-4, atol=1e-6)
    for l, layer in enumerate(ours.layers):
        torch.testing.assert_close(
            layer.weight.grad, theirs[2 * l].weight.grad, rtol=1e-4, atol=1e-6
        )
