"""Where the dense product beats the sparse row kernel: the density threshold of the
direct-current layer's products (codelets/DenseKernels.hpp, DENSE_MIN_NONZERO_PERCENT).

Compiles density_threshold.cpp against codelets/ with the codelets' own flags (-O3 -march=native
-fno-math-errno -fno-trapping-math, as the package builds them), then times both kernels of both
products (x.W for the forward current, x^T.G for the weight gradient) at the shape of one DSNN
shard (B 128, 784 inputs, 500 neurons: the 1,000-neuron layer on the cpu device's two tiles)
over a sweep of input densities (random U[0,1] entries, the rest zero). The kernels take turns,
one call each per round. Each cell gives the median and the minimum over the rounds; the
crossover is taken from the minima (the calls least disturbed by other processes: on a shared
machine a 2 ms call is often preempted, which makes the medians bimodal).

    .venv/bin/python bench/density_threshold.py [--repeats N] [--shape B IN N]

The crossover printed is the lowest density of the sweep from which the dense product is
at least as fast as the sparse kernel at every density of the sweep above it, per product.

Then the dense product's rate on dense input against this machine's BLAS (NumPy's matmul,
in a worker process whose BLAS threads are set before NumPy loads), in the same run: one
thread on one shard, and both threads on a layer of two shards (popsnn: a shard per
thread, as the cpu device runs it; NumPy: the whole [B, IN] x [IN, 2N] product on its two
BLAS threads). GFLOP/s from minimum times.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CODELETS = HERE.parent / "codelets"
DENSITIES = (0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.5, 0.7, 1.0)


def build(out: Path) -> Path:
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if not cxx:
        sys.exit("density_threshold: no C++ compiler found; install g++ or set CXX")
    exe = out / "density_threshold"
    subprocess.run(
        [
            cxx,
            "-std=c++17",
            "-O3",
            "-march=native",
            "-fno-math-errno",
            "-fno-trapping-math",
            "-pthread",
            f"-I{CODELETS}",
            str(HERE / "density_threshold.cpp"),
            "-o",
            str(exe),
        ],
        check=True,
    )
    return exe


def crossover(rows: list[tuple[float, float, float]]) -> float | None:
    """The lowest density from which dense <= sparse at every density above it."""
    best = None
    for density, sparse_ms, dense_ms in sorted(rows, reverse=True):
        if dense_ms > sparse_ms:
            break
        best = density
    return best


def blas_worker(b: int, n_in: int, n: int, repeats: int) -> None:
    """Prints NumPy's minimum ms for x.W and x^T.G at [B, IN] x [IN, N] (run in a subprocess)."""
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.random((b, n_in), dtype=np.float32)
    w = rng.random((n_in, n), dtype=np.float32)
    g = rng.random((b, n), dtype=np.float32)
    out, grad = np.empty((b, n), np.float32), np.empty((n_in, n), np.float32)
    times: dict[str, list[float]] = {"current": [], "weight_grad": []}
    for r in range(repeats + 1):
        t0 = time.perf_counter()
        np.matmul(x, w, out=out)
        t1 = time.perf_counter()
        np.matmul(x.T, g, out=grad)
        t2 = time.perf_counter()
        if r:  # the first round warms the caches and BLAS's threads
            times["current"].append(t1 - t0)
            times["weight_grad"].append(t2 - t1)
    print(json.dumps({k: 1e3 * min(v) for k, v in times.items()}))


