"""snnTorch interop, audited for every neuron model and option both ways: learn_beta,
learn_threshold, per-neuron vectors and every reset mechanism, in float64 (float32 where
snnTorch cannot run float64), go popsnn ->
snnTorch -> popsnn unchanged (layers, trained values, dtype), snnTorch's copy trains what
popsnn's trains and fires the reference's spikes; `inhibition` is refused on every model in
one line, from either side. Nothing is dropped silently (docs/interop.md)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from _reference_nets import active_params, sequence_input

import popsnn
from popsnn import interop, reference

torch = pytest.importorskip("torch", reason="needs torch (pip install '.[crosscheck]')")
snn = pytest.importorskip("snntorch", reason="needs snntorch (pip install '.[crosscheck]')")

N_IN, HIDDEN, OUT = 3, 6, 4


def _per_neuron(low, high, n, given):
    return np.linspace(low, high, n) if given else (low + high) / 2


def _model(name, n, per_neuron, **kw):
    """One layer of the model: its own constants one per layer or one per neuron."""
    kw["threshold"] = _per_neuron(0.8, 1.2, n, per_neuron)
    if name == "Lapicque":  # steps with R and C: its threshold only is per neuron
        return popsnn.Lapicque(beta=0.85, C=0.5, **kw)
    kw["beta"] = _per_neuron(0.6, 0.8, n, per_neuron)
    if name == "Leaky":
        return popsnn.Leaky(**kw)
    if name == "Synaptic":
        return popsnn.Synaptic(alpha=_per_neuron(0.5, 0.7, n, per_neuron), **kw)
    if name == "Alpha":
        return popsnn.Alpha(alpha=_per_neuron(0.85, 0.95, n, per_neuron), **kw)
    return popsnn.RLeaky(all_to_all=name == "RLeaky-all", **kw)


MODELS = ("Leaky", "Synaptic", "RLeaky-all", "RLeaky-one", "Lapicque", "Alpha")
OPTIONS = {
    "one-per-layer": dict(),
    "per-neuron": dict(per_neuron=True),
    "learn_beta": dict(learn_beta=True),
    "learn_beta-per-neuron": dict(learn_beta=True, per_neuron=True),
    "learn_threshold": dict(learn_threshold=True),
    "reset-subtract": dict(reset_mechanism="subtract"),
    "reset-zero": dict(reset_mechanism="zero"),
    "reset-none": dict(reset_mechanism="none"),
}


def _net(name, option):
    kw = dict(OPTIONS[option])
    per_neuron = kw.pop("per_neuron", False)
    return popsnn.Sequential(
        popsnn.Linear(N_IN, HIDDEN),
        _model(name, HIDDEN, per_neuron, **kw),
        popsnn.Linear(HIDDEN, OUT),
        _model(name, OUT, per_neuron, **kw),
    )


@pytest.mark.parametrize("option", sorted(OPTIONS))
@pytest.mark.parametrize("name", MODELS)
def test_every_model_and_option_goes_to_snntorch_and_back_unchanged(name, option):
    if name == "Lapicque" and "learn_beta" in option:  # popsnn's Lapicque has no such flag
        with pytest.raises(TypeError, match="learn_beta"):
            _net(name, option)
        return
    net = _net(name, option)
    # snnTorch's all-to-all RLeaky cannot run in float64 (its spikes are float32, its
    # recurrent nn.Linear float64): that one runs both sides in float32.
    dtype = np.float32 if name == "RLeaky-all" else np.float64
    params = active_params(net, 7, dtype=dtype)
    for p in params:  # trained values a little off their start, to see them carried
        for key in set(p) & {"beta", "threshold"}:
            p[key] = np.asarray(p[key] * 0.97, p[key].dtype)
    model = interop.to_snntorch(net, params)
    for (_, neuron), cell in zip(net.pairs, (model[1], model[3])):
        assert type(cell).__name__ == type(neuron).__name__
        assert cell.reset_mechanism == neuron.reset_mechanism
        for key in ("beta", "threshold"):  # trained in snnTorch exactly when in popsnn
            value = getattr(cell, key, None)
            trained = isinstance(value, torch.nn.Parameter) and value.requires_grad
            assert trained == (key in neuron.learned()), key
        tdtype = torch.float32 if dtype == np.float32 else torch.float64
        assert next(cell.parameters(), torch.zeros((), dtype=tdtype)).dtype == tdtype
    x = sequence_input(11, steps=10, n_in=N_IN, dtype=dtype)
    spikes = reference.forward(net, params, x).spikes[-1]
    assert 0 < spikes.mean() < 1, "a silent or saturated layer tests nothing"
    np.testing.assert_array_equal(interop.run_snntorch(model, x), spikes)
    back, back_params = interop.from_snntorch(model)
    for (_, mine), (_, theirs), p in zip(net.pairs, back.pairs, params):
        for key in mine.learned():  # the layer's start value is the trained one
            np.testing.assert_array_equal(np.asarray(getattr(theirs, key)), p[key])
            mine = dataclasses.replace(mine, **{key: getattr(theirs, key)})
        if dtype == np.float32:  # a float32 model holds its constants in float32
            mine = dataclasses.replace(mine, **_in_float32(mine))
        if name == "Lapicque":  # snnTorch keeps R and C: the same decay and gain
            assert (theirs.decay, theirs.gain) == pytest.approx((mine.decay, mine.gain), rel=1e-6)
            theirs = dataclasses.replace(theirs, beta=mine.beta, R=mine.R, C=mine.C)
        assert mine == theirs
    for p, q in zip(params, back_params):
        assert sorted(p) == sorted(q)
        for key in p:
            assert q[key].dtype == dtype
            np.testing.assert_array_equal(p[key], q[key], err_msg=key)


def _in_float32(neuron) -> dict:
    """The neuron's constants rounded to float32, as popsnn's layer takes them."""
    out = {}
    for key in ("alpha", "beta", "threshold"):
        value = getattr(neuron, key, None)
        if value is not None:
            rounded = np.asarray(value, np.float32).astype(np.float64)
            out[key] = tuple(rounded) if rounded.ndim else float(rounded)
    return out


INHIBITING = {
    "Leaky": lambda: snn.Leaky(beta=0.9, inhibition=True),
    "Synaptic": lambda: snn.Synaptic(alpha=0.8, beta=0.9, inhibition=True),
    "Alpha": lambda: snn.Alpha(alpha=0.9, beta=0.8, inhibition=True),
    "Lapicque": lambda: snn.Lapicque(beta=0.9, inhibition=True),
    "RLeaky": lambda: snn.RLeaky(beta=0.9, linear_features=4, inhibition=True),
}


@pytest.mark.parametrize("name", sorted(INHIBITING))
def test_inhibition_is_refused_in_one_line_from_either_side(name):
    model = torch.nn.Sequential(torch.nn.Linear(N_IN, 4), INHIBITING[name]())
    with pytest.raises(interop.InteropError) as err:
        interop.from_snntorch(model)
    assert "inhibition=True" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ValueError) as err:
        _model("RLeaky-all" if name == "RLeaky" else name, 4, False, inhibition=True)
    assert "inhibition=True" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("name", MODELS)
def test_a_sparse_rule_is_refused_on_the_way_to_snntorch(name):
    """snnTorch has no sparse backward: converting would drop the rule."""
    net = popsnn.Sequential(
        popsnn.Linear(N_IN, 4), _model(name, 4, False, sparse=popsnn.sparse.window(0.5))
    )
    with pytest.raises(interop.InteropError, match="no sparse-backward rule"):
        interop.to_snntorch(net, net.init_params(0))
