"""The seed-003 sparse setting (Perez-Nieves & Goodman's 784-200-200-10, T=25, B=32) under
`perf record`, or timed A/B against the model without a rule: the profile of issue 13.

Both models start from the same weights (`--pretrain` dense minibatches from scratch, latency-coded
images) with the learning rate 0 afterwards, so every call sees the same activity. `--perf-out FILE`
attaches perf to this process for `--seconds` of back-to-back `loss_and_grad` calls of the rule's
model; without it, the dense model, the rule's and the rule's with dL/dI exchanged dense
(grad_list_activity 1.0), the rule's with every layer's masked surrogate dense (the dense backward)
and with the compressed backward pinned however live (sparse_backward_max_live 1.0; the plain rule's
model takes the engine's per-layer choice) have their `loss_and_grad` and `infer` timed in
interleaved bursts (common.time_bursts), as wall clock or (`--cpu-time`) this process's CPU time,
which a loaded machine disturbs less with POPSNN_NUM_THREADS=1; the backward program's own time (the
runtime's per-program clock, the same kind) and the derived backward (loss_and_grad - infer) are
printed with the load. `--before FILE.gp`: the dense and the rule's models built a second time on
those codelets (e.g. the installed popsnn_codelets.gp of an earlier build, copied aside; the same
host, so its vertices must have the same fields) and timed in the same bursts: an A/B of codelet
versions in one process.

    .venv/bin/python bench/sparse_profile.py [--b-th 0.2] [--hidden 200] [--perf-out F]
        [--before OLD.gp] [--dataset fashion|mnist|shd|nmnist]
    perf report -i F --no-children --sort symbol -n
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import time_bursts  # noqa: E402
from event_tasks import event_task, latency_task  # noqa: E402
from profile_step import perf_loop  # noqa: E402
from sparse_bench import (  # noqa: E402
    SparseCase,
    _engine,
    _gradient_rows,
    _model,
    _start_rows,
    exchange_bytes_per_call,
)

from popsnn import sparse  # noqa: E402
from popsnn.backends import engine as engine_backend  # noqa: E402


def _setup(args):
    if args.dataset in ("shd", "nmnist"):  # the quick bench's recordings (1,024 train, 512 test)
        task = event_task(args.dataset, args.steps, 1024, 512)
    else:
        task = latency_task(args.dataset, args.steps)
    case = SparseCase(
        "profile", task, args.hidden, args.steps, args.batch, rules=(sparse.window(args.b_th),)
    )
    model = _model(case, None)
    # Epochs over the training split where it holds fewer than the minibatches (the recordings).
    n = min(args.batch * args.pretrain, len(task.train.labels) // args.batch * args.batch)
    xs, ys = task.sample(n, 1)
    for k in range(args.pretrain):
        lo = k * args.batch % n
        hi = lo + args.batch
        model.train_step(xs[:, lo:hi], ys[lo:hi])
    params = model.get_params()
    del model
    rows = _start_rows(case, 1)
    x, y = task.sample(args.batch, 0)
    _gradient_rows(case, rows, params, x, y)
    dense, est_dense = _engine(case, rows[0], params, x, y)
    rows[0]["backward_estimate_cycles"] = est_dense["backward_estimate_cycles"]
    rule, est = _engine(case, rows[1], params, x, y)
    dense_dldi, est_dldi = _engine(case, rows[1], params, x, y, grad_list_activity=1.0)
    # The rule's masked surrogate kept dense (the dense backward on the masked trace): the
    # other side of the per-layer choice (LayerSpec::denseBackward).
    masked, _ = _engine(case, rows[1], params, x, y, trace_activity=1.0)
    # The compressed backward however live (the engine's choice off): the crossover's other side.
    lists, _ = _engine(case, rows[1], params, x, y, sparse_backward_max_live=1.0)
    print(
        "cost model's ESTIMATE of backward cycles (not a measurement): dense",
        rows[0]["backward_estimate_cycles"],
        "rule",
        est["backward_estimate_cycles"],
        "rule, dL/dI dense",
        est_dldi["backward_estimate_cycles"],
    )
    prof = rule.profile()
    print(
        "per layer: live fraction counted, compressed trace, dense backward (engine's choice):",
        [
            (
                prof.get(f"layer{k}_live_fraction"),
                prof[f"layer{k}_compressed_trace"],
                prof.get(f"layer{k}_dense_backward"),
            )
            for k in range(case.layers + 1)
        ],
    )
    print(
        "dL/dI lists: activity",
        prof["grad_list_activity"],
        {k: v for k, v in prof.items() if k.endswith("grad_list_capacity")},
    )
    for name, m in (("dense", dense), ("rule", rule), ("rule, dL/dI dense", dense_dldi)):
        print(
            f"{name}: exchange bytes per loss_and_grad (counted) {exchange_bytes_per_call(m, x, y)}"
        )
    print(
        f"active {rows[1]['active_fraction']:.4f} (per layer "
        f"{[round(a, 4) for a in rows[1]['active_fraction_per_layer']]}), trace "
        f"{est.get('trace_bytes_hidden')} bytes hidden"
    )
    before = {}
    if args.before:  # the same models on the other codelets (codelets_ab.model_with's patch)
        original = engine_backend.codelets_path
        engine_backend.codelets_path = lambda: Path(args.before)
        try:
            before = {
                "dense, before": _engine(case, rows[0], params, x, y)[0],
                "rule, before": _engine(case, rows[1], params, x, y)[0],
            }
        finally:
            engine_backend.codelets_path = original
    return dense, rule, dense_dldi, masked, lists, x, y, before


def _meter(model, prog: int, kind: str):
    """(runs, seconds) of one engine program as the runtime measured them: `kind` "seconds"
    (wall clock) or "cpu_seconds" (the process's CPU time)."""

    def read():
        p = model.backend._engine.profile()
        return p[f"program{prog}_runs"], p[f"program{prog}_{kind}"]

    return read


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--b-th", type=float, default=0.2)
    ap.add_argument("--hidden", type=int, default=200)
    ap.add_argument("--steps", type=int, default=25)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--pretrain", type=int, default=30)
    ap.add_argument("--dataset", default="mnist")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--perf-out", default="", help="perf's output file; '' to time A/B")
    ap.add_argument("--cpu-time", action="store_true", help="time by process CPU time")
    ap.add_argument("--before", default="", help="codelets (.gp) to time the models on too")
    args = ap.parse_args()
    if args.perf_out and shutil.which("perf") is None:
        sys.exit("sparse_profile: perf is not installed; install it or drop --perf-out")
    if args.before and not Path(args.before).is_file():
        sys.exit(f"sparse_profile: --before {args.before}: no such codelets file")
    dense, rule, dense_dldi, masked, lists, x, y, before = _setup(args)
    if not args.perf_out:
        models = {
            "dense": dense,
            "rule": rule,
            "rule, dL/dI dense": dense_dldi,
            "rule, dense backward": masked,
            "rule, compressed backward": lists,
            **before,
        }
        fns = {}
        for name, m in models.items():
            fns[f"{name}/grad"] = lambda m=m: m.loss_and_grad(x, y)
            fns[f"{name}/infer"] = lambda m=m: m.infer(x)
        clock = time.process_time if args.cpu_time else time.perf_counter
        kind = "cpu_seconds" if args.cpu_time else "seconds"
        meters = {f"{name}/grad": _meter(m, 2, kind) for name, m in models.items()}
        t = time_bursts(fns, args.repeats, clock, meters)
        print({k: round(v * 1e3, 3) for k, v in t.items() if v is not None}, "ms")
        how = f"B_th {args.b_th}; {'CPU time' if args.cpu_time else 'wall clock'}; "
        how += f"load {os.getloadavg()[0]:.1f}"
        back = {name: t[f"{name}/grad"] - t[f"{name}/infer"] for name in models}
        alone = {name: t[f"{name}/grad:meter"] for name in models}
        for what, b in (("derived (loss_and_grad - infer)", back), ("program alone", alone)):
            print(
                f"backward {what}, ms: "
                + ", ".join(f"{k} {v * 1e3:.3f} ({b['dense'] / v:.2f}x)" for k, v in b.items())
                + f"; {how}"
            )
        return
    calls, seconds = perf_loop(
        lambda: rule.loss_and_grad(x, y), args.seconds, args.perf_out, "cpu-clock"
    )
    print(
        f"{calls} loss_and_grad calls, {1e3 * seconds / calls:.3f} ms each (wall clock), "
        f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    )


if __name__ == "__main__":
    main()
