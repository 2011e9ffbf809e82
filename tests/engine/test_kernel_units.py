"""The input layer's, PushGrads', the backward rows' and the whole-trace Leaky backward's kernels
(codelets/SparseRows.hpp, DenseKernels.hpp, LifCommon.hpp, BackwardRows.hpp, LeakyTrace.hpp)
against plain double-precision loops (kernel_checks/kernel_checks.cpp), built once per
instruction set the codelets have a path for: this machine's (-march=native),
AVX2, baseline x86-64 (SSE) and the plain loops of the IPU build; the event-driven convolution's
kernels (ConvEvents.hpp) against the dense ones bit for bit (kernel_checks/conv_checks.cpp) and
the listings of ids and values against plain loops (kernel_checks/list_checks.cpp), in the same
builds. The engine tests cover the same kernels through the reference on this
machine's build only."""

import platform
import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from engine_helpers import cpu_flags

ROOT = Path(__file__).resolve().parents[2]
SOURCE = Path(__file__).resolve().parent / "kernel_checks" / "kernel_checks.cpp"
BUILDS = {
    "native": ["-march=native"],
    "avx2": ["-mavx2", "-mfma"],
    "baseline": [],
    "plain-loops": ["-DPOPSNN_PLAIN_LOOPS"],
}
CHECKS = 61  # lines kernel_checks.cpp prints
# The whole-trace Leaky backward (3 settings x 4 results, and Synaptic's 3 x 5: its carried
# dL/dJ too), the surrogates' reciprocal (1) and the fused Leaky forward row (3 settings) exist
# in AVX-512 and AVX2 + FMA builds.
LEAK_TRACE_CHECKS = 28
FUSED_FORWARD_CHECKS = 3
# kernel_checks/list_checks.cpp: the spike and the convolution's non-zero listings (3 settings
# each) in every build; the gradient trace's listing by lanes and the whole-trace forward's ids
# from spike masks (3 each) in AVX-512 and AVX2 + FMA builds.
LIST_CHECKS, LANE_LIST_CHECKS = 6, 6


def builds_avx2_fma(build: str) -> bool:
    """AVX-512 builds have both too (every AVX-512 CPU has AVX2 and FMA)."""
    return build == "avx2" or (build == "native" and {"avx2", "fma"} <= cpu_flags())


pytestmark = [
    pytest.mark.skipif(shutil.which("c++") is None, reason="no C++ compiler"),
    pytest.mark.skipif(platform.machine() != "x86_64", reason="the builds target x86-64"),
]


