"""The training product on the engine devices: same curve as the reference, exact resume."""

import numpy as np
import pytest

from popsnn import checkpoint, data, model, train

ENGINE_DEVICES = [d for d in ("cpu", "ipu-model") if d in model.available_devices()]
pytestmark = pytest.mark.skipif(not ENGINE_DEVICES, reason="popsnn engine not available")


@pytest.fixture(scope="module")
def mnist_slice():
    full_train, full_test = data.load_mnist()
    return full_train.take(300), full_test.take(100)


def config(out, device, **kw):
    base = dict(
        hidden=[64],
        num_steps=5,
        batch_size=32,
        lr=5e-3,
        device=device,
        output=str(out),
        plots=False,
    )
    base.update(kw)
    return train.Config(**base)


@pytest.mark.parametrize("device", ENGINE_DEVICES)
def test_engine_follows_the_reference_curve(tmp_path, mnist_slice, device):
    tr, te = mnist_slice
    quiet = dict(train_set=tr, test_set=te, progress=False, log=lambda *_: None)
    ref = train.fit(config(tmp_path / "ref", "reference", epochs=2), **quiet)
    eng = train.fit(config(tmp_path / device, device, epochs=2), **quiet)
    assert eng["summary"]["device"] == device
    # float32 on both sides, summed in different orders: the first steps agree closely; once
    # a rounding difference flips one spike the two runs take different (equally good) paths.
    np.testing.assert_allclose(
        eng["history"]["step_loss"][:4], ref["history"]["step_loss"][:4], rtol=1e-4
    )
    assert eng["summary"]["test_accuracy"] > 0.3 and ref["summary"]["test_accuracy"] > 0.3


@pytest.mark.parametrize("device", ENGINE_DEVICES)
def test_engine_resume_is_exact(tmp_path, mnist_slice, device):
    tr, te = mnist_slice
    quiet = dict(train_set=tr, test_set=te, progress=False, log=lambda *_: None)
    train.fit(config(tmp_path / "a", device, epochs=2), **quiet)
    train.fit(config(tmp_path / "b", device, epochs=1), **quiet)
    train.fit(
        config(tmp_path / "b", device, epochs=2), resume=tmp_path / "b" / "checkpoint.npz", **quiet
    )
    a = checkpoint.load(tmp_path / "a" / "checkpoint.npz")["params"]
    b = checkpoint.load(tmp_path / "b" / "checkpoint.npz")["params"]
    for pa, pb in zip(a, b):
        for k in pa:
            np.testing.assert_array_equal(pa[k], pb[k])


@pytest.mark.parametrize("device", ["reference"] + ENGINE_DEVICES)
def test_new_learning_rate_without_a_rebuild_keeps_weights_and_adam_state(mnist_slice, device):
    """train.fit changes the rate per epoch with Model.set_learning_rate: no recompile. Weights,
    Adam's moments and step count stay: set to the same rate, the next step is bit-identical
    to the unbroken run's; at half the rate (Adam's step is linear in lr) it moves half as far."""
    tr, _ = mnist_slice
    x, y = tr.inputs(np.arange(32)), tr.labels[:32]
    c = config("unused", device)
    after = {}
    for rate in (None, c.lr, c.lr / 2):
        m = model.Model(
            c.network(784, 10),
            optimizer=c.make_optimizer(),
            device=device,
            num_steps=c.num_steps,
            batch_size=c.batch_size,
            seed=c.seed,
        )
        m.train_step(x, y)
        m.train_step(x, y)
        before = m.get_params()
        backend = m.backend
        engine = getattr(backend, "_engine", None)
        if rate is not None:
            m.set_learning_rate(rate)
            assert m.optimizer.hyper["lr"] == m.learning_rate == rate
        m.train_step(x, y)
        assert m.backend is backend and getattr(backend, "_engine", None) is engine
        after[rate] = [{k: p[k] - before[l][k] for k in p} for l, p in enumerate(m.get_params())]
    for unbroken, same, half in zip(after[None], after[c.lr], after[c.lr / 2]):
        for k in unbroken:
            np.testing.assert_array_equal(same[k], unbroken[k])
            np.testing.assert_allclose(half[k], unbroken[k] / 2, rtol=1e-3, atol=1e-7)
