"""A steady-state DSNN training step under `perf record`: the profile of issue 12.

Builds the DSNN (784-1000-10 Leaky, B 128, T 25, Adam, cpu device), runs 10 warm-up steps,
then attaches `perf record -g` to this process for --seconds of back-to-back steps and
prints the steps taken and the machine's load (perf's samples are CPU time of our threads,
so samples per step compare across loads better than the wall clock). --codelets runs
another codelet object (e.g. one built by codelets_ab.py's build_codelets).

    .venv/bin/python bench/profile_step.py [--input mnist|uniform] [--seconds S]
        [--neuron Leaky|Synaptic|RLeaky] [--perf-out FILE] [--codelets FILE.gp]
    perf report -i FILE --no-children --sort symbol -n
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import systems  # noqa: E402
import throughput  # noqa: E402

from popsnn.backends import engine as engine_backend  # noqa: E402


def perf_loop(step, seconds: float, perf_out: str, event: str | None = None) -> tuple:
    """Calls step() back to back for `seconds` (at least once), with `perf record -g`
    attached to this process when perf_out is set (`event`: perf's -e, e.g. cpu-clock where
    the VM has no cycle counter); returns (calls, wall-clock seconds)."""
    perf = None
    if perf_out:
        events = ["-e", event] if event else []
        perf = subprocess.Popen(
            ["perf", "record", *events, "-g", "-o", perf_out, "-p", str(os.getpid())]
        )
        time.sleep(0.5)  # perf attached before the first timed call
    calls, t0 = 0, time.perf_counter()
    while calls == 0 or time.perf_counter() - t0 < seconds:
        step()
        calls += 1
    elapsed = time.perf_counter() - t0
    if perf:
        perf.send_signal(signal.SIGINT)
        perf.wait()
    return calls, elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--input", choices=throughput.INPUTS, default="mnist")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--neuron", choices=tuple(throughput.neuron_models()), default="Leaky")
    ap.add_argument("--perf-out", default="perf.data", help="perf's output; '' for no perf")
    ap.add_argument("--codelets", default=None, help="a codelet object (.gp) to run instead")
    args = ap.parse_args()
    if args.seconds <= 0:
        sys.exit("profile_step: --seconds must be positive")
    if args.perf_out and shutil.which("perf") is None:
        sys.exit("profile_step: perf is not installed; install it or pass --perf-out ''")
    if args.codelets:
        gp = Path(args.codelets)
        if not gp.is_file():
            sys.exit(f"profile_step: no codelet object {gp}; build one or drop --codelets")
        engine_backend.codelets_path = lambda: gp
    neuron = throughput.neuron_models()[args.neuron]
    work = throughput.dsnn_workload(input=args.input, neuron=neuron)
    model = systems.popsnn_model(work)
    for _ in range(10):
        model.train_step(work.x, work.y)
    steps, seconds = perf_loop(
        lambda: model.train_step(work.x, work.y), args.seconds, args.perf_out
    )
    print(
        f"{args.input}, {args.neuron}: {steps} steps, "
        f"{1e3 * seconds / steps:.2f} ms per step (wall clock), "
        f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )


if __name__ == "__main__":
    main()
