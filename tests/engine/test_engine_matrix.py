"""The engine equals the float32 dense reference across the matrix: neuron
models and resets, direct and per-step input, every loss, population codes,
the sparse rules, and Adam / AdamW updates. Small nets on the cpu device; the
multi-tile geometries are in test_engine_geometry.py. See engine_helpers for
the tolerances."""

import copy

import numpy as np
import pytest
from engine_helpers import (
    assert_close,
    assert_grads_close,
    labels_for,
    make_input,
    sgd_backend,
    train_like_the_reference,
)

import popsnn
from popsnn import losses, optim, reference, sparse
from popsnn.engine import EngineBackend

BATCH, STEPS = 6, 10

NEURONS = {
    "leaky-subtract": lambda: popsnn.Leaky(beta=0.85),
    "leaky-zero": lambda: popsnn.Leaky(beta=0.85, reset_mechanism="zero"),
    "leaky-none": lambda: popsnn.Leaky(beta=0.7, reset_mechanism="none"),
    "synaptic-subtract": lambda: popsnn.Synaptic(alpha=0.6, beta=0.8),
    "synaptic-zero": lambda: popsnn.Synaptic(alpha=0.6, beta=0.8, reset_mechanism="zero"),
    "rleaky-all-subtract": lambda: popsnn.RLeaky(beta=0.8),
    "rleaky-all-zero": lambda: popsnn.RLeaky(beta=0.8, reset_mechanism="zero"),
    "rleaky-one-subtract": lambda: popsnn.RLeaky(beta=0.8, all_to_all=False),
    "rleaky-one-zero": lambda: popsnn.RLeaky(beta=0.8, all_to_all=False, reset_mechanism="zero"),
    "lapicque-subtract": lambda: popsnn.Lapicque(beta=0.85, C=0.5),
    "lapicque-zero": lambda: popsnn.Lapicque(R=4.0, C=1.25, reset_mechanism="zero"),
    "lapicque-none": lambda: popsnn.Lapicque(beta=0.8, C=0.5, reset_mechanism="none"),
}


def check(net, loss, direct, seed=0, optimizer=None, **options):
    x, raw = make_input(net, BATCH, STEPS, direct, seed=seed)
    y = labels_for(loss, net, raw)
    params = net.init_params(seed + 1)
    backend = EngineBackend(
        net,
        params,
        loss,
        optimizer or optim.SGD(lr=0.1),
        num_steps=STEPS,
        batch_size=BATCH,
        device="cpu",
        **options,
    )
    value, grads = backend.loss_and_grad(x, y)
    ref_value, ref_grads, rec = reference.loss_and_grad(
        net, params, x, y, loss, num_steps=STEPS if direct else None
    )
    np.testing.assert_array_equal(backend.infer(x), rec.spikes[-1])
    assert value == pytest.approx(ref_value, rel=2e-5, abs=1e-7)
    assert_grads_close(grads, ref_grads)
    rec.profile = backend.profile()
    return rec


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "per-step"])
@pytest.mark.parametrize("name", sorted(NEURONS))
def test_neuron_models_and_resets(name, direct):
    # The same model in both layers: the hidden layer exercises the spike-id
    # exchange, the output layer the loss path.
    net = popsnn.Sequential(
        popsnn.Linear(12, 16), NEURONS[name](), popsnn.Linear(16, 4), NEURONS[name]()
    )
    rec = check(net, losses.ce_count_loss(), direct)
    assert rec.spikes[0].sum() > 0, "a silent hidden layer tests nothing"


LOSSES = {
    "ce_count": lambda: losses.ce_count_loss(),
    "ce_rate": lambda: losses.ce_rate_loss(),
    # 0.7 * 10 steps = 6.999... in float32: the target count must truncate as Python does.
    "mse_count": lambda: losses.mse_count_loss(correct_rate=0.7, incorrect_rate=0.1),
    "mse_membrane": lambda: losses.mse_membrane_loss(on_target=1.2, off_target=-0.2),
    "ce_max_membrane": lambda: losses.ce_max_membrane_loss(),
    "ce_count-population": lambda: losses.ce_count_loss(population_code=True, num_classes=3),
    "mse_count-population": lambda: losses.mse_count_loss(population_code=True, num_classes=3),
}


@pytest.mark.parametrize("name", sorted(LOSSES))
def test_losses(name):
    loss = LOSSES[name]()
    outputs = 9 if loss.population_code else 5
    net = popsnn.Sequential(
        popsnn.Linear(10, 14),
        popsnn.Leaky(beta=0.9),
        popsnn.Linear(14, outputs),
        popsnn.Synaptic(alpha=0.5, beta=0.85),
    )
    check(net, loss, direct=True, seed=5)


RULES = {
    "window": lambda: sparse.window(0.4),
    "one_sided": lambda: sparse.one_sided(0.6),
}


