"""The benchmark experiments as functions: each takes its configuration and returns a list of
result rows (plain dicts, JSON-ready). `run.py` is the command line around them; the smoke test
calls them with the tiniest configurations.

Throughput (Sun et al.): one training step (forward over all steps, loss, backward, update) of
each system on the same workload, timed in the same run, reported as images/s and as ratios.
Sparse backward (Perez-Nieves & Goodman): popsnn's engine with and without
`sparse.window(b_th)` on every
hidden layer, interleaved timings, gradient error against the dense gradient, active fraction,
accuracy after a short training run. IPU (Sun et al. on an Mk2): the runtime's cost-model
ESTIMATE, never a measurement on an IPU.
"""

from __future__ import annotations

import os
import platform
import re
import statistics
import time
from dataclasses import fields
from pathlib import Path

import numpy as np
import systems
import workers

import popsnn
from popsnn import data, encoders, losses, optim, reference, sparse, surrogate

# Seed 000's measured Mk2 figures (Sun et al. (IPU), see docs/papers.md), shown beside our
# estimates.
SEED000_IPU_DSNN_IMAGES_PER_S = 46_297
SEED000_IPU_POPULATION_IMAGES_PER_S = 145_000
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
# The sparse runs' id buffers start this much above the largest hidden layer's mean fraction
# of buffered entries (spikes and gradient candidates), then grow on overflow.
ACTIVITY_MARGIN = 1.1


# --------------------------------------------------------------------------- machine, timing


def machine() -> dict:
    """What the numbers were measured on, including how busy it was."""
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info = {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "popsnn": popsnn.__version__,
        "platform": platform.platform(),
    }
    try:
        info["load_average_1_5_15"] = list(os.getloadavg())
    except OSError:
        info["load_average_1_5_15"] = None
    for mod in ("torch", "snntorch"):
        try:
            info[mod] = __import__(mod).__version__
        except ImportError:
            info[mod] = None
    info.update(_source_state())
    return info


def _source_state() -> dict:
    """The commit of the checkout and whether the engine's sources (host/, codelets/) had
    uncommitted changes: the installed engine is built from the working tree, which others
    may be changing while a benchmark runs."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "host", "codelets"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {"git_commit": None, "engine_sources_modified": None}
    return {"git_commit": head or None, "engine_sources_modified": bool(dirty.strip())}


def time_calls(fns: dict, repeats: int, warmup: int = 1) -> dict:
    """Seconds per call of every callable in `fns`, interleaved round by round so that a
    load spike on this shared machine hits every system alike rather than one of them."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    times = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {
        k: {"min_s": min(v), "median_s": statistics.median(v), "max_s": max(v), "repeats": repeats}
        for k, v in times.items()
    }


# --------------------------------------------------------------------------- data

_CACHE: dict = {}


def _dataset(name: str):
    if name not in _CACHE:
        _CACHE[name] = data.load_mnist() if name == "mnist" else data.load_fashion_mnist()
    return _CACHE[name]


def images(n: int, seed: int = 0, split: str = "train", dataset: str = "mnist"):
    """n real images in [0, 1] and their labels; a spiking network's activity (hence the
    engine's work) depends on its input, so synthetic noise would misstate it."""
    train, test = _dataset(dataset)
    ds = train if split == "train" else test
    rng = np.random.default_rng(seed)
    idx = rng.choice(len(ds.labels), size=n, replace=False)
    return ds.inputs(idx).astype(np.float32), ds.labels[idx].astype(np.int64)


