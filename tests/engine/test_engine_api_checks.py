"""The C++ API's own input checks, through the binding (the Python package checks first,
so these call popsnn._native.Network directly, as a C++ caller would): NaN/inf input and
parameters, bad surrogate and optimiser parameters, whole validation before any write, and
a second concurrent call refused. tests/engine/cpp_checks runs the same from C++."""

import copy
import threading
import time

import numpy as np
import pytest

import popsnn
from popsnn import _native, optim
from popsnn.engine import EngineBackend


@pytest.fixture(scope="module")
def backend():
    net = popsnn.Sequential(
        popsnn.Linear(6, 8), popsnn.Leaky(beta=0.9), popsnn.Linear(8, 3), popsnn.RLeaky(beta=0.8)
    )
    return EngineBackend(
        net,
        net.init_params(0),
        popsnn.losses.ce_count_loss(),
        optim.Adam(lr=0.01),
        num_steps=4,
        batch_size=2,
        device="cpu",
    )


def native(backend, **changes):
    spec = copy.deepcopy(dict(backend._spec, input="direct"))
    for path, value in changes.items():
        *keys, last = path.split("__")
        target = spec
        for key in keys:
            target = target[int(key)] if key.isdigit() else target[key]
        target[last] = value
    return _native.Network(spec, backend._device)


def test_nan_or_inf_input_is_refused_before_the_device_sees_it(backend):
    engine = native(backend)
    x = np.ones((2, 6), np.float32)
    x[1, 2], x[0, 0] = np.nan, np.inf
    with pytest.raises(ValueError, match=r"^x contains 2 NaN or inf value\(s\); clean or clip"):
        engine.train_step(x, np.array([0, 1], np.int32), 2)
    with pytest.raises(ValueError, match=r"^x contains 2 NaN"):
        engine.infer(x)
    with pytest.raises(ValueError, match=r"label 3 of sample 1 is outside \[0, 3\)"):
        engine.train_step(np.ones((2, 6), np.float32), np.array([0, 3], np.int32), 2)


@pytest.mark.parametrize(
    "path, value, message",
    [
        (
            "layers__0__surrogate_param",
            float("nan"),
            "layer 0: the surrogate's alpha must be a finite",
        ),
        ("layers__1__surrogate_param", -2.0, "layer 1: the surrogate's alpha must be a finite"),
        ("optimizer__lr", float("nan"), r"optimizer.lr must be a finite number >= 0, got nan"),
        ("optimizer__lr", -1.0, r"optimizer.lr must be a finite number >= 0, got -1"),
        ("optimizer__beta2", 1.0, r"optimizer.beta2 must lie in \[0, 1\), got 1"),
        ("loss__correct_rate", 1.5, r"loss.correctRate must lie in \[0, 1\], got 1.5"),
        ("input_activity", 1.5, r"NetworkSpec.inputActivity must lie in \[0, 1\] \(0: the dense"),
    ],
)
def test_a_bad_spec_is_refused_in_one_line(backend, path, value, message):
    with pytest.raises(ValueError, match=message):
        native(backend, **{path: value})


def test_the_sigmoids_name_their_parameter_slope(backend):
    for name in ("fast_sigmoid", "sigmoid"):
        with pytest.raises(ValueError, match="the surrogate's slope must be a finite number > 0"):
            native(backend, layers__0__surrogate=name, layers__0__surrogate_param=0.0)
    native(backend, layers__0__surrogate="straight_through", layers__0__surrogate_param=0.0)


def test_set_learning_rate_refuses_nan(backend):
    engine = native(backend)
    with pytest.raises(ValueError, match="the learning rate must be a finite number >= 0"):
        engine.set_learning_rate(float("nan"))
    assert engine.learning_rate == pytest.approx(0.01)


def test_set_params_validates_every_layer_before_writing_any(backend):
    engine = native(backend)
    before = engine.get_params()
    bad = [{k: v + 1.0 for k, v in layer.items()} for layer in before]
    bad[1]["recurrent_weight"].flat[4] = np.nan
    with pytest.raises(ValueError, match=r"params\[1\]\['recurrent_weight'\] contains 1 NaN"):
        engine.set_params(bad)
    short = [{k: v + 1.0 for k, v in layer.items()} for layer in before]
    short[1]["bias"] = short[1]["bias"][:2]
    with pytest.raises(ValueError, match=r"params\[1\]\['bias'\] has 2 values, expected 3"):
        engine.set_params(short)
    extra = [dict(layer) for layer in before]
    extra[0]["recurrent_bias"] = np.zeros(8, np.float32)
    with pytest.raises(
        ValueError,
        match=r"params\[0\]\['recurrent_bias'\] given, but layer 0 "
        r"has none",
    ):
        engine.set_params(extra)
    for got, want in zip(engine.get_params(), before):
        for key in want:
            np.testing.assert_array_equal(got[key], want[key])


def test_set_optimizer_state_validates_everything_before_writing(backend):
    engine = native(backend)
    x, y = np.ones((2, 6), np.float32), np.array([0, 2], np.int32)
    engine.train_step(x, y, 2)
    steps, first, second = engine.get_optimizer_state()
    bad_first = [{k: v * 0 + 7 for k, v in layer.items()} for layer in first]
    bad_second = [{k: v * 0 + 7 for k, v in layer.items()} for layer in second]
    bad_second[1]["weight"] = bad_second[1]["weight"].ravel()[:5]
    with pytest.raises(
        ValueError,
        match=r"optimiser state second\[1\]\['weight'\] has 5 "
        r"values, expected 24",
    ):
        engine.set_optimizer_state(steps + 5, bad_first, bad_second)
    got_steps, got_first, got_second = engine.get_optimizer_state()
    assert got_steps == steps
    for got, want in zip(got_first + got_second, first + second):
        for key in want:
            np.testing.assert_array_equal(got[key], want[key])


def test_a_second_concurrent_call_is_refused_and_the_first_is_unharmed(backend):
    engine = native(backend)
    x, y = np.ones((2, 6), np.float32), np.array([0, 2], np.int32)
    reference_engine = native(backend)
    stop, errors, losses = threading.Event(), [], []

    def train():  # either side may be the one refused; a refused step changes nothing
        while not stop.is_set():
            try:
                losses.append(engine.train_step(x, y, 2)[0])
            except RuntimeError:
                pass

    worker = threading.Thread(target=train)
    worker.start()
    try:
        for _ in range(5_000):
            time.sleep(0.0005)  # lets the worker take the GIL and enter a step
            try:
                engine.get_params()
            except RuntimeError as e:
                errors.append(str(e))
                break
    finally:
        stop.set()
        worker.join()
    assert errors and "already running a call from another thread" in errors[0]
    # The worker's steps were all whole steps: the same as as many steps on a fresh engine.
    for _ in losses:
        reference_engine.train_step(x, y, 2)
    for got, want in zip(engine.get_params(), reference_engine.get_params()):
        for key in want:
            np.testing.assert_array_equal(got[key], want[key])
