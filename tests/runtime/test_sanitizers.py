"""The C++ programs under AddressSanitizer and UndefinedBehaviorSanitizer.

popsnn itself (runtime, graph builder, its codelet object) is built from this checkout with
both sanitizers into a private prefix, with Leaky's LIF vertices only (POPSNN_NEURONS: the
examples train Leaky networks, and every model's vertices would take most of the build); the
runtime's test cases (cpp/, runtime_cases) and the C++ examples (examples/cpp_train,
examples/cpp_checkpoint) are built against it the same way and run. Every sanitizer report
ends the program with a non-zero status (halt_on_error, no recovery), leaks included; the
cases must also print the very JSON the regular build prints.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import HERE, REPO, cmake_build

import popsnn
from popsnn import checkpoint

# -O0 with line tables only: with -O1 -g, the builder alone takes minutes to compile here.
FLAGS = "-O0 -g1 -fsanitize=address,undefined -fno-sanitize-recover=all"
# A build type of its own, so that no Debug/Release flags are added to FLAGS.
CONFIG = ("-DCMAKE_BUILD_TYPE=Sanitize", f"-DCMAKE_CXX_FLAGS={FLAGS}")
SANITIZER_ENV = {
    "ASAN_OPTIONS": "detect_leaks=1:halt_on_error=1:abort_on_error=0",
    "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
}
# The neuron models the sanitized codelet object carries: what the C++ examples train.
SANITIZED_NEURONS = "Leaky"
REPORTS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")

# (case, device, extra) of runtime_cases (cpp/): every case, on the devices with the most structure.
CASES = [
    ("target", "ipu2x8", ""),
    ("tensor_views", "ipu2x8", ""),
    ("vertices", "cpu", ""),
    ("gp", "ipu4", ""),
    ("copies", "ipu2x8", ""),
    ("streams", "cpu", ""),
    ("control", "ipu4", ""),
    ("virtual_graph", "ipu16", ""),
    ("multi_program", "cpu", ""),
    ("non_contiguous", "ipu4", ""),
    ("half", "ipu4", ""),
    ("parallel", "ipu2x8", ""),
    ("locality", "ipu2x8", ""),
    ("memory", "ipu4-1k", "250"),
    ("memory", "ipu4-1k", "300"),
    ("memory_mk2", "mk2", ""),
    ("profile", "ipu2x8", ""),
    ("misc", "ipu16", ""),
    ("scanner", "ipu4", str(HERE / "cpp" / "ScannerCases.cpp")),
]


def run(cmd, **kwargs):
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kwargs)
    assert proc.returncode == 0, (
        f"{cmd} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    )
    assert not any(r in proc.stderr for r in REPORTS), proc.stderr[-6000:]
    return proc


@pytest.fixture(scope="module")
def sanitized_root(tmp_path_factory) -> Path:
    """popsnn built with the sanitizers in root/build, installed in root/prefix."""
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.fail("cmake is not on PATH; the sanitizer tests build popsnn with it")
    root = tmp_path_factory.mktemp("sanitized")
    build, prefix = root / "build", root / "prefix"
    run(
        [
            cmake,
            "-S",
            REPO,
            "-B",
            build,
            "-DPOPSNN_BUILD_PYTHON=OFF",
            "-DPOPSNN_NATIVE_CODELETS=OFF",
            f"-DPOPSNN_NEURONS={SANITIZED_NEURONS}",
            f"-DPython_EXECUTABLE={sys.executable}",  # its nlohmann-json (checkpoint reader)
            *CONFIG,
        ]
    )
    run([cmake, "--build", build, "-j", "2"])
    run([cmake, "--install", build, "--prefix", prefix])
    return root


@pytest.fixture(scope="module")
def sanitized_popsnn(sanitized_root) -> Path:
    """The sanitized popsnn's CMake package folder."""
    return sanitized_root / "prefix" / "lib" / "cmake" / "popsnn"


@pytest.fixture(scope="module")
def sanitized_cases(sanitized_popsnn, tmp_path_factory) -> Path:
    """The build folder of cpp/ (runtime_cases, test_codelets.gp) with the sanitizers."""
    build = tmp_path_factory.mktemp("sanitized_cases")
    cmake_build(HERE / "cpp", build, sanitized_popsnn, *CONFIG)
    return build


def test_runtime_cases_are_clean_and_unchanged_under_the_sanitizers(
    sanitized_cases, runtime_cases, tmp_path
):
    build = sanitized_cases
    env = dict(runtime_cases.env(**SANITIZER_ENV), POPSNN_CACHE_DIR=str(tmp_path / "cache"))
    for case, device, extra in CASES:
        cmd = [
            build / "runtime_cases",
            case,
            device,
            runtime_cases.codelets,
            build / "test_codelets.gp",
        ] + ([extra] if extra else [])
        got = json.loads(run(cmd, env=env, timeout=300).stdout)
        assert got == runtime_cases(case, device, extra), (case, device)


