"""Smoke test of bench/: every experiment function runs its tiniest configuration in-process
and returns rows of the right shape with sane, self-consistent numbers. No timing is
asserted (the machine is shared); this only keeps the benchmark code from rotting."""

import json
import math
import os
import sys
from pathlib import Path

import numpy as np
import pytest

import popsnn

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

ex = pytest.importorskip("experiments")
systems = pytest.importorskip("systems")
workers = pytest.importorskip("workers")
report = pytest.importorskip("report")

needs_engine = pytest.mark.skipif(
    systems.engine_available() is not None, reason="popsnn's engine is not built"
)
needs_torch = pytest.mark.skipif(
    systems.snntorch_available() is not None, reason="torch/snnTorch are not installed"
)
TINY = dict(hidden=16, batch=4, steps=2)
# torch.compile's first call compiles for tens of seconds: the throughput smoke tests leave the
# compiled system out; test_snntorch_compiled_matches_eager checks it.
FAST = ex.UNCOMPILED


@pytest.fixture(autouse=True)
def no_settle_pause(monkeypatch):
    # The pause before each timed step lets idle thread pools sleep; nothing is timed here.
    monkeypatch.setattr(workers, "SETTLE_S", 0.0)
    monkeypatch.setattr(workers, "WARM_S", 0.0)
    monkeypatch.setattr(workers, "TIMED_S", 0.0)


def check_throughput(row, include=FAST):
    json.dumps(row)  # JSON-ready
    for s in include:
        v = row[f"{s}_images_per_s"]
        if v is None:
            assert row[f"{s}_skipped"]
            continue
        lo, hi = row[f"{s}_images_per_s_min_max"]
        assert 0 < lo <= v <= hi and math.isfinite(hi)
        assert row[f"{s}_step_ms"] == pytest.approx(1e3 * row["batch"] / v)
        assert row[f"{s}_peak_rss_mib"] > 1  # the worker's own peak: at least the interpreter
        assert row[f"{s}_warmup_s"] > 0 and row[f"{s}_warmup_steps"] >= 1
        by_threads = row.get(f"{s}_images_per_s_by_threads")
        if by_threads:  # credited with its best thread count
            assert v == pytest.approx(max(by_threads.values()))
            assert str(row[f"{s}_threads"]) in by_threads
        if s != "popsnn" and row.get("popsnn_images_per_s"):
            assert row[f"popsnn_over_{s}"] == pytest.approx(row["popsnn_images_per_s"] / v)


def test_machine_described():
    m = ex.machine()
    assert m["cores"] >= 1 and m["numpy"] and m["popsnn"]


