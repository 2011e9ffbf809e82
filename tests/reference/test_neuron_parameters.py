"""Per-neuron and learnable beta / threshold (learn_beta, learn_threshold), as snnTorch has
them: the layer's checks, training side by side with snnTorch in float64 (SGD, Adam, AdamW),
beta's clamp to [0, 1], interop carrying them both ways (and refusing what it cannot carry),
checkpoints, NIR, and the engine running them. The models' gradients against finite differences
and snnTorch run with the other models (MODELS in _reference_nets: leaky_learn, synaptic_learn,
rleaky_learn)."""

from __future__ import annotations

import numpy as np
import pytest
from _reference_nets import active_params, sequence_input, targets

import popsnn
from popsnn import checkpoint, interop, losses, optim, reference

torch = pytest.importorskip("torch", reason="needs torch (pip install '.[crosscheck]')")
snn = pytest.importorskip("snntorch", reason="needs snntorch (pip install '.[crosscheck]')")
import snntorch.functional as SF  # noqa: E402
import snntorch.functional.loss as snn_loss  # noqa: E402
import snntorch.surrogate as snn_surrogate  # noqa: E402

TOL = 1e-9


@pytest.fixture
def float64_torch(monkeypatch):
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    monkeypatch.setattr(snn_loss, "dtype", torch.float64)
    yield
    torch.set_default_dtype(before)


class _ATan64(snn_surrogate.ATan):
    """snnTorch's ATan with its spikes in the input's dtype (its forward returns float32)."""

    @staticmethod
    def forward(ctx, input_, alpha=2.0):
        return snn_surrogate.ATan.forward(ctx, input_, alpha).to(input_.dtype)


def _net(learn_beta=True, learn_threshold=True, per_neuron=True):
    n = 6
    beta = np.linspace(0.7, 0.9, n) if per_neuron else 0.8
    threshold = np.linspace(0.9, 1.1, n) if per_neuron else 1.0
    learn = dict(learn_beta=learn_beta, learn_threshold=learn_threshold)
    return popsnn.Sequential(
        popsnn.Linear(3, n),
        popsnn.Leaky(beta=beta, threshold=threshold, **learn),
        popsnn.Linear(n, 4),
        popsnn.Synaptic(alpha=0.6, beta=0.75, reset_mechanism="zero", **learn),
    )


# ------------------------------------------------------------------ the layer's checks


@pytest.mark.parametrize(
    "build, words",
    [
        (lambda: popsnn.Leaky(beta=0.9, inhibition=True), "inhibition=True"),
        (lambda: popsnn.Alpha(alpha=0.9, beta=0.8, inhibition=True), "inhibition=True"),
        (lambda: popsnn.Leaky(beta=np.array([0.5, 1.5])), "beta[1] must lie in [0, 1]"),
        (lambda: popsnn.Leaky(beta=np.ones((2, 2)) / 2), "one real value per neuron"),
        (lambda: popsnn.Leaky(beta=0.9, threshold=np.array([1.0, -1.0])), "threshold[1]"),
        (
            lambda: popsnn.Sequential(popsnn.Linear(2, 3), popsnn.Leaky(beta=np.array([0.5] * 2))),
            "has 2 beta values, its Linear has 3 neurons",
        ),
    ],
)
def test_bad_constants_are_one_clear_line(build, words):
    with pytest.raises(ValueError) as err:
        build()
    assert words in str(err.value) and "\n" not in str(err.value)


def test_learn_flags_must_be_booleans():
    with pytest.raises(TypeError, match="learn_beta must be True or False"):
        popsnn.Leaky(beta=0.9, learn_beta=1)


def test_learned_constants_are_parameters_of_their_shape():
    net = _net()
    params = net.init_params(0, dtype=np.float64)
    assert {k: v.shape for k, v in params[0].items() if k in ("beta", "threshold")} == {
        "beta": (6,),
        "threshold": (6,),
    }
    assert params[1]["beta"].shape == () and params[1]["threshold"].shape == ()
    np.testing.assert_array_equal(params[0]["beta"], np.linspace(0.7, 0.9, 6))
    # Weights are drawn as without the flags: a learnable beta does not reshuffle them.
    plain = _net(False, False).init_params(0, dtype=np.float64)
    np.testing.assert_array_equal(params[0]["weight"], plain[0]["weight"])


