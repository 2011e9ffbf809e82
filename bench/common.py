"""What every benchmark shares: the machine a row was measured on, interleaved timing of
callables, real images, and a short training run with its test accuracy.

A `Task` is a data set plus how its samples become the network's input (direct current,
latency code, or binned events), so the same training loop serves the throughput and the
sparse experiments.
"""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import popsnn
from popsnn import data, losses, surrogate

# The sparse experiments' learning rate (Adam), for training and for the estimates.
LR = 2e-3


def machine() -> dict:
    """What the numbers were measured on, including how busy it was."""
    cpu = _cpu_info()
    info = {
        "cpu": cpu.get("model name") or platform.processor() or "unknown",
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "popsnn": popsnn.__version__,
        "platform": platform.platform(),
        "vector_isa": vector_isa(cpu.get("flags", "").split()),
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


def _cpu_info() -> dict[str, str]:
    """The first processor's fields of /proc/cpuinfo (empty where there is none)."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return {}
    info: dict[str, str] = {}
    for line in lines:
        key, sep, value = line.partition(":")
        if sep and key.strip() not in info:
            info[key.strip()] = value.strip()
    return info


def vector_isa(flags: list[str]) -> str:
    """The machine kind for speed figures: the widest x86 vector extension the CPU has
    (the codelets are built for the host's own instruction set, so the kinds differ)."""
    if not flags:
        return "unknown"
    for flag, kind in (("avx512f", "avx512"), ("avx2", "avx2"), ("sse4_2", "sse4.2")):
        if flag in flags:
            return kind
    return "other"


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


BURST_S = 0.2  # the least time of one timed turn of time_bursts


def time_bursts(fns: dict, repeats: int, clock=time.perf_counter, meters=None) -> dict:
    """Median seconds per call of every callable in `fns`: turns in rotation, each turn a
    burst of back-to-back calls lasting at least BURST_S (after one untimed call each), as
    in a training loop. A call of a few milliseconds timed once is at the mercy of this
    shared machine's other processes; the mean over a burst is not. `clock`: e.g.
    time.process_time, this process's CPU time. `meters`: {key of fns: callable returning
    (runs, seconds) so far}, e.g. one engine program's own time as the runtime measured it
    (popsnn's Engine, per program): per run over each burst, its median over the bursts
    under `key + ":meter"` and its minimum under `key + ":meter_min"`."""
    meters = meters or {}
    for fn in fns.values():
        fn()
    per_call = {k: [] for k in fns}
    per_run = {k: [] for k in meters}
    for _ in range(repeats):
        for k, fn in fns.items():
            start = meters[k]() if k in meters else None
            n, t0 = 0, clock()
            while True:
                fn()
                n += 1
                if clock() - t0 >= BURST_S:
                    break
            per_call[k].append((clock() - t0) / n)
            if start is not None:
                runs, seconds = (b - a for a, b in zip(start, meters[k]()))
                if runs:
                    per_run[k].append(seconds / runs)
    out = {k: statistics.median(v) for k, v in per_call.items()}
    for k, v in per_run.items():
        out[f"{k}:meter"] = statistics.median(v) if v else None
        out[f"{k}:meter_min"] = min(v) if v else None
    return out


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


@dataclass
class Task:
    """A data set (train, test) and how its samples become the network's input: `encode`
    maps `inputs(indices)` to what the model is fed. `source` says where the data came from
    (a real set, or a recording generated here: rows must not pass one off as the other)."""

    name: str
    train: object  # popsnn.data.ImageDataset or EventDataset
    test: object
    encode: Callable[[np.ndarray], np.ndarray]
    source: str

    @property
    def num_inputs(self) -> int:
        return int(self.train.num_inputs)

    @property
    def num_classes(self) -> int:
        return int(self.train.num_classes)

    def draw(self, split: str, indices) -> tuple:
        ds = self.train if split == "train" else self.test
        indices = np.asarray(indices)
        return self.encode(ds.inputs(indices).astype(np.float32)), ds.labels[indices].astype(
            np.int64
        )

    def sample(self, n: int, seed: int = 0, split: str = "train") -> tuple:
        """n random samples (without replacement) of a split, encoded."""
        ds = self.train if split == "train" else self.test
        idx = np.random.default_rng(seed).choice(len(ds.labels), size=n, replace=False)
        return self.draw(split, idx)


def image_task(dataset: str = "mnist", encode=None) -> Task:
    """MNIST or Fashion-MNIST; `encode` None feeds the pixels as direct current."""
    train, test = _dataset(dataset)
    return Task(dataset, train, test, encode or (lambda x: x), f"{dataset} (real)")


def predict(model, x) -> np.ndarray:
    """The class of each sample: the output with the highest membrane peak for a readout
    that never fires (ce_max_membrane), else the largest class spike count."""
    if isinstance(model.loss, losses.ce_max_membrane_loss):
        return model.record(x).membranes[-1].max(axis=0).argmax(axis=1)
    return losses.class_counts(model.infer(x), model.num_classes).argmax(axis=1)


def train_and_test(model, task: Task, train_steps: int, test_images: int, seed: int) -> dict:
    """Train `model` for `train_steps` random minibatches of the training set, then its
    accuracy on the first `test_images` test samples."""
    rng = np.random.default_rng(seed + 1)
    b = model.batch_size
    t0 = time.perf_counter()
    seen = []
    for _ in range(train_steps):
        x, y = task.draw("train", rng.choice(len(task.train.labels), size=b, replace=False))
        seen.append(model.train_step(x, y)[0])
    train_s = time.perf_counter() - t0
    n = min(test_images, len(task.test.labels))
    correct = 0
    for start in range(0, n, b):
        # The engine runs whole batches: the last one is padded with the first samples.
        idx = np.arange(start, start + b) % n
        x, y = task.draw("test", idx)
        keep = min(b, n - start)
        correct += int((predict(model, x)[:keep] == y[:keep]).sum())
    return {
        "train_steps": train_steps,
        "train_images": train_steps * b,
        "train_seconds": train_s,
        "first_loss": seen[0] if seen else None,
        "last_loss": seen[-1] if seen else None,
        "test_images": n,
        "test_accuracy": correct / n if n else None,
    }


def sparse_net(inputs, hidden, rule, layers=2, classes=10, beta=0.95, slope=100.0, bias=True):
    """Perez-Nieves & Goodman's network: `layers` spiking hidden layers of `hidden` neurons
    and a readout that never fires (no reset, threshold far away), fast-sigmoid surrogate;
    `rule` on every hidden layer."""
    mods, width = [], inputs
    for _ in range(layers):
        mods += [
            popsnn.Linear(width, hidden, bias=bias),
            popsnn.Leaky(beta=beta, surrogate=surrogate.fast_sigmoid(slope), sparse=rule),
        ]
        width = hidden
    mods += [
        popsnn.Linear(width, classes, bias=bias),
        popsnn.Leaky(beta=beta, reset_mechanism="none", threshold=1e6),
    ]
    return popsnn.Sequential(*mods)
