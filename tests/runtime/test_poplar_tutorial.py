"""examples/poplar_tutorial builds as a plain CMake project against the installed
popsnn::poplar and prints the numbers its header promises."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

EXPECTED = """sums: 6 22 38 54
axpy: 2 5 8 11 14 17 20 23
scaled: 0 3 6 9 12 15
streamed: 60 66 72 78
"""


def test_tutorial_builds_and_prints_the_expected_numbers(tmp_path, build_cmake_project):
    example = REPO / "examples" / "poplar_tutorial"
    build_cmake_project(example, tmp_path / "build")
    env = dict(os.environ, POPSNN_CACHE_DIR=str(tmp_path / "cache"))
    exe = str(tmp_path / "build" / "tutorial")
    proc = subprocess.run([exe], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == EXPECTED
    # With a second argument it prints the profile summary, labelled as estimates.
    proc = subprocess.run(
        [exe, str(example / "codelets.cpp"), "profile"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(EXPECTED)
    assert "ESTIMATES from the IPU cost model, not measurements on an IPU" in proc.stdout
    assert "Execute(sum)" in proc.stdout and "StreamCopy(to-device" in proc.stdout
