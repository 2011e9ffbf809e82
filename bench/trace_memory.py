"""Trace memory of the sparse rule against none, MEASURED from the engine's profile: Perez-
Nieves & Goodman's 784-h-h-10 (bench/sparse_bench.py) on latency-coded images after some dense
minibatches; each sparse model's traces start at 1.1 x their mean activity measured by the
reference and grow once where a shard needs more (as bench/sparse_bench.py sizes them). Sizes
only, no timing; one JSON row per B_th.

    .venv/bin/python bench/trace_memory.py --hidden 200 --steps 25 --batch 32
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from common import LR, sparse_net
from event_tasks import latency_task
from sparse_bench import ACTIVITY_MARGIN, trace_memory

import popsnn
from popsnn import losses, optim, reference, sparse


def _model(args, rule, params=None, **opts):
    return popsnn.Model(
        sparse_net(784, args.hidden, rule),
        loss=losses.ce_max_membrane_loss(),
        optimizer=optim.Adam(lr=LR),
        device="cpu",
        num_steps=args.steps,
        batch_size=args.batch,
        seed=0,
        params=params,
        **opts,
    )


def _start(fractions, hidden) -> float:
    return min(1.0, max(ACTIVITY_MARGIN * max(fractions), 1.0 / hidden))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=200)
    ap.add_argument("--steps", type=int, default=25)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--pretrain", type=int, default=30, help="dense minibatches first")
    ap.add_argument("--b-th", type=float, nargs="+", default=[0.05, 0.2, 0.5, 0.95])
    ap.add_argument("--dataset", default="mnist")
    args = ap.parse_args()
    task = latency_task(args.dataset, args.steps)
    dense = _model(args, None)
    for i in range(args.pretrain):
        dense.train_step(*task.sample(args.batch, i))
    params, (x, y) = dense.get_params(), task.sample(args.batch, 999)
    dense_bytes = trace_memory(dense)["trace_bytes_hidden"]
    for b_th in args.b_th:
        rule = sparse.window(b_th)
        net = sparse_net(784, args.hidden, rule)
        loss = losses.ce_max_membrane_loss()
        _, _, rec = reference.loss_and_grad(net, params, x, y, loss, num_steps=args.steps)
        active = [float(np.mean(m)) for m in rec.grad_masks[:2]]
        spikes = _start([float(np.mean(s)) for s in rec.spikes[:2]], args.hidden)
        model = _model(
            args,
            rule,
            params,
            max_activity=spikes,
            spike_activity=spikes,
            trace_activity=_start(active, args.hidden),
            on_overflow="grow",
        )
        model.train_step(x, y)
        mem = trace_memory(model)
        row = {"hidden": args.hidden, "steps": args.steps, "batch": args.batch, "b_th": b_th}
        row.update(
            dataset=args.dataset,
            active_fraction=float(np.mean(active)),
            trace_memory_saved_pct=100 * (1 - mem["trace_bytes_hidden"] / dense_bytes),
            trace_mib_hidden=mem["trace_bytes_hidden"] / 2**20,
            dense_trace_mib_hidden=dense_bytes / 2**20,
            **{k: mem[k] for k in ("max_activity", "spike_activity", "trace_activity")},
        )
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
