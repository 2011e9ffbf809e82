"""One model fed both input layouts (issue 12): the DSNN's training step (784-1000-10 Leaky,
T 25, B 128, Adam, cpu device) with direct-current input [B, N] and with the same input given
per step [T, B, N], and what switching between them costs now that each layout's engine is
compiled once and kept (a hand-over of weights and optimiser state) beside what building an
engine costs (what every switch cost before).

    python bench/input_layouts.py [--repeats N]

Prints one JSON row (ms, medians over the repeats). CPU measurements on this machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np

import popsnn
from popsnn import _native, data, losses, optim


def median_ms(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--hidden", type=int, default=1000)
    args = parser.parse_args(argv)
    net = popsnn.Sequential(
        popsnn.Linear(784, args.hidden),
        popsnn.Leaky(beta=0.9),
        popsnn.Linear(args.hidden, 10),
        popsnn.Leaky(beta=0.9),
    )
    model = popsnn.Model(
        net, losses.ce_count_loss(), optim.Adam(lr=5e-4), device="cpu", num_steps=25, batch_size=128
    )
    train, _ = data.load_mnist()
    x, y = train.inputs(np.arange(128)).astype(np.float32), train.labels[:128]
    x_steps = np.ascontiguousarray(np.broadcast_to(x, (25, *x.shape)))
    model.train_step(x, y)
    model.train_step(x_steps, y)  # both engines exist from here on
    backend = model.backend
    row = {
        "direct_step_ms": median_ms(lambda: model.train_step(x, y), args.repeats),
        "per_step_step_ms": median_ms(lambda: model.train_step(x_steps, y), args.repeats),
        "switch_ms": median_ms(
            lambda: (backend._engine_for("per_step"), backend._engine_for("direct")), args.repeats
        )
        / 2,
        "engine_build_ms": median_ms(
            lambda: _native.Network(
                dict(backend._spec, input="per_step"), backend._device, "error"
            ),
            max(1, args.repeats // 2),
        ),
        "engine_builds": backend.engine_builds,
        "load_average": os.getloadavg()[0],
        "note": "CPU measurements on this machine, not an IPU",
    }
    print(json.dumps(row))
    return row


if __name__ == "__main__":
    main()
