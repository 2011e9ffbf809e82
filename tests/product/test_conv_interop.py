"""Convolutional networks through interop: snnTorch both ways (an snnTorch CSNN written as
snnTorch's tutorial writes it, and popsnn's own), NIR both ways (Conv2d, AvgPool2d /
SumPool2d, Flatten), checkpoints, and the engines' one-line refusal."""

from __future__ import annotations

import numpy as np
import pytest

import popsnn
from popsnn import checkpoint, interop, reference
from popsnn.interop import InteropError

torch = pytest.importorskip("torch", reason="interop needs torch ('.[crosscheck]')")
snn = pytest.importorskip("snntorch", reason="interop needs snntorch")


def csnn_popsnn(pool=popsnn.MaxPool2d):
    return popsnn.Sequential(
        popsnn.Conv2d(1, 4, 3, padding=1),
        pool(2),
        popsnn.Leaky(beta=0.5),
        popsnn.Conv2d(4, 6, 3, stride=2),
        popsnn.Synaptic(alpha=0.625, beta=0.75),  # exact in float32, as snnTorch keeps them
        popsnn.Flatten(),
        popsnn.Linear(6 * 3 * 3, 5),
        popsnn.Leaky(beta=0.875),
        input_shape=(1, 14, 14),
    )


def _spikes_input(seed=0, steps=6, batch=3):
    return (np.random.default_rng(seed).random((steps, batch, 1, 14, 14)) < 0.4).astype(np.float32)


def test_snntorch_csnn_converts_and_runs_the_same():
    grad = snn.surrogate.fast_sigmoid(slope=25)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 12, 5),
        torch.nn.MaxPool2d(2),
        snn.Leaky(beta=0.5, spike_grad=grad, init_hidden=True),
        torch.nn.Conv2d(12, 64, 5),
        torch.nn.MaxPool2d(2),
        snn.Leaky(beta=0.5, spike_grad=grad, init_hidden=True),
        torch.nn.Flatten(),
        torch.nn.Linear(64 * 4 * 4, 10),
        snn.Leaky(beta=0.5, spike_grad=grad, init_hidden=True, output=True),
    )
    torch.manual_seed(0)
    with torch.no_grad():  # stronger weights than the init, so that the readout spikes
        for m in model:
            if hasattr(m, "weight"):
                m.weight.mul_(4.0)
    net, params = interop.from_snntorch(model, input_shape=(1, 28, 28))
    assert [s.out_shape for s in net.stages] == [(12, 12, 12), (64, 4, 4), (10,)]
    np.testing.assert_array_equal(params[1]["weight"], model[3].weight.detach().numpy())
    x = np.random.default_rng(1).random((8, 2, 1, 28, 28)).astype(np.float32)
    theirs = interop.run_snntorch(model, x, input_shape=(1, 28, 28))
    ours = reference.forward(net, params, x).spikes[-1]
    assert theirs.shape == ours.shape == (8, 2, 10)
    # float32 summation order differs between torch's convolution and NumPy's: a membrane
    # within rounding of the threshold may flip one spike; require agreement to that.
    assert np.mean(theirs != ours) < 0.01 and ours.any()


def test_popsnn_csnn_to_snntorch_and_back_in_float64():
    net = csnn_popsnn()
    params = net.init_params(2, np.float64)
    model = interop.to_snntorch(net, params)
    kinds = [type(m).__name__ for m in model]
    assert kinds[:3] == ["Conv2d", "MaxPool2d", "Leaky"] and "Flatten" in kinds
    x = _spikes_input().astype(np.float64)
    np.testing.assert_array_equal(
        interop.run_snntorch(model, x, input_shape=(1, 14, 14)),
        reference.forward(net, params, x).spikes[-1],
    )
    back, back_params = interop.from_snntorch(model, dtype=np.float64, input_shape=(1, 14, 14))
    assert back.layers == net.layers and back.input_shape == net.input_shape
    for a, b in zip(params, back_params):
        assert a.keys() == b.keys()
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])


