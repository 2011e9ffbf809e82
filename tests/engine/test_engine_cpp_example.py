"""examples/cpp_train builds against the installed CMake package (found with
`python -m popsnn --cmakedir`), trains a few steps and runs inference."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cpp_train"


@pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed")
def test_cpp_example_builds_trains_and_infers(tmp_path):
    cmakedir = subprocess.run(
        [sys.executable, "-m", "popsnn", "--cmakedir"], check=True, capture_output=True, text=True
    ).stdout.strip()
    build = tmp_path / "build"
    subprocess.run(
        [
            "cmake",
            "-S",
            str(EXAMPLE),
            "-B",
            str(build),
            f"-Dpopsnn_DIR={cmakedir}",
            "-DCMAKE_BUILD_TYPE=Release",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    subprocess.run(["cmake", "--build", str(build)], check=True, capture_output=True, text=True)
    run = subprocess.run([str(build / "cpp_train")], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    last = run.stdout.strip().splitlines()[-1]
    assert last.startswith("first loss")
    first_loss, last_loss = float(last.split()[2]), float(last.split()[5])
    assert last_loss < first_loss