def test_per_neuron_constants_match_one_layer_per_neuron():
    """Neuron j of a layer with per-neuron beta / threshold is the neuron of a layer built
    with that neuron's scalars."""
    net = _net(False, False)
    params = active_params(net, 1)
    x = sequence_input(3, steps=10)
    rec = reference.forward(net, params, x)
    lin, leaky = net.pairs[0]
    for j in (0, 3, 5):
        one = popsnn.Sequential(
            popsnn.Linear(3, 1), popsnn.Leaky(beta=leaky.beta[j], threshold=leaky.threshold[j])
        )
        p = [{"weight": params[0]["weight"][j : j + 1], "bias": params[0]["bias"][j : j + 1]}]
        r1 = reference.forward(one, p, x)
        # W x sums in another order for one row than for six: equal to rounding.
        np.testing.assert_allclose(r1.membranes[0][..., 0], rec.membranes[0][..., j], atol=1e-14)
        np.testing.assert_array_equal(r1.spikes[0][..., 0], rec.spikes[0][..., j])
    assert 0 < rec.spikes[0].mean() < 1


# ------------------------------------------------------------ beta's clamp to [0, 1]


def test_beta_is_clamped_where_it_is_used_and_its_gradient_stops_outside():
    """snnTorch multiplies by beta.clamp(0, 1): a trained beta of 1.2 acts as 1, -0.1 as 0,
    and torch's clamp passes no gradient outside [0, 1]."""
    net = _net(learn_threshold=False)
    params = active_params(net, 2)
    params[0]["beta"][:2] = (1.2, -0.1)
    x, y = sequence_input(4, steps=8), targets(5)
    _, grads, rec = reference.loss_and_grad(net, params, x, y, losses.ce_count_loss())
    clipped = [dict(p) for p in params]
    clipped[0]["beta"] = np.clip(params[0]["beta"], 0, 1)
    again = reference.forward(net, clipped, x)
    np.testing.assert_array_equal(again.membranes[0], rec.membranes[0])
    assert grads[0]["beta"][0] == 0 and grads[0]["beta"][1] == 0
    assert np.all(grads[0]["beta"][2:] != 0)


# --------------------------------------------------- training side by side with snnTorch


def _torch_model(net, params):
    """snnTorch's model of net in float64, with spikes kept in float64 (see _ATan64); returns
    (model, a function that puts snnTorch's own surrogates back)."""
    model = interop.to_snntorch(net, params)
    cells = [m for m in model if hasattr(m, "spike_grad")]
    originals = [m.spike_grad for m in cells]
    for m in cells:
        m.spike_grad = lambda x: _ATan64.apply(x, 2.0)

    def restore():
        for m, fn in zip(cells, originals):
            m.spike_grad = fn

    return model, restore


def _torch_step(model, x, y, opt):
    for m in model:
        if hasattr(m, "reset_mem"):
            m.reset_mem()
    opt.zero_grad()
    out = []
    for t in range(x.shape[0]):
        h = torch.tensor(x[t])
        for m in model:
            h = m(h)
            h = h[0] if isinstance(h, tuple) else h
        out.append(h)
    loss = SF.ce_count_loss()(torch.stack(out), torch.as_tensor(y))
    loss.backward()
    opt.step()
    return float(loss.detach())


OPTIMISERS = {
    "sgd": (lambda: optim.SGD(lr=0.5, momentum=0.9), lambda p: torch.optim.SGD(p, 0.5, 0.9)),
    "adam": (lambda: optim.Adam(lr=0.05), lambda p: torch.optim.Adam(p, lr=0.05)),
    "adamw": (
        lambda: optim.AdamW(lr=0.05, weight_decay=0.1),
        lambda p: torch.optim.AdamW(p, lr=0.05, weight_decay=0.1),
    ),
}