def test_unsupported_conv_options_are_named():
    with pytest.raises(InteropError, match=r"layer 1 \(MaxPool2d\): MaxPool2d: ceil_mode"):
        interop.from_snntorch(
            torch.nn.Sequential(
                torch.nn.Conv2d(1, 2, 3), torch.nn.MaxPool2d(2, ceil_mode=True), snn.Leaky(0.5)
            ),
            input_shape=(1, 8, 8),
        )
    with pytest.raises(InteropError, match="put popsnn.Flatten"):
        interop.from_snntorch(
            torch.nn.Sequential(
                torch.nn.Conv2d(1, 2, 3),
                snn.Leaky(0.5),
                torch.nn.Linear(72, 2),
                snn.Leaky(0.5),
            ),
            input_shape=(1, 8, 8),
        )


def test_checkpoint_round_trip_of_a_conv_net(tmp_path):
    net = csnn_popsnn()
    data = checkpoint.network_to_dict(net)
    assert data[0] == {"type": "Input", "shape": [1, 14, 14]}
    back = checkpoint.network_from_dict(data)
    assert back.layers == net.layers and back.input_shape == net.input_shape
    assert checkpoint.describe_network(net) == "1x14x14-4x7x7-6x3x3-5 (Leaky/Synaptic)"


def test_engines_refuse_what_their_conv_stages_do_not_run_in_one_line():
    net = csnn_popsnn()  # Synaptic neurons: the engine's conv stages take Leaky
    with pytest.raises(ValueError, match=r"Synaptic neurons .* use device='reference'$"):
        popsnn.Model(net, device="cpu")
    assert popsnn.Model(net, device="auto", batch_size=2, num_steps=3).device == "reference"


# ----------------------------------------------------------------------------- NIR


nir = pytest.importorskip("nir", reason="NIR interop needs nir ('.[nir]')")


def test_nir_round_trip_of_a_conv_net_is_exact():
    net = csnn_popsnn(pool=popsnn.AvgPool2d)
    params = net.init_params(3, np.float64)
    graph = popsnn.export_to_nir(net, params)
    kinds = [type(graph.nodes[str(i)]).__name__ for i in range(3)]
    assert kinds == ["Conv2d", "AvgPool2d", "LIF"]
    back, back_params = popsnn.import_from_nir(graph)
    assert back.layers == net.layers and back.input_shape == (1, 14, 14)
    for a, b in zip(params, back_params):
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])


def test_nir_sum_pool_is_read_as_an_average_with_the_factor_in_the_weights():
    net = csnn_popsnn(pool=popsnn.AvgPool2d)
    params = net.init_params(4, np.float64)
    graph = popsnn.export_to_nir(net, params)
    avg = graph.nodes["1"]
    graph.nodes["1"] = nir.SumPool2d(avg.kernel_size, avg.stride, avg.padding)
    back, back_params = popsnn.import_from_nir(graph)
    np.testing.assert_allclose(back_params[0]["weight"], 4 * params[0]["weight"])
    np.testing.assert_allclose(back_params[0]["bias"], 4 * params[0]["bias"])
    x = _spikes_input(5).astype(np.float64)
    first_step = reference.forward(back, back_params, x).membranes[0][0]  # U[0] = I[0]
    conv = torch.nn.functional.conv2d(
        torch.tensor(x[0]), torch.tensor(params[0]["weight"]), torch.tensor(params[0]["bias"]),
        padding=1,
    )  # fmt: skip
    sum_pool = torch.nn.functional.avg_pool2d(conv, 2, divisor_override=1)
    np.testing.assert_allclose(first_step, sum_pool.reshape(3, -1).numpy(), atol=1e-12)


def test_nir_refuses_max_pool_in_one_line():
    net = csnn_popsnn()
    with pytest.raises(popsnn.nir_interop.NIRError, match="NIR has no max-pooling node"):
        popsnn.export_to_nir(net, net.init_params(0))
