"""popsnn's benchmarks: the papers' experiments on this machine, side by side in one run.

    python bench/run.py dsnn [--quick]        seed 000's DSNN 784-1000-10, T=25, B=128, Adam
    python bench/run.py batch                 throughput over batch 8..128
    python bench/run.py width                 throughput over hidden width 250..8000
    python bench/run.py neurons               Leaky / Synaptic / RLeaky
    python bench/run.py rate                  rate-coded input (nothing to hoist)

Every experiment times each system on the same workload (one training step: forward over
all steps, loss, backward, update), reports min / median / max images/s over repeats and
ratios against popsnn, describes the machine, prints one JSON line per configuration and
writes them to bench/results/<experiment>.json. Systems that cannot run here are reported
with the reason, never left out silently. These are CPU measurements on this machine; no
figure here is an IPU measurement.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import popsnn  # noqa: E402
from popsnn import encoders, losses  # noqa: E402
import systems  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict:
    """What the numbers were measured on."""
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info = {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "numpy": np.__version__, "popsnn": popsnn.__version__, "platform": platform.platform()}
    for mod in ("torch", "snntorch"):
        try:
            info[mod] = __import__(mod).__version__
        except ImportError:
            info[mod] = None
    return info


def mnist_images(n: int, seed: int = 0):
    """n real MNIST images scaled to [0, 1] and their labels, from popsnn's data loaders;
    the activity of a spiking network depends on its input, so synthetic noise would lie."""
    from popsnn import data
    train, _ = data.load_mnist()
    rng = np.random.default_rng(seed)
    idx = rng.choice(len(train.labels), size=n, replace=False)
    return train.inputs(idx), train.labels[idx].astype(np.int64)


def time_step(step, repeats: int, warmup: int = 1) -> dict:
    for _ in range(warmup):
        step()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return {"min_s": min(times), "median_s": statistics.median(times), "max_s": max(times),
            "repeats": repeats}


def measure(work: systems.Workload, repeats: int, include=("popsnn", "snntorch", "numpy_hoisted",
                                                          "numpy_per_step")) -> dict:
    """images/s of every system on one workload, plus popsnn's ratio to each."""
    runners = {
        "popsnn": (systems.engine_available, lambda: systems.popsnn_engine(work)),
        "snntorch": (systems.snntorch_available, lambda: systems.snntorch(work)),
        "numpy_hoisted": (lambda: None if work.direct else "input is not direct current",
                          lambda: systems.numpy_reference(work, hoist=True)),
        "numpy_per_step": (lambda: None, lambda: systems.numpy_reference(work, hoist=False)),
    }
    row = {}
    for name in include:
        available, make = runners[name]
        reason = available()
        if reason is not None:
            row[f"{name}_images_per_s"] = None
            row[f"{name}_skipped"] = reason
            continue
        t = time_step(make(), repeats)
        b = work.batch_size
        row[f"{name}_images_per_s"] = b / t["median_s"]
        row[f"{name}_images_per_s_min_max"] = [b / t["max_s"], b / t["min_s"]]
    ours = row.get("popsnn_images_per_s")
    for name in include:
        other = row.get(f"{name}_images_per_s")
        if name != "popsnn" and ours and other:
            row[f"popsnn_over_{name}"] = ours / other
    return row


def dsnn(hidden=1000, batch=128, steps=25, neuron=None, rate_coded=False, seed=0):
    neuron = neuron or popsnn.Leaky(beta=0.9)
    net = popsnn.Sequential(popsnn.Linear(784, hidden), neuron,
                            popsnn.Linear(hidden, 10), type(neuron)(**_neuron_kwargs(neuron)))
    x, y = mnist_images(batch, seed)
    if rate_coded:
        x = encoders.rate(x, steps, rng=np.random.default_rng(seed)).astype(np.float32)
    return systems.Workload(net=net, x=x, y=y, num_steps=steps, loss=losses.ce_count_loss(),
                            seed=seed)


def _neuron_kwargs(neuron):
    from dataclasses import fields
    return {f.name: getattr(neuron, f.name) for f in fields(neuron)}


def experiments(args):
    """(experiment name, list of (config dict, workload factory))."""
    if args.experiment == "dsnn":
        return [({"hidden": 1000, "batch": 128, "steps": 25}, lambda: dsnn())]
    if args.experiment == "batch":
        return [({"batch": b}, lambda b=b: dsnn(batch=b)) for b in (8, 16, 32, 64, 128)]
    if args.experiment == "width":
        return [({"hidden": h}, lambda h=h: dsnn(hidden=h)) for h in (250, 500, 1000, 2000,
                                                                      4000, 8000)]
    if args.experiment == "neurons":
        models = {"Leaky": popsnn.Leaky(beta=0.9), "Synaptic": popsnn.Synaptic(alpha=0.8, beta=0.9),
                  "RLeaky": popsnn.RLeaky(beta=0.9)}
        return [({"neuron": k}, lambda n=n: dsnn(neuron=n)) for k, n in models.items()]
    if args.experiment == "rate":
        return [({"input": "rate"}, lambda: dsnn(rate_coded=True))]
    raise SystemExit(f"unknown experiment {args.experiment!r}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("experiment", choices=["dsnn", "batch", "width", "neurons", "rate"])
    parser.add_argument("--quick", action="store_true", help="3 repeats instead of 10")
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--no-save", action="store_true", help="print only, write no JSON file")
    args = parser.parse_args(argv)
    repeats = args.repeats or (3 if args.quick else 10)
    rows = []
    env = machine()
    for config, make in experiments(args):
        row = {"experiment": args.experiment, **config, **measure(make(), repeats),
               "machine": env, "note": "CPU measurements on this machine, not an IPU"}
        print(json.dumps(row), flush=True)
        rows.append(row)
    if not args.no_save:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / f"{args.experiment}.json").write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
