"""The engine trains in half storage (dtype="float16", docs/numerics.md section 8, steps 6-8):
weights as read, states, traces and exchanged values stored in half, float32 master weights and
optimiser state, a loss scale with the step skipped where a gradient overflows. Every case runs
the engine (device "cpu") beside popsnn's reference in the same mode
(`storage="float16"`, the same loss scale) and checks them within section 8's tolerances: the
loss to 1 %, every gradient to 1 % of the network's largest entry. The engine may round a
pushed W.S block once more than the reference (section 8, last paragraph), so a spike whose
membrane lies within a half ulp of the threshold may be decided differently: the cases' seeds
keep every decision equal, which the tests check first."""

import copy

import numpy as np
import pytest

import popsnn
from popsnn import losses, optim
from popsnn.engine import NetworkDoesNotFit
from popsnn.precision import LossScaler

T, B, N_IN = 8, 6, 48


def _net(kind, rule=None):
    hidden = {
        "leaky": lambda: popsnn.Leaky(beta=0.9, sparse=rule),
        "synaptic": lambda: popsnn.Synaptic(alpha=0.7, beta=0.85, sparse=rule),
        "lapicque": lambda: popsnn.Lapicque(beta=0.9, threshold=0.1, sparse=rule),
        "rleaky": lambda: popsnn.RLeaky(beta=0.85, all_to_all=False, sparse=rule),
        "alpha": lambda: popsnn.Alpha(alpha=0.8, beta=0.7, sparse=rule),
    }[kind]
    return popsnn.Sequential(popsnn.Linear(N_IN, 40), hidden(), popsnn.Linear(40, 10), hidden())


def _two_hidden():
    return popsnn.Sequential(
        popsnn.Linear(N_IN, 40),
        popsnn.Leaky(beta=0.9),
        popsnn.Linear(40, 32),
        popsnn.Leaky(beta=0.85),
        popsnn.Linear(32, 10),
        popsnn.Leaky(beta=0.9),
    )


def _data(seed=3):
    rng = np.random.default_rng(seed)
    x = (rng.uniform(0, 2.0, (B, N_IN)) * (rng.random((B, N_IN)) < 0.5)).astype(np.float32)
    return x, rng.integers(0, 10, B)


def _pair(net, optimizer=None, loss_scale=None, seed=1, loss=None):
    """The engine and the reference, both dtype float16, the same weights and settings."""
    models = []
    for device in ("cpu", "reference"):
        models.append(
            popsnn.Model(
                net,
                loss=loss or losses.ce_count_loss(),
                optimizer=copy.deepcopy(optimizer or optim.SGD(lr=0.05)),
                device=device,
                num_steps=T,
                batch_size=B,
                seed=seed,
                dtype="float16",
                loss_scale=copy.deepcopy(loss_scale),
            )
        )
    return models


def _max_rel(actual, expected):
    scale = max(np.max(np.abs(e)) for p in expected for e in p.values())
    return max(
        float(np.max(np.abs(a[k] - e[k]))) / scale for a, e in zip(actual, expected) for k in e
    )


def _assert_same_step(engine, ref, x, y):
    """Loss and gradients of one batch within section 8's tolerances; spikes equal."""
    np.testing.assert_array_equal(engine.infer(x), ref.infer(x))
    value, grads = engine.loss_and_grad(x, y)
    ref_value, ref_grads = ref.loss_and_grad(x, y)
    assert value == pytest.approx(ref_value, rel=1e-2)
    assert _max_rel(grads, ref_grads) < 1e-2
    return grads


CASES = ["leaky", "synaptic", "lapicque", "rleaky", "alpha"]


@pytest.mark.parametrize("kind", CASES)
def test_gradients_match_the_half_reference(kind):
    """A static scale of 2**8: RLeaky's gradients reach half's 65,504 at the default 2**16
    (engine and reference alike), which the scaler handles by skipping the step."""
    engine, ref = _pair(_net(kind), loss_scale=2.0**8)
    assert engine.backend.profile()["dtype"] == "float16"
    x, y = _data()
    grads = _assert_same_step(engine, ref, x, y)
    assert all(np.any(g["weight"] != 0) for g in grads)  # every layer carries gradient


