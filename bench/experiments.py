"""The benchmark experiments, one import for `run.py` and the smoke test: each `exp_*` takes
its configuration and returns a list of result rows (plain dicts, JSON-ready).

Where each lives: `throughput.py` (Sun et al. (IPU): every system's training step side by
side), `sparse_suite.py` and `sparse_bench.py` (Perez-Nieves & Goodman, Finkbeiner & Neftci:
the sparse rules against dense training), `estimates.py` (the IPU cost model's ESTIMATES,
never measurements on an IPU), `common.py` (machine, timing, data, short training runs).
"""

from common import Task, image_task, images, machine, sparse_net, time_calls, train_and_test
from estimates import (
    SEED000_IPU_DSNN_IMAGES_PER_S,
    SEED000_IPU_POPULATION_IMAGES_PER_S,
    _profile_rows,
    backward_estimate_cycles,
    engine_memory_bytes,
    exp_ipu,
    exp_weak_scaling,
)
from sparse_accuracy import ACCURACY, ACCURACY_QUICK, ACCURACY_TINY, exp_sparse_accuracy
from sparse_bench import SparseCase, run_case
from sparse_suite import (
    FULL,
    QUICK,
    TINY,
    Size,
    exp_sparse,
    exp_sparse_full,
    exp_sparse_width,
    two_layer_cases,
)
from throughput import (
    INPUTS,
    SEED000_IPU_CSNN_IMAGES_PER_S,
    SYSTEMS,
    UNCOMPILED,
    csnn_workload,
    dsnn_workload,
    exp_batch,
    exp_csnn,
    exp_dsnn,
    exp_isolation,
    exp_latency,
    exp_neurons,
    exp_population,
    exp_rate,
    exp_width,
    measure,
    thread_variants,
)

import popsnn

__all__ = [
    "ACCURACY",
    "ACCURACY_QUICK",
    "ACCURACY_TINY",
    "FULL",
    "INPUTS",
    "QUICK",
    "SEED000_IPU_CSNN_IMAGES_PER_S",
    "SEED000_IPU_DSNN_IMAGES_PER_S",
    "SEED000_IPU_POPULATION_IMAGES_PER_S",
    "SYSTEMS",
    "TINY",
    "UNCOMPILED",
    "Size",
    "SparseCase",
    "Task",
    "_profile_rows",
    "backward_estimate_cycles",
    "csnn_workload",
    "dsnn_workload",
    "engine_memory_bytes",
    "exp_batch",
    "exp_csnn",
    "exp_dsnn",
    "exp_ipu",
    "exp_isolation",
    "exp_latency",
    "exp_neurons",
    "exp_population",
    "exp_rate",
    "exp_sparse",
    "exp_sparse_accuracy",
    "exp_sparse_full",
    "exp_sparse_width",
    "exp_weak_scaling",
    "exp_width",
    "image_task",
    "images",
    "machine",
    "measure",
    "popsnn",
    "run_case",
    "sparse_net",
    "thread_variants",
    "time_calls",
    "two_layer_cases",
    "train_and_test",
]
