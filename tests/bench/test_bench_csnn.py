"""Smoke test of `python bench/run.py csnn`: the CSNN experiment runs its tiniest setting and
returns a row that says what ran and why anything did not; bench/csnn_estimate.py (the Mk2
ESTIMATE) on a tiny batch. No timing is asserted (the machine
is shared)."""

import json
import sys
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

ex = pytest.importorskip("experiments")
systems = pytest.importorskip("systems")
workers = pytest.importorskip("workers")
throughput = pytest.importorskip("throughput")


@pytest.fixture(autouse=True)
def no_settle_pause(monkeypatch):
    monkeypatch.setattr(workers, "SETTLE_S", 0.0)
    monkeypatch.setattr(workers, "WARM_S", 0.0)
    monkeypatch.setattr(workers, "TIMED_S", 0.0)


def test_csnn_workload_is_seed_000s_network():
    work = ex.csnn_workload(batch=4, steps=2)
    assert [s.out_shape for s in work.net.stages] == [(12, 12, 12), (64, 4, 4), (10,)]
    assert work.x.shape == (4, 784) and work.direct


def test_csnn_experiment_row():
    include = ("popsnn", "snntorch", "numpy_step", "numpy_hoisted", "limit")
    row, ruled = ex.exp_csnn(repeats=1, batch=2, steps=2, include=include)
    json.dumps([row, ruled])
    # the second row: popsnn alone with the window rule on the same network and batch
    assert ruled["sparse"] == throughput.CSNN_RULE and "sparse" not in row
    assert {k: ruled[k] for k in ("network", "batch", "steps")} == {
        k: row[k] for k in ("network", "batch", "steps")
    }
    assert "snntorch_images_per_s" not in ruled
    assert row["seed000_ipu_measured_images_per_s"] == pytest.approx(15566.16)
    # no results file for B 2, T 2: the row names the command that estimates it
    assert row["ipu_model_estimate_images_per_s"] is None
    assert "bench/csnn_estimate.py --batch 2 --steps 2" in row["ipu_model_estimate_skipped"]
    assert row["numpy_hoisted_images_per_s"] > 0
    assert row["numpy_step_images_per_s"] is None and row["numpy_step_skipped"]
    assert row["limit_images_per_s"] > 0  # the convolutions as their im2col products
    if systems.engine_available() is None:  # the engine runs the CSNN now
        assert row["popsnn_images_per_s"] > 0 and ruled["popsnn_images_per_s"] > 0
    if systems.snntorch_available() is None:
        assert row["snntorch_images_per_s"] > 0
        assert ruled["popsnn_over_snntorch_eager"] == pytest.approx(
            ruled["popsnn_images_per_s"] / row["snntorch_images_per_s"]
        )
        assert row["reference_over_snntorch"] == pytest.approx(
            row["numpy_hoisted_images_per_s"] / row["snntorch_images_per_s"]
        )


def test_the_limit_counts_each_convolution_as_its_im2col_product():
    B, T = 4, 3
    _, flops = systems.dense_products(ex.csnn_workload(batch=B, steps=T))
    first = 2 * (B * 24 * 24) * 25 * 12 * 2  # direct input: once per sample, no dL/dx
    second = 2 * (T * B * 8 * 8) * 300 * 64 * 3  # current, dL/dW, dL/dx every step
    readout = 2 * (T * B) * 1024 * 10 * 3
    assert flops == first + second + readout


@pytest.mark.skipif(systems.snntorch_available() is not None, reason="needs torch/snnTorch")
def test_snntorch_system_builds_the_same_conv_shapes():
    import snntorch as snn
    import torch
    from torch import nn

    work = ex.csnn_workload(batch=2, steps=1)
    synapses, _ = systems._snntorch_layers(work.net, snn, nn)
    h = torch.zeros(2, 1, 28, 28)
    for synapse, stage in zip(synapses, work.net.stages):
        h = synapse(h)
        assert tuple(h.shape[1:]) == stage.out_shape
    assert np.prod(h.shape[1:]) == 10


def test_csnn_estimate_on_a_tiny_batch(tmp_path):
    if systems.engine_available() is not None:
        pytest.skip(systems.engine_available())
    import csnn_estimate

    row = csnn_estimate.main(["--batch", "2", "--steps", "3", "--out", str(tmp_path / "e.json")])
    assert row["output_spikes_equal_reference"]
    assert row["estimate"]["estimate_total_cycles"] > 0
    assert row["ipu_model_estimate_images_per_s"] == pytest.approx(
        2 / row["estimate"]["estimate_seconds"]
    )
    assert len(row["plans"]) == 3 and "ESTIMATE" in row["what"]


def test_csnn_steps_runs_its_training_steps():
    if systems.engine_available() is not None:
        pytest.skip(systems.engine_available())
    import csnn_steps

    assert np.isfinite(csnn_steps.main(["1"]))
