"""The learning rate is device state: changed between steps (a host write, no recompile), the
engine's updates equal the reference optimiser's at every rate. See engine_helpers for the
tolerances."""

import copy

import pytest
from engine_helpers import assert_close, make_input, sgd_backend, train_like_the_reference

import popsnn
from popsnn import losses, optim, reference
from popsnn.engine import EngineBackend

BATCH, STEPS = 6, 10
RATES = (0.01, 0.004, 0.025)  # one per step: down, then up again

OPTIMIZERS = {
    "adam": lambda: optim.Adam(lr=RATES[0], weight_decay=0.01),
    "adamw": lambda: optim.AdamW(lr=RATES[0]),
    "sgd-momentum": lambda: optim.SGD(lr=RATES[0], momentum=0.9, weight_decay=0.01),
    "sgd": lambda: optim.SGD(lr=RATES[0]),
}


@pytest.mark.parametrize("device", ["cpu", "ipu-model"])
@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_rate_changed_between_steps_equals_the_reference(name, device):
    net = popsnn.Sequential(
        popsnn.Linear(10, 12), popsnn.RLeaky(beta=0.8), popsnn.Linear(12, 4), popsnn.Leaky(beta=0.9)
    )
    x, raw = make_input(net, BATCH, STEPS, True, seed=7)
    y = raw % 4
    params = net.init_params(8)
    loss = losses.ce_count_loss()
    options = dict(tiles_per_ipu=5) if device == "ipu-model" else {}
    backend = EngineBackend(
        net,
        params,
        loss,
        OPTIMIZERS[name](),
        num_steps=STEPS,
        batch_size=BATCH,
        device=device,
        **options,
    )
    engine = backend._engine
    train_like_the_reference(
        backend,
        net,
        params,
        loss,
        OPTIMIZERS[name](),
        x,
        y,
        rates=RATES,
        every_step=True,
        what=name,
    )
    assert backend._engine is engine, "changing the learning rate must not recompile"
    assert backend.optimizer.hyper["lr"] == RATES[-1] == engine.learning_rate


def test_rate_survives_a_recompile_and_the_optimizer_state():
    """The per-step input compiles a second engine: it starts from the rate set last. The saved
    optimiser state carries the rate, as popsnn.optim's state_dict does."""
    net = popsnn.Sequential(
        popsnn.Linear(10, 12), popsnn.Leaky(beta=0.9), popsnn.Linear(12, 4), popsnn.Leaky(beta=0.9)
    )
    params = net.init_params(3)
    loss = losses.ce_count_loss()
    backend = sgd_backend(net, params, loss, steps=STEPS, batch=BATCH, device="cpu")
    backend.set_learning_rate(0.03)
    x, raw = make_input(net, BATCH, STEPS, False, seed=2)
    y = raw % 4
    backend.train_step(x, y)  # per-step input: a new engine
    assert backend._engine.learning_rate == pytest.approx(0.03)
    ref_params = copy.deepcopy(params)
    _, grads, _ = reference.loss_and_grad(net, ref_params, x, y, loss)
    optim.SGD(lr=0.03).step(ref_params, grads)
    for p, r in zip(backend.get_params(), ref_params):
        for key in r:
            assert_close(p[key], r[key], f"after a recompile: {key}", rel=1e-5)
    state = backend.optimizer_state()
    assert state["hyper"]["lr"] == 0.03
    backend.set_learning_rate(0.5)
    backend.load_optimizer_state(state)
    assert backend._engine.learning_rate == pytest.approx(0.03)


def test_bad_learning_rates_are_refused_naming_the_value():
    net = popsnn.Sequential(popsnn.Linear(4, 3), popsnn.Leaky(beta=0.9))
    model = popsnn.Model(
        net, optimizer=optim.Adam(lr=0.01), device="cpu", num_steps=3, batch_size=2
    )
    for bad in (-0.1, float("nan"), float("inf"), "0.1", True, None):
        with pytest.raises(ValueError, match="learning rate must be a finite number >= 0"):
            model.set_learning_rate(bad)
    assert model.learning_rate == 0.01
    model.set_learning_rate(0.002)
    assert model.learning_rate == 0.002 == model.optimizer.hyper["lr"]
    assert model.backend._engine.learning_rate == pytest.approx(0.002)
