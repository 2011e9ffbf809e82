"""The convolution codelets' plain C++ loops (POPSNN_PLAIN_LOOPS: the IPU build's two-float
vectors, so the window runs of ConvInputGrad are padded to 2 floats, not 16) equal the
reference too: the CSNN test net of test_engine_conv_network on the baseline x86-64 build of
test_engine_portable_codelets."""

import numpy as np
import pytest
from test_engine_conv_network import assert_close, batch, csnn, engine_model
from test_engine_portable_codelets import portable_codelets, pytestmark  # noqa: F401

from popsnn import reference
from popsnn.backends import engine as engine_backend


@pytest.mark.parametrize("pool", ["max", "avg"])
def test_plain_loop_conv_codelets_equal_the_reference(pool, portable_codelets, monkeypatch):  # noqa: F811
    # Where the backends look it up (popsnn.engine only re-exports it: patched there, the
    # installed codelets would run).
    monkeypatch.setattr(engine_backend, "codelets_path", lambda: portable_codelets)
    net = csnn(pool=pool)
    params = net.init_params(0)
    x, y = batch(4, 3, 0)
    model = engine_model(net, params, 4, 3)
    value, grads = model.loss_and_grad(x, y)
    want_value, want_grads, rec = reference.loss_and_grad(net, params, x, y, "ce_count")
    np.testing.assert_array_equal(model.backend.record(x)[0][-1], rec.spikes[-1])
    assert value == pytest.approx(want_value, rel=1e-6)
    for l, (g, w) in enumerate(zip(grads, want_grads)):
        for k in w:
            assert np.abs(w[k]).max() > 0, f"stage {l} {k}: a gradient to compare"
            assert_close(g[k], w[k], f"stage {l} d{k}")
    # The second convolution's dL/dx: by window runs after the max pool (25% of dL/dI
    # non-zero), by the dense product after the average pool.
    dense = model.backend.profile()["input_grad_dense_rows"]
    assert (dense[1] > 0) == (pool == "avg")
