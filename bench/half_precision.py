"""Half precision against float32 (docs/numerics.md section 8) on Sun et al.'s DSNN (784-1000-10,
Leaky, B 128, T 25, MNIST), beside Sun et al.'s half-precision experiment.

    python bench/half_precision.py accuracy [--train-steps 100 --test-images 2000 --seed 0]
    python bench/half_precision.py memory
    python bench/half_precision.py instructions [--batch 8]

Each writes its part of bench/results/half.json. Nothing is timed by the clock (the machine is
shared): speed is instructions per training step counted by valgrind's callgrind, memory is
(a) the bytes the storage points hold per step, computed from the shapes, and (b) the peak of
NumPy's allocations in one training step (tracemalloc), measured. Everything runs on the
reference device: popsnn's engine refuses float16 (its half path is partly built:
docs/numerics.md section 8; bench/half_forward.py times the half LIF vertices alone), so
there is no engine or ipu-model figure for half here, and none is made up.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
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


def make_model(dtype: str, batch: int = BATCH, seed: int = 0) -> popsnn.Model:
    return popsnn.Model(
        dsnn(),
        optimizer=popsnn.optim.Adam(lr=5e-4),
        device="reference",
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="what", required=True)
    acc = sub.add_parser("accuracy")
    acc.add_argument("--train-steps", type=int, default=100)
    acc.add_argument("--test-images", type=int, default=2000)
    acc.add_argument("--seed", type=int, default=0)
    sub.add_parser("memory")
    ins = sub.add_parser("instructions")
    ins.add_argument("--batch", type=int, default=8)
    step = sub.add_parser("step")  # the workload callgrind counts
    step.add_argument("dtype", choices=DTYPES)
    step.add_argument("images")
    step.add_argument("steps", type=int)
    args = parser.parse_args(argv)
    if args.what == "step":
        _one_step(args.dtype, args.images, args.steps)
        return 0
    result = {"accuracy": run_accuracy, "memory": run_memory, "instructions": run_instructions}[
        args.what
    ](args)
    saved = _saved()
    saved.update(result)
    saved.setdefault("machine", {})[args.what] = machine()
    saved["seed_000"] = SEED_000
    RESULTS.write_text(json.dumps(saved, indent=1, default=float) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
