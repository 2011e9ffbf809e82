"""Half precision against float32 (docs/numerics.md section 8) on Sun et al.'s DSNN (784-1000-10,
Leaky, B 128, T 25, MNIST), beside Sun et al.'s half-precision experiment.

    python bench/half_precision.py accuracy [--train-steps 100 --test-images 2000 --seed 0]
    python bench/half_precision.py memory
    python bench/half_precision.py instructions [--batch 8]
    python bench/half_precision.py engine [--batch 32 --repeats 5 --ipu-batch 16]
    python bench/half_precision.py engine-accuracy [--train-steps 100 --test-images 2000]

Each writes its part of bench/results/half.json. `accuracy`, `memory` and `instructions` run
on the reference device: instructions per training step counted by valgrind's callgrind,
(a) the bytes the storage points hold per step, computed from the shapes, and (b) the peak of
NumPy's allocations in one training step (tracemalloc), measured. `engine` runs popsnn's
engine on this machine (device "cpu"): the bytes of its tensors as the plan counts them
(half: 2 bytes a stored value) and the process's peak resident memory after building each
dtype's engine, and the wall-clock and CPU seconds of training steps, float32 and float16
alternating in one run with the 1-minute load recorded beside them (a shared machine); then
the Mk2 `ipu-model`'s cycle ESTIMATE of one training step (popsnn's cost model at the
half-rate row ops, never measured on an IPU). `engine-accuracy` trains both dtypes on the
engine from the same seed and tests them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import image_task, machine, train_and_test  # noqa: E402

import popsnn  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "half.json"
SIZES = (784, 1000, 10)
T_STEPS, BATCH = 25, 128
DTYPES = ("float32", "float16")
# Sun et al. (IPU), section IV-G, Fig. 7(b): throughput in 16-bit and 32-bit; the text gives
# no number, only that "the difference for all cases is marginal because gradients continue
# to be calculated in full precision". No accuracy is reported for half.
SEED_000 = {
    "half_vs_full_throughput": "marginal difference (Fig. 7(b); no figure in the text)",
    "half_accuracy": "not reported",
}


def dsnn() -> popsnn.Sequential:
    def leaky():
        return popsnn.Leaky(beta=0.95, surrogate=popsnn.surrogate.fast_sigmoid(25.0))

    return popsnn.Sequential(
        popsnn.Linear(SIZES[0], SIZES[1]), leaky(), popsnn.Linear(SIZES[1], SIZES[2]), leaky()
    )


def make_model(
    dtype: str, batch: int = BATCH, seed: int = 0, device: str = "reference"
) -> popsnn.Model:
    return popsnn.Model(
        dsnn(),
        optimizer=popsnn.optim.Adam(lr=5e-4),
        device=device,
        num_steps=T_STEPS,
        batch_size=batch,
        seed=seed,
        dtype=dtype,
    )


def stored_bytes(dtype: str, batch: int = BATCH) -> dict:
    """Bytes the storage points of docs/numerics.md section 8 hold in one training step,
    from the shapes: what half storage saves, independent of any implementation's slack."""
    width = 2 if dtype == "float16" else 4
    params = sum(n_in * n_out + n_out for n_in, n_out in zip(SIZES[:-1], SIZES[1:]))
    neurons = sum(SIZES[1:])
    weights = params * width + (params * 4 if dtype == "float16" else 0)  # + float32 masters
    adam_state = 2 * params * 4
    # U, the surrogate trace and the current I, per step, sample and neuron.
    traces = 3 * T_STEPS * batch * neurons * width
    # Direct-current batch; dL/dS and dL/dU from the loss and the readout's dL/dI blocks
    # (each [T, B, 10]). Spike ids travel as integers in both dtypes: not counted.
    exchanged = (batch * SIZES[0] + 3 * T_STEPS * batch * SIZES[-1]) * width
    return {
        "weights": weights,
        "optimizer_state": adam_state,
        "traces": traces,
        "exchanged": exchanged,
        "total": weights + adam_state + traces + exchanged,
    }


def peak_step_allocation(dtype: str) -> int:
    """Peak bytes NumPy allocates during one training step of the reference (measured)."""
    task = image_task("mnist")
    model = make_model(dtype)
    x, y = task.sample(BATCH, seed=0)
    model.train_step(x, y)  # warm-up: optimiser state allocated
    tracemalloc.start()
    model.train_step(x, y)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def run_accuracy(args) -> dict:
    """Both dtypes trained from the same seed (same initial weights and minibatches); the
    rows of earlier seeds in half.json are kept, so seeds can be run one at a time."""
    task = image_task("mnist")
    rows = {}
    for dtype in DTYPES:
        model = make_model(dtype, seed=args.seed)
        row = train_and_test(model, task, args.train_steps, args.test_images, args.seed)
        row.pop("train_seconds")  # a clock figure on a shared machine: not reported
        if model.loss_scaler is not None:
            row["loss_scale"] = model.loss_scaler.scale
            row["skipped_steps"] = model.loss_scaler.skipped_steps
        rows[dtype] = row
        print(args.seed, dtype, row, flush=True)
    # Seeds sit beside the saved ones trained and tested alike (one entry per run length).
    accuracy = _saved().get("accuracy", {})
    length = f"{args.train_steps} steps, {args.test_images} test images"
    runs = accuracy.get(length, {}).get("runs", {})
    runs[str(args.seed)] = rows
    accuracy.update(network="784-1000-10", T=T_STEPS, B=BATCH)
    accuracy[length] = {"runs": runs, "summary": accuracy_summary(runs)}
    return {"accuracy": accuracy}


