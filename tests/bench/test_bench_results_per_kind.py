"""The results files of the experiments whose targets hold on either machine kind (dsnn,
neurons, csnn, latency: bench/run.py's KEPT_PER_KIND) keep one run per kind, and the goals
table judges each kind's run on its own."""

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

report = pytest.importorskip("report")


def rerun_kept_per_kind(tmp_path, monkeypatch, name, fresh, old_of):
    """Runs experiment `name` (its rows `fresh`) over a saved file of `old_of(kind, other)`
    rows; returns (kind, other, the saved rows as (kind, popsnn_images_per_s or batch))."""
    run = pytest.importorskip("run")
    kind = run.ex.machine()["vector_isa"]
    other = "avx512" if kind != "avx512" else "avx2"
    monkeypatch.setattr(run.ex, f"exp_{name}", lambda *a, **k: [dict(r) for r in fresh])
    monkeypatch.setattr(run, "RESULTS", tmp_path)
    (tmp_path / f"{name}.json").write_text(json.dumps(old_of(kind, other)))
    assert run.main([name, "--quick", "--repeats", "1"]) == 0
    rows = json.loads((tmp_path / f"{name}.json").read_text())
    return kind, other, rows


def saved(rows, key="popsnn_images_per_s"):
    return [(r["machine"]["vector_isa"], r[key]) for r in rows]


def test_dsnn_results_keep_one_run_per_machine_kind(tmp_path, monkeypatch):
    """A dsnn run replaces its own machine kind's rows and keeps the other kind's, and the
    goals table judges each kind's run on its own."""
    fresh = [{"experiment": "dsnn", "input": "mnist", "popsnn_images_per_s": 2.0}]
    kind, other, rows = rerun_kept_per_kind(
        tmp_path,
        monkeypatch,
        "dsnn",
        fresh,
        lambda kind, other: [
            {"input": "mnist", "popsnn_images_per_s": 40_000.0, "machine": {"vector_isa": other}},
            {"input": "mnist", "popsnn_images_per_s": 1.0, "machine": {"vector_isa": kind}},
        ],
    )
    assert saved(rows) == [(other, 40_000.0), (kind, 2.0)]
    goals = report.goals({"dsnn": rows})
    assert f"MNIST input, {other} machine: popsnn >= 30,000 images/s | 40,000" in goals
    assert f"MNIST input, {kind} machine: popsnn >= 30,000 images/s | 2 " in goals


def test_csnn_results_keep_one_run_per_machine_kind(tmp_path, monkeypatch):
    """A csnn run (its dense and window-rule rows) replaces its own machine kind's rows and
    keeps the other kind's, so an AVX2 run is saved beside the AVX-512 one."""
    fresh = [{"popsnn_images_per_s": 2.0}, {"popsnn_images_per_s": 3.0, "sparse": "window:0.2"}]
    kind, other, rows = rerun_kept_per_kind(
        tmp_path,
        monkeypatch,
        "csnn",
        fresh,
        lambda kind, other: [
            {"popsnn_images_per_s": 1_590.0, "machine": {"vector_isa": other}},
            {
                "popsnn_images_per_s": 1_530.0,
                "sparse": "window:0.2",
                "machine": {"vector_isa": other},
            },
            {"popsnn_images_per_s": 1.0, "machine": {"vector_isa": kind}},
        ],
    )
    assert saved(rows) == [(other, 1_590.0), (other, 1_530.0), (kind, 2.0), (kind, 3.0)]


def test_the_goals_table_judges_each_kinds_csnn_run():
    """Issue 15's 20x snnTorch eager, per machine kind, from the dense row only (the rule's
    row and quick runs are not the target's setting)."""
    rows = [
        {"popsnn_over_snntorch": 5.27, "machine": {"vector_isa": "avx512"}},
        {"popsnn_over_snntorch_eager": 5.07, "sparse": "window:0.2", "machine": {}},
        {"popsnn_over_snntorch": 21.0, "machine": {"vector_isa": "avx2"}},
        {"popsnn_over_snntorch": 99.0, "quick": True, "machine": {"vector_isa": "avx2"}},
    ]
    goals = report.goals({"csnn": rows})
    assert (
        "CSNN B=128, avx512 machine: popsnn >= 20x snnTorch eager | 5.27x (csnn run) | no" in goals
    )
    assert (
        "CSNN B=128, avx2 machine: popsnn >= 20x snnTorch eager | 21.00x (csnn run) | yes" in goals
    )
    assert goals.count("CSNN") == 2


def test_latency_results_keep_one_run_per_machine_kind(tmp_path, monkeypatch):
    """A latency run replaces its own machine kind's rows and keeps the other kind's, and the
    batch-8 goal is judged per kind (issue 12's batch-8 target holds on either kind)."""
    row = {"experiment": "latency"}
    fresh = [{**row, "batch": b, "popsnn_over_snntorch": 19.0 + b / 8} for b in (1, 8)]
    kind, other, rows = rerun_kept_per_kind(
        tmp_path,
        monkeypatch,
        "latency",
        fresh,
        lambda kind, other: [
            {**row, "batch": 8, "popsnn_over_snntorch": 57.0, "machine": {"vector_isa": other}},
            {**row, "batch": 8, "popsnn_over_snntorch": 1.0, "machine": {"vector_isa": kind}},
        ],
    )
    assert saved(rows, "batch") == [(other, 8), (kind, 1), (kind, 8)]
    goals = report.goals({"latency": rows})
    assert f"batch 8, {other} machine: popsnn >= 20x snnTorch at batch 8 | 57.00x" in goals
    assert f"batch 8, {kind} machine: popsnn >= 20x snnTorch at batch 8 | 20.00x" in goals
