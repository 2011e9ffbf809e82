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
from popsnn import interop, reference, sparse, surrogate  # noqa: E402


def mixed_net():
    # Decays exact in float32, so the comparison does not hang on how either side rounds them.
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


def test_learned_beta_and_threshold_are_parameters_with_snntorchs_gradients():
    net = popsnn.Sequential(
        popsnn.Linear(6, 8),
        popsnn.Leaky(beta=np.linspace(0.7, 0.9, 8), learn_beta=True, learn_threshold=True),
        popsnn.Linear(8, 4),
        popsnn.Synaptic(alpha=0.625, beta=0.875, learn_beta=True, learn_threshold=True),
    )
    params = [
        {k: 2.5 * v if k in ("weight", "bias") else v for k, v in p.items()}
        for p in net.init_params(3, np.float64)
    ]
    ours = ptorch.SpikingNetwork(net, params, dtype=torch.float64)
    assert {"layers.0.beta", "layers.1.threshold"} <= set(ours.state_dict())
    theirs = interop.to_snntorch(net, params)
    x, y = data(seed=4)
    x = x[..., :1].repeat(1, 1, 6) * 1.5
    spikes, membranes = ours(x)
    spikes_t, membranes_t = snntorch_outputs(theirs, x)
    assert 0 < spikes.mean() < 1
    torch.testing.assert_close(spikes, spikes_t, rtol=0, atol=0)
    torch_loss(spikes, membranes, y).backward()
    torch_loss(spikes_t, membranes_t, y).backward()
    for l, layer in enumerate(ours.layers):
        for key in ("beta", "threshold"):
            expect = getattr(theirs[2 * l + 1], key).grad
            assert getattr(layer, key).grad.abs().sum() > 0
            torch.testing.assert_close(getattr(layer, key).grad, expect, rtol=2e-6, atol=1e-9)


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


def test_engine_device_loss_and_input_gradients_match_the_reference():
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
    for x_in in (x, (torch.rand(8, 5, 6, generator=torch.Generator().manual_seed(1)) < 0.4)):
        x_in = x_in.float().requires_grad_()
        module.loss(x_in, y).backward()
        numpy_x = x_in.detach().numpy()
        rec = reference.forward(net, module.get_params(), numpy_x, 8 if x_in.dim() == 2 else None)
        d_s, d_u = popsnn.losses.get("ce_count").backward(rec.spikes[-1], rec.membranes[-1], y)
        _, d_x = reference.backward(net, module.get_params(), rec, d_s, d_u, input_grad=True)
        assert np.abs(d_x).max() > 0
        np.testing.assert_allclose(x_in.grad.numpy(), d_x, rtol=1e-4, atol=1e-4 * np.abs(d_x).max())
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


def test_the_module_computes_in_its_parameters_dtype_after_double_or_half():
    net = mixed_net()
    # Weights exact in float32, so that float32 made, then .double(), is the same network.
    params = [
        {k: np.float32(v).astype(np.float64) for k, v in p.items()} for p in lively_params(net, 5)
    ]
    x = torch.tensor(np.random.default_rng(5).random((7, 3, 6)) * 2)
    built = ptorch.SpikingNetwork(net, params, dtype=torch.float64)
    converted = ptorch.SpikingNetwork(net, params).double()  # float32 made, then .double()
    for got, expect in zip(converted(x), built(x)):
        assert got.dtype == torch.float64
        torch.testing.assert_close(got, expect, rtol=0, atol=0)
    with pytest.raises(TypeError, match=r"parameters are torch.float16; use .float\(\)"):
        ptorch.SpikingNetwork(net, params).half()(x)


def test_engine_device_says_how_to_pass_a_batch_larger_than_it_was_compiled_for():
    pytest.importorskip("popsnn._native")
    net = popsnn.Sequential(popsnn.Linear(6, 8), popsnn.Leaky(beta=0.8))
    module = ptorch.SpikingNetwork(net, num_steps=4, device="cpu")
    with torch.no_grad():
        assert module(torch.rand(5, 6))[0].shape == (4, 5, 8)  # compiled for 5 samples
        assert module(torch.rand(3, 6))[0].shape == (4, 3, 8)  # fewer: fine
        with pytest.raises(ValueError, match=r"SpikingNetwork\(\.\.\., batch_size=7\)"):
            module(torch.rand(7, 6))
        assert module(torch.rand(4, 2, 6))[0].shape == (4, 2, 8)  # [T, B, N], T as compiled
        with pytest.raises(ValueError, match=r"x has 9 time steps.*num_steps=9\)"):
            module(torch.rand(9, 2, 6))


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


