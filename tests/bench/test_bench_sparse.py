"""Smoke test of the sparse experiments (bench/sparse_*.py, event_tasks.py, the weak-scaling
estimates): the whole suite at its tiniest, rows of the right shape with self-consistent
numbers; the generated recordings read back through popsnn's own loaders. No timing is
asserted (the machine is shared)."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

ex = pytest.importorskip("experiments")
systems = pytest.importorskip("systems")

needs_engine = pytest.mark.skipif(
    systems.engine_available() is not None, reason="popsnn's engine is not built"
)


@pytest.fixture(scope="module")
def sparse_rows():
    """The whole sparse suite at its tiniest (the embedded MNIST instead of Fashion-MNIST,
    which is an optional download), in a few seconds."""
    if systems.engine_available() is not None:
        pytest.skip("popsnn's engine is not built")
    import common

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(common, "BURST_S", 0.0)  # one call per turn: nothing is timed here
        return ex.exp_sparse(ex.TINY, repeats=1)


def _cases(rows):
    out = {}
    for r in rows:
        out.setdefault(r["case"], []).append(r)
    return out


def test_sparse_suite_has_both_papers_cases(sparse_rows):
    json.dumps(sparse_rows)
    cases = _cases(sparse_rows)
    assert set(cases) == {
        "seed003-mnist-h8",
        "seed003-mnist-5x8",
        "seed003-nmnist-h8",
        "seed003-shd-h12",
        "seed002-shd-natural",
        "seed002-shd-fixed",
        "seed002-nmnist-natural",
        "seed002-nmnist-fixed",
    }
    assert [r["b_th"] for r in cases["seed003-shd-h12"]] == [None, 0.2, 0.95]
    assert cases["seed003-mnist-5x8"][0]["layers"] == 5
    assert all(r["inputs"] == 700 and r["classes"] == 20 for r in cases["seed003-shd-h12"])
    assert all(r["inputs"] == 2312 for r in cases["seed003-nmnist-h8"])
    assert all("generated" in r["data_source"] for r in cases["seed002-shd-fixed"])
    for name in ("seed002-shd-natural", "seed002-nmnist-fixed"):
        dense, one = cases[name]
        assert dense["rule"] == "dense" and one["rule"] == "one_sided"
        assert one["theta_grad"] == 0.9


def test_sparse_rows_are_consistent(sparse_rows):
    for rows in _cases(sparse_rows).values():
        dense = rows[0]
        assert dense["active_fraction"] == 1.0 and dense["grad_cosine"] == pytest.approx(1.0)
        assert dense["max_activity"] == 1.0 and dense["trace_memory_saved_pct"] == 0.0
        assert dense["train_step_speedup"] == 1.0
        assert dense["backward_speedup"] in (None, pytest.approx(1.0))
        for r in rows:
            h = r["layers"]
            assert len(r["active_fraction_per_layer"]) == h
            assert r["trace_bytes_all"] >= r["trace_bytes_hidden"] > 0
            assert r["trace_bytes_hidden"] == sum(r[f"layer{l}_trace_bytes"] for l in range(h))
            assert all(0 <= p <= 1 for p in r["buffered_peak_fraction_per_layer"])
            assert r["backward_s_derived"] >= 0 and r["forward_s"] > 0
            # The batch in one piece here: the backward program timed alone, per call.
            assert r["backward_timing"] == "program"
            assert 0 < r["backward_s_min"] <= r["backward_s"] * (1 + 1e-12)
            assert 0 < r["forward_program_s"]
            assert r["train_step_s"] > 0
        for r in rows[1:]:
            assert 0 <= r["active_fraction"] <= 1
            assert -1 - 1e-9 <= r["grad_cosine_hidden"] <= 1 + 1e-9
            # The engine keeps max_activity in float32.
            assert r["max_activity"] >= r["max_activity_start"] * (1 - 1e-6) > 0
            # The traces over all steps start at their own measured activity and only grow.
            for trace in ("spike_activity", "trace_activity"):
                assert r[trace] >= r[f"{trace}_start"] * (1 - 1e-6) > 0
            assert r["trace_memory_saved_pct"] == pytest.approx(
                100 * (1 - r["trace_bytes_hidden"] / dense["trace_bytes_hidden"])
            )
            assert r["train_step_speedup"] == pytest.approx(
                r["dense_train_step_s_same_run"] / r["train_step_s"]
            )
            assert r["backward_speedup"] == pytest.approx(
                r["dense_backward_s_same_run"] / r["backward_s"]
            )
            if dense.get("test_accuracy") is not None:
                assert r["accuracy_change"] == pytest.approx(
                    r["test_accuracy"] - dense["test_accuracy"]
                )


def test_fixed_activity_fires_every_neuron_and_natural_trains(sparse_rows):
    cases = _cases(sparse_rows)
    for name in ("seed002-shd-fixed", "seed002-nmnist-fixed"):
        for r in cases[name]:
            assert r["hidden_spike_rate"] == 1.0 and "test_accuracy" not in r
    for r in cases["seed002-shd-natural"]:
        assert 0 <= r["test_accuracy"] <= 1
        assert r["test_images"] == (8 if r["dataset"] == "shd" else 16)


def test_generated_recordings_read_back_through_popsnn_loaders(tmp_path):
    import event_tasks as et

    et.write_nmnist(tmp_path / "n", 6, 3, seed=0)
    et.write_shd(tmp_path / "s", 20, 4, seed=0)
    data = ex.popsnn.data
    train, test = data.load_named("nmnist", tmp_path / "n", num_steps=10)
    assert len(train) == 6 and len(test) == 3 and train.num_inputs == 2312
    x = train.inputs(np.arange(6))
    assert x.shape == (10, 6, 2312) and 0 < x.mean() < 0.2
    assert x[:, :, :1156].sum() > 0 and x[:, :, 1156:].sum() > 0  # OFF and ON events
    train, test = data.load_named("shd", tmp_path / "s", num_steps=20)
    assert train.num_classes == 20 and sorted(set(train.labels)) == list(range(20))
    assert train.num_inputs == 700 and 0 < train.inputs(np.arange(4)).mean() < 0.5
    # Events of one N-MNIST image: saccade-driven, within the sensor and the recording.
    img = np.zeros((28, 28), np.float32)
    img[10:18, 10:18] = 1
    x, y, p, t = et.nmnist_events(img, np.random.default_rng(0))
    assert len(x) > 0 and x.max() < 34 and y.max() < 34 and set(p) == {0, 1}
    assert np.all(np.diff(t) >= 0) and t.max() < et.NMNIST_FRAMES * et.NMNIST_FRAME_US
    with pytest.raises(ValueError, match="'nmnist' or 'shd'"):
        et.event_task("dvs", 10, 4, 2)


@needs_engine
def test_sparse_width_is_the_same_case_runner(monkeypatch):
    import common

    monkeypatch.setattr(common, "BURST_S", 0.0)
    size = ex.Size(4, 8, (8,), 8, 8, 0, 0, (20, 8), (0.2,), image_dataset="mnist")
    rows = ex.exp_sparse_width(hiddens=(8, 12), size=size, repeats=1, pretrain_steps=1)
    assert [(r["hidden"], r["b_th"]) for r in rows] == [(8, None), (8, 0.2), (12, None), (12, 0.2)]
    assert all(r["experiment"] == "sparse_width" for r in rows)
    assert rows[0]["weights"] == "after 1 dense minibatches"


@needs_engine
def test_weak_scaling_estimates_are_labelled():
    rows = ex.exp_weak_scaling(
        ipus=(1, 2), layers_per_ipu=1, width=16, steps=3, batch=2, tiles_per_ipu=16
    )
    assert [(r["ipus"], r["hidden_layers"], r["neurons"]) for r in rows] == [(1, 1, 16), (2, 2, 32)]
    for r in rows:
        assert "estimate" in r["note"] and "not measured" in r["note"]
        assert r["estimate_seconds_per_step"] > 0
        assert (
            r["parameters"]
            == 700 * 16 + 16 + (r["hidden_layers"] - 1) * (16 * 16 + 16) + 16 * 20 + 20
        )
    assert rows[0]["weak_scaling_efficiency_estimate"] == 1.0
    assert rows[1]["weak_scaling_efficiency_estimate"] == pytest.approx(
        rows[0]["estimate_seconds_per_step"] / rows[1]["estimate_seconds_per_step"]
    )


@needs_engine
def test_sparse_full_runs_only_the_two_layer_cases_named(monkeypatch):
    import common

    monkeypatch.setattr(common, "BURST_S", 0.0)
    assert ex.two_layer_cases(ex.TINY) == [
        "seed003-mnist-h8",
        "seed003-nmnist-h8",
        "seed003-shd-h12",
    ]
    rows = ex.exp_sparse_full(ex.TINY, repeats=1, cases=["seed003-shd-h12"])
    assert {r["case"] for r in rows} == {"seed003-shd-h12"}
    assert all(r["experiment"] == "sparse_full" for r in rows)
    assert [r["b_th"] for r in rows] == [None, 0.2, 0.95]
    with pytest.raises(SystemExit, match="unknown case.*seed003-shd-h400; choose from"):
        ex.exp_sparse_full(ex.TINY, repeats=1, cases=["seed003-shd-h400"])


@needs_engine
def test_sparse_accuracy_pairs_every_rule_with_dense_of_its_seed():
    import report_sparse

    rows = ex.exp_sparse_accuracy(ex.ACCURACY_TINY, datasets=("image", "shd"))
    json.dumps(rows)
    # 2 data sets x 2 seeds x (dense, B_th 0.95, one-sided 0.9)
    assert len(rows) == 12
    for r in rows:
        assert (
            0 <= r["test_accuracy"] <= 1 and r["test_images"] == 8 * (r["dataset"] == "shd") or 16
        )
        dense = next(
            d
            for d in rows
            if d["rule"] == "dense" and d["seed"] == r["seed"] and d["dataset"] == r["dataset"]
        )
        assert r["accuracy_change"] == pytest.approx(r["test_accuracy"] - dense["test_accuracy"])
    assert {r["seed"] for r in rows} == {0, 1} and {r["hidden"] for r in rows} == {8, 12}
    assert all("generated" in r["data_source"] for r in rows if r["dataset"] == "shd")
    table = report_sparse.accuracy_table(rows + [{"dataset": "nmnist", "skipped": "absent"}])
    assert "| mnist | one-sided 0.9 | 2 |" in table and "| shd | dense | 2 |" in table
    assert "*nmnist not run*: absent" in table
    with pytest.raises(SystemExit, match="unknown data set"):
        ex.exp_sparse_accuracy(ex.ACCURACY_TINY, datasets=("cifar",))


@needs_engine
def test_sparse_accuracy_with_the_papers_constants_and_regulariser():
    import dataclasses
    import math
    import types

    import sparse_bench

    size = dataclasses.replace(ex.ACCURACY_TINY, seeds=(0,), paper_constants=True)
    rows = ex.exp_sparse_accuracy(size, datasets=("image",))
    assert len(rows) == 3 and all(r["paper_constants"] and r["device"] == "cpu" for r in rows)
    task = types.SimpleNamespace(num_inputs=784, num_classes=10)
    case = sparse_bench.SparseCase("t", task, 64, 4, 8, (), extra={"paper_constants": True})
    net = sparse_bench._net(case, None)
    assert not any(lin.bias for lin, _ in net.pairs)
    assert all(n.beta == pytest.approx(math.exp(-0.1)) for _, n in net.pairs)
    params = sparse_bench._init_params(case)
    std = 20 * (1 - math.exp(-0.1)) / math.sqrt(params[0]["weight"].shape[1])
    assert params[0]["weight"].std() == pytest.approx(std, rel=0.1)
    size = dataclasses.replace(ex.ACCURACY_TINY, seeds=(0,), regularizer=True, device="reference")
    rows = ex.exp_sparse_accuracy(size, datasets=("image",))
    assert all(
        r["device"] == "reference" and "spike_count_bounds" in r["regularizer"] for r in rows
    )


@needs_engine
def test_input_exchange_counts_fewer_bytes_with_the_input_list():
    import argparse

    import input_exchange
    from event_tasks import latency_task

    args = argparse.Namespace(hidden=20, steps=6, batch=4, b_th=0.3)
    x, y = latency_task("mnist", args.steps).sample(args.batch, seed=0)
    dense = input_exchange.measure(args, x, y, 1.0)
    listed = input_exchange.measure(args, x, y, None)
    assert (dense["layout"], listed["layout"]) == ("dense", "list")
    assert dense["host_input_bytes_per_call"] == 4 * x.size
    assert listed["input_list_capacity"] >= np.count_nonzero(x)
    assert listed["host_input_bytes_per_call"] < dense["host_input_bytes_per_call"]
    # The dense block crossed onto layer 0's tiles; now only the list does.
    assert listed["exchange_bytes_per_call"] < dense["exchange_bytes_per_call"]


def test_time_bursts_meters_give_the_programs_time_per_run(monkeypatch):
    """A meter's (runs, seconds) per burst: the program's own seconds per run, whatever the
    wall clock of the call around it."""
    import common

    monkeypatch.setattr(common, "BURST_S", 0.0)
    state = {"runs": 0, "seconds": 0.0}

    def call():
        state["runs"] += 2  # two program runs per call, 0.25 s and 0.75 s
        state["seconds"] += 1.0

    t = common.time_bursts(
        {"a": call, "b": lambda: None}, 3, meters={"a": lambda: (state["runs"], state["seconds"])}
    )
    assert t["a:meter"] == pytest.approx(0.5) and t["a:meter_min"] == pytest.approx(0.5)
    assert "b:meter" not in t and t["a"] >= 0 and t["b"] >= 0


@needs_engine
def test_engine_times_each_program_alone():
    """popsnn's runtime times every program it runs (profile's program{k}_*): the forward
    (0) on every call, the loss and backward (2) on loss_and_grad, with the optimiser (1) on
    train_step; seconds summed over the runs, the last run's apart."""
    import common

    net = common.sparse_net(20, 16, None, 2, 4)
    m = ex.popsnn.Model(
        net,
        loss=ex.popsnn.losses.ce_max_membrane_loss(),
        optimizer=ex.popsnn.optim.Adam(lr=1e-3),
        device="cpu",
        num_steps=5,
        batch_size=4,
        seed=0,
    )
    x = (np.random.default_rng(0).random((5, 4, 20)) < 0.3).astype(np.float32)
    y = np.arange(4) % 4
    m.infer(x)
    m.loss_and_grad(x, y)
    m.loss_and_grad(x, y)
    m.train_step(x, y)
    p = m.backend._engine.profile()
    assert m.backend._engine.layout()["sample_chunks"] == 1
    assert [p[f"program{k}_runs"] for k in range(3)] == [4, 1, 2]
    for k in range(3):
        assert 0 < p[f"program{k}_last_seconds"] <= p[f"program{k}_seconds"]
    assert p["program2_seconds"] > p["program2_last_seconds"]  # two runs summed