# --------------------------------------------------------------------------- throughput


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
    """Seed 000's DSNN 784-hidden-outputs on MNIST, Adam, ce_count (population-coded over 10
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
        "limit": lambda: None,
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
    """Seed 000 section V: one time step, `outputs` output neurons pooled over 10 classes,
    beside the 10-output 25-step baseline; throughput of every system and, with
    train_steps > 0, popsnn's test accuracy after that many training minibatches (a short run:
    the paper trained 5 epochs on CIFAR-10; here MNIST)."""
    configs = [
        dict(hidden=hidden, batch=batch, steps=25, outputs=10, population=False),
        dict(hidden=hidden, batch=batch, steps=1, outputs=outputs, population=True),
    ]
    rows = throughput(configs, repeats, "population", include)
    if train_steps:
        for row, cfg in zip(rows, configs):
            row.update(
                _short_training(
                    dsnn_workload(seed=seed, **cfg),
                    train_steps,
                    test_images,
                    "mnist",
                    seed,
                    rate=False,
                )
            )
    return rows


def _short_training(
    work: systems.Workload,
    train_steps: int,
    test_images: int,
    dataset: str,
    seed: int,
    rate: bool,
    latency: bool = False,
) -> dict:
    """Train popsnn's engine (cpu device) for `train_steps` minibatches drawn from the training
    set, then the test accuracy on `test_images` test images."""
    model = popsnn.Model(
        work.net,
        loss=work.loss,
        optimizer=optim.Adam(lr=work.lr),
        device="cpu",
        num_steps=work.num_steps,
        batch_size=work.batch_size,
        seed=work.seed,
    )
    return _train_and_test(model, work, train_steps, test_images, dataset, seed, rate, latency)


def _encode(x, steps, rate, latency, rng):
    if latency:
        return encoders.latency(x, steps).astype(np.float32)
    if rate:
        return encoders.rate(x, steps, rng=rng).astype(np.float32)
    return x


def _train_and_test(model, work, train_steps, test_images, dataset, seed, rate, latency):
    train, test = _dataset(dataset)
    rng = np.random.default_rng(seed + 1)
    b, steps = work.batch_size, work.num_steps
    t0 = time.perf_counter()
    losses_seen = []
    for _ in range(train_steps):
        idx = rng.choice(len(train.labels), size=b, replace=False)
        x = _encode(train.inputs(idx).astype(np.float32), steps, rate, latency, rng)
        value, _ = model.train_step(x, train.labels[idx])
        losses_seen.append(value)
    train_s = time.perf_counter() - t0
    correct = 0
    n = min(test_images, len(test.labels))
    for start in range(0, n, b):
        idx = np.arange(start, min(start + b, n))
        x = _encode(test.inputs(idx).astype(np.float32), steps, rate, latency, rng)
        out = model.infer(x)
        if isinstance(model.loss, losses.ce_max_membrane_loss):
            # The readout never spikes: the class is the output with the highest membrane peak.
            rec = model.record(x)
            pred = rec.membranes[-1].max(axis=0).argmax(axis=1)
        else:
            pred = losses.class_counts(out, model.num_classes).argmax(axis=1)
        correct += int((pred == test.labels[idx]).sum())
    return {
        "train_steps": train_steps,
        "train_images": train_steps * b,
        "train_seconds": train_s,
        "first_loss": losses_seen[0] if losses_seen else None,
        "last_loss": losses_seen[-1] if losses_seen else None,
        "test_images": n,
        "test_accuracy": correct / n if n else None,
    }


# --------------------------------------------------------------------------- sparse backward


def _profile_rows(summary: str) -> list:
    """(name, execs, cycles per exec) of every program step in the engine's profile summary
    table. The engine exposes its per-phase ESTIMATES only as this text (see the README)."""
    rows = []
    for line in summary.splitlines():
        tok = line.split()
        if len(tok) >= 9 and tok[-8] in ("compute", "exchange") and tok[-7].isdigit():
            name = line[: line.rfind(tok[-8])].strip()
            rows.append((name, int(tok[-7]), float(tok[-6])))
    return rows


def backward_estimate_cycles(model) -> float | None:
    """The runtime's cost-model ESTIMATE of backward cycles per train step (rows of the
    backward phase: layer backward, weight gradients and their exchanges), or None."""
    prof = model.profile()
    steps = prof.get("train_steps") or 0
    rows = _profile_rows(prof.get("estimate_summary", ""))
    if not steps or not rows:
        return None
    total = sum(
        e * c
        for name, e, c in rows
        if "backward" in name or "weight_grad" in name or "grad_out" in name
    )
    return total / steps


def engine_memory_bytes(model) -> float | None:
    """All the memory the engine's graph allocates over its tiles (the profile summary's
    "Memory (estimate): X MiB in total" line), in bytes, or None."""
    m = re.search(
        r"Memory \(estimate\):\s*([0-9.]+)\s*(KiB|MiB|GiB)\s+in total",
        model.profile().get("estimate_summary", ""),
    )
    if not m:
        return None
    return float(m.group(1)) * {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[m.group(2)]


def sparse_net(hidden: int, rule, beta: float = 0.95, slope: float = 100.0):
    """Seed 003's network: two spiking hidden layers of `hidden` neurons and a readout that
    never fires (no reset, threshold far away), fast-sigmoid surrogate; `rule` on every
    hidden layer."""

    def lif():
        return popsnn.Leaky(beta=beta, surrogate=surrogate.fast_sigmoid(slope), sparse=rule)

    return popsnn.Sequential(
        popsnn.Linear(784, hidden),
        lif(),
        popsnn.Linear(hidden, hidden),
        lif(),
        popsnn.Linear(hidden, 10),
        popsnn.Leaky(beta=beta, reset_mechanism="none", threshold=1e6),
    )


def _grad_error(dense, approx, suffix="") -> dict:
    """Cosine similarity and relative norm error of two gradients (lists of param dicts),
    all parameters flattened into one vector."""
    a = np.concatenate([g.ravel() for layer in dense for g in layer.values()]).astype(np.float64)
    b = np.concatenate([g.ravel() for layer in approx for g in layer.values()]).astype(np.float64)
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    cos = float(a @ b / (na * nb)) if na and nb else float("nan")
    return {
        f"grad_cosine{suffix}": cos,
        f"grad_rel_norm_error{suffix}": float(np.linalg.norm(a - b) / na) if na else float("nan"),
    }


def trace_memory(model, hidden_layers: int = 2) -> dict:
    """The BPTT trace memory the engine allocated, MEASURED: its profile's
    `layer{l}_trace_bytes` (surrogate values plus spike/candidate id traces) per layer, summed
    over the hidden layers (those that carry the sparse rule) and over all layers. With a
    rule the surrogate is kept only beside the id buffers' entries, so it scales with the
    buffers' capacity (`max_activity`); without one it is [T, B, n]."""
    prof = model.profile()
    out, layer = {}, 0
    while f"layer{layer}_trace_bytes" in prof:
        for part in ("trace", "surrogate_trace", "id_trace"):
            out[f"layer{layer}_{part}_bytes"] = float(prof[f"layer{layer}_{part}_bytes"])
        out[f"layer{layer}_buffer_capacity"] = prof.get(f"layer{layer}_buffer_capacity")
        out[f"layer{layer}_shard_size"] = prof.get(f"layer{layer}_shard_size")
        layer += 1
    if not layer:
        return {}
    out["trace_bytes_hidden"] = sum(
        out[f"layer{l}_trace_bytes"] for l in range(min(hidden_layers, layer))
    )
    out["trace_bytes_all"] = sum(out[f"layer{l}_trace_bytes"] for l in range(layer))
    out["max_activity"] = prof.get("max_activity")
    return out


