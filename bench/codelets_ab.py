"""Two versions of the codelets side by side on the DSNN training step: before / after.

Builds codelets/ of a git revision (--before) and of the working tree into codelet objects
of their own (the package's flags: -O3 -march=native -fno-math-errno), then times popsnn's
cpu-device training step (784-1000-10 Leaky, B 128, T 25, Adam) with each, on real MNIST
input and on dense U[0,1] input, in one process. The host side is the installed package for
both, so this compares vertex code only (a revision whose vertex fields differ from the
installed builder's cannot be compared this way).

The four models take turns, round by round; a turn is a burst as in bench/README.md (0.1 s
untimed, then at least --seconds timed, back to back) and gives its mean step; the tables
give the median over rounds, the [min, max], and after/before ratios of the medians.

    .venv/bin/python bench/codelets_ab.py [--before REV] [--rounds N] [--seconds S]
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

import popsnn  # noqa: E402
from popsnn import optim  # noqa: E402
from popsnn.backends import engine as engine_backend  # noqa: E402


def export_codelets(rev: str | None, into: Path) -> Path:
    """codelets/ of `rev` (None: the working tree), with the shared headers under include/
    that codelets reach by relative path, copied into `into`; returns the codelets folder."""
    folders = ("codelets", "include")
    into.mkdir(parents=True)
    if rev is None:
        for folder in folders:
            if (ROOT / folder).is_dir():
                shutil.copytree(ROOT / folder, into / folder)
    else:
        top = subprocess.run(
            ["git", "ls-tree", "--name-only", rev],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        archive = subprocess.run(
            ["git", "archive", rev, *[f for f in folders if f in top]],
            cwd=ROOT,
            check=True,
            capture_output=True,
        ).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(into, filter="data")
    return into / "codelets"


NATIVE_FLAGS = "-O3 -march=native -fno-math-errno"  # the package's codelet flags


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
        return popsnn.Model(
            work.net,
            loss=work.loss,
            optimizer=optim.Adam(lr=work.lr),
            device="cpu",
            num_steps=work.num_steps,
            batch_size=work.batch_size,
            seed=work.seed,
        )
    finally:
        engine_backend.codelets_path = original


def burst(step, seconds: float) -> float:
    """Mean seconds of back-to-back steps after 0.1 s of untimed ones."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < 0.1:
        step()
    n, t0 = 0, time.perf_counter()
    while n == 0 or time.perf_counter() - t0 < seconds:
        step()
        n += 1
    return (time.perf_counter() - t0) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="main", help="git revision of the 'before' codelets")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--seconds", type=float, default=0.3, help="timed seconds per turn")
    args = ap.parse_args()
    if args.rounds < 1 or args.seconds <= 0:
        sys.exit("codelets_ab: --rounds and --seconds must be positive")
    mnist = experiments.dsnn_workload()
    dense = experiments.dsnn_workload()
    dense.x = np.random.default_rng(1).random(mnist.x.shape, dtype=np.float32)
    inputs = {"mnist": mnist, "dense U[0,1]": dense}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        gps = {
            "before": build_codelets(
                export_codelets(args.before, tmp / "src_before"), tmp / "before"
            ),
            "after": build_codelets(export_codelets(None, tmp / "src_after"), tmp / "after"),
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
                times[key].append(burst(step, args.seconds))
    batch = mnist.batch_size
    print(
        f"# DSNN 784-1000-10 B={batch} T={mnist.num_steps}, before = {args.before}, "
        f"after = working tree; {args.rounds} rounds; load {load0:.1f} -> "
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
