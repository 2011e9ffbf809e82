"""Two versions of the codelets side by side on the DSNN training step: before / after.

Builds codelets/ of a git revision (--before) and of the working tree into codelet objects
of their own (the package's flags: -O3 -march=native -fno-math-errno -fno-trapping-math),
then times popsnn's cpu-device training step (784-1000-10 Leaky, B 128, T 25, Adam) with
each, on real MNIST input and on dense U[0,1] input, in one process. The host side is the
installed package for both, so this compares vertex code only: a revision whose vertices the
installed host cannot name (a template changed) is refused before the builds; compare whole
packages with bench/cpu_step.py then (a revision whose vertex fields differ fails when its
model is made).

The four models take turns, round by round; a turn is a burst as in bench/README.md (0.1 s
untimed, then at least --seconds timed, back to back) and gives its mean step; the tables
give the median over rounds, the [min, max], and after/before ratios of the medians.
--neuron picks the hidden and readout layers' model (bench/throughput.py's); --cpu times a
burst in CPU time of this process (`time.process_time`, which moves less with the machine's
load than the wall clock; with POPSNN_NUM_THREADS=1 it has no pool spin in it).

    [POPSNN_NUM_THREADS=1] .venv/bin/python bench/codelets_ab.py [--before REV] [--rounds N]
        [--seconds S] [--neuron Leaky|Synaptic|RLeaky] [--cpu]
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import experiments  # noqa: E402
import systems  # noqa: E402
import throughput  # noqa: E402

from popsnn.backends import engine as engine_backend  # noqa: E402

GENERATOR = "host/src/VertexInstances.cpp"  # writes the LIF vertices' instantiation list


def export_codelets(rev: str | None, into: Path) -> Path:
    """codelets/ of `rev` (None: the working tree), with the shared headers under include/
    that codelets reach by relative path and the instantiation-list generator (where the
    revision has one), copied into `into`; returns the codelets folder."""
    paths = ("codelets", "include", GENERATOR)
    into.mkdir(parents=True)
    if rev is None:
        for path in paths:
            if (ROOT / path).is_dir():
                shutil.copytree(ROOT / path, into / path)
            elif (ROOT / path).is_file():
                (into / path).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / path, into / path)
    else:
        present = subprocess.run(
            ["git", "ls-tree", "-r", "--name-only", rev, "--", *paths],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        archive = subprocess.run(
            ["git", "archive", rev, *[p for p in paths if any(f.startswith(p) for f in present)]],
            cwd=ROOT,
            check=True,
            capture_output=True,
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(into, filter="data")
    return into / "codelets"


def instantiation_generator(tree: Path) -> Path | None:
    """The instantiation-list generator of the revision exported into `tree`, built from its
    own host/src/VertexInstances.cpp and include/; None for a revision without one."""
    generator = tree / GENERATOR
    if not generator.is_file():
        return None
    gen = tree / "popsnn_vertex_instances"
    if not gen.exists():
        compiler = shutil.which("c++") or sys.exit("codelets_ab: no C++ compiler (c++)")
        run = subprocess.run(
            [
                compiler,
                "-std=c++17",
                "-O1",
                f"-I{tree / 'include'}",
                str(generator),
                "-o",
                str(gen),
            ],
            capture_output=True,
            text=True,
        )
        if run.returncode != 0:
            sys.exit(f"codelets_ab: building {generator} failed:\n{run.stderr}")
    return gen


def listed_vertices(gen: Path, tmp: Path) -> set[str]:
    """The LIF vertices `gen` instantiates (appended to an empty source)."""
    names = set()
    for vertex in ("LifForward", "LifBackward"):
        empty, out = tmp / f"{vertex}.empty", tmp / f"{vertex}.list"
        empty.write_text("")
        subprocess.run([str(gen), vertex, str(empty), str(out)], check=True)
        names |= {
            line.removeprefix("template class ").rstrip(";")
            for line in out.read_text().splitlines()
            if line.startswith("template class ")
        }
    return names


def check_same_vertices(before: Path, after: Path, rev: str) -> None:
    """Refuses, before any long build, a revision whose LIF vertices the installed host
    cannot name: the float vertices the working tree lists must all be in the revision's
    list (the host takes them by name; float only: the models here are float)."""
    gens = [instantiation_generator(tree) for tree in (before, after)]
    if None in gens:
        return  # a revision from before the generator: its sources name their vertices
    missing = sorted(
        name
        for name in listed_vertices(gens[1], after) - listed_vertices(gens[0], before)
        if "half" not in name
    )
    if missing:
        sys.exit(
            f"codelets_ab: {rev}'s codelets lack {len(missing)} vertices the installed host "
            f"names (e.g. {missing[0]}): the templates changed; compare whole packages "
            "with bench/cpu_step.py instead"
        )


def add_instantiations(src: Path) -> Path:
    """The LIF vertices' explicit instantiations appended to `src`'s LifForward.cpp and
    LifBackward.cpp by the generator of the same revision (built from its own
    host/src/VertexInstances.cpp and include/), as the package build does, so that the lists
    match each revision's own templates; a revision without the generator has its
    instantiations in its sources and is left as it is."""
    gen = instantiation_generator(src.parent)
    if gen is None:
        return src
    for vertex in ("LifForward", "LifBackward"):
        source = src / f"{vertex}.cpp"
        generated = src / f"{vertex}.generated"
        subprocess.run([str(gen), vertex, str(source), str(generated)], check=True)
        generated.replace(source)
    return src


# The package's codelet flags (host/CMakeLists.txt).
NATIVE_FLAGS = "-O3 -march=native -fno-math-errno -fno-trapping-math"


def build_codelets(src: Path, build: Path, flags: str = NATIVE_FLAGS) -> Path:
    """src's codelets compiled with `flags` into build/ab.gp."""
    sources = " ".join(f'"{p.as_posix()}"' for p in sorted(src.glob("*.cpp")))
    project = build.parent / f"{build.name}_project"
    project.mkdir()
    (project / "CMakeLists.txt").write_text(f"""
cmake_minimum_required(VERSION 3.18)
project(ab_codelets CXX)
find_package(popsnn CONFIG REQUIRED)
popsnn_add_codelets(ab OUTPUT ab.gp SOURCES {sources}
  COMPILE_OPTIONS {flags})
""")
    cmakedir = subprocess.run(
        [sys.executable, "-m", "popsnn", "--cmakedir"], check=True, capture_output=True, text=True
    ).stdout.strip()
    for cmd in (
        [
            "cmake",
            "-S",
            str(project),
            "-B",
            str(build),
            f"-Dpopsnn_DIR={cmakedir}",
            "-DCMAKE_BUILD_TYPE=Release",
        ],
        ["cmake", "--build", str(build)],
    ):
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"{Path(sys.argv[0]).name}: building {src} failed:\n{run.stdout}{run.stderr}")
    return build / "ab.gp"


