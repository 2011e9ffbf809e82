"""bench/profile_step.perf_loop, the perf runner bench/sparse_profile.py shares: without perf it
calls the step back to back for the time asked, at least once."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import profile_step  # noqa: E402
import sparse_profile  # noqa: E402


def test_perf_loop_runs_the_step_for_the_time_asked():
    calls = []
    n, seconds = profile_step.perf_loop(lambda: calls.append(1), 0.05, "")
    assert n == len(calls) > 1 and seconds >= 0.05
    n, _ = profile_step.perf_loop(lambda: calls.append(1), 0.0, "")
    assert n == 1
    assert sparse_profile.perf_loop is profile_step.perf_loop
