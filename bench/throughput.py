"""Throughput (Sun et al. (IPU)): one training step (forward over all steps, loss, backward,
update) of every system on the same workload, each system in its own worker process, taking
turns round by round; images/s, milliseconds per step, peak memory and popsnn's ratios. Also
the A/B behind that harness (`exp_isolation`).
"""

from __future__ import annotations

import json
import os
import statistics
import time
from dataclasses import fields
from pathlib import Path

import numpy as np
import systems
import workers
from common import image_task, images, time_calls, train_and_test

import popsnn
from popsnn import encoders, losses, optim

# "limit" is not a system: the step's matrix products alone, done densely by NumPy's BLAS in
# the same run (systems.dense_products), i.e. the machine's matmul rate as images/s.
SYSTEMS = (
    "popsnn",
    "snntorch",
    "snntorch_compiled",
    "numpy_step",
    "numpy_hoisted",
    "numpy_per_step",
    "limit",
)
# Inputs of the DSNN rows: real MNIST images (mostly black: sparse first-layer activity) or
# U[0, 1] pixels (dense input, the case a sparse engine must not lose).
INPUTS = ("mnist", "uniform")
# torch.compile compiles for minutes per configuration here: the compiled snnTorch is timed in
# the dsnn and latency experiments only, and not with --quick.
UNCOMPILED = tuple(s for s in SYSTEMS if s != "snntorch_compiled")


def _copy_neuron(neuron, **changes):
    kw = {f.name: getattr(neuron, f.name) for f in fields(neuron)}
    kw.update(changes)
    return type(neuron)(**kw)


def dsnn_workload(
    hidden=1000,
    batch=128,
    steps=25,
    neuron=None,
    rate_coded=False,
    outputs=10,
    population=False,
    seed=0,
    input="mnist",
) -> systems.Workload:
    """Sun et al.'s DSNN 784-hidden-outputs on MNIST, Adam, ce_count (population-coded over 10
    classes when `population`); `input="uniform"` replaces the images' pixels with U[0, 1]
    values (same labels): dense input."""
    if input not in INPUTS:
        raise ValueError(f"input must be one of {INPUTS}, got {input!r}")
    neuron = neuron or popsnn.Leaky(beta=0.9)
    net = popsnn.Sequential(
        popsnn.Linear(784, hidden), neuron, popsnn.Linear(hidden, outputs), _copy_neuron(neuron)
    )
    x, y = images(batch, seed)
    if input == "uniform":
        x = np.random.default_rng(seed).random(x.shape, dtype=np.float32)
    if rate_coded:
        x = encoders.rate(x, steps, rng=np.random.default_rng(seed)).astype(np.float32)
    loss = (
        losses.ce_count_loss(population_code=True, num_classes=10)
        if population
        else losses.ce_count_loss()
    )
    return systems.Workload(net=net, x=x, y=y, num_steps=steps, loss=loss, seed=seed)


def measure(work: systems.Workload, repeats: int, include=SYSTEMS) -> dict:
    """images/s (median, and [min, max] over repeats) of every system on one workload, plus
    popsnn's ratio to each; a system that cannot run says why instead of vanishing.

    Every system runs in its own worker process (bench/workers.py), so that no system's
    thread pool takes a core from another's step; the workers are asked for one timed step
    each in turn, round by round."""
    import numpy_step

    checks = {
        "popsnn": systems.engine_available,
        "snntorch": systems.snntorch_available,
        "snntorch_compiled": systems.snntorch_available,
        "numpy_step": lambda: numpy_step.unsupported(work.net, work.loss, work.x),
        "numpy_hoisted": lambda: (
            None if work.direct else "input is not direct current: nothing to hoist"
        ),
        "numpy_per_step": lambda: None,
        "limit": lambda: None,  # a Conv2d counted as its im2col product
    }
    row, names = {}, []
    for name in include:
        reason = checks[name]()
        if reason is None:
            names.append(name)
        else:
            row[f"{name}_images_per_s"] = None
            row[f"{name}_skipped"] = reason
    b = work.batch_size
    variants = thread_variants(names)
    timed = workers.time_isolated(work, variants, repeats)
    for name in names:
        # A system timed at several thread settings is credited with its best median (the
        # comparison stays conservative for popsnn); all of them are kept in the row.
        mine = [timed[k] for k, (sys_name, _) in variants.items() if sys_name == name]
        t = min(mine, key=lambda v: v["median_s"])
        row[f"{name}_images_per_s"] = b / t["median_s"]
        row[f"{name}_images_per_s_min_max"] = [b / t["max_s"], b / t["min_s"]]
        row[f"{name}_threads"] = t["threads"]
        if len(mine) > 1:
            row[f"{name}_images_per_s_by_threads"] = {
                str(v["threads"]): b / v["median_s"] for v in mine
            }
    for name in names:
        best = min(
            (timed[k] for k, (n, _) in variants.items() if n == name), key=lambda v: v["median_s"]
        )
        row[f"{name}_timed_steps_per_turn"] = best["timed_steps_per_turn"]
        row[f"{name}_step_ms"] = 1e3 * best["median_s"]
        row.update(_memory_and_warmup(name, best))
    if "limit" in names:
        flops = systems.dense_products(work)[1]
        row["limit_gflop_per_step"] = flops / 1e9
        row["limit_gflop_per_s"] = flops / 1e9 * row["limit_images_per_s"] / b
        row["limit_what"] = (
            "the step's matrix products only (current, weight and input "
            "gradients; first layer over B rows if the input is direct), "
            "dense NumPy BLAS, timed in the same run; no neuron updates"
        )
    row["timing"] = (
        f"each system in its own worker process; turns in rotation, each "
        f"{workers.WARM_S:g} s of untimed then >= {workers.TIMED_S:g} s of timed "
        f"back-to-back steps; {workers.SETTLE_S:g} s pause before each turn"
    )
    ours = row.get("popsnn_images_per_s")
    for name in include:
        other = row.get(f"{name}_images_per_s")
        if name != "popsnn" and ours and other:
            row[f"popsnn_over_{name}"] = ours / other
    return row


