"""bench/conv_estimate.py on a small batch: the CSNN's second convolutional stage on the Mk2
ipu-model geometry, its spikes equal to the reference's (the script checks), and a row that
labels its figure an estimate of one stage and carries the plan and the cost model's seconds."""

import json
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
conv_estimate = pytest.importorskip("conv_estimate")


def test_small_batch_row(tmp_path):
    out = tmp_path / "row.json"
    row = conv_estimate.main(["--batch", "2", "--steps", "2", "--out", str(out)])
    assert json.loads(out.read_text()) == json.loads(json.dumps(row))
    assert row["what"].startswith("ESTIMATE") and "stage 2 only" in row["what"]
    assert row["estimate"]["estimate_seconds"] > 0
    assert row["stage_images_per_s_upper_bound"] == pytest.approx(
        2 / row["estimate"]["estimate_seconds"]
    )
    assert row["plan"]["tile_bytes"] <= 624 * 1024
    assert row["spikes_equal_reference"]
