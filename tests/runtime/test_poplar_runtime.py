"""popsnn's Poplar-compatible runtime, driven through C++ programs built against
the installed package (see conftest.py). Every case runs on the CPU device
(4 tiles here, set by POPSNN_CPU_TILES) and on IPU models of 4 and 16 tiles and
of 2 IPUs x 8 tiles."""

from __future__ import annotations

import math

import numpy as np
import pytest

DEVICES = ["cpu", "ipu4", "ipu16", "ipu2x8"]
NUM_TILES = {"cpu": 4, "ipu4": 4, "ipu16": 16, "ipu2x8": 16}


@pytest.mark.parametrize(
    "device, ipus, tiles, bytes_per_tile, kind",
    [
        ("cpu", 1, 4, 2**32 - 1, "CPU"),
        ("ipu4", 1, 4, 624 * 1024, "IPU_MODEL"),
        ("ipu2x8", 2, 8, 624 * 1024, "IPU_MODEL"),
        ("mk2", 1, 1472, 624 * 1024, "IPU_MODEL"),
        ("mk1", 1, 1216, 256 * 1024, "IPU_MODEL"),
    ],
)
def test_targets_have_the_ipu_figures(runtime_cases, device, ipus, tiles, bytes_per_tile, kind):
    t = runtime_cases("target", device)
    assert (t["numIPUs"], t["tilesPerIPU"], t["numTiles"]) == (ipus, tiles, ipus * tiles)
    assert t["bytesPerTile"] == bytes_per_tile
    assert t["type"] == kind
    assert t["workers"] == 6
    assert t["clock"] == (1.6e9 if device == "mk1" else 1.33e9)
    assert (t["floatSize"], t["halfSize"], t["vectorWidthFloat"]) == (4, 2, 2)
    assert t["hardwareDevices"] == 0  # no IPU hardware behind this runtime


@pytest.mark.parametrize("device", DEVICES)
def test_tensor_views_alias_the_right_elements(runtime_cases, device):
    r = runtime_cases("tensor_views", device)
    x = np.arange(24).reshape(2, 3, 4)
    y = np.array([100, 101, 102])
    expected = {
        "row": x[1],
        "elem": x[1, 2, 3].reshape(1),
        "slice_dim2": x[:, :, 1:3],
        "slice_multi": x[0:2, 1:3, 1:3],
        "shuffle": x.transpose(2, 0, 1),
        "transpose": x[0].T,
        "flatten12": x.reshape(2, 12),
        "reverse1": x[:, ::-1, :],
        "concat0": np.concatenate([x[0], x[1]], 0),
        "concat1": np.concatenate([x[0], x[1]], 1),
        "broadcast": np.stack([y, y]),
        "dimRoll": np.moveaxis(x, 2, 0),
        "squeeze": x[0],
        "concat_mixed": np.concatenate([x[0, 0], y]),
    }
    for name, want in expected.items():
        assert r[name]["shape"] == list(want.shape), name
        assert r[name]["values"] == want.ravel().tolist(), name
        assert r[name]["rank"] == want.ndim, name
    assert r["row"]["contiguous"] and r["elem"]["contiguous"] and r["concat0"]["contiguous"]
    assert not r["slice_dim2"]["contiguous"] and not r["shuffle"]["contiguous"]
    # x[0] on tile 0 and x[1] on tile 1: the 12-element slice maps 6 + 6.
    assert r["mapping_slice_dim2"] == [[0, 0, 6], [1, 6, 12]]
    assert r["contiguousRegions"] == 6
    assert (r["elementType"], r["numElements"]) == ("int", 24)


VERTEX_RESULTS = {
    "added": True,
    "addedAgain": False,  # a second addCodelets of the same file is a no-op
    "out": [4 * 2.5 + 7, -1 * 2.5 + 100],  # state a, default and overridden offset
    "count": [42],
    "count2": [2],  # InOut scalars, two runs of Repeat(2)
    "sum": [11, 22, 33, 44, 55],  # Vector inputs (SPAN and ONE_PTR), Vector output
    "ints": [0, 2, 7, 11],  # InOut vector, range-for
    "ids": [i % 6 for i in range(15)],  # MultiVertex: 6 workers, numWorkers() == 6
    "sums": [6, 15, 0.5],
    "sums2": [9, 6],  # VectorList from a list, and entry by entry
    "py": [1, 6, 17],  # plain Vector member as state
    "ff": [0.25, 1.25, 2.25],
    "fi": [-3, -2, -1],
    "fu": [7, 8],  # templates by instantiation
    "answer": [42],  # namespaced vertex, void compute()
}


