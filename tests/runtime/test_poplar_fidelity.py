"""Programs written as for Graphcore's Poplar SDK (tests/runtime/fidelity/, one per
compatibility item of docs/poplar-compatibility.md) build unchanged with plain CMake
against the installed package, under -std=c++11, and print what Poplar's
documentation says they print."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def fidelity(tmp_path_factory, build_cmake_project):
    build = tmp_path_factory.mktemp("fidelity_build")
    build_cmake_project(HERE / "fidelity", build)

    def run(program: str) -> str:
        env = dict(os.environ, POPSNN_CPU_TILES="2")
        proc = subprocess.run(
            [str(build / program)], capture_output=True, text=True, env=env, timeout=120
        )
        assert proc.returncode == 0, f"{program} exited {proc.returncode}:\n{proc.stderr}"
        return proc.stdout

    run.build = build
    return run


def test_print_tensor_writes_poplars_format(fidelity):
    # Rank 1 and the float format as in Poplar's tutorial 1 ("v1-debug: [1.0000000 1.5000000 ...]",
    # "v4-0: [0 1 2 ...]"); higher ranks nest brackets, one row per line.
    assert fidelity("print_tensor") == (
        "v1-debug: [0.0000000 0.0000000 0.0000000 0.0000000]\n"
        "v1-debug: [1.0000000 1.5000000 2.0000000 2.5000000]\n"
        "v4-0: [-3 -2 -1 0 1 2 3 4 5 6]\n"
        "m: [[10 11 12]\n [13 14 15]]\n"
        "cube: [[[0.2500000]\n  [-1.0000000]]\n\n [[3.0000000]\n  [1000000.0000000]]]\n"
        "slice: [[11 12]\n [14 15]]\n"
        "counter: 7\n"
    )


def test_ipu_model_fields_are_honoured_or_accepted(fidelity):
    lines = fidelity("ipu_model").splitlines()
    assert lines[0] == (
        "default ipus=1 tilesPerIPU=1472 bytesPerTile=638976 workers=6 "
        "clock=1.33e+09 arch=ipu2 model=1"
    )
    assert lines[1].startswith("ipu1 ipus=1 tilesPerIPU=1216 bytesPerTile=262144 ")
    assert lines[2] == (
        "set ipus=2 tilesPerIPU=8 bytesPerTile=4096 workers=6 clock=1e+09 arch=ipu2 model=1"
    )
    assert lines[3:] == ["fits 2048", "too big 8192"]


def test_control_programs_and_compiled_executables(fidelity):
    lines = fidelity("programs").splitlines()
    # Switch on 0, 1, 2, 3, 9: cases 1-3, the default for the rest.
    assert lines[:5] == ["switch: 40", "switch: 10", "switch: 20", "switch: 30", "switch: 40"]
    assert lines[5:8] == ["called: 10", "block: 20", "called: 10"]
    assert lines[8:10] == ["then: 10", "loops-done: 10"]
    assert lines[10] == "switch: 20"
    assert lines[11] == (
        "duplicate: Switch::add: case 1 is already there; each value may have one body"
    )
    assert len(lines) == 12


def test_stream_callbacks_prefetch_fetch_complete(fidelity):
    assert fidelity("callbacks").splitlines() == [
        "prefetch 0",
        "fetch 0",
        "complete",
        "t: [0 1 2]",
        "to host 0 1 2",
        "function form 2",
        "prefetch 1",
        "complete",
        "t: [100 101 102]",
        "to host 100 101 102",
        "function form 102",
    ]


def test_every_public_header_compiles_under_cxx11_and_cxx14(fidelity, cmake_dir):
    # Graphcore builds user programs with -std=c++11; CMakeLists.txt compiles all
    # installed poplar/*.hpp (each twice, -Wall -Wextra -pedantic -Werror) per standard.
    headers = sorted(p.name for p in (cmake_dir.parents[2] / "include" / "poplar").glob("*.hpp"))
    assert {"Engine.hpp", "Graph.hpp", "Program.hpp", "StreamCallback.hpp", "Vertex.hpp"} <= set(
        headers
    )
    source = (fidelity.build / "all_headers.cpp").read_text()
    assert all(f"#include <poplar/{h}>" in source for h in headers)
    for lib in ("poputil", "popops", "poplin", "popnn"):
        names = sorted(p.name for p in (cmake_dir.parents[2] / "include" / lib).glob("*.hpp"))
        assert names and all(f"#include <{lib}/{h}>" in source for h in names)
    for std in ("11", "14"):
        assert (fidelity.build / f"headers_cxx{std}").is_file()


def test_codelets_compile_as_popc_compiles_them(fidelity):
    """__POPC__ defined and __IPU__ not (the codelet #errors otherwise); a SupervisorVertex
    runs its compute() once beside a Vertex."""
    out = fidelity("codelet_macros").splitlines()
    assert out == ["twice: [2.0000000 4.0000000 6.0000000 8.0000000]", "total: 10.0000000"]


def test_a_field_on_other_tiles_gets_the_exchange_poplar_inserts(fidelity):
    """Three of the six elements live on tile 3, the vertex on tile 0: 12 bytes go in
    before the compute set and 12 come back after it."""
    out = fidelity("remote_field").splitlines()
    assert out == [
        "x: [1.0000000 2.0000000 3.0000000 4.0000000 5.0000000 6.0000000]",
        "exchanged bytes: 24",
    ]


def text(title, array, floats=False):
    """What PrintTensor prints for `array` under `title`."""
    fmt = "{:.7f}" if floats else "{}"
    body = np.array2string(
        np.asarray(array),
        separator=" ",
        threshold=10**6,
        max_line_width=10**6,
        formatter={"all": fmt.format},
    )
    return f"{title}: {body}"


def test_poputil_and_popops_subset(fidelity):
    # Item 8: poputil's linear mapping and popops' vertices, as the SDK documents them.
    # Every value is checked exactly against NumPy (integer-valued floats: sums are exact).
    lines = fidelity("poplibs").splitlines()
    assert lines[:3] == ["grain2: 0-4 4-8 8-10 -", "min6: 0-6 6-10 - -", "a: 0-2 2-4 4-6 -"]
    # The errors come from graph construction, before the engine runs.
    assert lines[3] == (
        "error: popops::add: A has shape {2,3} but B has shape {2,3,4}; popsnn's "
        "popops does not broadcast, give tensors of one shape"
    )
    assert lines[4] == (
        "error: popops::map: the expression uses _3 but 2 tensors were given; "
        "pass one tensor per placeholder"
    )
    assert lines[5] == (
        "error: popops::reduce: dimension 3 is out of range for a tensor of rank "
        "3; give dims below the rank"
    )
    a = np.arange(1, 7).reshape(2, 3)
    b = np.array([[10, -20, 30], [-40, 50, -60]])
    x = np.arange(24, dtype=np.float32)
    x[::5] *= -1
    x = x.reshape(2, 3, 4)

    expected = [
        text("add", a + b),
        text("sub", a - b),
        text("mul", a * b),
        text("max", np.maximum(a, b)),
        text("min", np.minimum(a, b)),
        text("expr1", a * b + 3),
        text("expr2", np.maximum(b, 0) - a),
        text("expr3", b),
        text("sum02", x.sum(axis=(0, 2)), True),
        text("max1", x.max(axis=1), True),
        f"min-all: {x.min():.7f}",
        text("mul0", a.prod(axis=0)),
        text("fill", np.full(5, 3.5), True),
        text("zero", [[7, 7], [0, 0]]),
        text("cast-float", a.astype(np.float32), True),
        text("cast-bool-int", (x[:1, :1] != 0).astype(int)),
        text("cast-unsigned", b[:1].astype(np.int64) % 2**32),
    ]
    assert "\n".join(lines[6:]) == "\n".join(expected)


def test_poplin_matrix_products(fidelity):
    """poplin's products as the SDK documents them, each checked exactly against NumPy
    (integer-valued operands: every sum is exact in float and in half)."""
    lines = fidelity("poplin").splitlines()

    def ramp(n, step, offset):
        return (np.arange(n) % 7 * step + offset).astype(np.float32)

    a = ramp(15, 1, -2).reshape(5, 3)
    b = ramp(21, 2, -5).reshape(3, 7)
    assert lines[:2] == ["mapped: 1 1", "half-half type: half"]
    plan = re.fullmatch(
        r"poplin plan \(popsnn\): \{900,600\} x \{600,300\} -> float: (\d+) x (\d+) blocks "
        r"of (\d+) x (\d+) on (\d+) tiles, about (\d+) cycles per tile \(estimate\)",
        lines[2],
    )
    assert plan, lines[2]
    row_blocks, col_blocks, rows, cols, tiles, _ = map(int, plan.groups())
    assert row_blocks * rows >= 900 and col_blocks * cols >= 300
    assert tiles == row_blocks * col_blocks <= 4
    # Shapes and types are checked while the graph is built, in one line each.
    assert lines[3:8] == [
        "inner: poplin::matMul: A has shape {2,3} and B {4,2}: A's 3 columns must equal B's rows",
        "rank: poplin::matMul: A has shape {2,3,1} and B {3,2}; both must be 2-D matrices "
        "(grouped products are not provided)",
        "type: poplin::matMul: the input type is int; popsnn's poplin multiplies float or half "
        "matrices",
        "mixed: poplin::matMul: A is float but B is half; cast one of them first",
        "output: poplin::matMulWithOutput: the result tensor has shape {3,3}, A . B has {2,2}",
    ]
    assert "\n".join(lines[8:]) == "\n".join(
        [
            text("AB", a @ b, True),
            text("AAt", a @ a.T, True),
            text("out", a @ b, True),
            text("acc", 0.5 * (a @ b), True),
            text(
                "CD",
                ramp(37 * 53, 1, -3).reshape(37, 53) @ ramp(53 * 29, 1, -2).reshape(53, 29),
                True,
            ),
            text("half-float", a @ b, True),
        ]
    )


def printed_arrays(lines) -> dict:
    """{title: array} of the PrintTensor blocks in `lines` ("title: [[1 2]", " [3 4]]")."""
    blocks, title = {}, None
    for line in lines:
        head = re.match(r"([\w-]+): (\[.*)", line)
        if head:
            title, line = head.groups()
            blocks[title] = []
        blocks[title].append(line)
    return {
        t: np.array([[float(v) for v in row.strip(" []").split()] for row in rows])
        for t, rows in blocks.items()
    }


def test_popnn_losses_nonlinearities_and_scaled_adds(fidelity):
    """popnn's calls as a softmax regression makes them, each against NumPy: row 3's label
    (9) names no class, so it adds nothing; calcLoss adds its count to numCorrect (5 before)."""
    lines = fidelity("popnn").splitlines()
    assert lines[:3] == [
        "gelu: popnn::nonLinearity: this NonLinearityType is not provided by popsnn's popnn; "
        "use SIGMOID, RELU, TANH, SOFTMAX or SOFTMAX_STABLE",
        "labels: popnn::calcLoss: expected is float; give int or unsigned int labels",
        "scaled: popops::scaledAddTo: A has shape {2,3} but B has shape {3,2}; give tensors "
        "of one shape",
    ]
    x = np.array(
        [
            [0.5, -1.0, 2.0, 0.0, 1.5],
            [-0.25, 3.0, 1.0, -2.0, 0.75],
            [1.0, 1.0, -0.5, 2.5, 0.0],
            [-3.0, 0.5, 0.5, 4.0, -1.0],
        ]
    )
    labels = np.array([2, 0, 3, 9])
    onehot = np.zeros_like(x)
    onehot[np.arange(3), labels[:3]] = 1
    valid = (labels < 5)[:, None]
    probs = np.exp(x - x.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    ce = np.where(valid[:, 0], -np.log(probs[np.arange(4), np.minimum(labels, 4)] + 1e-7), 0)
    expected = {
        "sigmoid": 1 / (1 + np.exp(-x)),
        "relu": np.maximum(x, 0),
        "tanh": np.tanh(x),
        "softmax": probs,
        "ce-loss": ce,
        "ce-deltas": (probs - onehot) * valid,
        "correct": [5 + int(np.sum(probs.argmax(1)[:3] == labels[:3]))],
        "sq-loss": 0.5 * (((x - onehot) * valid) ** 2).sum(1),
        "sq-deltas": (x - onehot) * valid,
        "scaled-add": 1.5 * x,
        "scaled-sub": -0.5 * x,
    }
    got = printed_arrays(lines[3:])
    assert list(got) == list(expected)
    for title, want in expected.items():
        np.testing.assert_allclose(
            got[title].reshape(np.shape(want)), want, rtol=1e-6, atol=2e-7, err_msg=title
        )


def test_a_serialized_executable_runs_as_the_original(fidelity):
    """Item 6: Executable::serialize then deserialize gives an Engine that prints, streams,
    reads and estimates exactly as one made from the Executable itself."""
    lines = fidelity("serialize").splitlines()
    runs = [lines[:6], lines[6:12]]
    inp = np.arange(1, 7, dtype=np.float32)
    factor = np.repeat([2.0, 10.0], 3)
    acc = [0.5 + k * factor * inp for k in (1, 2, 3, 4)]

    def text(a):
        return "acc: [" + " ".join(f"{v:.7f}" for v in a) + "]"

    for label, run in zip(("original", "restored"), runs):
        assert run[:4] == [text(a) for a in acc]
        assert run[4] == "calls: [3 3]"
        out = " ".join(f"{v:g}" for v in acc[1])
        assert run[5].startswith(f"{label} out: {out} calls: 3 3 cycles: ")
    # The same cost-model estimate (cycles) from both engines.
    assert runs[0][5].split("cycles: ")[1] == runs[1][5].split("cycles: ")[1]
    errors = lines[12:]
    assert len(errors) == 4 and all(
        e.startswith("error: Executable::deserialize: ") for e in errors
    )
    assert "is truncated" in errors[0] or "ends before" in errors[0]
    assert "does not start with" in errors[1]
    assert "truncated" in errors[2]
    assert "SHA-256 does not match" in errors[3]


HEADER = 8 + 4 + 8  # magic, version, payload size


def resign(blob: bytes) -> bytes:
    """A payload edited in place, with its SHA-256 trailer made to match again."""
    payload = blob[HEADER:-64]
    return blob[:HEADER] + payload + hashlib.sha256(payload).hexdigest().encode()


@pytest.fixture(scope="module")
def serialized(fidelity):
    fidelity("serialize")
    blob = (fidelity.build / "serialize_exe.bin").read_bytes()
    assert blob[:8] == b"POPSNNEX" and resign(blob) == blob
    return blob


def load(fidelity, blobs, tmp_path) -> list[str]:
    paths = []
    for i, b in enumerate(blobs):
        paths.append(tmp_path / f"exe{i}.bin")
        paths[-1].write_bytes(b)
    proc = subprocess.run(
        [str(fidelity.build / "load_executable"), *map(str, paths)],
        capture_output=True,
        text=True,
        errors="replace",
        timeout=300,
        env=dict(os.environ, POPSNN_CPU_TILES="2"),
    )
    assert proc.returncode == 0, f"load_executable exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    lines = proc.stdout.splitlines()
    assert len(lines) == len(blobs), proc.stdout[-3000:]
    return lines


def test_the_reader_refuses_bad_headers_in_one_line(fidelity, serialized, tmp_path):
    version = bytearray(serialized)
    version[8] = 9
    size = bytearray(serialized)
    size[12:20] = (2**40).to_bytes(8, "little")
    lines = load(
        fidelity, [serialized, bytes(version), bytes(size), b"", serialized[:-1]], tmp_path
    )
    assert lines[0] == "ok"
    assert lines[1] == (
        "error: Executable::deserialize: the executable has format version 9 but this popsnn "
        "reads version 1; serialize it again with this popsnn"
    )
    assert "the stream is truncated: the header announces 1099511627776 payload bytes" in lines[2]
    assert "ends before the header" in lines[3]
    assert "SHA-256 trailer is missing" in lines[4]


def test_a_changed_codelet_file_is_refused(fidelity, serialized, tmp_path):
    codelet = fidelity.build / "serialize_codelet.cpp"
    text = codelet.read_text()
    try:
        codelet.write_text(text + "\n// changed\n")
        (line,) = load(fidelity, [serialized], tmp_path)
    finally:
        codelet.write_text(text)
    assert line.startswith("error: Executable::deserialize: the executable needs codelet file '")
    assert line.endswith(
        "but it is different now; restore it, or build the graph and call compileGraph again"
    )


@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_fuzzed_executables_are_refused_in_one_line_or_load(
    fidelity, serialized, tmp_path_factory, data
):
    """Random edits of a real executable (bytes flipped, set, cut; with and without a
    matching SHA-256, so the decoder itself is reached): the reader never crashes and
    answers each with one line, 'ok' or one poplar_error from Executable::deserialize."""
    blobs = []
    payload_len = len(serialized) - HEADER - 64
    for _ in range(40):
        blob = bytearray(serialized)
        for _ in range(data.draw(st.integers(1, 4))):
            pos = HEADER + data.draw(st.integers(0, payload_len - 1))
            blob[pos] = data.draw(st.integers(0, 255))
        kind = data.draw(st.sampled_from(["resigned", "raw", "cut"]))
        if kind == "cut":
            blobs.append(bytes(serialized[: data.draw(st.integers(0, len(serialized) - 1))]))
        else:
            blobs.append(resign(bytes(blob)) if kind == "resigned" else bytes(blob))
    lines = load(fidelity, blobs, tmp_path_factory.mktemp("fuzz"))
    for line in lines:
        assert (
            line == "ok"
            or line.startswith("error: Executable::deserialize: ")
            or line.startswith("load error: Engine::load: the graph was built for")
        ), line


def test_vector_of_edges_layouts_and_multivertex_workers(fidelity):
    """Item 5: Vector<Input<Vector<float>>> rows of lengths 1, 3, 5 (setFieldSize and
    connect(v["rows"][i], t)); Vector<Input<float>> from a list of tensors; ONE_PTR,
    SCALED_PTR32/64 and COMPACT_PTR vectors; a MultiVertex whose worker w writes the
    elements i = w (mod 6), each tagged w*100 + i. A codelet asking a ONE_PTR vector for
    its size does not compile (the layout stores none)."""
    lines = fidelity("vector_fields").splitlines()
    assert lines[0] == "sums: [1.0000000 9.0000000 35.0000000]"
    assert lines[1] == f"weighted: {1 + 90 + 3500:.7f}"
    assert lines[2] == "layouts: [1111.0000000 2222.0000000 3333.0000000 4444.0000000]"
    ids = [(i % 6) * 100 + i for i in range(14)]
    assert lines[3] == "workers: [" + " ".join(map(str, ids)) + "]"
    assert lines[4:] == [
        "error: connect: vertex 'RowSums' (id 3, compute set 'bad') field 'rows'[0]: call "
        'graph.setFieldSize(v["rows"], n) with n > index before connecting list entries',
        "error: connect: vertex 'RowSums' (id 3, compute set 'bad') field 'weights'[1] is a "
        "scalar edge but tensor 'w' (float{2}) has 2 elements; connect a one-element tensor "
        "(e.g. t[i])",
        "ONE_PTR size(): does not compile (stores no size)",
    ]


def test_compile_flags_in_an_executable_are_limited(fidelity, serialized, tmp_path):
    """Flags of a codelet source reach the compiler's command line: a stream may carry
    plain -D/-O/... options, never shell syntax or options handed on to the linker."""
    marker = b"serialize_codelet.cpp"
    at = serialized.index(marker) + len(marker) - HEADER  # the flags' length follows the path
    payload = serialized[HEADER:-64]
    assert payload[at : at + 8] == bytes(8)

    def with_flags(flags: bytes) -> bytes:
        p = payload[:at] + len(flags).to_bytes(8, "little") + flags + payload[at + 8 :]
        head = serialized[:12] + len(p).to_bytes(8, "little")
        return head + p + hashlib.sha256(p).hexdigest().encode()

    lines = load(
        fidelity,
        [with_flags(b"-Wl,-plugin=/tmp/x.so"), with_flags(b"-DX=1; rm -rf ~"), with_flags(b"-O2")],
        tmp_path,
    )
    prefix = "error: Executable::deserialize: the compile flags of codelet '"
    assert lines[0].startswith(prefix) and "hold '-Wl,-plugin=/tmp/x.so'" in lines[0]
    assert lines[1].startswith(prefix) and "hold '-DX=1;'" in lines[1]
    assert lines[2] == "ok"