def blas_ms(shape: tuple[int, int, int], threads: str, repeats: int) -> dict[str, float]:
    """NumPy's minimum ms per product in a worker with `threads` BLAS threads."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS=threads, OMP_NUM_THREADS=threads)
    env["MKL_NUM_THREADS"] = threads
    run = subprocess.run(
        [sys.executable, __file__, "--blas-worker", *map(str, shape), "--repeats", str(repeats)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
    )
    return json.loads(run.stdout)


def print_rates(shape: tuple[int, int, int], repeats: int, two_threads: dict[str, dict]) -> None:
    """popsnn's dense product against NumPy's BLAS, 1 and 2 threads, as GFLOP/s."""
    b, n_in, n = shape
    flop = 2.0 * b * n_in * n  # one shard
    one = blas_ms(shape, "1", repeats)
    both = blas_ms((b, n_in, 2 * n), "2", repeats)
    print("# dense input: popsnn's blocked product vs NumPy's BLAS (GFLOP/s from min ms;")
    print("# 2 threads: popsnn the sum of both shards' rates, NumPy one [B, IN] x [IN, 2N] call)")
    print(
        f"{'product':<12} {'threads':>7} {'popsnn GFLOP/s':>14} {'NumPy GFLOP/s':>13} {'ratio':>6}"
    )
    for product, ms in two_threads["one"].items():
        rows = (
            (1, flop / ms, flop / one[product]),
            (2, sum(flop / t for t in two_threads["two"][product]), 2 * flop / both[product]),
        )
        for threads, ours, theirs in rows:
            print(
                f"{product:<12} {threads:>7} {ours / 1e6:>14.1f} {theirs / 1e6:>13.1f} "
                f"{ours / theirs:>6.2f}"
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15, help="rounds per density (median)")
    ap.add_argument(
        "--shape",
        type=int,
        nargs=3,
        default=(128, 784, 500),
        metavar=("B", "IN", "N"),
        help="batch, inputs, neurons of one shard",
    )
    ap.add_argument("--blas-worker", type=int, nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.blas_worker:
        blas_worker(*args.blas_worker, args.repeats)
        return
    if args.repeats < 1 or min(args.shape) < 1:
        sys.exit("density_threshold: --repeats and --shape must be positive")
    with tempfile.TemporaryDirectory() as tmp:
        exe = build(Path(tmp))
        run = subprocess.run(
            [str(exe), *map(str, args.shape), str(args.repeats), *map(str, DENSITIES)],
            check=True,
            capture_output=True,
            text=True,
        )
    b, n_in, n = args.shape
    flop = 2.0 * b * n_in * n
    print(
        f"# {platform.processor() or platform.machine()}, load {os.getloadavg()[0]:.1f}, "
        f"shape B={b} in={n_in} n={n}, median of {args.repeats} rounds"
    )
    print(
        f"{'product':<12} {'density':>7} {'sparse ms':>17} {'dense ms':>17} "
        f"{'dense GFLOP/s':>13} {'sparse/dense':>12}"
    )
    print(f"{'':<12} {'':>7} {'min (median)':>17} {'min (median)':>17} {'(min)':>13} {'(min)':>12}")
    table: dict[str, list] = {}
    rates: dict[str, dict] = {"one": {}, "two": {}}
    for line in run.stdout.splitlines():
        if "_2threads" in line:
            product, *ms = line.split()
            rates["two"][product.removesuffix("_2threads")] = list(map(float, ms))
            continue
        product, density, *cells, diff = line.split()
        density = float(density)
        sparse_med, dense_med, sparse_min, dense_min = map(float, cells)
        if float(diff) > 1e-3:
            sys.exit(
                f"density_threshold: the kernels disagree by {diff} at {product} "
                f"density {density}: a kernel is broken"
            )
        table.setdefault(product, []).append((density, sparse_min, dense_min))
        if density == 1.0:
            rates["one"][product] = dense_min
        print(
            f"{product:<12} {density:>7.3f} {sparse_min:>7.3f} ({sparse_med:>7.3f}) "
            f"{dense_min:>7.3f} ({dense_med:>7.3f}) {flop / dense_min / 1e6:>13.1f} "
            f"{sparse_min / dense_min:>12.2f}"
        )
    for product, rows in table.items():
        at = crossover(rows)
        print(f"crossover {product}: dense from density {'never' if at is None else f'{at:.3f}'}")
    print_rates(tuple(args.shape), args.repeats, rates)


if __name__ == "__main__":
    main()
