"""The vertical slice: Leaky (subtract), direct input, ce_count, SGD on the cpu
device equals the dense float32 reference: spikes, loss, every gradient, and
the weights after three SGD steps."""

import numpy as np
import pytest
from engine_helpers import (
    assert_close,
    assert_grads_close,
    make_input,
    sgd_backend,
    train_like_the_reference,
)

import popsnn
from popsnn import losses, optim, reference
from popsnn.engine import EngineBackend

BATCH, STEPS = 8, 12


@pytest.fixture(scope="module")
def net():
    return popsnn.Sequential(
        popsnn.Linear(30, 24), popsnn.Leaky(beta=0.9), popsnn.Linear(24, 5), popsnn.Leaky(beta=0.8)
    )


def test_forward_loss_and_gradients_equal_the_reference(net):
    x, raw = make_input(net, BATCH, STEPS, direct=True, seed=3)
    y = raw % 5
    params = net.init_params(1)
    loss = losses.ce_count_loss()
    backend = sgd_backend(net, params, loss, steps=STEPS, batch=BATCH, device="cpu")
    value, grads = backend.loss_and_grad(x, y)
    ref_value, ref_grads, rec = reference.loss_and_grad(net, params, x, y, loss, num_steps=STEPS)
    spikes = backend.infer(x)
    assert spikes.shape == (STEPS, BATCH, 5)
    # The test is only meaningful if the network is neither silent nor saturated.
    assert 0.02 < rec.spikes[0].mean() < 0.9 and rec.spikes[1].sum() > 0
    np.testing.assert_array_equal(spikes, rec.spikes[-1])
    assert value == pytest.approx(ref_value, rel=1e-5)
    assert_grads_close(grads, ref_grads)


def test_three_sgd_steps_equal_the_reference(net):
    x, raw = make_input(net, BATCH, STEPS, direct=True, seed=4)
    y = raw % 5
    params = net.init_params(2)
    loss = losses.ce_count_loss()
    backend = EngineBackend(
        net,
        params,
        loss,
        optim.SGD(lr=0.5, momentum=0.9),
        num_steps=STEPS,
        batch_size=BATCH,
        device="cpu",
    )
    ref_opt = optim.SGD(lr=0.5, momentum=0.9)
    train_like_the_reference(backend, net, params, loss, ref_opt, x, y, rel_loss=1e-5)
    # Momentum buffers come back in popsnn.optim's format.
    state = backend.optimizer_state()
    ref_state = ref_opt.state_dict()
    assert [s[:2] for s in state["state"]] == [s[:2] for s in ref_state["state"]]
    for (l, key, s), (_, _, r) in zip(state["state"], ref_state["state"]):
        assert_close(s["momentum_buffer"], r["momentum_buffer"], f"buffer {l} {key}")