def test_misuse_errors_are_clean_under_the_sanitizers(sanitized_cases, runtime_cases, tmp_path):
    # The error paths (exceptions thrown mid-construction) are where leaks hide.
    (tmp_path / "broken.cpp").write_text(
        "#include <poplar/Vertex.hpp>\nclass Broken : public poplar::Vertex {\npublic:\n"
        "  bool compute() { return undefined_name; }\n};\n"
    )
    (tmp_path / "garbage.gp").write_text("not a shared object\n")
    build = sanitized_cases
    env = dict(runtime_cases.env(**SANITIZER_ENV), POPSNN_CACHE_DIR=str(tmp_path / "cache"))
    cmd = [
        build / "runtime_cases",
        "errors",
        "ipu4",
        runtime_cases.codelets,
        build / "test_codelets.gp",
        tmp_path,
    ]
    errors = json.loads(run(cmd, env=env, timeout=300).stdout)["errors"]
    assert errors and all(e is not None and e["error"] for e in errors.values()), errors


def test_cpp_example_is_clean_under_the_sanitizers(sanitized_popsnn, tmp_path):
    build = tmp_path / "example"
    cmake_build(REPO / "examples" / "cpp_train", build, sanitized_popsnn, *CONFIG)
    env = dict(os.environ, **SANITIZER_ENV)
    for device in ("cpu", "ipu-model"):
        last = run([build / "cpp_train", device], env=env, timeout=300).stdout.split("\n")[-2]
        words = last.split()
        assert words[:2] == ["first", "loss"] and float(words[5]) < float(words[2]), last


def test_cpp_checkpoint_reader_is_clean_under_the_sanitizers(sanitized_popsnn, tmp_path):
    """examples/cpp_checkpoint on a Python-saved checkpoint and on damaged copies of it: the
    reader's checks of untrusted bytes run under ASan/UBSan with no report."""
    build = tmp_path / "example"
    cmake_build(REPO / "examples" / "cpp_checkpoint", build, sanitized_popsnn, *CONFIG)
    net = popsnn.Sequential(
        popsnn.Linear(6, 8), popsnn.Leaky(beta=0.9), popsnn.Linear(8, 2), popsnn.Leaky(beta=0.9)
    )
    good = checkpoint.save(tmp_path / "good.npz", net=net, params=net.init_params(0))
    np.full((2, 6), 1.5, "<f4").tofile(tmp_path / "x.f32")
    raw = good.read_bytes()
    (tmp_path / "truncated.npz").write_bytes(raw[: len(raw) // 2])
    (tmp_path / "flipped.npz").write_bytes(raw[:-30] + bytes([raw[-30] ^ 0xFF]) + raw[-29:])
    env = dict(os.environ, **SANITIZER_ENV)
    for name, status in (("good", 0), ("truncated", 1), ("flipped", 1)):
        cmd = [build / "cpp_checkpoint", tmp_path / f"{name}.npz", tmp_path / "x.f32", "2"]
        proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env)
        assert proc.returncode == status, (name, proc.stderr[-3000:])
        assert not any(r in proc.stderr for r in REPORTS), proc.stderr[-6000:]


def test_a_build_with_some_neuron_models_refuses_the_others(
    sanitized_root, sanitized_popsnn, tmp_path
):
    """POPSNN_NEURONS: the sanitized build carries Leaky only; a Leaky network builds, any other
    model is refused in one line naming the option, and an unknown name stops the generator."""
    build = tmp_path / "neurons"
    cmake_build(HERE / "cpp_neurons", build, sanitized_popsnn, *CONFIG)
    env = dict(os.environ, **SANITIZER_ENV)
    assert run([build / "cpp_neurons", "Leaky"], env=env).stdout == "built\n"
    for model in ("Synaptic", "Alpha"):
        proc = subprocess.run(
            [str(build / "cpp_neurons"), model], capture_output=True, text=True, env=env
        )
        assert proc.returncode == 1, proc.stderr[-3000:]
        assert not any(r in proc.stderr for r in REPORTS), proc.stderr[-6000:]
        line = proc.stdout.strip()
        assert "\n" not in line and "POPSNN_NEURONS" in line and model in line, line
        assert f"built with the neuron models {SANITIZED_NEURONS} only" in line, line
    generator = sanitized_root / "build" / "host" / "popsnn_vertex_instances"
    source = REPO / "codelets" / "LifForward.cpp"
    out = tmp_path / "LifForward.cpp"
    proc = subprocess.run(
        [str(generator), "LifForward", str(source), str(out), "Leaky", "Leakey"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 1 and not out.exists(), proc.stderr
    assert "unknown neuron model 'Leakey'" in proc.stderr and "Synaptic" in proc.stderr
    run([generator, "LifForward", source, out, "Synaptic"], env=env)
    generated = out.read_text()
    assert "template class LifForward<popsnn::Synaptic," in generated
    assert "popsnn::Leaky," not in generated.split("Generated from")[-1]