def _memory_and_warmup(name: str, timed: dict) -> dict:
    """The worker's peak resident memory (MiB) while it set up, warmed up and timed this
    workload, and its warm-up time; for torch.compile the compile time (the warm-up's excess
    over as many timed steps), reported apart from images/s."""
    out = {f"{name}_warmup_s": timed["warmup_s"], f"{name}_warmup_steps": timed["warmup_steps"]}
    peak = timed.get("peak_rss_bytes")
    out[f"{name}_peak_rss_mib"] = None if peak is None else peak / 2**20
    if not timed.get("peak_rss_reset"):
        out[f"{name}_peak_rss_note"] = "peak over the worker's whole life (could not reset it)"
    if name == "snntorch_compiled":
        out["snntorch_compiled_compile_s"] = max(
            timed["warmup_s"] - timed["warmup_steps"] * timed["median_s"], 0.0
        )
    return out


def thread_variants(names) -> dict:
    """{timing key: (system, threads)}, threads None meaning the library's default. Every
    system is timed with its library's default threads and with one, and credited with the
    better: on a shared, loaded machine a library's threads contend with other processes and
    its median can fall several-fold (seen here for PyTorch: 2 threads 76-710 images/s,
    1 thread a steady ~870); popsnn's runtime documents POPSNN_NUM_THREADS=1 for a crowded
    machine too."""
    out = {}
    for name in names:
        out[f"{name}@default"] = (name, None)
        if (os.cpu_count() or 1) > 1:
            out[f"{name}@1"] = (name, 1)
    return out


def exp_isolation(repeats=7, trials=2, **workload):
    """The A/B behind the worker processes: popsnn's step time (median, min over `repeats`)
    timed (a) in one process interleaved with snnTorch and both NumPy systems, one step per
    turn (this harness before the workers), (b) the same with each turn a burst of
    back-to-back steps (workers.WARM_S untimed, then TIMED_S timed), (c) in its worker,
    interleaved with the other systems' workers, bursts (the harness now), (d) in its worker
    with no other system running, bursts. Arms alternate `trials` times so that load from
    other users falls on all of them."""
    work = dsnn_workload(**workload)
    shown = {k: v for k, v in workload.items()}

    def in_process(bursts):
        fns = {"popsnn": systems.popsnn_engine(work)}
        if "snntorch" in others:
            fns["snntorch"] = systems.snntorch(work)
        fns["numpy_hoisted"] = systems.numpy_reference(work, hoist=True)
        fns["numpy_per_step"] = systems.numpy_reference(work, hoist=False)
        if not bursts:
            return time_calls(fns, repeats)["popsnn"]
        # Interleaved the same way, but each turn a burst of back-to-back steps (as the
        # workers' turns): per-step times of popsnn's turns, the warm-up call dropped.
        bursts = {k: _burst(fn) for k, fn in fns.items()}
        time_calls(bursts, repeats)
        v = bursts["popsnn"].per_step[1:]
        return {"median_s": statistics.median(v), "min_s": min(v)}

    # The systems of the harness's original A/B (the A/B is kept as it was measured).
    others = [
        s
        for s in ("popsnn", "snntorch", "numpy_hoisted", "numpy_per_step")
        if s != "snntorch" or systems.snntorch_available() is None
    ]
    arms = {
        "in_process_with_others": lambda: in_process(False),
        "in_process_with_others_bursts": lambda: in_process(True),
        "worker_with_others": lambda: workers.time_isolated(work, thread_variants(others), repeats)[
            "popsnn@default"
        ],
        "worker_alone": lambda: workers.time_isolated(
            work, {"popsnn@default": ("popsnn", None)}, repeats
        )["popsnn@default"],
    }
    rows = []
    for trial in range(trials):
        for arm, fn in arms.items():
            t = fn()
            rows.append(
                {
                    "experiment": "isolation",
                    "arm": arm,
                    "trial": trial,
                    "batch": work.batch_size,
                    **shown,
                    "repeats": repeats,
                    "popsnn_step_ms_median": 1e3 * t["median_s"],
                    "popsnn_step_ms_min": 1e3 * t["min_s"],
                    "popsnn_images_per_s": work.batch_size / t["median_s"],
                    "load_average_1": os.getloadavg()[0],
                }
            )
    return rows


