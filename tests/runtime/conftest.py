"""Fixtures for the Poplar-runtime tests: the C++ test programs are built once
per session as a plain CMake project against the *installed* popsnn package
(``python -m popsnn --cmakedir``), the way a user's program would be."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


def installed_cmake_dir() -> Path:
    # Without PYTHONPATH, `python -m popsnn` is the installed copy, which has
    # the CMake package; a source checkout on PYTHONPATH has not.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, "-m", "popsnn", "--cmakedir"],
        capture_output=True,
        text=True,
        env=env,
        cwd="/",
    )
    if proc.returncode != 0:
        pytest.fail(
            "popsnn is not installed with its CMake package "
            f"({proc.stderr.strip()}); run `pip install .` first"
        )
    return Path(proc.stdout.strip())


def cmake_build(source: Path, build: Path, cmake_dir: Path, *options: str) -> None:
    """Configures (with -D`options`) and builds a CMake project against popsnn."""
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.fail("cmake is not on PATH; the runtime tests build C++ programs with it")
    configure = [
        cmake,
        "-S",
        str(source),
        "-B",
        str(build),
        f"-Dpopsnn_DIR={cmake_dir}",
        "-DCMAKE_BUILD_TYPE=Debug",
        *options,
    ]
    for cmd in (configure, [cmake, "--build", str(build), "-j", "2"]):
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            pytest.fail(f"{' '.join(cmd)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")


class RuntimeCases:
    """Runs one case of runtime_cases (cpp/) on one device and returns its JSON."""

    def __init__(self, build: Path, cache: Path, scratch: Path):
        self.exe = build / "runtime_cases"
        self.gp = build / "test_codelets.gp"
        self.codelets = HERE / "cpp" / "TestVertices.cpp"
        self.cache = cache
        self.scratch = scratch

    def env(self, **extra: str) -> dict:
        env = dict(os.environ)
        env.update(POPSNN_CACHE_DIR=str(self.cache), POPSNN_CPU_TILES="4")
        env.update(extra)
        return env

    def __call__(self, case: str, device: str, extra: str = "", **env: str) -> dict:
        cmd = [str(self.exe), case, device, str(self.codelets), str(self.gp)]
        if extra:
            cmd.append(extra)
        proc = subprocess.run(cmd, capture_output=True, text=True, env=self.env(**env), timeout=120)
        assert proc.returncode == 0, f"{cmd} exited {proc.returncode}:\n{proc.stderr}"
        return json.loads(proc.stdout)


@pytest.fixture(scope="session")
def build_cmake_project(cmake_dir):
    """build(source, build_dir): configures and builds a CMake project against popsnn."""
    return lambda source, build: cmake_build(Path(source), Path(build), cmake_dir)


@pytest.fixture(scope="session")
def cmake_dir() -> Path:
    path = installed_cmake_dir()
    # Only popsnn's own runtime ships the codelet ABI header; a package built on
    # Graphcore's SDK (POPSNN_USE_POPLAR_SDK=ON) has the SDK's Poplar instead.
    if not (path.parents[2] / "include" / "poplar" / "detail" / "CodeletABI.hpp").is_file():
        pytest.skip(
            "the installed popsnn is built on Graphcore's SDK; these tests check "
            "popsnn's own Poplar runtime"
        )
    return path


@pytest.fixture(scope="session")
def runtime_cases(tmp_path_factory, cmake_dir) -> RuntimeCases:
    build = tmp_path_factory.mktemp("runtime_build")
    cmake_build(HERE / "cpp", build, cmake_dir)
    return RuntimeCases(
        build, tmp_path_factory.mktemp("codelet_cache"), tmp_path_factory.mktemp("runtime_scratch")
    )
