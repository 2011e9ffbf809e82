"""Data-parallel scaling over MPI ranks on this machine: the DSNN's training step (784-1000-10,
Leaky beta 0.9, T 25, Adam, ce_count, MNIST input) with one process and with `mpirun -n 2`,
the same global batch (128: 64 per rank), the cpu device. Rows: images/s (median over rounds)
per (ranks, threads per rank), the 2-rank/1-rank ratio, and the bytes each rank allreduces
per step (every gradient and the loss, float32) with the allreduce's own time.

    python bench/mpi_scaling.py            # writes bench/results/mpi_scaling.json
    python bench/mpi_scaling.py --quick    # a small network, for a check that it runs

This machine has 2 cores: two ranks share them (each rank's engine threads compete with the
other rank's), so the ratio shows what the MPI path costs and gives here, not what two
machines would give. Ranks are launched with `--bind-to none` (as the single process is not
bound) and the environment's mpirun (the `mpi` extra); as root Open MPI needs
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1, which this script sets.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MPIRUN = Path(sys.executable).parent / "mpirun"
# (ranks, threads per rank): "default" is the runtime's own choice (the machine's threads).
LAYOUTS = ((1, "default"), (1, "1"), (2, "1"), (2, "default"))


def worker(args) -> None:
    """One rank of one layout: warm up, then `rounds` rounds of `steps` timed training steps
    (the ranks start each round together); rank 0 prints one JSON row."""
    import numpy as np

    import popsnn
    from popsnn import data, distributed, losses, optim

    w = distributed.world()
    net = popsnn.Sequential(
        popsnn.Linear(784, args.hidden),
        popsnn.Leaky(beta=0.9),
        popsnn.Linear(args.hidden, 10),
        popsnn.Leaky(beta=0.9),
    )
    model = popsnn.Model(
        net,
        losses.ce_count_loss(),
        optim.Adam(lr=5e-4),
        device="cpu",
        num_steps=args.num_steps,
        batch_size=distributed.local_batch_size(args.batch, w),
        seed=0,
    )
    dp = distributed.data_parallel(model, w)
    train, _ = data.load_mnist()
    idx = np.random.default_rng(0).choice(len(train.labels), args.batch, replace=False)
    x, y = train.inputs(idx).astype(np.float32), train.labels[idx].astype(np.int64)
    for _ in range(2):
        dp.train_step(x, y)
    rates = []
    for _ in range(args.rounds):
        if w.comm is not None:
            w.comm.Barrier()
        start = time.perf_counter()
        for _ in range(args.steps):
            dp.train_step(x, y)
        rates.append(args.batch * args.steps / (time.perf_counter() - start))
    row = {"ranks": w.size, "images_per_s": statistics.median(rates), "rounds": rates}
    if w.comm is not None:
        row["phases_ms"] = phases(dp, x, y, args.steps)
        # The allreduce alone, on a buffer of the step's size: its share of a step.
        buf = np.zeros(dp.allreduced_bytes_per_step // 4, np.float32)
        out = np.empty_like(buf)
        w.comm.Barrier()
        start = time.perf_counter()
        for _ in range(20):
            w.comm.Allreduce(buf, out)
        row["allreduce_ms"] = (time.perf_counter() - start) / 20 * 1e3
        row["allreduced_bytes_per_step"] = dp.allreduced_bytes_per_step
    if w.is_root:
        print(json.dumps(row), flush=True)


def phases(dp, x, y, steps: int) -> dict:
    """Where a data-parallel step's time goes (ms, mean over `steps`), timed around the parts
    of popsnn.distributed.DataParallelModel.train_step, called in its order."""
    import time

    total = dict.fromkeys(("shard_loss_and_grad", "allreduce", "host_optimizer", "gather"), 0.0)
    for _ in range(steps):
        t0 = time.perf_counter()
        xs, ys, part = dp._take(x, y)
        value, grads, local = dp.model.backend.loss_grad_and_spikes(xs, ys)
        t1 = time.perf_counter()
        value, grads = dp._reduce(value, grads, part.stop - part.start, len(y))
        t2 = time.perf_counter()
        params = dp.model.get_params()
        dp.optimizer.step(params, grads)
        dp.model.set_params(params)
        t3 = time.perf_counter()
        dp._gather(local)
        t4 = time.perf_counter()
        for key, dt in zip(total, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
            total[key] += dt * 1e3 / steps
    return total


def launch(ranks: int, threads: str, args) -> dict:
    env = dict(
        os.environ,
        OMPI_ALLOW_RUN_AS_ROOT="1",
        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        OMPI_MCA_rmaps_base_oversubscribe="1",
        OMP_NUM_THREADS="1",
        OPENBLAS_NUM_THREADS="1",
    )
    env.pop("POPSNN_NUM_THREADS", None)
    if threads != "default":
        env["POPSNN_NUM_THREADS"] = threads
    cmd = [sys.executable, __file__, "--worker", *sizes(args)]
    if ranks > 1:
        cmd = [str(MPIRUN), "-n", str(ranks), "--bind-to", "none", *cmd]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise SystemExit(f"{ranks} rank(s) failed:\n{done.stderr[-3000:]}")
    row = json.loads(done.stdout.strip().splitlines()[-1])
    return dict(row, threads_per_rank=threads)


def sizes(args) -> list:
    return [
        f"--{k.replace('_', '-')}={getattr(args, k)}"
        for k in ("hidden", "batch", "num_steps", "steps", "rounds")
    ]


def parameters_bytes(hidden: int) -> int:
    """float32 bytes of the DSNN's gradients plus the loss: what one allreduce carries."""
    return 4 * (784 * hidden + hidden + hidden * 10 + 10 + 1)