# Both layouts of a rule's masked surrogate (host/src/Plan.cpp): the compressed gradient trace
# (a trace sized below DENSE_TRACE_MIN_ACTIVITY, grown if it must) and the dense one (every
# entry), and the default: measured on the first minibatch, the layout following from it;
# "live": compressed, but a layer whose backward is too live for it runs dense (chosen per layer
# by the engine; the others pin the compressed backward with sparse_backward_max_live 1).
LAYOUTS = {
    "compressed": {"trace_activity": 0.3, "on_overflow": "grow", "sparse_backward_max_live": 1.0},
    "dense": {"trace_activity": 1.0},
    "measured": {"sparse_backward_max_live": 1.0},
    "live": {"trace_activity": 0.3, "on_overflow": "grow"},
}


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("direct", [True, False], ids=["direct", "per-step"])
@pytest.mark.parametrize("rule", sorted(RULES))
def test_sparse_rules_equal_the_masked_reference(rule, direct, layout):
    net = popsnn.Sequential(
        popsnn.Linear(12, 20),
        popsnn.Leaky(beta=0.9, sparse=RULES[rule]()),
        popsnn.Linear(20, 16),
        popsnn.RLeaky(beta=0.8, sparse=RULES[rule]()),
        popsnn.Linear(16, 4),
        popsnn.Leaky(beta=0.9, sparse=RULES[rule]()),
    )
    rec = check(net, losses.ce_count_loss(), direct, seed=2, **LAYOUTS[layout])
    masks = rec.grad_masks
    # The rule must actually cut something, and leave something.
    assert all(0 < m.mean() < 1 for m in masks[:2])
    measured_compressed = rec.profile["trace_activity"] < 0.45
    for l in range(3):
        live = not rec.profile[f"layer{l}_dense_backward"]
        compressed = {"compressed": True, "dense": False, "measured": measured_compressed}
        assert rec.profile[f"layer{l}_compressed_trace"] == compressed.get(layout, live)
        if layout == "live":  # dense exactly where the forward counted too many live entries
            assert live == (
                rec.profile[f"layer{l}_live_fraction"] <= rec.profile["sparse_backward_max_live"]
            )


@pytest.mark.parametrize("name", ["adam", "adamw"])
def test_adam_and_adamw_updates(name):
    net = popsnn.Sequential(
        popsnn.Linear(10, 12), popsnn.RLeaky(beta=0.8), popsnn.Linear(12, 4), popsnn.Leaky(beta=0.9)
    )
    make_opt = (
        (lambda: optim.Adam(lr=0.01, weight_decay=0.01))
        if name == "adam"
        else (lambda: optim.AdamW(lr=0.01))
    )
    x, raw = make_input(net, BATCH, STEPS, True, seed=7)
    y = raw % 4
    params = net.init_params(8)
    loss = losses.ce_count_loss()
    backend = EngineBackend(
        net, params, loss, make_opt(), num_steps=STEPS, batch_size=BATCH, device="cpu"
    )
    ref_opt = make_opt()
    train_like_the_reference(backend, net, params, loss, ref_opt, x, y, what=name)
    # Optimiser state round-trips through popsnn.optim's format.
    state = backend.optimizer_state()
    ref_state = ref_opt.state_dict()
    assert len(state["state"]) == len(ref_state["state"])
    for (l, key, s), (rl, rkey, r) in zip(state["state"], ref_state["state"]):
        assert (l, key) == (rl, rkey) and s["step"] == r["step"] == 3
        assert_close(s["exp_avg"], r["exp_avg"], f"exp_avg {l} {key}", rel=1e-4)
        assert_close(s["exp_avg_sq"], r["exp_avg_sq"], f"exp_avg_sq {l} {key}", rel=1e-4)


def test_partial_batch_counts_only_the_valid_samples():
    net = popsnn.Sequential(
        popsnn.Linear(10, 12), popsnn.Leaky(beta=0.9), popsnn.Linear(12, 3), popsnn.Leaky(beta=0.9)
    )
    loss = losses.ce_count_loss()
    x, raw = make_input(net, BATCH, STEPS, True, seed=9)
    x, y = x[:4], raw[:4] % 3
    params = net.init_params(3)
    backend = sgd_backend(net, params, loss, steps=STEPS, batch=BATCH, device="cpu")
    value, grads = backend.loss_and_grad(x, y)
    ref_value, ref_grads, rec = reference.loss_and_grad(net, params, x, y, loss, num_steps=STEPS)
    assert backend.infer(x).shape == (STEPS, 4, 3)
    np.testing.assert_array_equal(backend.infer(x), rec.spikes[-1])
    assert value == pytest.approx(ref_value, rel=1e-5)
    assert_grads_close(grads, ref_grads)
    with pytest.raises(ValueError, match="batch_size"):
        backend.infer(np.zeros((BATCH + 1, 10), np.float32))


