"""popsnn's benchmarks: the papers' experiments on this machine, side by side in one run.

    python bench/run.py dsnn [--quick]   Sun et al.'s DSNN 784-1000-10, T=25, B=128, Adam, ce_count,
                                         on MNIST and on dense U[0, 1] input
    python bench/run.py csnn [--quick]   Sun et al.'s CSNN 12C5-MP2-64C5-MP2-10, T=25, B=128,
                                         MNIST: snnTorch eager / compiled, the reference, popsnn
    python bench/run.py latency          milliseconds per step at batch 1, 2, 4, 8
    python bench/run.py batch            throughput over batch 8..128
    python bench/run.py width            throughput over hidden width 250..8000
    python bench/run.py neurons          Leaky / Synaptic / RLeaky
    python bench/run.py rate             rate-coded input (nothing to hoist)
    python bench/run.py population       1 step, 500 outputs pooled over 10 classes (Sun et al. V)
    python bench/run.py sparse           Perez-Nieves & Goodman (F-MNIST, N-MNIST, SHD, B_th up
                                         to 0.95, 5 hidden layers) and Finkbeiner & Neftci
                                         (one-sided rule, natural vs fixed activity): accuracy
                                         beside backward / training-step speed-up and memory
    python bench/run.py sparse_full [--cases A,B]
                                         Perez-Nieves & Goodman's two-hidden-layer cases at
                                         their T=100, B=256 (rows merged by case)
    python bench/run.py sparse_accuracy [--cases image,nmnist,shd]
                                         dense vs every rule, same seeds and minibatches,
                                         3 seeds: accuracy only (rows merged by data set)
    python bench/run.py sparse_width     Perez-Nieves & Goodman: dense vs one B_th as the
                                         hidden layers widen
    python bench/run.py ipu              DSNN on the Mk2 geometry: runtime ESTIMATE of images/s
    python bench/run.py weak_scaling     Finkbeiner & Neftci's weak scaling over IPUs: ESTIMATES
    python bench/run.py isolation        A/B: popsnn timed beside the others in one process vs
                                         in its own worker process
    python bench/run.py report           plots (PNG) and the README table from saved results

Throughput experiments time each system on the same workload (one training step: forward over
all steps, loss, backward, update), interleaved round by round, and report median images/s with
[min, max] over the repeats, milliseconds per step, each worker's peak memory, popsnn's ratios
to the others, and the limit (the step's matrix products at the machine's BLAS rate, timed in
the same run). Every row carries the machine
(with its load average at the start). Systems that cannot run are reported with the reason.
These are CPU measurements on this machine; the `ipu` experiment's figures are estimates from
popsnn's IPU cost model, never measurements on an IPU.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import experiments as ex  # noqa: E402

RESULTS = HERE / "results"
# Experiments whose results file keeps one run per machine kind (vector_isa): issues 12's and
# 15's targets (batch 8's included) hold on either kind, so a run on one kind must not erase the
# other's figures.
KEPT_PER_KIND = ("dsnn", "neurons", "csnn", "latency")


def other_kinds_rows(saved: list, env: dict) -> list:
    """The saved rows measured on another machine kind than env's."""
    kind = env.get("vector_isa")
    return [r for r in saved if r.get("machine", {}).get("vector_isa") != kind]


NOTE = "CPU measurements on this machine, not an IPU"
EXPERIMENTS = (
    "dsnn",
    "csnn",
    "latency",
    "batch",
    "width",
    "neurons",
    "rate",
    "population",
    "sparse",
    "sparse_full",
    "sparse_accuracy",
    "sparse_width",
    "ipu",
    "weak_scaling",
    "isolation",
)


