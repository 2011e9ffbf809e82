"""Accuracy of the sparse rules against dense training at the same setting, over seeds: the
question "does the sparse backward cost accuracy?" needs more test samples and more than one
seed than the side-by-side speed runs (`sparse_suite.py`) can afford, and no timing.

Per data set (Perez-Nieves & Goodman's Fashion-MNIST latency-coded 784-200-200-10, N-MNIST
2312-200-200-10, SHD 700-400-400-20; real sets where installed, else the generated stand-ins
of `event_tasks.py`, named in every row) and per seed, the same initial weights and the same
minibatches are trained densely, with `window(B_th)` for each B_th of the sweep and with
Finkbeiner & Neftci's `one_sided(0.9)`; each rule's accuracy change is paired with the dense
run of its own seed.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from common import train_and_test
from event_tasks import event_task, latency_task
from sparse_bench import SparseCase, _model, rule_fields, rule_label

from popsnn import data, regularizers, sparse


@dataclass(frozen=True)
class AccuracySize:
    steps: int
    batch: int
    train_steps: int
    test_images: int
    seeds: tuple
    b_ths: tuple
    recordings: tuple  # generated N-MNIST / SHD recordings: (train, test)
    hidden: tuple = (200, 400)  # Fashion-MNIST and N-MNIST / SHD
    image_dataset: str = "fashion-mnist"
    # The paper's spike-count regulariser on the hidden layers (device "reference" only).
    regularizer: bool = False
    device: str = "cpu"
    # Their network's constants instead of popsnn's (sparse_bench._net, _paper_init).
    paper_constants: bool = False


ACCURACY = AccuracySize(25, 128, 1500, 10000, (0, 1, 2), (0.05, 0.2, 0.5, 0.95), (4000, 2000))
ACCURACY_QUICK = AccuracySize(25, 64, 100, 1000, (0, 1), (0.2, 0.95), (1024, 1000))
ACCURACY_TINY = AccuracySize(
    4, 8, 2, 16, (0, 1), (0.95,), (20, 8), hidden=(8, 12), image_dataset="mnist"
)
DATASETS = ("image", "nmnist", "shd")


def _task(name: str, size: AccuracySize):
    if name == "image":
        return latency_task(size.image_dataset, size.steps)
    return event_task(name, size.steps, *size.recordings)


def exp_sparse_accuracy(size: AccuracySize = ACCURACY, datasets=DATASETS) -> list:
    """One row per (data set, rule, seed): test accuracy and its change against the dense
    run of the same seed. A data set that is not installed (Fashion-MNIST is an optional
    download) gives one row saying so."""
    unknown = sorted(set(datasets) - set(DATASETS))
    if unknown:
        raise SystemExit(f"unknown data set(s) {unknown}; choose from {list(DATASETS)}")
    rules = [None] + [sparse.window(b) for b in size.b_ths] + [sparse.one_sided(0.9)]
    rows = []
    for name in datasets:
        try:
            task = _task(name, size)
        except (FileNotFoundError, data.DataError) as err:
            rows.append({"experiment": "sparse_accuracy", "dataset": name, "skipped": str(err)})
            continue
        hidden = size.hidden[1] if task.name == "shd" else size.hidden[0]
        for seed in size.seeds:
            extra = {"paper_constants": True} if size.paper_constants else {}
            case = SparseCase(
                task.name, task, hidden, size.steps, size.batch, (), seed=seed, extra=extra
            )
            dense = None
            for rule in rules:
                reg = regularizers.spike_count_bounds() if size.regularizer else None
                model = _model(case, rule, device=size.device, regularizer=reg)
                row = {
                    "experiment": "sparse_accuracy",
                    "dataset": task.name,
                    "data_source": task.source,
                    "hidden": hidden,
                    "steps": size.steps,
                    "batch": size.batch,
                    "seed": seed,
                    **extra,
                    "device": size.device,
                    "regularizer": repr(reg) if reg else None,
                    **rule_fields(rule),
                    **train_and_test(model, task, size.train_steps, size.test_images, seed),
                }
                del model
                dense = row["test_accuracy"] if rule is None else dense
                row["accuracy_change"] = row["test_accuracy"] - dense
                rows.append(row)
    return rows


def summary(rows: list) -> list:
    """Per (data set, rule): mean accuracy over the seeds, and the mean and spread of the
    paired change against dense."""
    groups: dict = {}
    for r in rows:
        if not r.get("skipped"):
            groups.setdefault((r["dataset"], rule_label(r)), []).append(r)
    out = []
    for (dataset, label), rs in groups.items():
        acc = [r["test_accuracy"] for r in rs]
        change = [r["accuracy_change"] for r in rs]
        out.append(
            {
                "dataset": dataset,
                "rule": label,
                "seeds": len(rs),
                "mean_accuracy": statistics.fmean(acc),
                "mean_change": statistics.fmean(change),
                "change_sd": statistics.stdev(change) if len(change) > 1 else None,
                "worst_change": min(change),
                "first": rs[0],
            }
        )
    return out
