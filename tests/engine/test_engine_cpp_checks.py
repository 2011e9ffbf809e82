"""The C++ API refuses bad input from C++ too (tests/engine/cpp_checks/api_checks.cpp, built
against the installed package): NaN/inf input, bad surrogate parameter, NaN or negative
learning rate, setParams / setOptimizerState validated whole before any write, and a second
concurrent call refused with popsnn::NetworkBusy; a uint8 batch gives its float copy's loss and
gradients; a null x names both kinds of batch."""

import subprocess
from pathlib import Path

from engine_helpers import build_against_installed

SOURCE = Path(__file__).resolve().parent / "cpp_checks"
CHECKS = [
    "nan_surrogate_param",
    "zero_atan_alpha",
    "nan_learning_rate",
    "negative_learning_rate",
    "byte_input_equals_floats",
    "null_input",
    "inf_input",
    "nan_input_infer",
    "nan_set_learning_rate",
    "set_params_nan",
    "set_params_nothing_written",
    "set_optimizer_state_shape",
    "set_optimizer_state_nothing_written",
    "concurrent_call_refused",
]


def test_cpp_api_checks(tmp_path):
    build = build_against_installed(SOURCE, tmp_path / "build")
    run = subprocess.run([str(build / "api_checks")], capture_output=True, text=True, timeout=300)
    lines = run.stdout.splitlines()
    assert run.returncode == 0, run.stdout + run.stderr
    assert lines == [f"ok {name}" for name in CHECKS]
