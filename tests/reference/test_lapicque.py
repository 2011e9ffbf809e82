"""snnTorch's Lapicque neuron in popsnn: its constants derived as snnTorch derives them, the
one-line errors, the interop both ways and a checkpoint round trip. The reference against
snnTorch (float64), its gradient against finite differences and the engine against the
reference run with the other models (MODELS in _reference_nets, NEURONS in
tests/engine/test_engine_matrix.py)."""

from __future__ import annotations

import numpy as np
import pytest
from _reference_nets import active_params, sequence_input

import popsnn
from popsnn import checkpoint, interop, reference

torch = pytest.importorskip("torch", reason="needs torch (pip install '.[crosscheck]')")
snn = pytest.importorskip("snntorch", reason="needs snntorch (pip install '.[crosscheck]')")

GIVEN = {
    "beta": dict(beta=0.85),
    "R-and-C": dict(R=4.0, C=1.25),
    "beta-and-R": dict(beta=0.8, R=2.0),
    "beta-and-C": dict(beta=0.9, C=3.0, time_step=0.5),
}


@pytest.mark.parametrize("name", sorted(GIVEN))
def test_decay_and_gain_are_snntorchs(name):
    kw = GIVEN[name]
    cell = snn.Lapicque(**{k: torch.tensor(v, dtype=torch.float64) for k, v in kw.items()})
    R, C, dt = (float(getattr(cell, k)) for k in ("R", "C", "time_step"))
    neuron = popsnn.Lapicque(**kw)
    assert neuron.resistance_capacitance() == pytest.approx((R, C), rel=1e-12)
    assert neuron.decay == pytest.approx(1 - dt / (R * C), rel=1e-12)
    assert neuron.gain == pytest.approx(dt / C, rel=1e-12)
    # One snnTorch step from rest with input 1: U = gain.
    _, mem = cell(torch.ones(1, dtype=torch.float64), torch.zeros(1, dtype=torch.float64))
    assert float(mem) == pytest.approx(neuron.gain, rel=1e-12)


@pytest.mark.parametrize(
    "kw, words",
    [
        (dict(), "needs beta, or R and C"),
        (dict(R=2.0), "needs beta, or R and C"),
        (dict(beta=0.9, R=1.0, C=1.0), "needs beta, or R and C"),
        (dict(beta=1.0), "must lie in (0, 1)"),
        (dict(beta=0.2), "overshoots"),
        (dict(R=1.0, C=0.5), "overshoots"),
        (dict(R=-1.0, C=2.0), "R must be a finite number > 0"),
        (dict(beta=0.9, time_step=0.0), "time_step must be a finite number > 0"),
    ],
)
def test_bad_constants_are_one_clear_line(kw, words):
    with pytest.raises(ValueError) as err:
        popsnn.Lapicque(**kw)
    assert words in str(err.value) and "\n" not in str(err.value)


def _net():
    return popsnn.Sequential(
        popsnn.Linear(3, 5),
        popsnn.Lapicque(beta=0.85),
        popsnn.Linear(5, 4),
        popsnn.Lapicque(R=4.0, C=1.25, reset_mechanism="zero"),
    )


def test_interop_runs_the_same_spikes_in_snntorch_and_back():
    net = _net()
    params = active_params(net, 0)
    x = sequence_input(7, steps=8)
    model = interop.to_snntorch(net, params)
    np.testing.assert_array_equal(
        interop.run_snntorch(model, x), reference.forward(net, params, x).spikes[-1]
    )
    back, back_params = interop.from_snntorch(model, dtype=np.float64)
    for (_, a), (_, b) in zip(net.pairs, back.pairs):
        assert isinstance(b, popsnn.Lapicque) and b.reset_mechanism == a.reset_mechanism
        assert (b.decay, b.gain) == pytest.approx((a.decay, a.gain), rel=1e-6)
    for p, q in zip(params, back_params):
        for key in p:
            np.testing.assert_array_equal(p[key], q[key])


def test_network_description_round_trips_through_a_checkpoint():
    net = _net()
    again = checkpoint.network_from_dict(checkpoint.network_to_dict(net))
    assert [n for _, n in again.pairs] == [n for _, n in net.pairs]
