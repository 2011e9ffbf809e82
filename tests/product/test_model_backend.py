"""popsnn.Model on the reference device: the backend protocol, device selection, errors."""

import numpy as np
import pytest

import popsnn
from popsnn import losses, optim, reference
from popsnn.model import DEVICES, Model, ReferenceBackend, resolve_device


def tiny_net():
    return popsnn.Sequential(
        popsnn.Linear(12, 16), popsnn.Leaky(beta=0.9), popsnn.Linear(16, 3), popsnn.Leaky(beta=0.9)
    )


def tiny_batch(seed=0, batch=8):
    rng = np.random.default_rng(seed)
    return rng.random((batch, 12)).astype(np.float32) * 2, rng.integers(0, 3, batch)


def test_train_step_is_reference_loss_and_grad_then_optimiser_step():
    net = tiny_net()
    x, y = tiny_batch()
    model = Model(
        net,
        loss=losses.ce_count_loss(),
        optimizer=optim.Adam(lr=1e-2),
        device="reference",
        num_steps=6,
        seed=4,
    )
    params = net.init_params(4)
    value, grads, rec = reference.loss_and_grad(net, params, x, y, losses.ce_count_loss(), 6)
    optim.Adam(lr=1e-2).step(params, grads)
    got_loss, out = model.train_step(x, y)
    assert got_loss == pytest.approx(value)
    np.testing.assert_array_equal(out, rec.spikes[-1])
    assert out.shape == (6, 8, 3)
    for a, b in zip(model.get_params(), params):
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])


def test_loss_falls_when_training_on_one_batch():
    model = Model(tiny_net(), optimizer=optim.Adam(lr=2e-2), device="reference", num_steps=8)
    x, y = tiny_batch(batch=16)
    first = model.train_step(x, y)[0]
    before = model.accuracy(model.infer(x), y)
    for _ in range(80):
        last = model.train_step(x, y)[0]
    assert last < 0.5 * first
    assert model.accuracy(model.infer(x), y) > max(before, 0.6)  # chance is 1/3


def test_time_major_input_and_partial_batches():
    model = Model(tiny_net(), device="reference", num_steps=7, batch_size=4)
    x = (np.random.default_rng(0).random((7, 3, 12)) < 0.5).astype(np.float32)
    assert model.infer(x).shape == (7, 3, 3)  # [T, B, N] input with T = num_steps
    loss, out = model.train_step(x[:, :1], np.array([2]))  # a batch of one sample
    assert out.shape == (7, 1, 3) and np.isfinite(loss)


def test_params_are_copies_and_checked():
    model = Model(tiny_net(), device="reference")
    params = model.get_params()
    params[0]["weight"][:] = 0
    assert np.any(model.get_params()[0]["weight"] != 0)
    with pytest.raises(ValueError, match="shape"):
        model.set_params(
            popsnn.Sequential(
                popsnn.Linear(12, 5),
                popsnn.Leaky(beta=0.9),
                popsnn.Linear(5, 3),
                popsnn.Leaky(beta=0.9),
            ).init_params(0)
        )


def test_optimizer_state_round_trip_continues_identically():
    x, y = tiny_batch()
    a = Model(tiny_net(), device="reference", num_steps=4)
    a.train_step(x, y)
    b = Model(tiny_net(), device="reference", num_steps=4, params=a.get_params())
    b.load_optimizer_state(a.optimizer_state())
    a.train_step(x, y)
    b.train_step(x, y)
    for pa, pb in zip(a.get_params(), b.get_params()):
        for k in pa:
            np.testing.assert_array_equal(pa[k], pb[k])


def test_devices():
    with pytest.raises(
        ValueError,
        match="unknown device 'gpu'; valid devices: reference, cpu, ipu-model, ipu, auto",
    ):
        Model(tiny_net(), device="gpu")
    assert resolve_device("auto") in DEVICES
    with pytest.raises(ValueError, match="reference device takes no device options"):
        Model(tiny_net(), device="reference", tiles=4)
    assert isinstance(Model(tiny_net(), device="reference").backend, ReferenceBackend)


def test_bad_arguments_name_the_problem():
    with pytest.raises(TypeError, match="popsnn.Sequential"):
        Model("784-10")
    with pytest.raises(ValueError, match="unknown loss 'hinge'"):
        Model(tiny_net(), loss="hinge", device="reference")
    with pytest.raises(TypeError, match="popsnn.optim"):
        Model(tiny_net(), optimizer="adam", device="reference")
