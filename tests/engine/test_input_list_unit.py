"""The host's input lists (host/src/InputList.cpp) against a plain loop
(input_list_check/input_list_check.cpp) on random float and byte batches, in the SSE2 build
and the plain-loop build, with the address and undefined-behaviour sanitizers where the
compiler has them. The engine tests (test_engine_input_list.py) cover the lists through the
reference."""

import platform
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [
    Path(__file__).resolve().parent / "input_list_check" / "input_list_check.cpp",
    ROOT / "host" / "src" / "InputList.cpp",
]
BUILDS = {"sse2": [], "plain-loops": ["-DPOPSNN_PLAIN_LOOPS"]}
SANITIZERS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=all"]

pytestmark = pytest.mark.skipif(shutil.which("c++") is None, reason="no C++ compiler")


def _sanitizers_work(tmp_path) -> bool:
    probe = tmp_path / "probe.cpp"
    probe.write_text("int main() { return 0; }\n")
    built = subprocess.run(["c++", *SANITIZERS, str(probe), "-o", str(tmp_path / "probe")])
    return built.returncode == 0


@pytest.mark.parametrize("build", sorted(BUILDS))
def test_input_lists_equal_a_plain_loop(build, tmp_path):
    if build == "sse2" and platform.machine() != "x86_64":
        pytest.skip("the SSE2 path is x86-64's")
    exe = tmp_path / "input_list_check"
    flags = ["-std=c++17", "-O1", "-g", f"-I{ROOT / 'host' / 'src'}", f"-I{ROOT / 'include'}"]
    if _sanitizers_work(tmp_path):
        flags += SANITIZERS
    subprocess.run(["c++", *flags, *BUILDS[build], *map(str, SOURCES), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "mismatches 0"


def test_input_list_speed_bench_builds_and_lists(tmp_path):
    """bench/input_list_speed.cpp (the listing's timing) builds against the host's source and
    runs: some events listed, at most one per central pixel and sample, as floats and bytes."""
    exe = tmp_path / "input_list_speed"
    flags = ["-std=c++17", "-O1", f"-I{ROOT / 'host' / 'src'}", f"-I{ROOT / 'include'}"]
    sources = [ROOT / "bench" / "input_list_speed.cpp", ROOT / "host" / "src" / "InputList.cpp"]
    subprocess.run(["c++", *flags, *map(str, sources), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe), "5", "3", "1"], check=True, capture_output=True, text=True)
    entries, float_micros, byte_micros = out.stdout.split()
    assert int(entries) > 0 and float(float_micros) > 0 and float(byte_micros) > 0
    assert int(entries) <= 3 * 15 * 15  # one event at most per central pixel and sample
