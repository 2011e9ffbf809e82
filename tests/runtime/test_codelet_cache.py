"""The cache of codelets compiled at run time (graph.addCodelets("x.cpp")): its key covers
everything that goes into a compile, and it never loads code another user could have put
there. Runs the `cached_value` case of runtime_cases (cpp/MiscCases.cpp): vertex Value writes
VALUE + EXTRA, with VALUE from a header two includes deep."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess

import pytest

SOURCE = """#include <poplar/Vertex.hpp>
#include "value.hpp"
using namespace poplar;
struct Value : public Vertex {
  Output<int> out;
  void compute() { *out = VALUE + EXTRA; }
};
"""
OUTER = '#pragma once\n#include "nested/inner.hpp"\n#ifndef EXTRA\n#define EXTRA 0\n#endif\n'


def write_codelet(folder, value):
    (folder / "nested").mkdir(parents=True, exist_ok=True)
    (folder / "value.cpp").write_text(SOURCE)
    (folder / "value.hpp").write_text(OUTER)
    (folder / "nested" / "inner.hpp").write_text(f"#define VALUE {value}\n")
    return folder / "value.cpp"


def run_case(runtime_cases, source, env, flags=""):
    """The case's JSON, run with `env` as its whole environment."""
    cmd = [
        str(runtime_cases.exe),
        "cached_value",
        "cpu",
        str(runtime_cases.codelets),
        str(runtime_cases.gp),
        str(source),
    ]
    env = dict(env, POPSNN_CPU_TILES="4", CASE_CODELET_FLAGS=flags)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture
def cached(runtime_cases, tmp_path):
    """run(flags="") -> JSON, with a fresh cache folder; .cache and .source for the test."""
    cache = tmp_path / "cache"
    source = write_codelet(tmp_path / "src", 1)
    env = dict(os.environ, POPSNN_CACHE_DIR=str(cache))

    def run(flags=""):
        return run_case(runtime_cases, source, env, flags)

    run.cache, run.source = cache, source
    return run


def objects(cache):
    return sorted(cache.glob("codelet-*.gp"))


def mode(path):
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_a_changed_included_header_or_flag_compiles_anew(cached):
    assert cached()["value"] == [1]
    assert len(objects(cached.cache)) == 1
    # A header included by a header, not the codelet source, changes.
    (cached.source.parent / "nested" / "inner.hpp").write_text("#define VALUE 2\n")
    assert cached()["value"] == [2]
    assert len(objects(cached.cache)) == 2
    # Flags are part of the key too; the same inputs again reuse the object.
    assert cached("-DEXTRA=5")["value"] == [7]
    assert cached("-DEXTRA=5")["value"] == [7]
    assert len(objects(cached.cache)) == 3


def test_cache_folders_and_files_are_private(cached):
    assert cached()["value"] == [1]
    assert mode(cached.cache) == 0o700
    include = next(cached.cache.glob("include-*"))
    assert mode(include) == 0o700 and mode(include / "poplar") == 0o700
    assert mode(include / "poplar" / "Vertex.hpp") == 0o600
    [obj] = objects(cached.cache)
    assert mode(obj) & 0o077 == 0
    # Nothing half-written is left behind (objects go through a temporary and rename()).
    assert not [p for p in cached.cache.iterdir() if ".tmp" in p.name or "XXXX" in p.name]


@pytest.mark.parametrize("plant", ["writable_by_others", "symlink"])
def test_a_planted_object_is_never_loaded(cached, plant):
    assert cached("-DEXTRA=5")["value"] == [6]
    [foreign] = objects(cached.cache)
    assert cached()["value"] == [1]
    [own] = [p for p in objects(cached.cache) if p != foreign]
    # Put the EXTRA=5 object where the plain compile's object belongs.
    own.unlink()
    if plant == "symlink":
        own.symlink_to(foreign)
    else:
        shutil.copy(foreign, own)
        own.chmod(0o666)
    assert cached()["value"] == [1]  # compiled again, not the planted 6
    assert not own.is_symlink() and mode(own) & 0o077 == 0


def test_a_header_in_the_cache_that_differs_is_rewritten(cached):
    assert cached()["value"] == [1]
    header = next(cached.cache.glob("include-*/poplar/Vertex.hpp"))
    text = header.read_text()
    header.write_text("#error planted header\n")
    assert cached()["value"] == [1]
    assert header.read_text() == text


def test_a_cache_folder_others_can_write_is_refused(cached):
    cached.cache.mkdir(mode=0o700)
    cached.cache.chmod(0o777)
    r = cached()
    assert r["error"] == "graph_program_compilation_error"
    assert str(cached.cache) in r["message"] and "writable by group or others" in r["message"]
    assert "chmod go-w" in r["message"] and "POPSNN_CACHE_DIR" in r["message"]
    assert not list(cached.cache.iterdir())


def test_the_temp_folder_fallback_is_checked_too(runtime_cases, tmp_path):
    source = write_codelet(tmp_path / "src", 3)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("HOME", "XDG_CACHE_HOME", "POPSNN_CACHE_DIR")
    }
    env["TMPDIR"] = str(tmp_path)
    fallback = tmp_path / f"popsnn-cache-{os.geteuid()}"
    assert run_case(runtime_cases, source, env)["value"] == [3]
    assert mode(fallback) == 0o700 and len(objects(fallback)) == 1
    # Another user's folder would be refused the same way as one others can write.
    fallback.chmod(0o775)
    r = run_case(runtime_cases, source, env)
    assert r["error"] == "graph_program_compilation_error"
    assert str(fallback) in r["message"] and "planted code" in r["message"]
