"""One model fed [B, N] (direct current) and [T, B, N] (per-step) inputs in turn compiles each
layout once and keeps it: alternating never rebuilds an engine (builds counted, not timed), and
the weights, Adam's state and a changed learning rate follow every switch, so the run equals the
reference's step for step."""

import numpy as np
import pytest
from engine_helpers import assert_close

import popsnn
from popsnn import losses, optim
from popsnn.model import Model

STEPS, BATCH = 6, 4


def _models():
    net = popsnn.Sequential(
        popsnn.Linear(12, 20), popsnn.Leaky(beta=0.9), popsnn.Linear(20, 3), popsnn.Leaky(beta=0.8)
    )
    return {
        d: Model(
            net,
            losses.ce_count_loss(),
            optim.Adam(lr=0.02),
            device=d,
            num_steps=STEPS,
            batch_size=BATCH,
            seed=3,
        )
        for d in ("reference", "cpu")
    }


def test_alternating_input_layouts_builds_each_engine_once_and_matches_the_reference():
    models = _models()
    backend = models["cpu"].backend
    assert backend.engine_builds == 1  # the direct-current engine, built up front
    rng = np.random.default_rng(7)
    y = rng.integers(0, 3, BATCH)
    layouts = ["direct", "per_step", "direct", "per_step", "per_step", "direct", "per_step"]
    for i, layout in enumerate(layouts):
        if layout == "direct":
            x = rng.uniform(0, 1.5, (BATCH, 12)).astype(np.float32)
        else:
            x = (rng.random((STEPS, BATCH, 12)) < 0.4).astype(np.float32)
        if i == 3:  # a schedule's change while on one layout reaches the other one too
            for m in models.values():
                m.set_learning_rate(0.005)
        out = {d: m.train_step(x, y) for d, m in models.items()}
        np.testing.assert_array_equal(out["cpu"][1], out["reference"][1])
        assert out["cpu"][0] == pytest.approx(out["reference"][0], rel=1e-5)
        assert backend.engine_builds == (1 if i == 0 else 2), f"step {i} ({layout}) rebuilt"
        np.testing.assert_array_equal(models["cpu"].infer(x), models["reference"].infer(x))
    assert models["cpu"].profile()["engine_builds"] == 2
    ref, cpu = (models[d].get_params() for d in ("reference", "cpu"))
    for l, (p, r) in enumerate(zip(cpu, ref)):
        for key in r:
            assert_close(p[key], r[key], f"layer {l} {key}", rel=1e-5)
    ref_state, cpu_state = (models[d].optimizer_state() for d in ("reference", "cpu"))
    assert cpu_state["hyper"]["lr"] == pytest.approx(0.005)
    assert [e[2]["step"] for e in cpu_state["state"]] == [e[2]["step"] for e in ref_state["state"]]


def test_set_params_on_one_layout_reaches_the_other():
    models = _models()
    new = models["reference"].net.init_params(11)
    for m in models.values():
        m.train_step(np.ones((STEPS, BATCH, 12), np.float32), np.zeros(BATCH, int))
        m.set_params(new)  # written while the per-step engine is the current one
    x = np.full((BATCH, 12), 0.7, np.float32)
    np.testing.assert_array_equal(models["cpu"].infer(x), models["reference"].infer(x))
    for l, p in enumerate(models["cpu"].get_params()):
        for key, value in p.items():
            np.testing.assert_array_equal(value, new[l][key].astype(np.float32))
    assert models["cpu"].backend.engine_builds == 2
