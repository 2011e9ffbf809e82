"""ConvInputGrad's density choice on the CSNN's second convolution (12 -> 64 channels, 5x5,
12x12 input, no pool, no neurons), timed through the one-stage runner on the cpu device:
dL/dI at densities around DENSE_INPUT_GRAD_MIN_PER_MILLE (30%), so the rows below it take
the per-entry path and those at or above it the blocked dense product. Near the threshold
both paths do about the same work per row, so the times on either side say which path is
faster there. Each call builds its graph; the build is timed with the forward alone
(grad None) and subtracted.

    python bench/csnn_threshold.py [--rows 1600] [--repeats 3] [--codelets OBJECT.gp]

With --codelets a codelet object built with the threshold forced (0: every row takes the
product; 1001: none does) times one path at every density; under `perf record` the
ConvInputGrad samples are that path's CPU time alone (docs/convolution.md).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

from popsnn import _native
from popsnn.engine import codelets_path

SPEC = {
    "rows": 0,
    "in_shape": (12, 12, 12),
    "out_channels": 64,
    "conv": {"kernel_size": (5, 5), "stride": (1, 1), "padding": (0, 0)},
    "pools": [],
    "input_grad": True,
}


def timed(spec, x, w, b, d, repeats, codelets=None):
    device = {"codelets": str(codelets or codelets_path()), "type": "cpu"}
    best = []
    for _ in range(repeats):
        t = time.perf_counter()
        out = _native.conv_stage(spec, x, w, b, d, device=device)
        best.append(time.perf_counter() - t)
    return min(best), out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rows", type=int, default=1600)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--densities", default="0.15,0.25,0.28,0.32,0.35,0.5")
    ap.add_argument("--codelets", default=None, help="a codelet object (default: the package's)")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    spec = dict(SPEC, rows=args.rows)
    x = (rng.random((args.rows, 12, 12, 12)) < 0.05).astype(np.float32)
    w = rng.uniform(-0.06, 0.06, (64, 12, 5, 5)).astype(np.float32)
    b = np.zeros(64, np.float32)
    forward, _ = timed(spec, x, w, b, None, args.repeats, args.codelets)
    rows = []
    for density in (float(v) for v in args.densities.split(",")):
        d = rng.normal(size=(args.rows, 64, 8, 8)).astype(np.float32)
        d *= rng.random(d.shape) < density
        seconds, out = timed(spec, x, w, b, d, args.repeats, args.codelets)
        rows.append(
            {
                "density": density,
                "dense_product_rows": out["input_grad_dense_rows"],
                "backward_ms_per_row": 1e3 * (seconds - forward) / args.rows,
            }
        )
        print(rows[-1], flush=True)
    print(json.dumps({"rows": args.rows, "load": os.getloadavg()[0], "results": rows}))


if __name__ == "__main__":
    main()
