"""The LIF forward vertex over half storage against float, alone (docs/numerics.md section 8,
step 4): CPU seconds per run of the DSNN's two forward layers (784-1000-10 Leaky, T 25, MNIST
as direct current) in tests/engine/half_vertices/lif_forward (one tile of popsnn's CPU
runtime, one step per call, so the float side takes the per-step kernels, not the AVX-512
whole-trace path the engine's hidden layer takes). The two stored types take turns, round by
round; the table gives the median per run and half/float. CPU time (std::clock) rather than
wall time: the machine is shared; the load is recorded beside it. --backward: the two layers'
LifBackward too (from a fixed dL/dS and dL/dU of the output layer), forward and backward timed
together.

    .venv/bin/python bench/half_forward.py [--batch 32] [--rounds 5] [--repeat 10] [--backward]

Writes bench/results/half_forward.json (--backward: half_forward_backward.json).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import image_task, machine  # noqa: E402
from half_precision import T_STEPS, dsnn  # noqa: E402

from popsnn.backends.engine import _layer_spec  # noqa: E402

SOURCE = HERE.parent / "tests" / "engine" / "half_vertices"
RESULTS = HERE / "results" / "half_forward.json"


def build(into: Path) -> Path:
    cmakedir = subprocess.run(
        [sys.executable, "-m", "popsnn", "--cmakedir"], check=True, capture_output=True, text=True
    ).stdout.strip()
    configure = ["cmake", "-S", str(SOURCE), "-B", str(into), f"-Dpopsnn_DIR={cmakedir}"]
    subprocess.run(configure + ["-DCMAKE_BUILD_TYPE=Release"], check=True, capture_output=True)
    subprocess.run(["cmake", "--build", str(into)], check=True, capture_output=True)
    return into / "lif_forward"


def write_inputs(folder: Path, stored: str, x, params, batch: int) -> None:
    dtype = np.float16 if stored == "half" else np.float32
    arrays = {"x": x, "l0_w": params[0]["weight"].T, "l0_b": params[0]["bias"]}
    arrays |= {"l1_w": params[1]["weight"].T, "l1_b": params[1]["bias"]}
    rng = np.random.default_rng(0)  # the output layer's dL/dS, dL/dU (read with --backward)
    arrays |= {f"l1_d{k}": rng.normal(0.0, 0.01, (T_STEPS, batch, 10)) for k in "SU"}
    for name, a in arrays.items():
        np.ascontiguousarray(a, dtype).tofile(folder / f"{name}.bin")


def seconds(harness: Path, folder: Path, stored: str, args, spec: dict) -> float:
    n_in, n0, n1 = 784, 1000, 10
    argv = [str(harness), str(folder), stored, "Leaky", "ResetSubtract", "NoRule", "0", "0"]
    argv += [str(v) for v in (T_STEPS, args.batch, n_in, n0, n1)]
    argv += [repr(float(spec["beta"])), "0.0", "1.0", repr(float(spec["threshold"]))]
    argv += ["0", repr(float(spec["surrogate_param"])), "0.0", "1", "0", str(int(args.backward))]
    env = dict(os.environ, LIF_FORWARD_REPEAT=str(args.repeat))
    run = subprocess.run(argv, check=True, capture_output=True, text=True, env=env)
    return float(run.stdout.split()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--backward", action="store_true")
    args = parser.parse_args(argv)
    net = dsnn()
    params = net.init_params(0)
    spec = _layer_spec(*net.pairs[0])
    x, _ = image_task("mnist").sample(args.batch, seed=0)
    times = {"float": [], "half": []}
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp:
        harness = build(Path(tmp, "build"))
        folders = {s: Path(tmp, s) for s in times}
        for stored, folder in folders.items():
            folder.mkdir()
            write_inputs(folder, stored, x, params, args.batch)
        for _ in range(args.rounds):
            for stored, folder in folders.items():
                times[stored].append(seconds(harness, folder, stored, args, spec))
                print(stored, f"{times[stored][-1] * 1e3:.2f} ms", flush=True)
            load.append(os.getloadavg()[0])
    median = {s: statistics.median(v) for s, v in times.items()}
    result = {
        "what": ("LifForward and LifBackward" if args.backward else "LifForward")
        + " DSNN layers alone, CPU seconds per run (std::clock), one step per call",
        "B": args.batch,
        "T": T_STEPS,
        "rounds": args.rounds,
        "repeat": args.repeat,
        "seconds": times,
        "median_seconds": median,
        "half_over_float": median["half"] / median["float"],
        "load_1min": load,
        "machine": machine(),
    }
    print(
        f"median float {median['float'] * 1e3:.2f} ms, half {median['half'] * 1e3:.2f} ms, "
        f"half/float {result['half_over_float']:.2f}; load {min(load):.1f}-{max(load):.1f}"
    )
    out = RESULTS.with_name("half_forward_backward.json") if args.backward else RESULTS
    out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