def test_time_bursts_times_each_call_in_rotation(monkeypatch):
    import common

    monkeypatch.setattr(common, "BURST_S", 0.02)
    calls = []
    t = common.time_bursts({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, 2)
    assert calls[:2] == ["a", "b"] and calls.count("a") > 3 and calls.count("b") > 3
    assert 0 < t["a"] < 0.02 and 0 < t["b"] < 0.02


def test_time_calls_interleaves_and_orders():
    calls = []
    t = ex.time_calls(
        {"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, repeats=2, warmup=1
    )
    assert calls == ["a", "b", "a", "b", "a", "b"]
    for v in t.values():
        assert 0 <= v["min_s"] <= v["median_s"] <= v["max_s"] and v["repeats"] == 2


def test_each_system_runs_in_its_own_worker_with_its_threads():
    work = ex.dsnn_workload(hidden=8, batch=2, steps=2)
    variants = {
        "a": ("numpy_hoisted", None),
        "b": ("numpy_hoisted", 1),
        "c": ("numpy_per_step", None),
    }
    t = workers.time_isolated(work, variants, repeats=2, settle_s=0.0)
    pids = {v["pid"] for v in t.values()}
    assert len(pids) == 3 and os.getpid() not in pids
    assert t["b"]["threads"] == 1
    for v in t.values():
        assert 0 < v["min_s"] <= v["median_s"] <= v["max_s"] and v["repeats"] == 2
        assert v["timed_steps_per_turn"] == 1  # WARM_S = TIMED_S = 0: one step each
    env = workers.worker("numpy_hoisted", 1).call("env")
    assert env["pid"] == t["b"]["pid"]
    assert all(env[k] == "1" for k in workers.THREAD_ENV)
    # A turn is a burst of back-to-back steps lasting at least timed_s.
    burst = workers.time_isolated(
        work, {"a": ("numpy_hoisted", None)}, repeats=1, settle_s=0.0, warm_s=0.0, timed_s=0.05
    )
    assert burst["a"]["timed_steps_per_turn"] > 1
    # The workers are kept for the next configuration: same processes.
    again = workers.time_isolated(work, variants, repeats=1, settle_s=0.0)
    assert {v["pid"] for v in again.values()} == pids


def test_worker_errors_are_raised_and_the_pool_stays_usable():
    work = ex.dsnn_workload(hidden=8, batch=2, steps=2)
    with pytest.raises(workers.WorkerError, match="unknown system"):
        workers.time_isolated(
            work, {"x": ("no_such_system", None), "y": ("numpy_hoisted", None)}, repeats=1
        )
    t = workers.time_isolated(work, {"y": ("numpy_hoisted", None)}, repeats=1, settle_s=0.0)
    assert t["y"]["median_s"] > 0


@needs_engine
def test_dsnn_batch_width_latency():
    rows = ex.exp_dsnn(repeats=1, include=FAST, **TINY)
    assert [r["input"] for r in rows] == ["mnist", "uniform"]
    for row in rows:
        check_throughput(row)
        assert row["experiment"] == "dsnn" and row["batch"] == 4
        # The limit: the step's products at the measured BLAS rate, beside the systems.
        assert row["limit_gflop_per_s"] == pytest.approx(
            row["limit_gflop_per_step"] * row["limit_images_per_s"] / row["batch"]
        )
    rows = ex.exp_batch(
        repeats=1, batches=(2, 4), hidden=16, steps=2, include=("popsnn", "numpy_step")
    )
    assert [r["batch"] for r in rows] == [2, 4]
    for r in rows:
        check_throughput(r, ("popsnn", "numpy_step"))
    rows = ex.exp_width(
        repeats=1, widths=(8, 16), batch=4, steps=2, include=("popsnn", "numpy_step")
    )
    assert [r["hidden"] for r in rows] == [8, 16]
    rows = ex.exp_latency(
        repeats=1, batches=(1, 2), hidden=16, steps=2, include=("popsnn", "snntorch", "limit")
    )
    assert [r["batch"] for r in rows] == [1, 2]
    for r in rows:
        check_throughput(r, ("popsnn", "snntorch", "limit"))


def test_dsnn_inputs():
    mnist = ex.dsnn_workload(**TINY)
    dense = ex.dsnn_workload(input="uniform", **TINY)
    assert np.array_equal(mnist.y, dense.y) and dense.x.shape == mnist.x.shape
    assert (dense.x > 0).mean() > 0.99 and (mnist.x == 0).mean() > 0.5  # MNIST is mostly 0
    assert 0 <= dense.x.min() and dense.x.max() < 1
    with pytest.raises(ValueError, match="input must be one of"):
        ex.dsnn_workload(input="noise", **TINY)


def test_limit_counts_the_steps_products():
    # Sun et al.'s DSNN at B=128, T=25: W x and its weight gradient once (hoisted), the
    # readout's three products over T*B rows: about 0.6 GFLOP.
    work = ex.dsnn_workload(hidden=1000, batch=128, steps=25)
    _, flops = systems.dense_products(work)
    assert flops == 2 * 128 * 784 * 1000 * 2 + 2 * 25 * 128 * 1000 * 10 * 3
    assert 0.55e9 < flops < 0.65e9
    rate = ex.dsnn_workload(hidden=8, batch=2, steps=3, rate_coded=True)
    assert systems.dense_products(rate)[1] == 2 * 6 * 784 * 8 * 2 + 2 * 6 * 8 * 10 * 3
    # An all-to-all RLeaky layer's recurrent map: three products over T*B rows as well.
    rec = ex.dsnn_workload(hidden=8, batch=2, steps=3, neuron=popsnn.RLeaky(beta=0.9))
    readout_rec = 2 * 6 * 10 * 10 * 3  # the copied neuron makes the readout RLeaky too
    assert systems.dense_products(rec)[1] == (
        2 * 2 * 784 * 8 * 2 + 2 * 6 * 8 * 10 * 3 + 2 * 6 * 8 * 8 * 3 + readout_rec
    )


@needs_engine
def test_neurons_and_rate():
    rows = ex.exp_neurons(repeats=1, include=FAST, **TINY)
    assert [r["neuron"] for r in rows] == ["Leaky", "Synaptic", "RLeaky"]
    for r in rows:
        check_throughput(r)
    for r in rows[1:]:  # the hand-written NumPy step is Leaky only, and says so
        assert r["numpy_step_images_per_s"] is None and "Leaky only" in r["numpy_step_skipped"]
    (rate,) = ex.exp_rate(repeats=1, include=FAST, **TINY)
    check_throughput(rate)
    assert rate["numpy_hoisted_images_per_s"] is None and "hoist" in rate["numpy_hoisted_skipped"]
    assert rate["numpy_step_images_per_s"] > 0  # layer by layer: runs on [T, B, N] too


@needs_engine
def test_population():
    rows = ex.exp_population(
        repeats=1,
        hidden=16,
        batch=4,
        outputs=20,
        train_steps=2,
        test_images=8,
        include=("popsnn", "numpy_hoisted"),
    )
    assert [(r["steps"], r["outputs"]) for r in rows] == [(25, 10), (1, 20)]
    for r in rows:
        check_throughput(r, ("popsnn", "numpy_hoisted"))
        assert 0 <= r["test_accuracy"] <= 1 and r["train_images"] == 8


@needs_engine
def test_isolation_ab_has_every_arm():
    rows = ex.exp_isolation(repeats=1, trials=1, **TINY)
    assert [r["arm"] for r in rows] == [
        "in_process_with_others",
        "in_process_with_others_bursts",
        "worker_with_others",
        "worker_alone",
    ]
    for r in rows:
        assert 0 < r["popsnn_step_ms_min"] <= r["popsnn_step_ms_median"]
    json.dumps(rows)


@needs_engine
def test_ipu_estimate_is_labelled():
    rows = ex.exp_ipu(batches=(4,), hidden=16, tiles_per_ipu=32, steps_run=1)
    for r in rows:
        assert "estimate" in r["note"] and "not measured" in r["note"]
        if r["estimate_images_per_s"] is not None:
            assert r["estimate_images_per_s"] == pytest.approx(
                r["batch"] / r["estimate_seconds_per_step"]
            )
        else:
            assert r["batches_refused"]


@pytest.mark.parametrize("reset", ["subtract", "zero", "none"])
@pytest.mark.parametrize("direct", [True, False])
def test_numpy_step_matches_the_reference(reset, direct):
    """The hand-written NumPy step computes popsnn's loss and gradients (float64: to rounding;
    float32: to float tolerance), population code included, and Adam as popsnn.optim.Adam."""
    import numpy_step as ns

    from popsnn import losses, optim, reference

    net = ex.popsnn.Sequential(
        ex.popsnn.Linear(30, 40),
        ex.popsnn.Leaky(beta=0.9, reset_mechanism=reset),
        ex.popsnn.Linear(40, 20),
        ex.popsnn.Leaky(beta=0.8, reset_mechanism=reset),
    )
    rng = np.random.default_rng(1)
    x = rng.random((6, 30)) if direct else (rng.random((5, 6, 30)) < 0.3).astype(float)
    y = rng.integers(0, 10, 6)
    loss = losses.ce_count_loss(population_code=True, num_classes=10)
    for dtype, tol in ((np.float64, 1e-12), (np.float32, 2e-5)):
        params = net.init_params(0, dtype=dtype)
        for p in params:
            p["weight"] *= 4  # enough spikes in both layers for the gradients to matter
        xs = x.astype(dtype)
        value, grads, rec = reference.loss_and_grad(net, params, xs, y, loss, num_steps=5)
        assert 0.05 < rec.spikes[0].mean() < 0.95 and rec.spikes[1].mean() > 0.05
        trainer = ns.NumpyStep(
            net, [{k: v.copy() for k, v in p.items()} for p in params], 5, num_classes=10, lr=1e-2
        )
        mine, my_grads = trainer.loss_and_grad(xs, y)
        assert mine == pytest.approx(value, rel=tol)
        for g, h in zip(grads, my_grads):
            assert set(g) == set(h)
            for k in g:
                assert h[k].dtype == dtype
                np.testing.assert_allclose(h[k], g[k], rtol=tol, atol=tol * np.abs(g[k]).max())
        # One full step: the update is popsnn.optim.Adam's on the reference's gradients.
        trainer.step(xs, y)
        expect = [{k: v.copy() for k, v in p.items()} for p in params]
        optim.Adam(lr=1e-2).step(expect, grads)
        for p, q in zip(expect, trainer.params):
            for k in p:
                np.testing.assert_allclose(q[k], p[k], rtol=10 * tol, atol=10 * tol)
    assert (
        ns.unsupported(net, losses.mse_count_loss(), x)
        == "the hand-written NumPy step implements ce_count only, got mse_count"
    )


@needs_torch
def test_snntorch_compiled_matches_eager(monkeypatch):
    """The torch.compile system trains exactly as the eager one (same initial weights, same
    losses). Inductor's C++ build takes tens of seconds, so the graph is compiled with
    "aot_eager" here (the same capture and autograd); the bench itself uses Inductor."""
    monkeypatch.setattr(systems, "COMPILE_BACKEND", "aot_eager")
    work = ex.dsnn_workload(hidden=8, batch=3, steps=3)
    eager, compiled = systems.snntorch(work), systems.snntorch(work, compiled=True)
    a = [float(eager()) for _ in range(3)]
    b = [float(compiled()) for _ in range(3)]
    assert a == pytest.approx(b, rel=1e-5) and a[0] != a[-1]


def test_profile_table_parser():
    text = (
        "Program step    kind    execs cycles/exec    compute   exchange   exch bytes "
        "inter-IPU B     host B\n"
        "Execute(layer1/backward)                      compute       25       46890      "
        "46740          0            0           0          0\n"
        "Copy('a', 'b')  exchange        1       18966       6272      12544       100352  "
        "         0          0\n"
    )
    assert ex._profile_rows(text) == [
        ("Execute(layer1/backward)", 25, 46890.0),
        ("Copy('a', 'b')", 1, 18966.0),
    ]


def synthetic_sparse_rows(m):
    """A hidden-200 case (dense, one B_th), a fixed-activity one-sided row and a skip."""
    base = dict(
        case="seed003-fashion-mnist-h200",
        hidden=200,
        layers=2,
        inputs=784,
        classes=10,
        steps=4,
        batch=8,
        dataset="fashion-mnist",
        data_source="fashion-mnist (real)",
        paper="Perez-Nieves & Goodman",
        train_steps=2,
        test_images=16,
        machine=m,
    )
    return [
        dict(
            base,
            rule="dense",
            b_th=None,
            active_fraction=1.0,
            backward_s_derived=0.01,
            backward_speedup=1.0,
            train_step_s=0.02,
            train_step_speedup=1.0,
            trace_memory_saved_pct=0.0,
            test_accuracy=0.5,
            trace_bytes_hidden=1000.0,
            max_activity=1.0,
            grad_cosine_hidden=1.0,
        ),
        dict(
            base,
            rule="window",
            b_th=0.2,
            active_fraction=0.01,
            backward_s_derived=0.0001,
            backward_speedup=100.0,
            train_step_s=0.004,
            train_step_speedup=5.0,
            trace_memory_saved_pct=90.0,
            test_accuracy=0.5,
            accuracy_change=0.0,
            trace_bytes_hidden=100.0,
            max_activity=0.1,
            max_activity_start=0.05,
            buffered_peak_fraction_per_layer=[0.08, 0.06],
            grad_cosine_hidden=0.99,
        ),
        dict(
            base,
            case="seed002-shd-fixed",
            rule="one_sided",
            theta_grad=0.9,
            b_th=None,
            active_fraction=1.0,
            backward_s_derived=0.01,
            trace_bytes_hidden=100.0,
            train_step_speedup=0.5,
        ),
        {"experiment": "sparse", "case": "seed003-fashion-mnist", "skipped": "run make data"},
    ]


def synthetic_weak_scaling_rows(m):
    return [
        dict(
            experiment="weak_scaling",
            ipus=k,
            hidden_layers=k,
            width=500,
            neurons=500 * k,
            parameters=1000 * k,
            steps=10,
            batch=4,
            max_activity=0.05,
            data_source="generated",
            estimate_seconds_per_step=0.001 * (1 + k / 10),
            weak_scaling_efficiency_estimate=1.1 / (1 + k / 10),
            simulation_wall_s=7.0,
            machine=m,
        )
        for k in (1, 2)
    ]


def test_report_from_synthetic_results(tmp_path):
    m = ex.machine()
    row = {
        "experiment": "dsnn",
        "hidden": 16,
        "batch": 4,
        "machine": m,
        "quick": True,
        "input": "mnist",
        "popsnn_images_per_s": 30.0,
        "snntorch_images_per_s": 1.0,
        "snntorch_compiled_images_per_s": 2.0,
        "numpy_step_images_per_s": 7.5,
        "numpy_hoisted_images_per_s": 10.0,
        "numpy_per_step_images_per_s": 5.0,
        "limit_images_per_s": 60.0,
        "popsnn_over_limit": 0.5,
        "popsnn_over_snntorch": 30.0,
        "popsnn_over_snntorch_compiled": 15.0,
        "popsnn_over_numpy_step": 4.0,
        "popsnn_over_numpy_hoisted": 3.0,
        "popsnn_over_numpy_per_step": 6.0,
        "snntorch_compiled_compile_s": 42.0,
        **{f"{s}_peak_rss_mib": 100.0 + i for i, s in enumerate(report.LABELS)},
    }
    dense_row = {**row, "input": "uniform", "popsnn_over_numpy_step": 3.5}
    latency = [
        {
            **row,
            "experiment": "latency",
            "batch": b,
            "popsnn_step_ms": 0.5 * b,
            "snntorch_step_ms": 10.0 * b,
            "limit_step_ms": 0.01 * b,
            "popsnn_over_snntorch": 20.0,
        }
        for b in (1, 8)
    ]
    sparse, weak = synthetic_sparse_rows(m), synthetic_weak_scaling_rows(m)
    for name, rows in (
        ("dsnn", [row, dense_row]),
        ("sparse", sparse),
        ("latency", latency),
        ("weak_scaling", weak),
    ):
        (tmp_path / f"{name}.json").write_text(json.dumps(rows))
    readme = tmp_path / "README.md"
    readme.write_text(f"top\n{report.BEGIN}\nold\n{report.END}\nbottom\n")
    report.write_all(tmp_path, readme)
    text = readme.read_text()
    assert "old" not in text and text.startswith("top") and text.endswith("bottom\n")
    kind = m["vector_isa"]
    assert f"MNIST input, {kind} machine: popsnn >= 40x snnTorch | 30.00x (dsnn run) | no |" in text
    assert f"MNIST input, {kind} machine: popsnn >= 10x snnTorch compiled | 15.00x" in text
    assert (
        f"U[0,1] input, {kind} machine: popsnn >= 3x NumPy step | 3.50x (dsnn run) | yes |" in text
    )
    assert (
        f"| DSNN batch 8, {kind} machine: popsnn >= 20x snnTorch at batch 8 | 20.00x "
        "(latency run) | yes |" in text
    )
    # The limit and each system's peak memory beside the ratios; compile time apart.
    assert (
        "| 16 | 4 | mnist | 30 | 1 | 2 | 8 | 10 | 5 | 30.00x | 15.00x | 4.00x | 3.00x | "
        "6.00x | 60 | 0.50 | 100 / 101 / 102 / 103 / 104 / 105 | 42 |" in text
    )
    assert (
        "| 8 | 4.00 | 80.00 | n/a | n/a | n/a | n/a | 20.0x | 15.0x | 4.0x | 3.0x | 6.0x | 0.080 |"
        in text
        and "*The limit*" in text
    )
    # Issue 13's goals from the hidden-200 case; each case its own table, skips named.
    assert (
        "| hidden 200: backward >= 40x, >= 80% less trace memory, accuracy within 1 point | "
        "B_th 0.2: 100.00x (wall clock, derived), 90.0% less trace memory (measured" in text
    )
    assert "| hidden 200: whole training step >= 5x dense | B_th 0.2: 5.00x | yes |" in text
    assert "**seed003-fashion-mnist-h200** (Perez-Nieves & Goodman: 784-200-200-10" in text
    assert "**seed002-shd-fixed**" in text and "| one-sided 0.9 |" in text
    assert "*seed003-fashion-mnist not run*: run make data" in text and "0.05 -> 0.1" in text
    assert "| 2 | 2 x 500 | 1,000 | 2,000 | 1.200 (estimate) | 0.92 | 7 |" in text
    assert (tmp_path / "sparse.png").exists()
    assert np.isfinite(len(text))


def test_cli_dispatches_every_experiment(tmp_path, monkeypatch, capsys):
    run = pytest.importorskip("run")
    called = []
    for fn in (
        "exp_dsnn",
        "exp_csnn",
        "exp_latency",
        "exp_batch",
        "exp_width",
        "exp_neurons",
        "exp_rate",
        "exp_population",
        "exp_sparse",
        "exp_sparse_full",
        "exp_sparse_accuracy",
        "exp_sparse_width",
        "exp_ipu",
        "exp_weak_scaling",
        "exp_isolation",
    ):
        monkeypatch.setattr(
            run.ex,
            fn,
            lambda *a, _fn=fn, **k: (
                called.append(_fn) or [{"experiment": _fn, "popsnn_images_per_s": 1.0}]
            ),
        )
    monkeypatch.setattr(run, "RESULTS", tmp_path)
    for name in run.EXPERIMENTS:
        assert run.main([name, "--quick", "--repeats", "1"]) == 0
        rows = json.loads((tmp_path / f"{name}.json").read_text())
        assert rows[0]["quick"] is True and rows[0]["machine"]["cores"] >= 1
        assert "not an IPU" in rows[0]["note"]
    assert len(called) == len(run.EXPERIMENTS)
    lines = capsys.readouterr().out.strip().splitlines()
    assert all(json.loads(line)["popsnn_images_per_s"] == 1.0 for line in lines)


def test_sparse_full_cases_replace_only_their_own_rows(tmp_path, monkeypatch):
    run = pytest.importorskip("run")

    def fake(size, repeats, cases):
        return [{"experiment": "sparse_full", "case": c, "run": 2} for c in cases]

    monkeypatch.setattr(run.ex, "exp_sparse_full", fake)
    monkeypatch.setattr(run, "RESULTS", tmp_path)
    old = [{"case": "a", "run": 1}, {"case": "b", "run": 1}]
    (tmp_path / "sparse_full.json").write_text(json.dumps(old))
    assert run.main(["sparse_full", "--quick", "--cases", "b,c"]) == 0
    rows = json.loads((tmp_path / "sparse_full.json").read_text())
    assert [(r["case"], r["run"]) for r in rows] == [("a", 1), ("b", 2), ("c", 2)]
    with pytest.raises(SystemExit):
        run.main(["sparse", "--cases", "b"])  # --cases belongs to sparse_full / _accuracy


def test_the_dsnn_spread_only_counts_runs_of_the_same_engine_code():
    """Rows from a result file of other engine sources (another commit's kernels, or no
    commit recorded) do not pass for the dsnn run's spread; the same commit's do."""
    import report

    head = os.popen(f"git -C {BENCH} rev-parse --short HEAD").read().strip()
    row = {"machine": {"git_commit": head}, "hidden": 1000, "batch": 128}
    res = {
        "dsnn": [row],
        "batch": [
            dict(row, popsnn_images_per_s=1.0),
            dict(row, machine={"git_commit": None}, popsnn_images_per_s=2.0),
            dict(row, machine={"git_commit": "0000000"}, popsnn_images_per_s=3.0),
        ],
    }
    assert [r["popsnn_images_per_s"] for r in report.same_engine_rows(res, head)] == [1.0]


def test_sparse_goal_takes_accuracy_from_the_seeded_run_when_it_covers_the_case():
    """A --quick speed run's single short training cannot tell one point apart: where
    sparse_accuracy ran the case's data set and width over seeds, its mean change decides."""
    import report_sparse

    speed = synthetic_sparse_rows(ex.machine())
    acc = {"dataset": "fashion-mnist", "hidden": 200, "test_accuracy": 0.8}
    seeded = [
        dict(acc, rule="dense", b_th=None, accuracy_change=0.0),
        dict(acc, rule="window", b_th=0.2, test_accuracy=0.78, accuracy_change=-0.02),
    ]
    assert "B_th 0.2: 100.00x" in report_sparse.goal_lines({"sparse": speed})[0]
    lost = report_sparse.goal_lines({"sparse": speed, "sparse_accuracy": seeded})[0]
    assert "no rule kept the accuracy within a point" in lost
    seeded[1]["accuracy_change"] = -0.004
    kept = report_sparse.goal_lines({"sparse": speed, "sparse_accuracy": seeded})[0]
    assert "B_th 0.2: 100.00x" in kept and "-0.40 points against dense" in kept
