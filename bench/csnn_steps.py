"""A fixed CSNN workload for `perf record` A/B of the convolution kernels: builds Sun et al.'s
CSNN on the engine's cpu device (T 25, the first B MNIST test images, initial weights of
seed 0) and runs N training steps, printing the last loss (equal losses: same arithmetic)
and, from the second step on, the best step's images/s.

    perf record -e cpu-clock -F 1000 -o FILE .venv/bin/python bench/csnn_steps.py 2
    perf report -i FILE --no-children --sort symbol -n -g none
    .venv/bin/python bench/csnn_steps.py 4 128     # N steps at batch B (default 2, 32)
    .venv/bin/python bench/csnn_steps.py 4 128 window:0.5   # with a sparse rule (Config.sparse)
"""

from __future__ import annotations

import os
import sys
import time

from common import images

import popsnn
from popsnn.train_config import Config


def workload(batch: int, rule: str = "none") -> tuple[popsnn.Model, object, object]:
    """The model (seed 0's initial weights, the engine's cpu device) and the first `batch`
    MNIST test images and labels; bench/csnn_ab.py builds its two models with this."""
    net = Config(model="csnn", beta=0.5, sparse=rule).network(784, 10)
    x, y = images(batch, 0)
    model = popsnn.Model(
        net,
        loss="ce_count",
        device="cpu",
        num_steps=25,
        batch_size=batch,
        params=net.init_params(0),
    )
    return model, x, y


def main(argv=None) -> float:
    args = argv or sys.argv[1:]
    steps = int(args[0]) if args else 2
    batch = int(args[1]) if len(args) > 1 else 32
    rule = args[2] if len(args) > 2 else "none"
    model, x, y = workload(batch, rule)
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        value, _ = model.train_step(x, y)
        times.append(time.perf_counter() - start)
    print("loss", repr(value))
    print("dL/dI entries visited per stage", model.backend.profile()["active_grads"])
    if steps > 1:  # the first step also builds and warms up
        best = min(times[1:])
        load = os.getloadavg()[0]
        print(
            f"B {batch}: best step {best * 1e3:.0f} ms = {batch / best:.0f} images/s "
            f"(load {load:.1f})"
        )
    return value


if __name__ == "__main__":
    main()