def exp_sparse(
    b_ths=(0.05, 0.1, 0.2, 0.3, 0.5),
    hidden=200,
    steps=100,
    batch=256,
    repeats=3,
    train_steps=100,
    test_images=2000,
    dataset="fashion-mnist",
    seed=0,
    pretrain_steps=0,
):
    """Seed 003 on this machine: F-MNIST latency-coded (one spike per pixel at most, as the
    paper), 784-h-h-10, ce on the readout's peak membrane, Adam.

    Per setting (dense, then each b_th): the engine's wall-clock loss-and-gradient and
    forward times, interleaved; backward = (loss and gradient) - forward, derived because the
    engine times no phase; its cost-model ESTIMATE of backward cycles; the active fraction of
    (t, b, j) entries in the hidden layers and the gradient error against the dense gradient
    (dense NumPy reference, on weights trained densely first, and at initialisation); the trace
    memory the engine allocated (measured: its profile's trace bytes; the sparse models' id
    buffers sized just above the measured activity and grown on overflow); and the test
    accuracy after `train_steps` minibatches from scratch (default buffers: the capacity
    changes no result)."""
    train, _ = _dataset(dataset)
    x0, y0 = images(batch, seed, "train", dataset)
    x = encoders.latency(x0, steps).astype(np.float32)
    settings = [None] + [float(b) for b in b_ths]

    # Accuracy first: the densely trained weights are where the gradients get compared.
    rows, trained = [], None
    for b_th in settings:
        rule = None if b_th is None else sparse.window(b_th)
        net = sparse_net(hidden, rule)
        work = systems.Workload(
            net=net,
            x=x,
            y=y0,
            num_steps=steps,
            loss=losses.ce_max_membrane_loss(),
            lr=2e-3,
            seed=seed,
        )
        row = {
            "experiment": "sparse",
            "b_th": b_th,
            "hidden": hidden,
            "steps": steps,
            "batch": batch,
            "dataset": dataset,
            "encoding": "latency",
            "repeats": repeats,
        }
        if train_steps:
            model = popsnn.Model(
                net,
                loss=work.loss,
                optimizer=optim.Adam(lr=work.lr),
                device="cpu",
                num_steps=steps,
                batch_size=batch,
                seed=seed,
            )
            row.update(
                _train_and_test(
                    model, work, train_steps, test_images, dataset, seed, rate=False, latency=True
                )
            )
            if b_th is None:
                trained = model.get_params()
            del model  # gigabytes at Perez-Nieves & Goodman's sizes: free before the next is built
        rows.append(row)
    if trained is None and pretrain_steps:
        # No accuracy runs: train densely for a few minibatches anyway, since at
        # initialisation wide layers barely fire and the rule would leave almost nothing.
        net = sparse_net(hidden, None)
        model = popsnn.Model(
            net,
            loss=losses.ce_max_membrane_loss(),
            optimizer=optim.Adam(lr=2e-3),
            device="cpu",
            num_steps=steps,
            batch_size=batch,
            seed=seed,
        )
        work = systems.Workload(
            net=net,
            x=x,
            y=y0,
            num_steps=steps,
            loss=losses.ce_max_membrane_loss(),
            lr=2e-3,
            seed=seed,
        )
        _train_and_test(model, work, pretrain_steps, 0, dataset, seed, rate=False, latency=True)
        trained = model.get_params()
        del model
        for row in rows:
            row["weights"] = f"after {pretrain_steps} dense minibatches"
    params = (
        trained
        if trained is not None
        else sparse_net(hidden, None).init_params(seed, dtype=np.float32)
    )

    # Gradient error and activity, with the dense reference on the same weights and batch;
    # also at initialisation, where activity is lowest and a training run starts.
    dense_net = sparse_net(hidden, None)
    _, dense_grads, _ = reference.loss_and_grad(
        dense_net, params, x, y0, losses.ce_max_membrane_loss()
    )
    init = dense_net.init_params(seed, dtype=np.float32)
    _, dense_init, _ = reference.loss_and_grad(
        dense_net, init, x, y0, losses.ce_max_membrane_loss()
    )
    buffered_masks = {}
    for row in rows:
        rule = None if row["b_th"] is None else sparse.window(row["b_th"])
        net = sparse_net(hidden, rule)
        _, grads, rec = reference.loss_and_grad(net, params, x, y0, losses.ce_max_membrane_loss())
        active = [float(m.mean()) for m in rec.grad_masks[:2]]
        row["active_fraction_per_layer"] = active
        row["active_fraction"] = float(np.mean(active))
        row["hidden_spike_rate"] = float(np.mean([s.mean() for s in rec.spikes[:2]]))
        row.update(_grad_error(dense_grads, grads))
        # The readout has no rule and its gradient is exact, and it dominates the norm: the
        # hidden layers' own error is the one that says what the rule costs.
        row.update(_grad_error(dense_grads[:2], grads[:2], "_hidden"))
        for l in range(2):
            row.update(_grad_error(dense_grads[l : l + 1], grads[l : l + 1], f"_layer{l}"))
            # Adam scales every coordinate to a similar step whatever its size, so the weights
            # the rule leaves with no gradient at all matter more than the cosine suggests.
            row[f"zero_weight_grad_fraction_layer{l}"] = float(np.mean(grads[l]["weight"] == 0))
        _, grads0, rec0 = reference.loss_and_grad(net, init, x, y0, losses.ce_max_membrane_loss())
        row.update(_grad_error(dense_init[:2], grads0[:2], "_hidden_at_init"))
        row["active_fraction_at_init"] = float(np.mean([m.mean() for m in rec0.grad_masks[:2]]))
        # What the id buffers must hold at a step: the spikes and the gradient candidates.
        masks = [
            np.asarray(m, bool) | (np.asarray(s) > 0)
            for m, s in zip(rec.grad_masks[:2], rec.spikes[:2])
        ]
        buffered_masks[row["b_th"]] = masks
        row["buffered_fraction_per_layer"] = [float(m.mean()) for m in masks]

    # Speed. An engine model holds gigabytes at Perez-Nieves & Goodman's sizes (two compiled
    # engines: the
    # direct-input one built at construction and the per-step one), so only two live at a
    # time: the dense one, and each sparse one in turn, timed round by round against it. The
    # speed-up of a row is against the dense timings of its own pair.
    def engine_model(row):
        b_th = row["b_th"]
        opts = {}
        if b_th is not None:
            # The id buffers (hence the sparse trace) sized just above the activity measured
            # on these weights and inputs; a (t, b) whose shard holds more entries grows them
            # (the engine recompiles and redoes the step), so nothing is ever dropped.
            start = min(
                1.0, max(ACTIVITY_MARGIN * max(row["buffered_fraction_per_layer"]), 1.0 / hidden)
            )
            opts = {"max_activity": start, "on_overflow": "grow"}
            row["max_activity_start"] = start
        m = popsnn.Model(
            sparse_net(hidden, None if b_th is None else sparse.window(b_th)),
            loss=losses.ce_max_membrane_loss(),
            optimizer=optim.Adam(lr=2e-3),
            device="cpu",
            num_steps=steps,
            batch_size=batch,
            seed=seed,
            params=params,
            **opts,
        )
        # One training step (it grows the buffers if they overflow, and gives the cost
        # model's per-step estimates), then the weights back, so that every setting is timed
        # on the same weights and inputs, which now fit.
        m.train_step(x, y0)
        est = {
            "backward_estimate_cycles": backward_estimate_cycles(m),
            "engine_memory_bytes_estimate": engine_memory_bytes(m),
            **trace_memory(m),
        }
        m.set_params(params)
        return m, est

    def phases(m):
        return {"grad": lambda: m.loss_and_grad(x, y0), "infer": lambda: m.infer(x)}

    dense_model, est = engine_model(rows[0])
    rows[0].update(est)
    # A buffer holds one shard's entries at one (t, b): its capacity must cover the PEAK over
    # (t, b, shard), not the mean. The peak on these inputs, with the engine's shards
    # (contiguous neuron ranges of layer{l}_shard_size):
    for row in rows:
        peaks = []
        for l, m in enumerate(buffered_masks.pop(row["b_th"])):
            size = int(est.get(f"layer{l}_shard_size") or m.shape[-1])
            counts = [
                m[..., k : k + size].sum(axis=-1).max() / min(size, m.shape[-1] - k)
                for k in range(0, m.shape[-1], size)
            ]
            peaks.append(float(max(counts)))
        row["buffered_peak_fraction_per_layer"] = peaks
    dense_backward, dense_forward = [], []
    pairs = rows[1:] or [None]
    for row in pairs:
        fns = {f"dense/{k}": f for k, f in phases(dense_model).items()}
        m = None
        if row is not None:
            m, est = engine_model(row)
            row.update(est)
            fns.update({f"sparse/{k}": f for k, f in phases(m).items()})
        t = time_calls(fns, repeats)
        d_back = max(t["dense/grad"]["median_s"] - t["dense/infer"]["median_s"], 0.0)
        dense_backward.append(d_back)
        dense_forward.append(t["dense/infer"]["median_s"])
        if row is not None:
            grad_s, infer_s = t["sparse/grad"]["median_s"], t["sparse/infer"]["median_s"]
            row.update(
                forward_s=infer_s,
                loss_and_grad_s=grad_s,
                backward_s_derived=max(grad_s - infer_s, 0.0),
                dense_backward_s_same_run=d_back,
            )
            row["backward_speedup"] = (
                d_back / row["backward_s_derived"] if d_back and row["backward_s_derived"] else None
            )
        del m, fns
    dense = rows[0]
    dense.update(
        forward_s=statistics.median(dense_forward),
        backward_s_derived=statistics.median(dense_backward),
        backward_speedup=1.0 if statistics.median(dense_backward) else None,
    )
    for row in rows:
        # Trace memory saved against the dense model (default buffers, no rule), both
        # measured by the engine in this run; over the hidden layers (which carry the rule)
        # and over the whole network (the readout has no rule: its trace is the same).
        for part, key in (
            ("hidden", "trace_memory_saved_pct"),
            ("all", "trace_memory_saved_pct_all_layers"),
        ):
            d, r = dense.get(f"trace_bytes_{part}"), row.get(f"trace_bytes_{part}")
            row[key] = 100.0 * (1 - r / d) if d and r is not None else None
        if dense["backward_estimate_cycles"] and row["backward_estimate_cycles"]:
            row["backward_speedup_estimate"] = (
                dense["backward_estimate_cycles"] / row["backward_estimate_cycles"]
            )
        if dense.get("test_accuracy") is not None and row.get("test_accuracy") is not None:
            row["accuracy_change"] = row["test_accuracy"] - dense["test_accuracy"]
    return rows


