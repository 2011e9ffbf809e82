"""popsnn.Model on the engine devices trains like Model on the reference, and the
optimiser state moves between the two backends (one format: popsnn.optim's)."""

import numpy as np
import pytest
from engine_helpers import assert_close

import popsnn
from popsnn import losses, optim
from popsnn.model import Model


def test_model_on_cpu_trains_like_the_reference_and_state_moves_between_them():
    net = popsnn.Sequential(
        popsnn.Linear(16, 24), popsnn.Leaky(beta=0.9), popsnn.Linear(24, 4), popsnn.Leaky(beta=0.9)
    )
    rng = np.random.default_rng(0)
    xs = rng.uniform(0, 1.5, (3, 8, 16)).astype(np.float32)
    ys = rng.integers(0, 4, (3, 8))
    models = {
        d: Model(
            net,
            losses.ce_count_loss(),
            optim.AdamW(lr=0.01),
            device=d,
            num_steps=10,
            batch_size=8,
            seed=1,
        )
        for d in ("reference", "cpu")
    }
    # Two full batches and a last, partial one of 5 samples.
    for step, (x, y) in enumerate(zip(xs, ys)):
        n = 5 if step == 2 else 8
        results = {d: m.train_step(x[:n], y[:n]) for d, m in models.items()}
        np.testing.assert_array_equal(results["cpu"][1], results["reference"][1])
        assert results["cpu"][0] == pytest.approx(results["reference"][0], rel=1e-5)
    ref_params, cpu_params = (models[d].get_params() for d in ("reference", "cpu"))
    for l, (p, r) in enumerate(zip(cpu_params, ref_params)):
        for key in r:
            assert_close(p[key], r[key], f"layer {l} {key}", rel=1e-5)
    # The engine's optimiser state continues training on the reference identically.
    state = models["cpu"].optimizer_state()
    fresh = Model(
        net,
        losses.ce_count_loss(),
        optim.AdamW(lr=0.01),
        device="reference",
        num_steps=10,
        batch_size=8,
        params=cpu_params,
    )
    fresh.load_optimizer_state(state)
    models["cpu"].train_step(xs[0], ys[0])
    fresh.train_step(xs[0], ys[0])
    for l, (p, r) in enumerate(zip(models["cpu"].get_params(), fresh.get_params())):
        for key in r:
            assert_close(p[key], r[key], f"after reload: layer {l} {key}", rel=1e-5)
    # And the other way: the reference's state loaded into a fresh engine model.
    engine = Model(
        net,
        losses.ce_count_loss(),
        optim.AdamW(lr=0.01),
        device="cpu",
        num_steps=10,
        batch_size=8,
        params=fresh.get_params(),
    )
    engine.load_optimizer_state(fresh.optimizer_state())
    engine.train_step(xs[1], ys[1])
    fresh.train_step(xs[1], ys[1])
    for l, (p, r) in enumerate(zip(engine.get_params(), fresh.get_params())):
        for key in r:
            assert_close(
                p[key], r[key], f"reference state in the engine: layer {l} {key}", rel=1e-5
            )