def run(args) -> list:
    if not MPIRUN.is_file():
        raise SystemExit("mpirun is not in this environment: pip install 'popsnn[mpi]'")
    load = os.getloadavg()[0]  # other users of this shared machine compete too
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rows = [launch(r, t, args) for r, t in LAYOUTS]
    base = next(r for r in rows if r["ranks"] == 1 and r["threads_per_rank"] == "default")
    for row in rows:
        row["vs_one_process"] = row["images_per_s"] / base["images_per_s"]
        row.update(hidden=args.hidden, batch=args.batch, num_steps=args.num_steps)
        row["machine"] = {
            "cpus": os.cpu_count(),
            "processor": platform.processor() or platform.machine(),
            "load_average_at_start": load,
            "utc": when,
        }
        row["note"] = "CPU measurements on this machine (2 ranks share its cores), not an IPU"
        if row["ranks"] > 1:
            assert row["allreduced_bytes_per_step"] == parameters_bytes(args.hidden), row
    return rows


def table(rows: list) -> str:
    lines = [
        "| ranks x threads | images/s | vs 1 process | allreduced per step | allreduce "
        "| step's parts (ms): shard loss+grad / allreduce / host Adam / gather |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        sent = r.get("allreduced_bytes_per_step")
        lines.append(
            f"| {r['ranks']} x {r['threads_per_rank']} | {r['images_per_s']:,.0f} | "
            f"{r['vs_one_process']:.2f}x | "
            + (
                f"{sent / 1e6:.2f} MB | {r['allreduce_ms']:.2f} ms | "
                + " / ".join(f"{v:.1f}" for v in r["phases_ms"].values())
                + " |"
                if sent
                else "- | - | - |"
            )
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="hidden 100, 2 rounds of 3 steps")
    parser.add_argument("--hidden", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--num-steps", type=int, default=25)
    parser.add_argument("--steps", type=int, default=10, help="timed steps per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--no-save", action="store_true", help="print only, write no file")
    args = parser.parse_args(argv)
    if args.worker:
        worker(args)
        return 0
    if args.quick:
        args.hidden, args.steps, args.rounds = 100, 3, 2
    rows = run(args)
    print(table(rows))
    if not args.no_save:
        out = HERE / "results" / "mpi_scaling.json"
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps(rows, indent=1) + "\n")
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