def test_params_round_trip_and_bad_params_are_refused():
    net = popsnn.Sequential(
        popsnn.Linear(5, 7, bias=False),
        popsnn.RLeaky(beta=0.8),
        popsnn.Linear(7, 2),
        popsnn.RLeaky(beta=0.8, all_to_all=False),
    )
    params = net.init_params(4)
    backend = EngineBackend(
        net,
        params,
        losses.ce_count_loss(),
        optim.SGD(lr=0.1),
        num_steps=3,
        batch_size=2,
        device="cpu",
    )
    for p, r in zip(backend.get_params(), params):
        assert set(p) == set(r)
        for key in r:
            np.testing.assert_array_equal(p[key], r[key])
    bad = copy.deepcopy(params)
    bad[0]["weight"] = bad[0]["weight"][:, :4]
    with pytest.raises(ValueError, match="weight"):
        backend.set_params(bad)


def test_bad_options_and_inputs_are_refused_with_the_fix():
    net = popsnn.Sequential(
        popsnn.Linear(6, 5), popsnn.Leaky(beta=0.9), popsnn.Linear(5, 3), popsnn.Leaky(beta=0.9)
    )
    params = net.init_params(0)

    def make(**kw):
        return EngineBackend(
            net, params, losses.ce_count_loss(), optim.SGD(lr=0.1), num_steps=4, batch_size=2, **kw
        )

    with pytest.raises(ValueError, match="max_activity must be a number in"):
        make(device="cpu", max_activity=1.5)
    with pytest.raises(ValueError, match="unknown device option"):
        make(device="cpu", tiles=4)
    with pytest.raises(ValueError, match="ipu-model"):
        make(device="cpu", tiles_per_ipu=4)
    with pytest.raises(ValueError, match="on_overflow"):
        make(device="cpu", on_overflow="truncate")
    backend = make(device="cpu")
    with pytest.raises(ValueError, match="last axis"):
        backend.infer(np.zeros((2, 7), np.float32))
    with pytest.raises(ValueError, match=r"targets must lie in \[0, 3\)"):
        backend.loss_and_grad(np.zeros((2, 6), np.float32), np.array([0, 3]))


def test_ipu_device_without_hardware_says_what_to_use_instead():
    net = popsnn.Sequential(popsnn.Linear(3, 2), popsnn.Leaky(beta=0.9))
    with pytest.raises(RuntimeError, match="no IPU.*'ipu-model'.*'cpu'"):
        EngineBackend(
            net,
            net.init_params(0),
            losses.ce_count_loss(),
            optim.SGD(lr=0.1),
            num_steps=2,
            batch_size=1,
            device="ipu",
        )


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "per-step"])
def test_wide_shards_take_the_blocked_paths(direct):
    # 300 neurons on the cpu device's tiles: shards of 128+ neurons, so the register-blocked
    # sparse row sums (blocks of 128 columns, then a masked partial block) run, and the
    # 10-neuron output layer gets its input pushed from them.
    net = popsnn.Sequential(
        popsnn.Linear(40, 300),
        popsnn.Leaky(beta=0.9),
        popsnn.Linear(300, 10),
        popsnn.Leaky(beta=0.9),
    )
    rec = check(net, losses.ce_count_loss(), direct, seed=3)
    assert 0 < rec.spikes[0].mean() < 0.5


def test_three_dense_leaky_layers():
    # Hidden Leaky layers that both receive and pass on dL/dI (the fused dense backward with
    # its dL/dI published), one with a zero reset.
    net = popsnn.Sequential(
        popsnn.Linear(40, 300),
        popsnn.Leaky(beta=0.9),
        popsnn.Linear(300, 40),
        popsnn.Leaky(beta=0.85, reset_mechanism="zero"),
        popsnn.Linear(40, 10),
        popsnn.Leaky(beta=0.9),
    )
    rec = check(net, losses.ce_count_loss(), True, seed=6)
    assert rec.spikes[1].sum() > 0


SURROGATES = {
    "fast_sigmoid": lambda: popsnn.surrogate.fast_sigmoid(10.0),
    "atan": lambda: popsnn.surrogate.atan(2.0),
    "sigmoid": lambda: popsnn.surrogate.sigmoid(5.0),
    "straight_through": lambda: popsnn.surrogate.straight_through(),
}


@pytest.mark.parametrize("rule", [None, "window", "one_sided"])
@pytest.mark.parametrize("name", sorted(SURROGATES))
def test_surrogates_with_and_without_a_rule(name, rule):
    # Every surrogate through the Leaky forward (fused on AVX-512 hosts, except sigmoid).
    make = RULES[rule] if rule else (lambda: None)
    net = popsnn.Sequential(
        popsnn.Linear(20, 40),
        popsnn.Leaky(beta=0.9, surrogate=SURROGATES[name](), sparse=make()),
        popsnn.Linear(40, 4),
        popsnn.Leaky(beta=0.9, surrogate=SURROGATES[name]()),
    )
    check(net, losses.ce_count_loss(), True, seed=8)