def accuracy_summary(runs: dict) -> dict:
    """Per dtype over the seeds: mean, smallest and largest test accuracy; and the largest
    number of steps the loss scaler skipped."""
    out = {"seeds": sorted(int(s) for s in runs)}
    for dtype in DTYPES:
        acc = [r[dtype]["test_accuracy"] for r in runs.values()]
        out[dtype] = {"mean": float(np.mean(acc)), "min": min(acc), "max": max(acc)}
    out["float16"]["most_skipped_steps"] = max(r["float16"]["skipped_steps"] for r in runs.values())
    return out


def _saved() -> dict:
    return json.loads(RESULTS.read_text()) if RESULTS.exists() else {}


def run_memory(_args) -> dict:
    rows = {}
    for dtype in DTYPES:
        rows[dtype] = {
            "stored_bytes": stored_bytes(dtype),
            "reference_step_peak_alloc_bytes": peak_step_allocation(dtype),
        }
        print(dtype, rows[dtype], flush=True)
    return {"memory": rows}


def _one_step(dtype: str, images: str, steps: int) -> None:
    """`steps` training steps on the images saved in `images` (an .npz of x and y), so the
    counted process does not decode MNIST itself."""
    saved = np.load(images)
    x, y = saved["x"], saved["y"]
    model = make_model(dtype, len(y))
    for _ in range(steps):
        model.train_step(x, y)