class _Burst:
    """A step run as the workers' turns are (workers.WARM_S untimed, then >= TIMED_S timed,
    back to back): time_calls times the whole call, the per-step time is kept here."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self):
        t0 = time.perf_counter()
        while True:
            self.fn()
            if time.perf_counter() - t0 >= workers.WARM_S:
                break
        n, t0 = 0, time.perf_counter()
        while True:
            self.fn()
            n += 1
            if time.perf_counter() - t0 >= workers.TIMED_S:
                break
        self.per_step.append((time.perf_counter() - t0) / n)


def _burst(fn):
    b = _Burst(fn)
    b.per_step = []
    return b


def throughput(configs, repeats: int, experiment: str, include=SYSTEMS) -> list:
    """One row per config dict (keyword arguments of dsnn_workload)."""
    rows = []
    for cfg in configs:
        work = dsnn_workload(**cfg)
        shown = {
            k: (type(v).__name__ if isinstance(v, popsnn.layers._Neuron) else v)
            for k, v in cfg.items()
        }
        rows.append(
            {
                "experiment": experiment,
                **shown,
                "repeats": repeats,
                **measure(work, repeats, include),
            }
        )
    return rows


def exp_dsnn(repeats=3, hidden=1000, batch=128, steps=25, inputs=INPUTS, include=SYSTEMS):
    """The headline: one row on MNIST input and one on dense U[0, 1] input."""
    return throughput(
        [dict(hidden=hidden, batch=batch, steps=steps, input=i) for i in inputs],
        repeats,
        "dsnn",
        include,
    )


def csnn_workload(batch=128, steps=25, seed=0, input="mnist", sparse="none") -> systems.Workload:
    """Sun et al.'s CSNN 12C5-MP2-64C5-MP2-10 on MNIST, Leaky beta 0.5, direct input,
    Adam, ce_count: the network `popsnn train --model csnn [--sparse RULE]` builds."""
    from popsnn.train_config import Config

    net = Config(model="csnn", beta=0.5, sparse=sparse).network(784, 10)
    x, y = images(batch, seed)
    if input == "uniform":
        x = np.random.default_rng(seed).random(x.shape, dtype=np.float32)
    return systems.Workload(net=net, x=x, y=y, num_steps=steps, loss=losses.ce_count_loss())


# Sun et al., Table IV: the CSNN's training throughput MEASURED on an IPU Mk2.
SEED000_IPU_CSNN_IMAGES_PER_S = 15566.16
# The row beside the dense one: popsnn with the window rule (accuracy: bench/README.md).
CSNN_RULE = "window:0.2"


def exp_csnn(repeats=3, batch=128, steps=25, include=SYSTEMS):
    """The CSNN side by side (snnTorch eager and compiled, the reference, popsnn's engine on
    the cpu device) with seed 000's IPU figure MEASURED on a Mk2 and popsnn's Mk2 ipu-model
    ESTIMATE beside it. The estimate is bench/csnn_estimate.py's (a whole training step on
    1,472 tiles, minutes of cost-model run), read from its results file, not re-run here."""
    work = csnn_workload(batch, steps)
    row = {"experiment": "csnn", "network": "12C5-MP2-64C5-MP2-10", "batch": batch}
    row.update(steps=steps, input="mnist", repeats=repeats, **measure(work, repeats, include))
    ref, eager = row.get("numpy_hoisted_images_per_s"), row.get("snntorch_images_per_s")
    if ref and eager:
        row["reference_over_snntorch"] = ref / eager
    row["seed000_ipu_measured_images_per_s"] = SEED000_IPU_CSNN_IMAGES_PER_S
    estimate = Path(__file__).resolve().parent / "results" / "csnn_estimate.json"
    found = json.loads(estimate.read_text()) if estimate.is_file() else {}
    if found.get("batch") == batch and found.get("steps") == steps:
        row["ipu_model_estimate_images_per_s"] = found["ipu_model_estimate_images_per_s"]
        row["ipu_model_estimate_note"] = (
            f"ESTIMATE, not measured: {found['what']}; tile memory "
            f"{found['memory_bytes_per_tile']} bytes (bench/results/csnn_estimate.json)"
        )
    else:
        row["ipu_model_estimate_images_per_s"] = None
        row["ipu_model_estimate_skipped"] = (
            f"no estimate for B {batch}, T {steps}: run python bench/csnn_estimate.py "
            f"--batch {batch} --steps {steps} --memory-bytes-per-tile 1048576"
        )
    rows = [row]
    if "popsnn" in include:  # "popsnn, window rule": the same step, the rule's backward
        ruled = {k: row[k] for k in ("experiment", "network", "batch", "steps", "input")}
        ruled.update(sparse=CSNN_RULE, repeats=repeats)
        ruled.update(measure(csnn_workload(batch, steps, sparse=CSNN_RULE), repeats, ("popsnn",)))
        if ruled.get("popsnn_images_per_s") and row.get("snntorch_images_per_s"):
            ruled["popsnn_over_snntorch_eager"] = (
                ruled["popsnn_images_per_s"] / row["snntorch_images_per_s"]
            )
        rows.append(ruled)
    return rows


def exp_latency(repeats=3, batches=(1, 2, 4, 8), hidden=1000, steps=25, include=SYSTEMS):
    """Small batches (Sun et al.'s headline is batch 8): milliseconds per training step of every
    system (`<system>_step_ms`) and the ratios, at each batch."""
    return throughput(
        [dict(hidden=hidden, batch=b, steps=steps) for b in batches], repeats, "latency", include
    )


def exp_batch(repeats=3, batches=(8, 16, 32, 64, 128), hidden=1000, steps=25, include=UNCOMPILED):
    return throughput(
        [dict(hidden=hidden, batch=b, steps=steps) for b in batches], repeats, "batch", include
    )


def exp_width(
    repeats=3, widths=(250, 500, 1000, 2000, 4000, 8000), batch=128, steps=25, include=UNCOMPILED
):
    return throughput(
        [dict(hidden=h, batch=batch, steps=steps) for h in widths], repeats, "width", include
    )


def neuron_models():
    return {
        "Leaky": popsnn.Leaky(beta=0.9),
        "Synaptic": popsnn.Synaptic(alpha=0.8, beta=0.9),
        "RLeaky": popsnn.RLeaky(beta=0.9),
    }


def exp_neurons(
    repeats=3,
    hidden=1000,
    batch=128,
    steps=25,
    names=("Leaky", "Synaptic", "RLeaky"),
    include=UNCOMPILED,
):
    models = neuron_models()
    return throughput(
        [dict(hidden=hidden, batch=batch, steps=steps, neuron=models[n]) for n in names],
        repeats,
        "neurons",
        include,
    )


def exp_rate(repeats=3, hidden=1000, batch=128, steps=25, include=UNCOMPILED):
    """Rate-coded input: a new [B, 784] spike tensor every step, so no system can hoist the
    first layer's W x; the hoisted NumPy column says so instead of a figure."""
    return throughput(
        [dict(hidden=hidden, batch=batch, steps=steps, rate_coded=True)], repeats, "rate", include
    )


def exp_population(
    repeats=3,
    hidden=1000,
    batch=128,
    outputs=500,
    train_steps=0,
    test_images=1000,
    seed=0,
    include=UNCOMPILED,
):
    """Sun et al. section V: one time step, `outputs` output neurons pooled over 10 classes,
    beside the 10-output 25-step baseline; throughput of every system and, with
    train_steps > 0, popsnn's test accuracy after that many training minibatches (a short run:
    the paper trained 5 epochs on CIFAR-10; here MNIST)."""
    configs = [
        dict(hidden=hidden, batch=batch, steps=25, outputs=10, population=False),
        dict(hidden=hidden, batch=batch, steps=1, outputs=outputs, population=True),
    ]
    rows = throughput(configs, repeats, "population", include)
    rows = throughput(configs, repeats, "population", include)
    if train_steps:
        for row, cfg in zip(rows, configs):
            row.update(_short_training(dsnn_workload(seed=seed, **cfg), train_steps, test_images))
    return rows


def _short_training(work: systems.Workload, train_steps: int, test_images: int) -> dict:
    """Train popsnn's engine (cpu device) for `train_steps` MNIST minibatches, then its test
    accuracy on `test_images` test images (pixels as direct current)."""
    model = popsnn.Model(
        work.net,
        loss=work.loss,
        optimizer=optim.Adam(lr=work.lr),
        device="cpu",
        num_steps=work.num_steps,
        batch_size=work.batch_size,
        seed=work.seed,
    )
    return train_and_test(model, image_task("mnist"), train_steps, test_images, work.seed)