@pytest.mark.parametrize("per_neuron", [True, False], ids=["per-neuron", "per-layer"])
@pytest.mark.parametrize("name", sorted(OPTIMISERS))
def test_training_learns_beta_and_threshold_as_snntorch(name, per_neuron, float64_torch):
    net = _net(per_neuron=per_neuron)
    params = active_params(net, 0)
    model, restore = _torch_model(net, params)
    ours, theirs = OPTIMISERS[name][0](), OPTIMISERS[name][1](model.parameters())
    loss = losses.ce_count_loss()
    start = [{k: v.copy() for k, v in p.items()} for p in params]
    for step in range(4):
        x, y = sequence_input(30 + step, steps=8), targets(40 + step)
        value, grads, _ = reference.loss_and_grad(net, params, x, y, loss)
        ours.step(params, grads)
        assert value == pytest.approx(_torch_step(model, x, y, theirs), abs=TOL)
    restore()
    _, back = interop.from_snntorch(model)
    for l, (p, q) in enumerate(zip(params, back)):
        assert sorted(p) == sorted(q)
        for key in p:
            np.testing.assert_allclose(p[key], q[key], rtol=0, atol=1e-9, err_msg=f"{l} {key}")
    for key in ("beta", "threshold"):  # they did train
        assert not np.allclose(params[0][key], start[0][key])


# ------------------------------------------------------------------------------ interop


def test_interop_carries_learned_and_per_neuron_constants_both_ways():
    net = _net()
    params = active_params(net, 3)
    params[0]["beta"][0] = 1.3  # trained past the clamp: carried as is
    model = interop.to_snntorch(net, params)
    leaky, synaptic = model[1], model[3]
    assert isinstance(leaky.beta, torch.nn.Parameter) and leaky.beta.shape == (6,)
    assert isinstance(synaptic.threshold, torch.nn.Parameter) and synaptic.threshold.dim() == 0
    back, back_params = interop.from_snntorch(model)
    assert back_params[0]["beta"].dtype == np.float64  # the model's dtype
    assert [n.learned() for _, n in back.pairs] == [("beta", "threshold")] * 2
    assert back.pairs[0][1].beta[0] == 1.0  # the layer's start value is the clamped one
    for p, q in zip(params, back_params):
        for key in p:
            np.testing.assert_array_equal(p[key], q[key])
    x = sequence_input(9, steps=8)
    np.testing.assert_array_equal(
        interop.run_snntorch(model, x), reference.forward(net, params, x).spikes[-1]
    )


def test_a_float64_snntorch_model_converts_in_float64():
    model = torch.nn.Sequential(
        torch.nn.Linear(3, 4, dtype=torch.float64),
        snn.Leaky(beta=torch.tensor([0.5, 0.6, 0.7, 0.8], dtype=torch.float64), learn_beta=True),
    ).double()
    net, params = interop.from_snntorch(model)
    assert all(a.dtype == np.float64 for a in params[0].values())
    assert net.pairs[0][1].beta == (0.5, 0.6, 0.7, 0.8)
    np.testing.assert_array_equal(params[0]["beta"], [0.5, 0.6, 0.7, 0.8])


def test_equal_per_neuron_values_are_one_value_unless_learned():
    """snnTorch's NIR export writes per-neuron tensors of equal values: one value for popsnn.
    A learned per-neuron tensor stays per neuron even when its values start equal."""
    fixed = snn.Leaky(beta=torch.full((4,), 0.5), threshold=torch.full((4,), 1.5))
    learned = snn.Leaky(beta=torch.full((4,), 0.5), learn_beta=True)
    (net_fixed, _), (net_learned, p_learned) = (
        interop.from_snntorch(torch.nn.Sequential(torch.nn.Linear(3, 4), cell))
        for cell in (fixed, learned)
    )
    assert (net_fixed.pairs[0][1].beta, net_fixed.pairs[0][1].threshold) == (0.5, 1.5)
    assert net_learned.pairs[0][1].beta == (0.5,) * 4 and p_learned[0]["beta"].shape == (4,)


