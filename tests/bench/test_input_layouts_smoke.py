"""Smoke test of bench/input_layouts.py on a tiny DSNN: both layouts run on one model, which
builds exactly two engines however often the script switches. No timing is asserted."""

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
input_layouts = pytest.importorskip("input_layouts")


def test_both_layouts_time_and_build_two_engines():
    row = input_layouts.main(["--repeats", "2", "--hidden", "16"])
    assert row["engine_builds"] == 2  # the switches timed above rebuilt nothing
    for key in ("direct_step_ms", "per_step_step_ms", "switch_ms", "engine_build_ms"):
        assert row[key] > 0, key
