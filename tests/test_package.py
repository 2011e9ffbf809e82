"""The package builds, installs, and exposes its native module and CMake package."""

import subprocess
import sys

import popsnn
from popsnn import _native


def test_native_module_matches_package_version():
    assert _native.version() == popsnn.__version__


def test_cmakedir_points_at_an_installed_config():
    out = subprocess.run(
        [sys.executable, "-m", "popsnn", "--cmakedir"], check=True, capture_output=True, text=True
    ).stdout.strip()
    from pathlib import Path

    assert (Path(out) / "popsnnConfig.cmake").is_file()
    assert (Path(out) / "popsnnTargets.cmake").is_file()
