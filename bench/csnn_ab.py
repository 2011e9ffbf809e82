"""Two codelet objects side by side on Sun et al.'s CSNN training step (bench/csnn_steps.py's
workload: the engine's cpu device, T 25, B MNIST test images, initial weights of seed 0): one
model per object in one process, their steps taken in turns, round by round, so the load
of this shared machine falls on both alike. Prints per object the median CPU time
(`time.process_time`, both threads) and wall time of a step, the ratio, and whether the two
models' losses were equal at every step (the same arithmetic gives the same floats).

Both objects must fit the installed host (the same vertex names and fields): build the
"before" object from the same host, e.g. copy the installed popsnn_codelets.gp aside, change
only codelets/, reinstall.

    .venv/bin/python bench/csnn_ab.py BEFORE.gp AFTER.gp [--rounds 8] [--batch 128]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

from csnn_steps import workload

from popsnn.backends import engine as engine_backend


def model_with(codelets: Path, batch: int, rule: str):
    """csnn_steps.py's workload whose graphs load `codelets` (the backend takes the object's
    path when it is made); returns the model, images and labels."""
    saved = engine_backend.codelets_path
    engine_backend.codelets_path = lambda: codelets.resolve()
    try:
        return workload(batch, rule)
    finally:
        engine_backend.codelets_path = saved


def step(model, x, y):
    cpu, wall = time.process_time(), time.perf_counter()
    loss, _ = model.train_step(x, y)
    return loss, time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--rule", default="none", help="Config.sparse, e.g. window:0.5")
    args = ap.parse_args()
    runs = {"before": model_with(args.before, args.batch, args.rule)[0]}
    runs["after"], x, y = model_with(args.after, args.batch, args.rule)
    losses = {k: [step(m, x, y)[0]] for k, m in runs.items()}  # build + warm-up
    times = {k: [] for k in runs}
    load = [os.getloadavg()[0]]
    for _ in range(args.rounds):
        for k, m in runs.items():
            loss, cpu, wall = step(m, x, y)
            losses[k].append(loss)
            times[k].append((cpu, wall))
    load.append(os.getloadavg()[0])
    med = {k: [statistics.median(t[i] for t in v) for i in (0, 1)] for k, v in times.items()}
    for k, (cpu, wall) in med.items():
        print(f"{k:6s} CPU {cpu * 1e3:7.1f} ms  wall {wall * 1e3:7.1f} ms per step (median)")
    print(
        f"after/before: CPU {med['after'][0] / med['before'][0]:.3f}, "
        f"wall {med['after'][1] / med['before'][1]:.3f}; {args.rounds} rounds, B {args.batch}, "
        f"load {load[0]:.1f} -> {load[1]:.1f}"
    )
    print("losses equal at every step:", losses["before"] == losses["after"])


if __name__ == "__main__":
    main()
