"""bench/half_precision.py accuracy: each seed trains both dtypes from the same start, its rows
join the seeds saved before with the same run length, and the summary spans them.
A tiny network and run stand in for the DSNN (the real run takes minutes a step here)."""

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

hp = pytest.importorskip("half_precision")

import popsnn  # noqa: E402


def _tiny_model(dtype, batch=8, seed=0):
    net = popsnn.Sequential(popsnn.Linear(784, 16), popsnn.Leaky(beta=0.9))
    return popsnn.Model(
        net, device="reference", num_steps=3, batch_size=batch, seed=seed, dtype=dtype
    )


def test_accuracy_rows_of_each_seed_are_kept_and_summarised(tmp_path, monkeypatch):
    monkeypatch.setattr(hp, "RESULTS", tmp_path / "half.json")
    monkeypatch.setattr(hp, "make_model", _tiny_model)
    for seed in (0, 1):
        hp.main(["accuracy", "--train-steps", "2", "--test-images", "16", "--seed", str(seed)])
    saved = json.loads((tmp_path / "half.json").read_text())["accuracy"]["2 steps, 16 test images"]
    assert sorted(saved["runs"]) == ["0", "1"]
    for rows in saved["runs"].values():
        assert rows["float16"]["train_steps"] == 2 and rows["float16"]["test_images"] == 16
        assert rows["float16"]["loss_scale"] > 0 and "loss_scale" not in rows["float32"]
    summary = saved["summary"]
    assert summary["seeds"] == [0, 1]
    for dtype in hp.DTYPES:
        acc = [r[dtype]["test_accuracy"] for r in saved["runs"].values()]
        assert summary[dtype]["min"] == min(acc) and summary[dtype]["max"] == max(acc)
    # A run of another length sits apart from those seeds.
    hp.main(["accuracy", "--train-steps", "1", "--test-images", "16", "--seed", "2"])
    saved = json.loads((tmp_path / "half.json").read_text())["accuracy"]
    assert saved["1 steps, 16 test images"]["summary"]["seeds"] == [2]
    assert saved["2 steps, 16 test images"]["summary"]["seeds"] == [0, 1]


def test_engine_accuracy_trains_both_dtypes_on_the_engine(tmp_path, monkeypatch):
    """engine-accuracy: the engine device, both dtypes from one seed, float16's scale kept."""
    made = []

    def tiny_engine(dtype, batch=8, seed=0, device="reference"):
        made.append(device)
        model = _tiny_model(dtype, batch, seed)
        return popsnn.Model(
            model.net, device=device, num_steps=3, batch_size=batch, seed=seed, dtype=dtype
        )

    monkeypatch.setattr(hp, "RESULTS", tmp_path / "half.json")
    monkeypatch.setattr(hp, "make_model", tiny_engine)
    monkeypatch.setattr(hp, "BATCH", 8)
    hp.main(["engine-accuracy", "--train-steps", "2", "--test-images", "16"])
    assert made == ["cpu", "cpu"]
    saved = json.loads((tmp_path / "half.json").read_text())["engine_accuracy"]
    rows = saved["2 steps, 16 test images, seed 0"]
    assert rows["float16"]["train_steps"] == 2 and rows["float16"]["loss_scale"] > 0
    assert 0.0 <= rows["float32"]["test_accuracy"] <= 1.0 and saved["device"] == "cpu"