def model_with(gp: Path, work):
    # The backend looks the path up in its own module (popsnn.engine only re-exports it):
    # patched there, or every model would get the installed codelets.
    original = engine_backend.codelets_path
    engine_backend.codelets_path = lambda: gp
    try:
        return systems.popsnn_model(work)
    finally:
        engine_backend.codelets_path = original


def burst(step, seconds: float, clock=time.perf_counter) -> float:
    """Mean seconds (of `clock`) of back-to-back steps after 0.1 s of untimed ones."""
    t0 = clock()
    while clock() - t0 < 0.1:
        step()
    n, t0 = 0, clock()
    while n == 0 or clock() - t0 < seconds:
        step()
        n += 1
    return (clock() - t0) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="main", help="git revision of the 'before' codelets")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--seconds", type=float, default=0.3, help="timed seconds per turn")
    ap.add_argument("--neuron", choices=tuple(throughput.neuron_models()), default="Leaky")
    ap.add_argument("--cpu", action="store_true", help="CPU time, not the wall clock")
    args = ap.parse_args()
    if args.rounds < 1 or args.seconds <= 0:
        sys.exit("codelets_ab: --rounds and --seconds must be positive")
    neuron = throughput.neuron_models()[args.neuron]
    mnist = experiments.dsnn_workload(neuron=neuron)
    dense = experiments.dsnn_workload(neuron=neuron)
    dense.x = np.random.default_rng(1).random(mnist.x.shape, dtype=np.float32)
    clock = time.process_time if args.cpu else time.perf_counter
    inputs = {"mnist": mnist, "dense U[0,1]": dense}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        srcs = {
            which: export_codelets(rev, tmp / f"src_{which}")
            for which, rev in (("before", args.before), ("after", None))
        }
        check_same_vertices(srcs["before"].parent, srcs["after"].parent, args.before)
        gps = {
            which: build_codelets(add_instantiations(src), tmp / which)
            for which, src in srcs.items()
        }
        steps = {}
        for which, gp in gps.items():
            for name, work in inputs.items():
                model = model_with(gp, work)
                steps[which, name] = lambda m=model, w=work: m.train_step(w.x, w.y)
                steps[which, name]()  # compile and warm up outside the timing
        times = {key: [] for key in steps}
        load0 = os.getloadavg()[0]
        for _ in range(args.rounds):
            for key, step in steps.items():
                time.sleep(0.05)
                times[key].append(burst(step, args.seconds, clock))
    batch = mnist.batch_size
    print(
        f"# DSNN 784-1000-10 {args.neuron} B={batch} T={mnist.num_steps}, before = "
        f"{args.before}, after = working tree; {args.rounds} rounds; "
        f"{'CPU time' if args.cpu else 'wall clock'}; load {load0:.1f} -> "
        f"{os.getloadavg()[0]:.1f}"
    )
    print(f"{'input':<14} {'codelets':<8} {'img/s median':>12} {'[min, max]':>20}")
    for name in inputs:
        for which in gps:
            t = times[which, name]
            print(
                f"{name:<14} {which:<8} {batch / statistics.median(t):>12,.0f} "
                f"[{batch / max(t):>8,.0f}, {batch / min(t):>8,.0f}]"
            )
        ratio = statistics.median(times["before", name]) / statistics.median(times["after", name])
        print(f"{name:<14} after/before {ratio:.2f}x")


if __name__ == "__main__":
    main()