def engine_pair_net(rule=None):
    # Decays exact in float32 (snnTorch keeps them as float32 buffers).
    return popsnn.Sequential(
        popsnn.Linear(6, 24),
        popsnn.Leaky(beta=0.8125, sparse=rule),
        popsnn.Linear(24, 16),
        popsnn.Synaptic(alpha=0.625, beta=0.875, reset_mechanism="zero", sparse=rule),
        popsnn.Linear(16, 4),
        popsnn.Leaky(beta=0.75, sparse=rule),
    )


def upstream_linear(dtype):
    """The same nn.Linear(5, 6) every time: float32 weights, in `dtype`."""
    torch.manual_seed(7)
    return torch.nn.Linear(5, 6).to(dtype)


def upstream_grads(device, net, params, x, y, dtype=torch.float32, **options):
    """Upstream nn.Linear(5, 6) -> SpikingNetwork with the ce_count loss: the upstream
    layer's gradients and the loss."""
    up = upstream_linear(dtype)
    snn_module = ptorch.SpikingNetwork(
        net, params, num_steps=10, device=device, loss="ce_count", dtype=dtype, **options
    )
    loss = snn_module.loss(up(x.to(dtype)), y)
    loss.backward()
    if "memory_bytes_per_tile" in options:
        assert snn_module._engine.profile()["sample_chunks"] > 1
    return loss.item(), up.weight.grad.double(), up.bias.grad.double()


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "per-step"])
@pytest.mark.parametrize("sparse_rule", [None, sparse.window(0.5)], ids=["dense", "window"])
def test_engine_device_passes_the_input_gradient_to_upstream_layers(sparse_rule, direct):
    """Upstream nn.Linear gradients through device "cpu" equal those through the reference
    (float32, the same rule) and, without a rule, snnTorch's in float64 (ce_count is the
    cross-entropy of the spike counts), to float32 tolerance."""
    pytest.importorskip("popsnn._native")
    net = engine_pair_net(sparse_rule)
    params = [{k: (2.5 * v).astype(np.float32) for k, v in p.items()} for p in net.init_params(6)]
    rng = np.random.default_rng(6)
    x = torch.tensor(rng.random((9, 5) if direct else (10, 9, 5)) * 2, dtype=torch.float32)
    y = torch.tensor(rng.integers(0, 4, 9))
    value, d_w, d_b = upstream_grads("cpu", net, params, x, y)
    ref_value, ref_w, ref_b = upstream_grads("reference", net, params, x, y)
    assert d_w.abs().sum() > 0
    assert value == pytest.approx(ref_value, rel=2e-5)
    torch.testing.assert_close(d_w, ref_w, rtol=1e-4, atol=1e-4 * ref_w.abs().max().item())
    torch.testing.assert_close(d_b, ref_b, rtol=1e-4, atol=1e-4 * ref_b.abs().max().item())
    # The batch in chunks of samples on an ipu-model too small to hold it at once.
    chunked = dict(num_ipus=1, tiles_per_ipu=4, memory_bytes_per_tile=24 * 1024)
    _, d_w_chunked, _ = upstream_grads("ipu-model", net, params, x, y, **chunked)
    torch.testing.assert_close(d_w_chunked, ref_w, rtol=1e-4, atol=1e-4 * ref_w.abs().max().item())
    if sparse_rule is not None:
        return
    # snnTorch in float64 on the same weights (the current up(x) every step) against the
    # reference in float64; and the engine's against snnTorch's to float32 tolerance (the
    # seeds put no membrane within float32 rounding of the threshold).
    params64 = [{k: v.astype(np.float64) for k, v in p.items()} for p in params]
    value64, ref64_w, ref64_b = upstream_grads("reference", net, params64, x, y, torch.float64)
    up = upstream_linear(torch.float64)
    current = up(x.double())
    if direct:
        current = current.expand(10, -1, -1)
    spikes, _ = snntorch_outputs(interop.to_snntorch(net, params64), current)
    loss = torch.nn.functional.cross_entropy(spikes.sum(0), y)
    loss.backward()
    assert value64 == pytest.approx(loss.item(), rel=1e-12)
    torch.testing.assert_close(ref64_w, up.weight.grad, rtol=2e-6, atol=1e-9)
    torch.testing.assert_close(ref64_b, up.bias.grad, rtol=2e-6, atol=1e-9)
    assert value == pytest.approx(loss.item(), rel=1e-5)
    torch.testing.assert_close(d_w, up.weight.grad, rtol=1e-4, atol=1e-4 * ref_w.abs().max().item())