def checks_output(source: Path, build: str, tmp_path: Path) -> dict:
    """{check: its printed result} of kernel_checks/`source` built for `build` and run."""
    exe = tmp_path / source.stem
    flags = ["-std=c++17", "-O2", "-fno-math-errno", "-fno-trapping-math", f"-I{ROOT / 'codelets'}"]
    subprocess.run(["c++", *flags, *BUILDS[build], str(source), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    return dict(line.split() for line in out.splitlines() if line)


@pytest.mark.parametrize("build", sorted(BUILDS))
def test_kernels_equal_plain_loops(build, tmp_path):
    errors = checks_output(SOURCE, build, tmp_path)
    leak = [name for name in errors if name.startswith("leak_trace_")]
    fused = [name for name in errors if name.startswith("fused_forward_")]
    assert len(leak) == (LEAK_TRACE_CHECKS if builds_avx2_fma(build) else 0)
    assert len(fused) == (FUSED_FORWARD_CHECKS if builds_avx2_fma(build) else 0)
    assert len(errors) == CHECKS + len(leak) + len(fused)
    for name, error in errors.items():
        assert float(error) < 2e-6, f"{name}: relative error {error} in the {build} build"
    # The fused weight step: the same sums and per-entry arithmetic as the separate passes.
    fused_steps = {name: e for name, e in errors.items() if name.startswith("fused_step_")}
    assert len(fused_steps) == 6
    assert all(float(e) == 0.0 for e in fused_steps.values()), fused_steps


@pytest.mark.parametrize("build", sorted(BUILDS))
def test_listings_equal_plain_loops(build, tmp_path):
    errors = checks_output(SOURCE.parent / "list_checks.cpp", build, tmp_path)
    lanes = [n for n in errors if n.startswith(("trace_list_", "leak_trace_masked_ids_"))]
    assert len(lanes) == (LANE_LIST_CHECKS if builds_avx2_fma(build) else 0)
    assert len(errors) == LIST_CHECKS + len(lanes)
    for name, error in errors.items():
        assert float(error) == 0.0, f"{name}: error {error} in the {build} build"


def run_bench_harness(name: str, data: bytes, *args: str, tmp_path, first: str = "") -> list:
    """bench/NAME.cpp built against the codelets (-O1, this CPU) and run on `first` (if
    given), `data` (written to a file, its first argument or the one after `first`) and args;
    its stdout's lines."""
    exe, data_file = tmp_path / name, tmp_path / f"{name}.data"
    data_file.write_bytes(data)
    flags = ["-std=c++17", "-O1", f"-I{ROOT / 'codelets'}", "-march=native"]
    subprocess.run(["c++", *flags, str(ROOT / "bench" / f"{name}.cpp"), "-o", str(exe)], check=True)
    run = subprocess.run(
        [str(exe), *([first] if first else []), str(data_file), *args],
        check=True,
        capture_output=True,
        text=True,
    )
    return run.stdout.splitlines()


def test_input_product_speed_bench_builds_and_times(tmp_path):
    """bench/input_product_speed.cpp (the input layer's products, timed) builds against the
    codelets and times both products on a given x."""
    rows = [[float((b + i) % 5 == 0) for i in range(784)] for b in range(8)]
    x = struct.pack(f"{8 * 784}f", *[v for row in rows for v in row])
    out = run_bench_harness("input_product_speed", x, "40", "2", "8", tmp_path=tmp_path)
    times = {
        line.split()[0]: (float(line.split()[2]), float(line.split()[4])) for line in out if line
    }
    assert set(times) == {"current", "weight_grad"}
    assert all(0.0 <= least <= median for least, median in times.values())
    # The AVX-512 branches compile too (this file includes InputProducts.hpp first, alone).
    icelake = ["-std=c++17", f"-I{ROOT / 'codelets'}", "-march=icelake-server", "-fsyntax-only"]
    subprocess.run(["c++", *icelake, str(ROOT / "bench" / "input_product_speed.cpp")], check=True)


CONV_CASES = 341  # lines conv_checks.cpp prints: 5 geometries x 4 channel counts x 16, the
# input gradient's runs: 5 pooled geometries x 4 channel counts, and the weight gradient by
# taps refusing an inf input


@pytest.mark.parametrize("build", sorted(BUILDS))
def test_event_convolution_kernels_give_the_dense_kernels_floats(build, tmp_path):
    """windowEventsRow and scatterRow (the event-driven forward's two kernels) against gatherRow
    (the dense one), the weight gradient by positions and by taps against the one by inputs, and the
    input gradient's runs kernel row by kernel row against position by position, bit for
    bit, in every build (kernel_checks/conv_checks.cpp); the AVX-512 branches compile."""
    source = SOURCE.parent / "conv_checks.cpp"
    differing = checks_output(source, build, tmp_path)
    assert len(differing) == CONV_CASES
    assert all(n == "0" for n in differing.values()), {
        k: n for k, n in differing.items() if n != "0"
    }
    if build == "native":
        icelake = ["-std=c++17", f"-I{ROOT / 'codelets'}", "-march=icelake-server", "-fsyntax-only"]
        subprocess.run(["c++", *icelake, str(source)], check=True)


def test_conv_forward_speed_bench_builds_and_agrees(tmp_path):
    """bench/conv_forward_speed.cpp (the CSNN's second convolution's event path, by positions
    and by scatter, timed) builds against the codelets, finds the two kernels' floats and
    argmax equal on spikes, and prints both timings."""
    rows = [[float((r * 7 + i) % 23 == 0) for i in range(12 * 12 * 12)] for r in range(6)]
    x = struct.pack(f"{6 * 1728}f", *[v for row in rows for v in row])
    out = run_bench_harness("conv_forward_speed", x, "4", "2", tmp_path=tmp_path)
    assert out[0] == "6 rows, same floats and argmax: yes"
    times = {line.split()[0]: float(line.split()[2]) for line in out[1:3]}
    assert set(times) == {"scatter", "windows"} and all(t >= 0.0 for t in times.values())


def test_conv_input_grad_speed_bench_builds_and_agrees(tmp_path):
    """bench/conv_input_grad_speed.cpp (the CSNN's second convolution's input gradient by
    window runs, kernel row by kernel row and position by position, timed) builds against
    the codelets, finds the two orders' floats equal, and prints both timings."""
    argmax = [(k * 7 + k // 5) % 4 for k in range(6 * 64 * 16)]
    data = struct.pack(f"{len(argmax)}I", *argmax)
    out = run_bench_harness("conv_input_grad_speed", data, "4", "2", tmp_path=tmp_path)
    assert out[0] == "6 rows, same floats: yes"
    times = {line.split()[0]: float(line.split()[2]) for line in out[1:3]}
    assert set(times) == {"positions", "rows"} and all(t >= 0.0 for t in times.values())


def test_conv_weight_grad_speed_bench_builds_and_agrees(tmp_path):
    """bench/conv_weight_grad_speed.cpp (the CSNN's second convolution's weight gradient by
    inputs, by output positions and tap by tap, timed) builds against the codelets, finds the
    two kernels' floats equal, and prints both timings."""
    rows = [[float((r * 7 + i) % 23 == 0) for i in range(12 * 12 * 12)] for r in range(6)]
    spikes = tmp_path / "x"
    spikes.write_bytes(struct.pack(f"{6 * 1728}f", *[v for row in rows for v in row]))
    argmax = [(k * 7 + k // 5) % 4 for k in range(6 * 64 * 16)]
    data = struct.pack(f"{len(argmax)}I", *argmax)
    out = run_bench_harness(
        "conv_weight_grad_speed", data, "4", "2", tmp_path=tmp_path, first=str(spikes)
    )
    assert out[0] == "6 rows, same floats: yes"
    times = {line.split()[0]: float(line.split()[2]) for line in out[1:3]}
    assert set(times) == {"positions", "taps"} and all(t >= 0.0 for t in times.values())


@pytest.mark.parametrize("arch", ["-march=native", "-msse2"])
def test_push_rows_speed_bench_builds_and_agrees(arch, tmp_path):
    """bench/push_rows_speed.cpp (PushSpikes' and PushGrads' row kernels, timed) builds against
    the codelets, finds addToRows equal to a plain loop bit for bit and sumRows within float
    rounding, and prints both timings."""
    exe = tmp_path / "push_rows_speed"
    flags = ["-std=c++17", "-O1", f"-I{ROOT / 'codelets'}", arch]
    source = ROOT / "bench" / "push_rows_speed.cpp"
    subprocess.run(["c++", *flags, str(source), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe), "0.2", "2"], check=True, capture_output=True, text=True)
    lines = out.stdout.splitlines()
    assert "addToRows as a plain loop bit for bit: yes" in lines[0]
    assert float(lines[0].split()[-1]) < 1e-4
    times = {line.split()[0]: float(line.split()[2]) for line in lines[1:3]}
    assert set(times) == {"sumRows", "addToRows"} and all(t >= 0.0 for t in times.values())
