"""The codelets' plain C++ loops, the path the IPU build takes, equal the reference too. The
package's own codelets are compiled for this machine's CPU (-march=native), which selects
the vector paths (AVX-512 or generic vector types); this test builds the same sources for
baseline x86-64 with POPSNN_PLAIN_LOOPS (the IPU's loops and tile shapes) into a .gp of its
own and runs the engine on it."""

import platform
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from engine_helpers import (
    assert_close,
    assert_grads_close,
    build_against_installed,
    make_input,
)

import popsnn
from popsnn import engine, losses, optim, reference, sparse
from popsnn.backends import engine as engine_backend

ROOT = Path(__file__).resolve().parents[2]
CODELETS = ROOT / "codelets"

pytestmark = [
    pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed"),
    pytest.mark.skipif(
        platform.machine() not in ("x86_64", "AMD64"), reason="the baseline build targets x86-64"
    ),
]


# The neuron models of NETS (and the conv nets' Leaky): the LIF vertices of these only, as the
# package build's POPSNN_NEURONS option would make them (every model's take most of the build).
MODELS = ("Leaky", "Synaptic", "RLeaky")


def lif_sources_with_instances(into: Path) -> list:
    """The codelet sources, LifForward.cpp and LifBackward.cpp with their explicit
    instantiations appended by host/src/VertexInstances.cpp (MODELS' only), as the package
    build does."""
    gen = into / "popsnn_vertex_instances"
    compiler = shutil.which("c++") or pytest.skip("no C++ compiler (c++)")
    generator = ROOT / "host" / "src" / "VertexInstances.cpp"
    subprocess.run(
        [compiler, "-std=c++17", "-O1", f"-I{ROOT / 'include'}", str(generator), "-o", str(gen)],
        check=True,
    )
    sources = []
    for path in sorted(CODELETS.glob("*.cpp")):
        if path.stem in ("LifForward", "LifBackward"):
            out = into / path.name
            subprocess.run([str(gen), path.stem, str(path), str(out), *MODELS], check=True)
            path = out
        sources.append(path)
    return sources


@pytest.fixture(scope="module")
def portable_codelets(tmp_path_factory):
    # One folder a session: test_engine_conv_portable uses this build too (built once).
    src = tmp_path_factory.getbasetemp() / "portable"
    if (src / "build" / "portable.gp").is_file():
        return src / "build" / "portable.gp"
    src.mkdir(exist_ok=True)
    sources = " ".join(f'"{p.as_posix()}"' for p in lif_sources_with_instances(src))
    # -O1: the ISA is what is under test; the LIF instantiations take minutes at -O2.
    (src / "CMakeLists.txt").write_text(f"""
cmake_minimum_required(VERSION 3.18)
project(portable_codelets CXX)
find_package(popsnn CONFIG REQUIRED)
popsnn_add_codelets(portable OUTPUT portable.gp SOURCES {sources}
  COMPILE_OPTIONS -O1 -march=x86-64 -fno-math-errno -fno-trapping-math -DPOPSNN_PLAIN_LOOPS
  "-I{CODELETS.as_posix()}")
""")
    build = build_against_installed(src, src / "build")
    gp = build / "portable.gp"
    assert gp.is_file()
    return gp


NETS = {
    "leaky": lambda: popsnn.Sequential(
        popsnn.Linear(200, 300),
        popsnn.Leaky(beta=0.9),
        popsnn.Linear(300, 10),
        popsnn.Leaky(beta=0.9),
    ),
    "leaky_window": lambda: popsnn.Sequential(
        popsnn.Linear(200, 300),
        popsnn.Leaky(beta=0.9, sparse=sparse.window(0.3)),
        popsnn.Linear(300, 10),
        popsnn.Leaky(beta=0.9),
    ),
    "synaptic_zero": lambda: popsnn.Sequential(
        popsnn.Linear(200, 64),
        popsnn.Synaptic(alpha=0.8, beta=0.9, reset_mechanism="zero"),
        popsnn.Linear(64, 10),
        popsnn.Leaky(beta=0.9),
    ),
    "rleaky": lambda: popsnn.Sequential(
        popsnn.Linear(200, 64),
        popsnn.RLeaky(beta=0.9),
        popsnn.Linear(64, 10),
        popsnn.Leaky(beta=0.9),
    ),
}


@pytest.mark.parametrize("name", sorted(NETS))
def test_baseline_x86_codelets_equal_the_reference(name, portable_codelets, monkeypatch):
    # Where the backends look it up (popsnn.engine only re-exports it: patched there, the
    # installed codelets would run).
    monkeypatch.setattr(engine_backend, "codelets_path", lambda: portable_codelets)
    net, batch, steps = NETS[name](), 6, 10
    x, raw = make_input(net, batch, steps, direct=True, seed=3)
    y = raw % 10
    loss = losses.ce_count_loss()
    params = net.init_params(2)
    backend = engine.EngineBackend(
        net, params, loss, optim.Adam(lr=1e-2), num_steps=steps, batch_size=batch, device="cpu"
    )
    value, grads = backend.loss_and_grad(x, y)
    ref_value, ref_grads, rec = reference.loss_and_grad(net, params, x, y, loss, num_steps=steps)
    np.testing.assert_array_equal(backend.infer(x), rec.spikes[-1])
    assert value == pytest.approx(ref_value, rel=2e-5, abs=1e-7)
    assert_grads_close(grads, ref_grads)
    assert rec.spikes[0].mean() > 0.01, "the hidden layer must spike for the test to mean much"
    assert_close(np.float32(value), np.float32(ref_value), "loss")
    # This object has no whole-trace kernels (LeakTraceKernels says so): the host keeps the
    # hidden layer's dense surrogate trace whole, as its per-step kernels write it.
    prof = backend.profile()
    assert prof["layer0_leak_trace"] == 0
    hidden = net.stages[0].num_neurons
    if name != "leaky_window":
        assert prof["layer0_surrogate_trace_bytes"] == steps * batch * hidden * 4
