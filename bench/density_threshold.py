"""Where the dense product beats the sparse row kernel: the density threshold of the
direct-current layer's products (codelets/DenseKernels.hpp, DENSE_MIN_NONZERO_PERCENT).

Compiles density_threshold.cpp against codelets/ with the codelets' own flags (-O3
-march=native -fno-math-errno, as the package builds them), then times both kernels of both
products (x.W for the forward current, x^T.G for the weight gradient) at the shape of one
DSNN shard (B 128, 784 inputs, 500 neurons: the 1,000-neuron layer on the cpu device's two
tiles) over a sweep of input densities (random U[0,1] entries, the rest zero). The kernels
take turns, one call each per round. Each cell gives the median and the minimum over the
rounds; the crossover is taken from the minima (the calls least disturbed by other
processes: on a shared machine a 2 ms call is often preempted, which makes the medians
bimodal).

    .venv/bin/python bench/density_threshold.py [--repeats N] [--shape B IN N]

The crossover printed is the lowest density of the sweep from which the dense product is
at least as fast as the sparse kernel at every density of the sweep above it, per product.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
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
    args = ap.parse_args()
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
    for line in run.stdout.splitlines():
        product, density, *cells, diff = line.split()
        density = float(density)
        sparse_med, dense_med, sparse_min, dense_min = map(float, cells)
        if float(diff) > 1e-3:
            sys.exit(
                f"density_threshold: the kernels disagree by {diff} at {product} "
                f"density {density}: a kernel is broken"
            )
        table.setdefault(product, []).append((density, sparse_min, dense_min))
        print(
            f"{product:<12} {density:>7.3f} {sparse_min:>7.3f} ({sparse_med:>7.3f}) "
            f"{dense_min:>7.3f} ({dense_med:>7.3f}) {flop / dense_min / 1e6:>13.1f} "
            f"{sparse_min / dense_min:>12.2f}"
        )
    for product, rows in table.items():
        at = crossover(rows)
        print(f"crossover {product}: dense from density {'never' if at is None else f'{at:.3f}'}")


if __name__ == "__main__":
    main()