@pytest.mark.parametrize("rule", ["window", "one_sided"])
def test_sparse_rules_run_on_the_dense_masked_trace(rule):
    kind = popsnn.sparse.window(0.5) if rule == "window" else popsnn.sparse.one_sided(0.4)
    engine, ref = _pair(_net("leaky", kind))
    x, y = _data()
    _assert_same_step(engine, ref, x, y)


@pytest.mark.parametrize("opt", ["sgd", "adam"])
@pytest.mark.parametrize("two_hidden", [False, True])
def test_training_follows_the_half_reference(opt, two_hidden):
    """Five steps of the DSNN shape and of a 2-hidden-layer net: the same spikes each step,
    and float32 masters that stay within half's tolerance of the reference's."""
    net = _two_hidden() if two_hidden else _net("leaky")
    optimizer = optim.Adam(lr=2e-3) if opt == "adam" else optim.SGD(lr=0.1, momentum=0.9)
    engine, ref = _pair(net, optimizer)
    x, y = _data(5)
    for step in range(5):
        value, spikes = engine.train_step(x, y)
        ref_value, ref_spikes = ref.train_step(x, y)
        np.testing.assert_array_equal(spikes, ref_spikes, err_msg=f"step {step}")
        assert value == pytest.approx(ref_value, rel=1e-2), f"step {step}"
    params, ref_params = engine.get_params(), ref.get_params()
    moved = _max_rel(
        [{k: p[k] - q[k] for k in p} for p, q in zip(ref_params, net.init_params(1))],
        [{k: np.ones(1) for k in p} for p in ref_params],
    )
    assert moved > 0  # the steps changed the weights
    assert all(p[k].dtype == np.float32 for p in params for k in p)
    assert _max_rel(params, ref_params) < 2e-3
    assert engine.loss_scaler.skipped_steps == 0 == ref.loss_scaler.skipped_steps


def test_float32_master_weights_take_steps_below_half_spacing():
    """lr 1e-6: every update is far below half's spacing of the weights, which a half weight
    would drop; the float32 master moves as the reference's does."""
    engine, ref = _pair(_net("leaky"), optim.SGD(lr=1e-6))
    x, y = _data()
    before = engine.get_params()
    engine.train_step(x, y)
    ref.train_step(x, y)
    after = engine.get_params()
    w0, w1 = before[0]["weight"], after[0]["weight"]
    assert np.mean(w0 != w1) > 0.5
    # The same update applied to the half weight: rounded back to where it was, nearly always.
    half = popsnn.precision.rounding("float16")
    assert np.mean(half(half(w0) + (w1 - w0)) == half(w0)) > 0.99
    assert _max_rel(after, ref.get_params()) < 1e-6


def test_an_overflowing_step_is_skipped_and_the_scale_backs_off():
    """A scale of 2**40 overflows half's 65,504 in dL/dS: the engine's step changes no
    parameter and no optimiser state, the scale halves; once it is small enough, steps apply,
    as on the reference."""
    engine, ref = _pair(_net("leaky"), optim.Adam(lr=1e-3), loss_scale=LossScaler(2.0**40))
    x, y = _data()
    before = engine.get_params()
    engine.train_step(x, y)
    ref.train_step(x, y)
    assert engine.loss_scaler.skipped_steps == 1 == ref.loss_scaler.skipped_steps
    assert engine.loss_scaler.scale == 2.0**39 == ref.loss_scaler.scale
    for p, q in zip(engine.get_params(), before):
        for k in q:
            np.testing.assert_array_equal(p[k], q[k])
    assert engine.backend.optimizer_state()["state"] == []  # Adam has not stepped
    for _ in range(40):
        engine.train_step(x, y)
        ref.train_step(x, y)
    assert engine.loss_scaler.scale == ref.loss_scaler.scale < 2.0**20
    assert engine.loss_scaler.skipped_steps == ref.loss_scaler.skipped_steps > 1
    assert engine.profile()["skipped_steps"] == engine.loss_scaler.skipped_steps
    assert _max_rel(engine.get_params(), ref.get_params()) < 2e-3
    assert any(np.any(p[k] != q[k]) for p, q in zip(engine.get_params(), before) for k in q)


