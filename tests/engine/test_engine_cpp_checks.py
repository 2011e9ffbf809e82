"""The C++ API refuses bad input from C++ too (tests/engine/cpp_checks/api_checks.cpp, built
against the installed package): NaN/inf input, bad surrogate parameter, NaN or negative
learning rate, setParams / setOptimizerState validated whole before any write, and a second
concurrent call refused with popsnn::NetworkBusy."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parent / "cpp_checks"
CHECKS = [
    "nan_surrogate_param",
    "zero_atan_alpha",
    "nan_learning_rate",
    "negative_learning_rate",
    "inf_input",
    "nan_input_infer",
    "nan_set_learning_rate",
    "set_params_nan",
    "set_params_nothing_written",
    "set_optimizer_state_shape",
    "set_optimizer_state_nothing_written",
    "concurrent_call_refused",
]


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed")
def test_cpp_api_checks(tmp_path):
    cmakedir = subprocess.run(
        [sys.executable, "-m", "popsnn", "--cmakedir"], check=True, capture_output=True, text=True
    ).stdout.strip()
    build = tmp_path / "build"
    for cmd in (
        [
            "cmake",
            "-S",
            str(SOURCE),
            "-B",
            str(build),
            f"-Dpopsnn_DIR={cmakedir}",
            "-DCMAKE_BUILD_TYPE=Release",
        ],
        ["cmake", "--build", str(build)],
    ):
        run = subprocess.run(cmd, capture_output=True, text=True)
        assert run.returncode == 0, run.stdout + run.stderr
    run = subprocess.run([str(build / "api_checks")], capture_output=True, text=True, timeout=300)
    lines = run.stdout.splitlines()
    assert run.returncode == 0, run.stdout + run.stderr
    assert lines == [f"ok {name}" for name in CHECKS]