@pytest.mark.parametrize("device", DEVICES)
def test_vertex_fields_from_codelet_source(runtime_cases, device):
    assert runtime_cases("vertices", device) == VERTEX_RESULTS


@pytest.mark.parametrize("device", ["cpu", "ipu2x8"])
def test_vertex_fields_from_prebuilt_gp(runtime_cases, device):
    assert runtime_cases("gp", device) == VERTEX_RESULTS


@pytest.mark.parametrize("device", DEVICES)
def test_copies_between_tiles_and_views(runtime_cases, device):
    r = runtime_cases("copies", device)
    n = NUM_TILES[device]
    src = np.arange(n * 4, dtype=float).reshape(n, 4)
    assert r["tiles"] == n
    assert r["dst"] == src.ravel().tolist()
    assert r["local"] == src[0].tolist()
    assert r["cols"] == src.T.ravel().tolist()
    assert r["bigWrong"] == 0 and r["bigExchangeBytes"] == n * 65536 * 4


@pytest.mark.parametrize("device", DEVICES)
def test_streams_fifo_circular_buffers_and_callbacks(runtime_cases, device):
    r = runtime_cases("streams", device)
    # Reads 1,2,3 / 4,5,6 / 1,2,3 / 4,5,6 from a two-transfer ring, adds one,
    # writes into a three-transfer ring that wraps on the fourth.
    assert r["outRing"] == [5, 6, 7, 5, 6, 7, 2, 3, 4]
    assert r["callback"] == [2, 3, 4, 5, 6, 7, 2, 3, 4, 5, 6, 7]
    assert r["callbackAfterFixed"] == [8, 9, 10]
    assert "stream 'never' is not connected" in r["unconnected"]
    assert "connectStream" in r["unconnected"]


@pytest.mark.parametrize("device", DEVICES)
def test_repeat_while_and_if(runtime_cases, device):
    assert runtime_cases("control", device) == {"n": [0], "hits": [4], "then": [2], "else": [1]}