def exp_sparse_width(
    hiddens=(200, 500, 1000),
    b_th=0.2,
    steps=100,
    batch=256,
    repeats=3,
    dataset="fashion-mnist",
    seed=0,
    pretrain_steps=30,
):
    """Seed 003's Fig. 4C on this machine: dense vs window(b_th) as both hidden layers
    widen. Speed, activity, gradient error and trace memory only (no accuracy runs), on
    weights trained densely for `pretrain_steps` minibatches."""
    rows = []
    for h in hiddens:
        for r in exp_sparse(
            b_ths=(b_th,),
            hidden=h,
            steps=steps,
            batch=batch,
            repeats=repeats,
            train_steps=0,
            dataset=dataset,
            seed=seed,
            pretrain_steps=pretrain_steps,
        ):
            r["experiment"] = "sparse_width"
            r.setdefault("weights", "initialisation")
            rows.append(r)
    return rows


# --------------------------------------------------------------------------- IPU estimate


def _top_phases(prof: dict, n: int) -> list:
    """The n program steps with the most ESTIMATED cycles per train step, with their share
    of the total: where the cost model says the time goes."""
    rows = _profile_rows(prof.get("estimate_summary", ""))
    steps = prof.get("train_steps") or 1
    total = sum(e * c for _, e, c in rows) or 1.0
    merged: dict = {}
    for name, e, c in rows:
        merged[name] = merged.get(name, 0.0) + e * c
    top = sorted(merged.items(), key=lambda kv: -kv[1])[:n]
    return [{"step": k, "cycles_per_train_step": v / steps, "share": v / total} for k, v in top]


