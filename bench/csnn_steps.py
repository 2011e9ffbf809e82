"""A fixed CSNN workload for `perf record` A/B of the convolution kernels: builds Sun et al.'s
CSNN on the engine's cpu device (B 32, T 25, the first 32 MNIST test images, initial weights
of seed 0) and runs N training steps, printing the last loss (equal losses: same arithmetic).

    perf record -e cpu-clock -F 1000 -o FILE .venv/bin/python bench/csnn_steps.py 2
    perf report -i FILE --no-children --sort symbol -n -g none
"""

from __future__ import annotations

import sys

from common import images

import popsnn
from popsnn.train_config import Config


def main(argv=None) -> float:
    steps = int((argv or sys.argv[1:] or ["2"])[0])
    net = Config(model="csnn", beta=0.5).network(784, 10)
    x, y = images(32, 0)
    model = popsnn.Model(
        net, loss="ce_count", device="cpu", num_steps=25, batch_size=32, params=net.init_params(0)
    )
    for _ in range(steps):
        value, _ = model.train_step(x, y)
    print("loss", repr(value))
    return value


if __name__ == "__main__":
    main()
