"""The runtime's thread pool on its own, under ThreadSanitizer: every task of every loop runs
once, a task's exception reaches the caller, and no data race is reported (pool/)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from conftest import HERE, REPO


@pytest.fixture(scope="module")
def stress(tmp_path_factory):
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.fail("g++ is not on PATH; the pool's stress test builds with it")
    exe = tmp_path_factory.mktemp("pool") / "pool_stress"
    src = REPO / "host" / "poplar" / "src"
    cmd = [cxx, "-std=c++17", "-O1", "-g", "-fsanitize=thread", "-pthread", f"-I{src}"]
    cmd += [str(HERE / "pool" / "pool_stress.cpp"), str(src / "ThreadPool.cpp"), "-o", str(exe)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return exe


@pytest.mark.parametrize("threads", [2, 3])
def test_every_task_runs_once_and_errors_reach_the_caller(stress, threads):
    env = dict(os.environ, POPSNN_NUM_THREADS=str(threads), TSAN_OPTIONS="halt_on_error=1")
    proc = subprocess.run([str(stress), "20000"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-6000:]
    assert "ThreadSanitizer" not in proc.stderr, proc.stderr[-6000:]
    got = json.loads(proc.stdout)
    assert got["wrong"] == 0
    assert got["thrown"] == got["expected"] > 0