def exp_ipu(
    batches=(128, 64, 32, 16, 8, 4, 2, 1),
    steps_run=2,
    hidden=1000,
    population=True,
    tiles_per_ipu=None,
):
    """The DSNN (and the one-step, 500-output population code) on the runtime's Mk2
    geometry (device="ipu-model", 1 IPU x 1,472 tiles x 624 KiB unless told otherwise): the
    largest batch of `batches` that fits, and the runtime's cost-model ESTIMATE of images/s
    there. ESTIMATES, never measurements on an IPU; Sun et al.'s measured figures beside them."""
    from popsnn import engine

    rows = []
    configs = [("dsnn", dict(hidden=hidden, steps=25), SEED000_IPU_DSNN_IMAGES_PER_S)]
    if population:
        configs.append(
            (
                "population",
                dict(hidden=hidden, steps=1, outputs=500, population=True),
                SEED000_IPU_POPULATION_IMAGES_PER_S,
            )
        )
    opts = {} if tiles_per_ipu is None else {"tiles_per_ipu": tiles_per_ipu}
    for name, cfg, paper in configs:
        row = {
            "experiment": "ipu",
            "network": name,
            **cfg,
            "seed000_measured_mk2_images_per_s": paper,
            "note": "estimate from popsnn's IPU cost model on the ipu-model device, not "
            "measured on an IPU",
        }
        refused = {}
        for b in batches:
            work = dsnn_workload(batch=b, **cfg)
            try:
                model = popsnn.Model(
                    work.net,
                    loss=work.loss,
                    optimizer=optim.Adam(lr=work.lr),
                    device="ipu-model",
                    num_steps=work.num_steps,
                    batch_size=b,
                    seed=work.seed,
                    **opts,
                )
            except engine.NetworkDoesNotFit as err:
                refused[b] = str(err).split(" Fix:")[0]
                continue
            t0 = time.perf_counter()
            for _ in range(steps_run):
                model.train_step(work.x, work.y)
            wall = (time.perf_counter() - t0) / steps_run
            prof = model.profile()
            est_s = prof["estimate_seconds"] / prof["train_steps"]
            row.update(
                {
                    "batch": b,
                    "tiles": prof.get("tiles"),
                    "estimate_seconds_per_step": est_s,
                    "estimate_images_per_s": b / est_s,
                    "estimate_over_seed000_measured": b / est_s / paper,
                    "estimate_max_tile_bytes": prof.get("max_tile_bytes"),
                    "estimate_top_phases": _top_phases(prof, 5),
                    "simulation_wall_s_per_step": wall,
                }
            )
            break
        row["batches_refused"] = refused
        if "batch" not in row:
            row["estimate_images_per_s"] = None
        rows.append(row)
    return rows