@pytest.mark.parametrize(
    "cell, words",
    [
        (lambda: snn.Synaptic(alpha=0.5, beta=0.9, learn_alpha=True), "learn_alpha=True"),
        (lambda: snn.Lapicque(beta=0.9, learn_beta=True), "learn_beta=True on Lapicque"),
        (lambda: snn.Leaky(beta=0.9, inhibition=True), "inhibition=True"),
        (
            lambda: snn.Leaky(beta=0.9, learn_graded_spikes_factor=True),
            "trainable parameter 'graded_spikes_factor'",
        ),
        (lambda: snn.Leaky(beta=torch.arange(8.0).reshape(2, 4) / 10), "beta has shape (2, 4)"),
    ],
)
def test_interop_refuses_what_it_cannot_carry_in_one_line(cell, words):
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), cell())
    with pytest.raises(interop.InteropError) as err:
        interop.from_snntorch(model)
    assert words in str(err.value) and "\n" not in str(err.value)


# ------------------------------------------------------------ checkpoints, NIR, engine


def test_checkpoint_round_trip_keeps_flags_vectors_and_trained_values(tmp_path):
    net = _net()
    params = active_params(net, 4)
    path = checkpoint.save(tmp_path / "learned.npz", net=net, params=params)
    ckpt = checkpoint.load(path, net)
    again = checkpoint.network_from_dict(checkpoint.network_to_dict(net))
    assert [n for _, n in again.pairs] == [n for _, n in net.pairs]
    for p, q in zip(params, ckpt["params"]):
        for key in p:
            np.testing.assert_array_equal(p[key], q[key])


def test_training_resumes_from_a_checkpoint_with_learned_constants(tmp_path):
    """A Model on the reference trains beta and threshold; its weights and Adam state (0-d
    moments for the per-layer constants) go through a checkpoint and training resumes
    exactly."""
    net = _net()
    kw = dict(loss="ce_count", device="reference", num_steps=8, batch_size=3)
    model = popsnn.Model(net, optimizer=optim.Adam(lr=0.05), params=active_params(net, 5), **kw)
    batches = [(sequence_input(50 + i, steps=8), targets(60 + i)) for i in range(3)]
    for x, y in batches[:2]:
        model.train_step(x, y)
    path = checkpoint.save(
        tmp_path / "ckpt.npz",
        net=net,
        params=model.get_params(),
        optimizer_state=model.optimizer_state(),
    )
    ckpt = checkpoint.load(path, net)
    again = popsnn.Model(
        ckpt["network"], optimizer=optim.Adam(lr=0.05), params=ckpt["params"], **kw
    )
    again.load_optimizer_state(ckpt["optimizer_state"])
    for m in (model, again):
        m.train_step(*batches[2])
    for p, q in zip(model.get_params(), again.get_params()):
        for key in p:
            np.testing.assert_array_equal(p[key], q[key])
    assert model.get_params()[1]["beta"].shape == ()


@pytest.mark.parametrize("flags", [(True, False, False), (False, False, True)])
def test_nir_export_refuses_learned_and_per_neuron_constants(flags):
    pytest.importorskip("nir", reason="needs nir (pip install '.[nir]')")
    net = _net(*flags)
    with pytest.raises(popsnn.nir_interop.NIRError) as err:
        popsnn.export_to_nir(net, net.init_params())
    assert "has no NIR export in popsnn yet" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    "flags", [(True, False, False), (False, True, False), (False, False, True)]
)
def test_the_engine_runs_them_as_the_reference(flags):
    """The engine devices run per-neuron and learned constants (tests/engine/
    test_engine_neuron_constants.py has the matrix): the same loss and gradients."""
    if "cpu" not in popsnn.model.available_devices():
        pytest.skip("the engine is not built")
    net = _net(*flags)
    x = np.random.default_rng(0).uniform(0, 2, (2, 3))
    y = np.array([1, 3])
    results = []
    for device in ("cpu", "reference"):
        model = popsnn.Model(net, device=device, num_steps=4, batch_size=2, seed=1)
        results.append(model.loss_and_grad(x, y))
    (value, grads), (ref_value, ref_grads) = results
    assert value == pytest.approx(ref_value, rel=1e-5)
    for g, r in zip(grads, ref_grads):
        assert sorted(g) == sorted(r)
        for key in r:
            np.testing.assert_allclose(g[key], r[key], rtol=1e-4, atol=1e-5)


def test_device_auto_runs_them_on_the_engine():
    expected = "cpu" if "cpu" in popsnn.model.available_devices() else "reference"
    assert popsnn.Model(_net(), device="auto", num_steps=4, batch_size=2).device == expected
