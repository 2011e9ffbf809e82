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
    base = dict(hidden=[64], num_steps=5, batch_size=32, lr=5e-3, device=device,
                output=str(out), plots=False)
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
    np.testing.assert_allclose(eng["history"]["step_loss"][:4], ref["history"]["step_loss"][:4],
                               rtol=1e-4)
    assert eng["summary"]["test_accuracy"] > 0.3 and ref["summary"]["test_accuracy"] > 0.3


@pytest.mark.parametrize("device", ENGINE_DEVICES)
def test_engine_resume_is_exact(tmp_path, mnist_slice, device):
    tr, te = mnist_slice
    quiet = dict(train_set=tr, test_set=te, progress=False, log=lambda *_: None)
    train.fit(config(tmp_path / "a", device, epochs=2), **quiet)
    train.fit(config(tmp_path / "b", device, epochs=1), **quiet)
    train.fit(config(tmp_path / "b", device, epochs=2), resume=tmp_path / "b" / "checkpoint.npz",
              **quiet)
    a = checkpoint.load(tmp_path / "a" / "checkpoint.npz")["params"]
    b = checkpoint.load(tmp_path / "b" / "checkpoint.npz")["params"]
    for pa, pb in zip(a, b):
        for k in pa:
            np.testing.assert_array_equal(pa[k], pb[k])
