"""Bytes the engine moves per `loss_and_grad` call with [T, B, N] input as a list of its
non-zeros (`input_activity` default) against the dense block (`input_activity=1.0`), COUNTED by
popsnn's CPU runtime (its profile's exchange bytes; no timing, so the machine's load does not
matter), and the batch written from the host. Perez-Nieves & Goodman's 784-h-h-10 with a window
rule on latency-coded Fashion-MNIST (MNIST where it is not installed); one JSON row per layout.
`--ipu-model` adds the cost model's ESTIMATE of a training step on one IPU (Mk2 geometry), an
estimate and not a measurement on an IPU.

    .venv/bin/python bench/input_exchange.py [--hidden 200 --steps 50 --batch 128 --b-th 0.05]
        [--ipu-model]
"""

from __future__ import annotations

import argparse
import json
import re

import numpy as np
from common import LR, sparse_net
from event_tasks import latency_task

import popsnn
from popsnn import data, losses, optim, sparse


def _exchange_bytes(model) -> int:
    summary = model.backend._engine.profile_summary()
    found = re.search(r"exchange bytes\s+(\d+) within IPUs, (\d+) between IPUs", summary)
    return int(found.group(1)) + int(found.group(2))


def _model(args, x, input_activity, device):
    net = sparse_net(x.shape[2], args.hidden, sparse.window(args.b_th))
    params = net.init_params(0, np.float32)
    for p in params[:2]:
        p["weight"] *= 3.0  # the hidden layers spike
    return popsnn.Model(
        net,
        loss=losses.ce_max_membrane_loss(),
        optimizer=optim.Adam(lr=LR),
        device=device,
        num_steps=args.steps,
        batch_size=args.batch,
        seed=0,
        params=params,
        trace_activity=0.2,
        on_overflow="grow",
        input_activity=input_activity,
    )


def ipu_step_estimate(args, x, y, input_activity) -> float:
    """The ipu-model cost model's ESTIMATED seconds of one training step (after two, which
    grow the traces)."""
    model = _model(args, x, input_activity, "ipu-model")
    model.train_step(x, y)
    model.train_step(x, y)
    before = model.profile()["estimate_seconds"]
    model.train_step(x, y)
    return model.profile()["estimate_seconds"] - before


def measure(args, x, y, input_activity) -> dict:
    model = _model(args, x, input_activity, "cpu")
    model.loss_and_grad(x, y)  # builds (and grows) the engine
    before = _exchange_bytes(model)
    model.loss_and_grad(x, y)
    prof = model.profile()
    listed = prof["input_list_capacity"] > 0
    rows = args.steps * args.batch
    return {
        "layout": "list" if listed else "dense",
        "input_nonzero_fraction": float(np.count_nonzero(x) / x.size),
        "input_list_capacity": prof["input_list_capacity"],
        "exchange_bytes_per_call": _exchange_bytes(model) - before,
        "host_input_bytes_per_call": (
            4 * (rows + 1 + 2 * prof["input_list_capacity"]) if listed else 4 * x.size
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hidden", type=int, default=200)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--b-th", type=float, default=0.05)
    ap.add_argument("--ipu-model", action="store_true", help="add the ipu-model step ESTIMATE")
    args = ap.parse_args()
    dataset = "fashion-mnist" if data.fashion_mnist_folder() else "mnist"
    x, y = latency_task(dataset, args.steps).sample(args.batch, seed=0)
    for input_activity in (1.0, None):
        row = measure(args, x, y, input_activity)
        if args.ipu_model:
            row["ipu_model_estimate_s_per_step"] = ipu_step_estimate(args, x, y, input_activity)
        print(json.dumps(dict(row, data=dataset, **vars(args))), flush=True)


if __name__ == "__main__":
    main()
