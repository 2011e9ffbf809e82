"""snnTorch interop: nn.Sequential of nn.Linear + snn.Leaky / Synaptic / RLeaky <-> popsnn."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
snn = pytest.importorskip("snntorch")

import popsnn  # noqa: E402
from popsnn import interop, reference, surrogate  # noqa: E402
from popsnn.interop import InteropError  # noqa: E402


def mixed_torch_model():
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Flatten(),
        torch.nn.Linear(20, 16),
        snn.Leaky(beta=0.8, init_hidden=True, spike_grad=snn.surrogate.fast_sigmoid(slope=10)),
        torch.nn.Linear(16, 12),
        snn.Synaptic(alpha=0.7, beta=0.9, init_hidden=True, reset_mechanism="zero"),
        torch.nn.Linear(12, 8),
        snn.RLeaky(beta=0.85, linear_features=8, init_hidden=True),
        torch.nn.Linear(8, 5),
        snn.RLeaky(beta=0.9, all_to_all=False, V=0.5, init_hidden=True, output=True),
    )
    # Weights on a 1/32 grid: the sums are exact in float32 whatever order torch and NumPy
    # add in, so the spikes must agree bit for bit.
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.round(p * 64) / 32)
    return model


def spikes_in(seed=0, shape=(30, 4, 20)):
    return (np.random.default_rng(seed).random(shape) < 0.4).astype(np.float32)


def test_snntorch_model_and_converted_popsnn_net_give_the_same_spikes():
    model = mixed_torch_model()
    net, params = interop.from_snntorch(model)
    kinds = [type(n).__name__ for _, n in net.pairs]
    assert kinds == ["Leaky", "Synaptic", "RLeaky", "RLeaky"]
    assert net.pairs[0][1].surrogate == surrogate.fast_sigmoid(10)
    assert net.pairs[1][1].surrogate == surrogate.atan(2.0)  # snnTorch's default
    assert net.pairs[1][1].reset_mechanism == "zero"
    np.testing.assert_array_equal(
        params[2]["recurrent_weight"], model[6].recurrent.weight.detach().numpy()
    )
    # V = 0.5 was put on the grid too (0.5 * 64 / 32 = 1): one value, copied to every neuron.
    np.testing.assert_array_equal(params[3]["recurrent_weight"], np.full(5, 1.0, np.float32))
    x = spikes_in()
    ours = reference.forward(net, params, x).spikes[-1]
    theirs = interop.run_snntorch(model, x)
    assert theirs.sum() > 10  # the comparison is not between two silent networks
    np.testing.assert_array_equal(ours, theirs)


def test_popsnn_to_snntorch_and_back():
    net = popsnn.Sequential(
        popsnn.Linear(6, 9),
        popsnn.Synaptic(alpha=0.5, beta=0.75),
        popsnn.Linear(9, 3, bias=False),
        popsnn.Leaky(beta=0.875, threshold=0.5, surrogate=surrogate.sigmoid(5.0)),
    )
    params = net.init_params(1)
    for p in params:
        for k in p:
            p[k] = np.round(p[k] * 64) / 32
    model = interop.to_snntorch(net, params)
    net2, params2 = interop.from_snntorch(model)
    assert repr(net2) == repr(net)
    for a, b in zip(params, params2):
        assert a.keys() == b.keys()
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])
    x = np.random.default_rng(2).random((4, 6)).astype(np.float32)  # direct current
    np.testing.assert_array_equal(
        interop.run_snntorch(model, x, num_steps=12),
        reference.forward(net, params, x, 12).spikes[-1],
    )


def test_unsupported_layers_are_named():
    with pytest.raises(InteropError, match=r"layer 1 \(ReLU\).*not supported"):
        interop.from_snntorch(torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU()))
    with pytest.raises(InteropError, match=r"needs input_shape.*from_snntorch\(model, input_shape"):
        interop.from_snntorch(torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), snn.Leaky(beta=0.9)))
    with pytest.raises(InteropError, match=r"layer 0 \(Conv2d\): Conv2d: groups=2 is not supp"):
        interop.from_snntorch(
            torch.nn.Sequential(torch.nn.Conv2d(2, 2, 3, groups=2), snn.Leaky(beta=0.9)),
            input_shape=(2, 8, 8),
        )
    with pytest.raises(InteropError, match=r"layer 1 \(Dropout\).*not supported.*nn.Conv2d"):
        interop.from_snntorch(torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Dropout()))
    with pytest.raises(InteropError, match=r"beta has shape \(3, 1\)"):
        interop.from_snntorch(
            torch.nn.Sequential(
                torch.nn.Linear(4, 3), snn.Leaky(beta=torch.tensor([[0.1], [0.2], [0.3]]))
            )
        )
    with pytest.raises(InteropError, match="reset_delay=False"):
        interop.from_snntorch(
            torch.nn.Sequential(torch.nn.Linear(4, 3), snn.Leaky(beta=0.9, reset_delay=False))
        )
    with pytest.raises(InteropError, match="expected a torch.nn.Sequential"):
        interop.from_snntorch(snn.Leaky(beta=0.9))


@pytest.mark.parametrize(
    "cell, flag",
    [
        (lambda: snn.Lapicque(beta=0.9, learn_beta=True), "learn_beta=True"),
        (lambda: snn.Synaptic(alpha=0.8, beta=0.9, learn_alpha=True), "learn_alpha=True"),
        (
            lambda: snn.RLeaky(beta=0.9, linear_features=3, learn_recurrent=False),
            "learn_recurrent=False",
        ),
        (
            lambda: snn.RLeaky(beta=0.9, all_to_all=False, V=0.5, learn_recurrent=False),
            "learn_recurrent=False",
        ),
    ],
)
def test_trainability_popsnn_cannot_keep_is_refused(cell, flag):
    """A learnable alpha (or beta where popsnn does not train it) or a frozen recurrence would
    silently change what trains after conversion: refused, naming the flag and the layer.
    Learnable beta and threshold convert (tests/reference/test_neuron_parameters.py)."""
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), cell())
    with pytest.raises(InteropError, match=rf"layer 1 .*{flag}"):
        interop.from_snntorch(model)


def test_default_trainability_converts():
    model = torch.nn.Sequential(
        torch.nn.Linear(4, 3),
        snn.RLeaky(beta=0.9, linear_features=3),
        torch.nn.Linear(3, 2),
        snn.RLeaky(beta=0.9, all_to_all=False, V=0.5),
    )
    net, _ = interop.from_snntorch(model)
    assert [type(layer).__name__ for layer in net.layers][1::2] == ["RLeaky", "RLeaky"]