def _callgrind_instructions(dtype: str, images: str, steps: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        cmd = [
            "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
            sys.executable, __file__, "step", dtype, images, str(steps),
        ]  # fmt: skip
        env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
        subprocess.run(cmd, check=True, capture_output=True, env=env)
        text = Path(out).read_text()
    return int(re.search(r"^summary:\s+(\d+)", text, re.M).group(1))


def run_instructions(args) -> dict:
    """Instructions of one training step: (setup + 2 steps) - (setup + 1 step), one thread."""
    rows = {}
    x, y = image_task("mnist").sample(args.batch, seed=0)
    with tempfile.TemporaryDirectory() as tmp:
        images = os.path.join(tmp, "batch.npz")
        np.savez(images, x=x, y=y)
        for dtype in DTYPES:
            one = _callgrind_instructions(dtype, images, 1)
            two = _callgrind_instructions(dtype, images, 2)
            rows[dtype] = two - one
            print(dtype, rows[dtype], flush=True)
    return {
        "instructions_per_step": {
            "device": "reference",
            "B": args.batch,
            "T": T_STEPS,
            "threads": 1,
            "tool": "valgrind --tool=callgrind",
            **rows,
        }
    }


def _peak_rss_bytes() -> int:
    """The process's peak resident set so far (Linux: VmHWM)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def _rss(dtype: str, batch: int) -> None:
    """The workload whose peak resident memory run_engine reads: one engine of `dtype` built
    and trained 2 steps ("none": the same process without a model, the baseline)."""
    x, y = image_task("mnist").sample(batch, seed=0)
    if dtype != "none":
        model = make_model(dtype, batch, device="cpu")
        for _ in range(2):
            model.train_step(x, y)
    print(_peak_rss_bytes())


def _peak_rss_of(dtype: str, batch: int) -> int:
    cmd = [sys.executable, __file__, "rss", dtype, str(batch)]
    return int(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.split()[-1])


def run_engine(args) -> dict:
    """Engine memory and speed, float32 against float16, in one run (see the docstring)."""
    x, y = image_task("mnist").sample(args.batch, seed=0)
    models, rows = {}, {}
    for dtype in DTYPES:  # float32 first: its peak is the process's before half is built
        models[dtype] = make_model(dtype, args.batch, device="cpu")
        models[dtype].train_step(x, y)  # warm-up: pages touched, optimiser state written
        layout = models[dtype].profile()
        rows[dtype] = {
            "tensor_bytes": layout["tensor_bytes"],
            "surrogate_trace_bytes": sum(
                layout[f"layer{l}_surrogate_trace_bytes"] for l in range(len(SIZES) - 1)
            ),
            # a process of its own per dtype, less the same process without a model
            "peak_rss_bytes_over_baseline": _peak_rss_of(dtype, args.batch)
            - _peak_rss_of("none", args.batch),
            "wall_seconds": [],
            "cpu_seconds": [],
        }
    loads = [os.getloadavg()[0]]
    for _ in range(args.repeats):  # A/B alternating: the load drifts alike for both
        for dtype in DTYPES:
            wall, cpu = time.perf_counter(), time.process_time()
            models[dtype].train_step(x, y)
            rows[dtype]["wall_seconds"].append(time.perf_counter() - wall)
            rows[dtype]["cpu_seconds"].append(time.process_time() - cpu)
        loads.append(os.getloadavg()[0])
    for dtype in DTYPES:
        for key in ("wall_seconds", "cpu_seconds"):
            rows[dtype][f"median_{key}"] = float(np.median(rows[dtype][key]))
        print(dtype, {k: v for k, v in rows[dtype].items() if "median" in k or "bytes" in k})
    del models
    estimate = {}
    xi, yi = image_task("mnist").sample(args.ipu_batch, seed=0)
    for dtype in DTYPES:
        model = make_model(dtype, args.ipu_batch, device="ipu-model")
        model.train_step(xi, yi)
        p = model.profile()
        estimate[dtype] = {
            "estimate_cycles_per_step": p["estimate_total_cycles"],
            "estimate_compute_cycles": p["estimate_compute_cycles"],
            "estimate_exchange_bytes_within_ipu": p["estimate_exchange_bytes_within_ipu"],
            "max_tile_bytes": p["max_tile_bytes"],
            "tensor_bytes": p["tensor_bytes"],
        }
        print("ipu-model ESTIMATE", dtype, estimate[dtype], flush=True)
    return {
        "engine": {
            "device": "cpu",
            "B": args.batch,
            "T": T_STEPS,
            "repeats": args.repeats,
            "load_1min": loads,
            **rows,
            "ipu_model_ESTIMATE": {"B": args.ipu_batch, "target": "Mk2 (ipu-model)", **estimate},
        }
    }


def run_engine_accuracy(args) -> dict:
    """Both dtypes trained on the engine (device "cpu") from the same seed and minibatches."""
    task = image_task("mnist")
    rows = {}
    for dtype in DTYPES:
        model = make_model(dtype, seed=args.seed, device="cpu")
        row = train_and_test(model, task, args.train_steps, args.test_images, args.seed)
        row.pop("train_seconds")
        if model.loss_scaler is not None:
            row["loss_scale"] = model.loss_scaler.scale
            row["skipped_steps"] = model.loss_scaler.skipped_steps
        rows[dtype] = row
        print(args.seed, dtype, row, flush=True)
    length = f"{args.train_steps} steps, {args.test_images} test images, seed {args.seed}"
    saved = _saved().get("engine_accuracy", {})
    saved.update(network="784-1000-10", T=T_STEPS, B=BATCH, device="cpu")
    saved[length] = rows
    return {"engine_accuracy": saved}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    acc = sub.add_parser("accuracy")
    acc.add_argument("--train-steps", type=int, default=100)
    acc.add_argument("--test-images", type=int, default=2000)
    acc.add_argument("--seed", type=int, default=0)
    sub.add_parser("memory")
    eng = sub.add_parser("engine")
    eng.add_argument("--batch", type=int, default=32)
    eng.add_argument("--repeats", type=int, default=5)
    eng.add_argument("--ipu-batch", type=int, default=16)
    eacc = sub.add_parser("engine-accuracy")
    eacc.add_argument("--train-steps", type=int, default=100)
    eacc.add_argument("--test-images", type=int, default=2000)
    eacc.add_argument("--seed", type=int, default=0)
    ins = sub.add_parser("instructions")
    ins.add_argument("--batch", type=int, default=8)
    rss = sub.add_parser("rss")  # the workload whose peak memory `engine` reads
    rss.add_argument("dtype", choices=DTYPES + ("none",))
    rss.add_argument("batch", type=int)
    step = sub.add_parser("step")  # the workload callgrind counts
    step.add_argument("dtype", choices=DTYPES)
    step.add_argument("images")
    step.add_argument("steps", type=int)
    args = parser.parse_args(argv)
    if args.what == "step":
        _one_step(args.dtype, args.images, args.steps)
        return 0
    if args.what == "rss":
        _rss(args.dtype, args.batch)
        return 0
    result = {
        "accuracy": run_accuracy,
        "memory": run_memory,
        "instructions": run_instructions,
        "engine": run_engine,
        "engine-accuracy": run_engine_accuracy,
    }[args.what](args)
    saved = _saved()
    saved.update(result)
    saved.setdefault("machine", {})[args.what] = machine()
    saved["seed_000"] = SEED_000
    RESULTS.write_text(json.dumps(saved, indent=1, default=float) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
