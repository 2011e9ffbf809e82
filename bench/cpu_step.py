"""CPU time per DSNN training step of whichever popsnn package Python imports.

For an A/B of two whole packages (host and codelets, across any change): install the other
revision into a directory of its own (`pip install --no-deps --target DIR .` in its
checkout) and run this script alternately with and without `PYTHONPATH=DIR`. CPU time
(`time.process_time`) moves less with the machine's load than the wall clock; with
POPSNN_NUM_THREADS=1 it has no pool spin in it. With two threads the wall clock is the figure
(CPU time then counts the pool's spinning); it is printed beside the CPU time, with the part
of a step spent outside the engine's programs (Python, the host's input and output copies:
one thread however many the pool has).

    [POPSNN_NUM_THREADS=1] [PYTHONPATH=DIR] .venv/bin/python bench/cpu_step.py
        [--input mnist|uniform] [--neuron Leaky|Synaptic|RLeaky] [--blocks N] [--batch B]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import systems  # noqa: E402
import throughput  # noqa: E402

import popsnn  # noqa: E402


def engine_seconds(model) -> float:
    """Wall seconds the engine has spent running its programs (profile()'s per-program
    figures): the rest of a step is the host's, on one thread whatever the pool's size."""
    prof = model.profile()
    return sum(
        v
        for k, v in prof.items()
        if k.startswith("program")
        and k.endswith("_seconds")
        and not k.endswith("cpu_seconds")
        and not k.endswith("last_seconds")
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", choices=throughput.INPUTS, default="mnist")
    ap.add_argument("--neuron", choices=tuple(throughput.neuron_models()), default="Leaky")
    ap.add_argument("--blocks", type=int, default=5, help="blocks of 10 timed steps")
    ap.add_argument("--batch", type=int, default=128, help="minibatch size (8: issue 12's)")
    args = ap.parse_args()
    if args.blocks < 1 or args.batch < 1:
        sys.exit("cpu_step: --blocks and --batch must be at least 1")
    work = throughput.dsnn_workload(
        batch=args.batch, input=args.input, neuron=throughput.neuron_models()[args.neuron]
    )
    model = systems.popsnn_model(work)
    for _ in range(5):
        model.train_step(work.x, work.y)
    per_step, wall, host = [], [], []
    for _ in range(args.blocks):
        e0 = engine_seconds(model)
        c0, w0 = time.process_time(), time.perf_counter()
        for _ in range(10):
            model.train_step(work.x, work.y)
        per_step.append((time.process_time() - c0) / 10)
        wall.append((time.perf_counter() - w0) / 10)
        host.append(wall[-1] - (engine_seconds(model) - e0) / 10)
    per_step.sort()
    wall.sort()
    host.sort()
    print(
        f"{args.input}, {args.neuron}, B {args.batch}: "
        f"popsnn from {Path(popsnn.__file__).parent}, CPU ms per step "
        f"min {1e3 * per_step[0]:.2f} median {1e3 * per_step[len(per_step) // 2]:.2f}; "
        f"wall ms min {1e3 * wall[0]:.2f} median {1e3 * wall[len(wall) // 2]:.2f} "
        f"({args.batch / wall[0]:,.0f} images/s at the min), "
        f"outside the engine's programs median {1e3 * host[len(host) // 2]:.2f}, "
        f"threads {os.environ.get('POPSNN_NUM_THREADS', 'default')}, "
        f"load {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