def run_experiment(name: str, quick: bool, repeats: int, cases=None) -> list:
    """The rows of one experiment; --quick shrinks the sweeps (and Perez-Nieves &
    Goodman's setting) for a check that the code runs, not for the figures."""
    systems = ex.UNCOMPILED if quick else ex.SYSTEMS  # torch.compile only in dsnn, latency
    if name == "dsnn":
        return ex.exp_dsnn(repeats, include=systems)
    if name == "csnn":
        return ex.exp_csnn(repeats, include=systems)
    if name == "latency":
        return ex.exp_latency(repeats, batches=(1, 8) if quick else (1, 2, 4, 8), include=systems)
    if name == "batch":
        return ex.exp_batch(repeats, batches=(8, 32, 128) if quick else (8, 16, 32, 64, 128))
    if name == "width":
        return ex.exp_width(
            repeats, widths=(250, 1000, 4000) if quick else (250, 500, 1000, 2000, 4000, 8000)
        )
    if name == "neurons":
        return ex.exp_neurons(repeats)
    if name == "rate":
        return ex.exp_rate(repeats)
    if name == "population":
        return ex.exp_population(
            repeats, train_steps=20 if quick else 200, test_images=500 if quick else 2000
        )
    if name == "sparse":
        return ex.exp_sparse(ex.QUICK if quick else ex.FULL, repeats)
    if name == "sparse_full":
        return ex.exp_sparse_full(ex.QUICK if quick else ex.FULL, repeats, cases)
    if name == "sparse_accuracy":
        size = ex.ACCURACY_QUICK if quick else ex.ACCURACY
        return ex.exp_sparse_accuracy(size, cases or ("image", "nmnist", "shd"))
    if name == "sparse_width":
        # FULL's T=100, B=256 halved: at hidden 1,000 an engine model takes ~2.6 GB here, and
        # two are alive while timing.
        size = ex.QUICK if quick else replace(ex.FULL, steps=50, batch=128)
        hiddens = (100, 200) if quick else (200, 500, 1000)
        return ex.exp_sparse_width(
            hiddens, size=size, repeats=repeats, pretrain_steps=5 if quick else 30
        )
    if name == "weak_scaling":
        if quick:
            return ex.exp_weak_scaling(
                ipus=(1, 2, 4), layers_per_ipu=1, width=500, steps=10, batch=4
            )
        return ex.exp_weak_scaling()
    if name == "ipu":
        return ex.exp_ipu()
    if name == "isolation":
        return ex.exp_isolation(repeats=repeats, trials=1 if quick else 3)
    raise SystemExit(f"unknown experiment {name!r}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("experiment", choices=EXPERIMENTS + ("report",))
    parser.add_argument(
        "--quick",
        action="store_true",
        help="3 repeats (unless --repeats), smaller sweeps, no torch.compile",
    )
    parser.add_argument("--repeats", type=int, default=None)
    parser.add_argument("--no-save", action="store_true", help="print only, write no file")
    parser.add_argument(
        "--cases",
        default=None,
        help="sparse_full: comma-separated case names, sparse_accuracy: data sets (image, "
        "nmnist, shd) to run; their rows replace the same cases' rows in the results file, "
        "the others are kept",
    )
    args = parser.parse_args(argv)
    cases = args.cases.split(",") if args.cases else None
    if cases and args.experiment not in ("sparse_full", "sparse_accuracy"):
        parser.error(f"--cases applies to sparse_full and sparse_accuracy, not {args.experiment}")
    if args.experiment == "report":
        import report

        report.write_all(RESULTS, HERE / "README.md")
        return 0
    repeats = args.repeats or (3 if args.quick else 5)
    env = ex.machine()
    rows = []
    for row in run_experiment(args.experiment, args.quick, repeats, cases):
        row = {**row, "quick": args.quick, "machine": env, "note": row.get("note", NOTE)}
        print(json.dumps(row), flush=True)
        rows.append(row)
    if not args.no_save:
        RESULTS.mkdir(exist_ok=True)
        path = RESULTS / f"{args.experiment}.json"
        if cases and path.is_file():  # keep the cases not re-run, in their order
            key = "case" if args.experiment == "sparse_full" else "dataset"
            ran = {r[key] for r in rows}
            rows = [r for r in json.loads(path.read_text()) if r[key] not in ran] + rows
        elif args.experiment in KEPT_PER_KIND and path.is_file():
            rows = other_kinds_rows(json.loads(path.read_text()), env) + rows
        path.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