@pytest.mark.parametrize("device", DEVICES)
def test_virtual_graphs_offset_tiles(runtime_cases, device):
    r = runtime_cases("virtual_graph", device)
    n = NUM_TILES[device]
    assert r["virtualTiles"] == n - n // 2
    assert r["deviceTiles"] == [n // 2 + 1]
    assert r["virtualTilesUsed"] == [1]
    assert (r["vertexTileVirtual"], r["vertexTileDevice"]) == (1, n // 2 + 1)
    assert r["v"] == [1, 1]
    assert "invalid_tile_mapping" in r["outOfRange"]


@pytest.mark.parametrize("device", ["cpu", "ipu4"])
def test_engine_with_several_programs(runtime_cases, device):
    assert runtime_cases("multi_program", device) == {"v": [121]}


@pytest.mark.parametrize("device", ["cpu", "ipu16"])
def test_fields_on_non_contiguous_views_are_rearranged(runtime_cases, device):
    r = runtime_cases("non_contiguous", device)
    m = np.arange(12, dtype=float).reshape(3, 4)
    o = np.zeros((4, 3))
    o[:3, 0] = m[:, 1] + m[:, 2]
    assert r["o"] == o.ravel().tolist()
    assert r["iv"] == [1, 11, 21, 31, 41, 51]


def test_half_is_stored_as_ieee_binary16(runtime_cases):
    r = runtime_cases("half", "ipu4")
    want = np.array([1.0, -2.0, 0.5, 65504.0], dtype=np.float16).view(np.uint16).tolist()
    assert r["bits"] == want


@pytest.mark.parametrize("device", ["cpu", "ipu4"])
def test_a_codelet_with_half_fields_stores_binary16_and_sums_in_float(runtime_cases, device):
    """HalfAxpy: y = half(a*x + y) with a float product and sum, as numpy rounds it."""
    r = runtime_cases("half_vertex", device)
    x = np.array([1.0, 3.0, 0.001, 60000.0], np.float16).astype(np.float32)
    y = np.array([0.5, 1.0, 1.0, 10000.0], np.float16).astype(np.float32)
    new_y = (np.float32(0.1) * x + y).astype(np.float16)
    assert r["bits"] == new_y.view(np.uint16).tolist()
    total = np.float32(0)
    for v in new_y.astype(np.float32):
        total += v
    assert r["total"] == [pytest.approx(float(total), rel=1e-7)]


@pytest.mark.parametrize(
    "device, cpu_tiles", [("cpu", "7"), ("cpu", "1"), ("ipu16", "4"), ("ipu2x8", "4"), ("mk2", "4")]
)
def test_every_tile_runs_in_parallel_correctly(runtime_cases, device, cpu_tiles):
    r = runtime_cases("parallel", device, POPSNN_CPU_TILES=cpu_tiles)
    tiles = {"cpu": int(cpu_tiles), "ipu16": 16, "ipu2x8": 16, "mk2": 1472}[device]
    assert r == {"wrong": 0, "elements": tiles * 15}


@pytest.mark.parametrize("device", DEVICES)
def test_a_field_on_other_tiles_is_exchanged_and_counted(runtime_cases, device):
    """As Poplar's compiler does: the remote elements come to the vertex's tile before the
    compute set and go back after it; the profile counts those bytes (8 in, 8 out per run,
    two runs) and a second sync for the return phase; the vertex's tile holds the buffer."""
    r = runtime_cases("locality", device)
    assert r["values"] == [12, 22, 32, 42]
    assert r["exchangeBytes"] == 2 * (8 + 8)
    assert r["exchangeCycles"] > 0 and r["syncs"] == 2 * 2
    assert r["tileBytes"][0] > r["tileBytes"][1]


@pytest.mark.parametrize("n", [254, 256, 257])
def test_memory_overflow_names_tile_bytes_and_tensors(runtime_cases, n):
    r = runtime_cases("memory", "ipu4-1k", str(n))
    needed = math.ceil(4 * n / 8) * 8 + 16  # each tensor's share of a tile rounds up to 8 bytes
    assert r["error"] == "graph_memory_allocation_error"
    assert f"out of memory on tile 2: {needed} bytes needed, 1024 available" in r["message"]
    assert "'big'" in r["message"] and "'small' 16 B" in r["message"]


def test_memory_that_fits_is_accounted_exactly(runtime_cases):
    assert runtime_cases("memory", "ipu4-1k", "250") == {"tileBytes": [0, 0, 1016, 0]}
    # The CPU device has no per-tile limit.
    assert runtime_cases("memory", "cpu", "100000")["tileBytes"][2] == 400016


def test_memory_overflow_on_a_whole_mk2(runtime_cases):
    r = runtime_cases("memory_mk2", "mk2")
    assert r["error"] == "graph_memory_allocation_error"
    assert "tile 1000: 640000 bytes needed, 638976 available" in r["message"]
    assert "'weights' 640000 B" in r["message"]


def test_profile_counts_equal_hand_computed_values(runtime_cases):
    r = runtime_cases("profile", "ipu2x8")
    sync, exch_bpc, link_bpc, host_bpc = 150, 4, 240.0, 12.0  # IPUModel defaults (documented)
    steps = {s["name"]: s for s in r["steps"]}
    work = steps["work-step"]
    # A Vertex's estimate is thread cycles: 6 tile cycles each (barrel scheduling); a
    # MultiVertex's is tile cycles. Tile 0: Vertex 100 and Vertex 50 on two workers -> 600.
    # Tile 1: MultiVertex 30 on every worker, then Vertex 40 on the least-loaded one ->
    # 30 + 240 = 270. Slowest tile: 600.
    assert (work["computeCycles"], work["vertices"], work["tilesUsed"]) == (600, 4, 2)
    assert work["cycles"] == 600 + sync and work["executions"] == 6
    near = steps["Copy('x' (float{16}) -> 'xNext' (float{16}))"]
    assert (near["exchangeBytesWithinIPU"], near["exchangeBytesBetweenIPUs"]) == (64, 0)
    assert near["exchangeCycles"] == 64 // exch_bpc and near["cycles"] == 16 + sync
    far = steps["Copy('x' (float{16}) -> 'xFar' (float{16}))"]
    assert (far["exchangeBytesWithinIPU"], far["exchangeBytesBetweenIPUs"]) == (0, 64)
    assert far["exchangeCycles"] == 64 // exch_bpc + math.ceil(64 / link_bpc)
    local = steps["Copy('x' (float{8}) -> 'xLocal' (float{8}))"]
    assert (local["onTileCopyBytes"], local["computeCycles"], local["exchangeCycles"]) == (32, 4, 0)
    stream = steps["StreamCopy(in -> 'inbox' (float{10}))"]
    assert (stream["hostBytes"], stream["exchangeCycles"], stream["executions"]) == (
        40,
        math.ceil(40 / host_bpc),
        2,
    )
    assert steps["Sync(internal)"]["cycles"] == sync
    per_run = 3 * (750 + 166 + 167 + 154) + 154 + 150
    assert r["totalCycles"] == 2 * per_run
    assert r["syncs"] == 2 * (3 * 4 + 2) and r["syncCycles"] == r["syncs"] * sync
    assert r["computeCycles"] == 2 * 3 * (600 + 4)
    assert (r["exchangeBytesWithinIPU"], r["exchangeBytesBetweenIPUs"]) == (6 * 64, 6 * 64)
    assert (r["onTileCopyBytes"], r["hostBytes"], r["vertexExecutions"]) == (6 * 32, 80, 24)
    assert r["estimatedSeconds"] == pytest.approx(r["totalCycles"] / 1.33e9)
    # Memory: tile 0 holds v0, v1 (8 B each), x (64), xLocal (32) and two vertices of
    # 8 B header + 8 B for a SPAN vector edge.
    assert r["tileBytes"][:3] == [8 + 8 + 64 + 32 + 2 * 16, 24 + 8 + 64 + 2 * 16, 40]
    assert r["tileBytes"][8] == 64
    assert "ESTIMATES" in r["summary"] and "not measurements on an IPU" in r["summary"]
    assert "(estimate)" in r["summary"]


def test_profile_summary_keeps_large_figures_apart(runtime_cases):
    """A step of 3e10 cycles: every column of its summary row is a separate word, equal to
    the figure behind it (the table once ran wide numbers together)."""
    r = runtime_cases("profile_wide", "ipu2x8")
    assert r["computeCycles"] == 6 * 5_000_000_000
    row = next(line for line in r["summary"].splitlines() if line.startswith("wide-step"))
    words = row.split()
    assert words[1:5] == ["compute", "1", str(r["cycles"]), str(r["computeCycles"])]
    assert words[5:] == ["0"] * 4


ERRORS = {
    "unknown_vertex": ("unknown_vertex_type", ["'NoSuchVertex'", "Fill<float>", "addCodelets"]),
    "template_without_args": ("unknown_vertex_type", ["'Fill'", "explicit instantiation"]),
    "unknown_field": ("unknown_field", ["no field 'values'", "its fields are: v"]),
    "type_mismatch": ("graph_connection_error", ["holds int", "'floats' (float{2}) holds float"]),
    "scalar_too_big": ("graph_connection_error", ["scalar Input", "has 3 elements"]),
    "connect_state": ("graph_connection_error", ["field 'a'", "setInitialValue"]),
    "initial_value_on_edge": ("graph_connection_error", ["field 'in' is an Input edge"]),
    "double_connect": ("graph_connection_error", ["already connected"]),
    "list_entry_without_size": ("no_size_specified", ["setFieldSize"]),
    "not_connected": ("graph_connection_error", ["'AddVectors'", "field 'b' is not connected"]),
    "unmapped_tensor": (
        "invalid_tile_mapping",
        ["'half_mapped'", "6 of 8 elements", "setTileMapping"],
    ),
    "unmapped_vertex": ("invalid_tile_mapping", ["'Increment'", "has no tile"]),
    "tile_out_of_range": ("invalid_tile_mapping", ["tile 4 does not exist"]),
    "run_before_load": ("poplar_error", ["load(device) before run()"]),
    "run_bad_index": ("index_error", ["run(3)", "1 program(s)"]),
    "read_wrong_size": ("stream_connection_error", ["holds 12 bytes", "needs 16"]),
    "unknown_handle": ("stream_connection_error", ["no handle 'nope'", "createHostWrite"]),
    "unknown_stream": ("stream_connection_error", ["no stream named 'nope'"]),
    "copy_size_mismatch": ("control_program_error", ["4 elements", "has 5"]),
    "copy_type_mismatch": ("control_program_error", ["holds float", "int"]),
    "slice_out_of_range": ("index_error", ["[2, 5)", "{4,3}"]),
    "reshape_mismatch": ("poplar_error", ["{5,2} has 10 elements", "has 12"]),
    "other_graph_tensor": ("graph_connection_error", ["another graph"]),
    "vertex_returns_false": ("poplar_error", ["'Fails'", "returned false"]),
    "device_mismatch": ("poplar_error", ["x 4 tiles", "x 3 tiles"]),
    "bad_model": ("invalid_machine_model", ["tilesPerIPU is 0"]),
    "bad_ipu_version": ("invalid_machine_model", ["'ipu9'", "ipu2"]),
    "missing_codelet_file": ("graph_program_compilation_error", ["/nonexistent/codelets.cpp"]),
    "compile_error": (
        "graph_program_compilation_error",
        ["broken.cpp", "undefined_name", "was not declared", "command:"],
    ),
    "gp_not_loadable": ("graph_program_compilation_error", ["cannot load codelet object"]),
    "gp_missing": ("graph_program_compilation_error", ["does not exist"]),
    "bad_extension": ("graph_program_compilation_error", ["'.txt'"]),
    "virtual_range": ("invalid_tile_mapping", ["createVirtualGraph(1, 5)"]),
    "copy_into_constant": ("control_program_error", ["'k' is a constant"]),
    "stream_into_constant": ("control_program_error", ["stream 'in' writes to constant 'k'"]),
    "output_to_constant": ("graph_connection_error", ["field 'v' writes to constant 'k'"]),
}


@pytest.mark.parametrize("device", ["cpu", "ipu4"])
def test_misuse_fails_with_a_clear_error(runtime_cases, device):
    scratch = runtime_cases.scratch
    (scratch / "broken.cpp").write_text(
        "#include <poplar/Vertex.hpp>\n"
        "class Broken : public poplar::Vertex {\npublic:\n"
        "  bool compute() { return undefined_name; }\n};\n"
    )
    (scratch / "garbage.gp").write_text("not a shared object\n")
    errors = runtime_cases("errors", device, str(scratch))["errors"]
    assert set(errors) == set(ERRORS)
    for name, (kind, parts) in ERRORS.items():
        got = errors[name]
        assert got is not None, f"{name}: no error raised"
        assert got["error"] == kind, (name, got)
        for part in parts:
            assert part in got["message"], (name, part, got["message"])


def test_compiled_codelets_are_cached_by_content(runtime_cases, tmp_path):
    cache = tmp_path / "cache"
    env = {"POPSNN_CACHE_DIR": str(cache)}
    assert runtime_cases("vertices", "cpu", **env) == VERTEX_RESULTS
    objects = sorted(cache.glob("codelet-*.gp"))
    assert len(objects) == 1
    stamp = objects[0].stat().st_mtime_ns
    assert runtime_cases("vertices", "ipu4", **env) == VERTEX_RESULTS
    assert sorted(cache.glob("codelet-*.gp")) == objects
    assert objects[0].stat().st_mtime_ns == stamp  # loaded, not rebuilt
    # The vertex-side headers travel inside the runtime and land in the cache.
    assert list(cache.glob("include-*/poplar/Vertex.hpp"))


@pytest.mark.parametrize("device", ["cpu", "ipu16"])
def test_remaining_calls(runtime_cases, device):
    r = runtime_cases("misc", device)
    n = NUM_TILES[device]
    # LINEAR spreads 2 * (n + 1) elements in contiguous blocks over all tiles.
    total = 2 * (n + 1)
    assert r["linearPerTile"] == [total * (k + 1) // n - total * k // n for k in range(n)]
    assert r["cloneSameMapping"] is True
    assert r["intervalMapping"] == [0, 1, 4, 5, 102, 103]  # tile * 100 + element
    assert r["streamed"] == [7, 5, 8]  # index({1, 0}), slices, concat of views
    assert (r["loops"], r["countdown"]) == ([0], [2])
    assert r["printed"] == "fromPtr: [[5 6]\n [7 8]]\ncountdown: 2\n"
    assert (r["runsBeforeReset"], r["runsAfterReset"]) == (1, 0)
    assert "no handle 'too-late'" in r["lateHandle"]
    assert (r["directTiles"], r["directType"], r["flag"]) == (16, "IPU", "2")
    assert (
        "invalid_option" in r["missingCpuTiles"]
        and "POPSNN_CPU_TILES='lots'" in r["missingCpuTiles"]
    )


def test_scanner_reads_unusual_codelet_shapes(runtime_cases):
    codelets = runtime_cases.codelets.parent / "ScannerCases.cpp"
    r = runtime_cases("scanner", "ipu4", str(codelets))
    assert r["fo"] == [3 * 0.5 * 11, 3 * 0.5 * 22, 3 * 0.5 * 33]
    assert r["io"] == [2 * 2, 2 * 4]
    assert r["ho"] == [10]
    assert "graph_connection_error" in r["arrayField"] and "field 'table'" in r["arrayField"]


@pytest.mark.parametrize("device", ["cpu", "ipu4"])
def test_initial_values_zeros_and_set_parts(runtime_cases, device):
    # Zeros keep a variable's initial value empty (its memory starts zeroed); parts set
    # after them, and a -0.0, keep their bits.
    assert runtime_cases("initial_values", device) == {
        "zeros_nonzero_bits": [0],
        "mixed_ends": [3.5, 0.0, 0.0],
        "mixed_last_signbit": [1],
        "ints": [1, 1, 1, 8],
    }