def test_a_static_scale_skips_without_changing_and_a_dynamic_one_grows():
    x, y = _data()
    static, _ = _pair(_net("leaky"), loss_scale=1e30)
    static.train_step(x, y)
    assert static.loss_scaler.scale == 1e30 and static.loss_scaler.skipped_steps == 1
    growing, _ = _pair(_net("leaky"), loss_scale=LossScaler(2.0**8, growth_interval=2))
    for _ in range(2):
        growing.train_step(x, y)
    assert growing.loss_scaler.scale == 2.0**9 and growing.loss_scaler.skipped_steps == 0


def test_the_input_gradient_comes_back_unscaled():
    """dL/dx (popsnn.torch's path upstream) leaves the device times the loss scale, like the
    weight gradients; the host divides it: it matches float32's within half's tolerance."""
    x, y = _data()
    half, _ = _pair(_net("leaky"), loss_scale=2.0**12)
    single = popsnn.Model(
        _net("leaky"), loss=losses.ce_count_loss(), device="cpu", num_steps=T, batch_size=B, seed=1
    )
    dx16 = half.loss_and_input_grad(x, y)[2]
    dx32 = single.loss_and_input_grad(x, y)[2]
    assert np.abs(dx16 - dx32).max() < 2e-2 * np.abs(dx32).max()


def test_auto_picks_the_engine_and_the_profile_says_half():
    model = popsnn.Model(_net("leaky"), device="auto", dtype="float16", num_steps=T, batch_size=B)
    assert model.device == "cpu"
    profile = model.profile()
    assert profile["dtype"] == "float16" and profile["loss_scale"] == 2.0**16


@pytest.mark.parametrize(
    "net, words",
    [
        (
            popsnn.Sequential(popsnn.Linear(N_IN, 10), popsnn.RLeaky(beta=0.9, all_to_all=True)),
            "all-to-all RLeaky",
        ),
        (
            popsnn.Sequential(popsnn.Linear(N_IN, 10), popsnn.Leaky(beta=0.9, learn_beta=True)),
            "does not learn beta or threshold",
        ),
    ],
)
def test_what_is_not_built_is_refused_in_one_line(net, words):
    with pytest.raises(ValueError, match=words) as info:
        popsnn.Model(net, device="cpu", dtype="float16", num_steps=T, batch_size=B)
    assert "\n" not in str(info.value) and "dtype='float32'" in str(info.value)


def test_per_step_input_is_refused_in_one_line():
    model = popsnn.Model(_net("leaky"), device="cpu", dtype="float16", num_steps=T, batch_size=B)
    x = np.zeros((T, B, N_IN), np.float32)
    with pytest.raises(ValueError, match="per-step input") as info:
        model.train_step(x, np.zeros(B, int))
    assert "\n" not in str(info.value)


def test_convolutional_nets_are_refused_on_the_engine_and_auto_takes_the_reference():
    net = popsnn.Sequential(
        popsnn.Conv2d(1, 4, 3),
        popsnn.Leaky(beta=0.9),
        popsnn.Flatten(),
        popsnn.Linear(4 * 4 * 4, 10),
        popsnn.Leaky(beta=0.9),
        input_shape=(1, 6, 6),
    )
    with pytest.raises(ValueError, match="Linear layers only") as info:
        popsnn.Model(net, device="cpu", dtype="float16", num_steps=T, batch_size=B)
    assert "\n" not in str(info.value)
    auto = popsnn.Model(net, device="auto", dtype="float16", num_steps=T, batch_size=B)
    assert auto.device == "reference"


def test_a_net_that_fits_only_step_major_or_chunked_does_not_fit_in_half():
    """Half runs layer-major with the whole batch on the tiles: where float32 needs the
    step-major schedule and sample chunks (2 tiles of 48,000 bytes), half is NetworkDoesNotFit
    in one line naming the fix."""
    kw = dict(
        loss=losses.ce_count_loss(),
        device="ipu-model",
        num_steps=T,
        batch_size=B,
        tiles_per_ipu=2,
        memory_bytes_per_tile=48_000,
    )
    single = popsnn.Model(_net("leaky"), **kw)
    assert single.profile()["step_major"] == 1 and single.profile()["sample_chunks"] > 1
    with pytest.raises(NetworkDoesNotFit, match="layer-major schedule") as info:
        popsnn.Model(_net("leaky"), dtype="float16", **kw)
    assert "\n" not in str(info.value) and "more tiles" in str(info.value)
