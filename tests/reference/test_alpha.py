"""snnTorch's Alpha neuron in popsnn: its checks and defaults as snnTorch's, the interop both
ways, a checkpoint round trip, NIR's one-line refusal and the engine running it. The reference
against snnTorch (float64, every reset, surrogate and loss) and its gradient against finite
differences run with the other models (MODELS in _reference_nets)."""

from __future__ import annotations

import numpy as np
import pytest
from _reference_nets import active_params, sequence_input

import popsnn
from popsnn import checkpoint, interop, reference

torch = pytest.importorskip("torch", reason="needs torch (pip install '.[crosscheck]')")
snn = pytest.importorskip("snntorch", reason="needs snntorch (pip install '.[crosscheck]')")


def _net():
    return popsnn.Sequential(
        popsnn.Linear(3, 5),
        popsnn.Alpha(alpha=0.9, beta=0.7),
        popsnn.Linear(5, 4),
        popsnn.Alpha(alpha=np.linspace(0.85, 0.95, 4), beta=0.6, reset_mechanism="subtract"),
    )


@pytest.mark.parametrize(
    "kw, words",
    [
        (dict(alpha=0.7, beta=0.7), "0 < beta < alpha <= 1"),
        (dict(alpha=0.6, beta=0.8), "alpha must be greater than beta"),
        (dict(alpha=0.6, beta=0.0), "0 < beta < alpha <= 1"),
        (dict(alpha=1.2, beta=0.5), "alpha must lie in [0, 1]"),
    ],
)
def test_bad_constants_are_one_clear_line(kw, words):
    with pytest.raises(ValueError) as err:
        popsnn.Alpha(**kw)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_defaults_and_tau_alpha_are_snntorchs():
    cell = snn.Alpha(alpha=0.9, beta=0.7)
    neuron = popsnn.Alpha(alpha=0.9, beta=0.7)
    assert neuron.reset_mechanism == cell.reset_mechanism == "zero"
    # One snnTorch step from rest with input 1 gives U = 0 (E + H = 1 - 1); a second gives
    # tau_alpha * (alpha - beta).
    x = torch.ones(1, dtype=torch.float64)
    cell = cell.to(torch.float64)
    cell(x)
    mem = cell(x)[-1]
    assert float(mem) == pytest.approx(neuron.tau_alpha * (0.9 - 0.7), rel=1e-6)


def test_interop_runs_the_same_spikes_in_snntorch_and_back():
    net = _net()
    params = active_params(net, 0)
    x = sequence_input(7, steps=12)
    model = interop.to_snntorch(net, params)
    assert isinstance(model[1], snn.Alpha) and isinstance(model[3], snn.Alpha)
    spikes = reference.forward(net, params, x).spikes
    assert 0 < spikes[0].mean() < 1
    np.testing.assert_array_equal(interop.run_snntorch(model, x), spikes[-1])
    back, back_params = interop.from_snntorch(model)
    assert [n for _, n in back.pairs] == [n for _, n in net.pairs]
    for p, q in zip(params, back_params):
        for key in p:
            np.testing.assert_array_equal(p[key], q[key])


def test_network_description_round_trips_through_a_checkpoint(tmp_path):
    net = _net()
    params = net.init_params(1)
    ckpt = checkpoint.load(checkpoint.save(tmp_path / "alpha.npz", net=net, params=params), net)
    assert [n for _, n in ckpt["network"].pairs] == [n for _, n in net.pairs]


def test_nir_refuses_it_in_one_line_and_the_engine_runs_it():
    net = _net()  # its per-neuron alpha too
    if "cpu" in popsnn.model.available_devices():
        # The engine's Alpha (tests/engine/test_engine_alpha.py and, per neuron or learned,
        # test_engine_neuron_constants.py have the full matrix).
        params = net.init_params(0)
        model = popsnn.Model(net, device="cpu", num_steps=6, batch_size=2, params=params)
        x = np.random.default_rng(0).random((2, net.layers[0].in_features), np.float32) * 3
        rec = popsnn.reference.forward(net, params, x, num_steps=6)
        np.testing.assert_array_equal(model.infer(x), rec.spikes[-1])
    pytest.importorskip("nir", reason="needs nir (pip install '.[nir]')")
    with pytest.raises(popsnn.nir_interop.NIRError, match="Alpha layer has no NIR export"):
        popsnn.export_to_nir(_net(), _net().init_params())


@pytest.mark.parametrize("loss_name", ["ce_count", "mse_membrane"])
@pytest.mark.parametrize("reset", ["subtract", "zero", "none"])
def test_per_neuron_learned_beta_matches_finite_differences_and_snntorch(
    reset, loss_name, monkeypatch
):
    """Alpha with alpha per neuron and beta learned per neuron (tau_alpha per neuron, moved by
    beta): the hand BPTT against finite differences and snnTorch in float64, as MODELS'
    "alpha" (one learned beta per layer) in the shared matrices."""
    import snntorch.functional.loss as snn_loss
    from _reference_nets import LOSS_CASES, two_layer_net
    from test_reference_gradients import check_against_fd
    from test_reference_snntorch_crosscheck import crosscheck

    net = two_layer_net("alpha_learn", reset, "atan")
    check_against_fd(net, LOSS_CASES[loss_name]())
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)  # as the crosscheck module's fixture
    monkeypatch.setattr(snn_loss, "dtype", torch.float64)
    try:
        crosscheck(net, LOSS_CASES[loss_name]())
    finally:
        torch.set_default_dtype(before)
