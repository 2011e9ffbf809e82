"""examples/cpp_train builds against the installed CMake package (found with
`python -m popsnn --cmakedir`), trains a few steps and runs inference."""

import subprocess
from pathlib import Path

from engine_helpers import build_against_installed

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cpp_train"


def test_cpp_example_builds_trains_and_infers(tmp_path):
    build = build_against_installed(EXAMPLE, tmp_path / "build")
    run = subprocess.run([str(build / "cpp_train")], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    last = run.stdout.strip().splitlines()[-1]
    assert last.startswith("first loss")
    first_loss, last_loss = float(last.split()[2]), float(last.split()[5])
    assert last_loss < first_loss
