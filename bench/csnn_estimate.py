"""The Mk2 `ipu-model` ESTIMATE of one training step of Sun et al.'s whole CSNN
(12C5-MP2-64C5-MP2-10, B 128, T 25, direct MNIST input) from popsnn's cost model
(host/src/CycleEstimates.cpp; nothing here ran on an IPU), beside the paper's 15,566 images/s
MEASURED on a Mk2.

The network runs as popsnn.Model(device="ipu-model") runs it (docs/convolution.md): the
three stages in one graph on a Mk2's 1,472 tiles and clock, stage spikes exchanged between
them, forward and backward. Not in the figure: the loss and the Adam step, which this
backend does on the host (a few thousand floats: the readout's records and 0.2 M weights).
The cost model needs the activity the event-driven kernels see: stage inputs' non-zero
fraction is measured on the batch with the reference (`--checkpoint` for trained weights,
else initial ones; the row says which), and dL/dI's non-zero fraction at each convolution's
output from one backward of the same step on the cpu device (no sparse rule: 1 in 4 after a
2x2 max pool, all of the readout's). The stage input is
exchanged as dense floats, so the stages need more than a Mk2 tile's 624 KiB at B 128:
`--memory-bytes-per-tile 1048576` relaxes it (the row says so).

    python bench/csnn_estimate.py [--checkpoint runs/csnn_ref_s0/checkpoint.npz]
        [--batch 128] [--steps 25] [--memory-bytes-per-tile 1048576]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from common import images

import popsnn
from popsnn import checkpoint, reference
from popsnn.train_config import Config

HERE = Path(__file__).resolve().parent
# Sun et al., Table IV: the CSNN's training throughput MEASURED on an IPU Mk2.
SEED000_IPU_CSNN_IMAGES_PER_S = 15566.16


def measured_grad_activity(net, params, x, y, batch, steps) -> list:
    """dL/dI's non-zero fraction at each stage's convolution output, from one backward on
    the cpu device (the first stage's direct input: one row per sample)."""
    probe = popsnn.Model(
        net, loss="ce_count", device="cpu", num_steps=steps, batch_size=batch, params=params
    )
    probe.loss_and_grad(x, y)
    active = probe.backend.profile()["active_grads"]
    fractions = []
    for k, plan in enumerate(probe.backend.plans()):
        h, w = plan["maps"][1]
        rows = batch * (1 if k == 0 else steps)
        fractions.append(active[k] / (rows * params[k]["weight"].shape[0] * h * w))
    return fractions


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", type=Path, default=None)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=25)
    ap.add_argument("--memory-bytes-per-tile", type=int, default=0, help="0: a Mk2's 624 KiB")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "csnn_estimate.json")
    args = ap.parse_args(argv)
    if args.checkpoint is not None:
        trained = checkpoint.load(args.checkpoint)
        net, params, weights = trained["network"], trained["params"], str(args.checkpoint)
    else:
        net = Config(model="csnn", beta=0.5).network(784, 10)
        params, weights = net.init_params(0), "initial (seed 0)"
    x, y = images(args.batch, 0)
    rec = reference.forward(net, params, x, num_steps=args.steps)
    inputs = [x] + rec.spikes[:-1]
    activity = [float(np.count_nonzero(a) / a.size) for a in inputs]
    grad_activity = measured_grad_activity(net, params, x, y, args.batch, args.steps)
    options = {"input_activity": activity, "grad_activity": grad_activity}
    if args.memory_bytes_per_tile:
        options["memory_bytes_per_tile"] = args.memory_bytes_per_tile
    model = popsnn.Model(
        net,
        loss="ce_count",
        optimizer=popsnn.optim.Adam(lr=5e-3),
        device="ipu-model",
        num_steps=args.steps,
        batch_size=args.batch,
        params=params,
        **options,
    )
    _, out = model.train_step(x, y)  # the estimate covers exactly this step's two programs
    profile = model.profile()
    np.testing.assert_array_equal(out, rec.spikes[-1])
    seconds = profile["estimate_seconds"]
    row = {
        "experiment": "csnn_estimate",
        "what": "ESTIMATE (popsnn cost model, Mk2 ipu-model geometry): whole CSNN training "
        "step, forward + backward on the tiles; loss and Adam on the host not included; "
        "not measured on an IPU",
        "batch": args.batch,
        "steps": args.steps,
        "weights": weights,
        "stage_input_activity": activity,
        "stage_grad_activity": grad_activity,
        "memory_bytes_per_tile": args.memory_bytes_per_tile or 624 * 1024,
        "plans": [
            {
                k: p[k]
                for k in ("channel_groups", "row_groups", "tile_bytes", "workers", "neuron_workers")
            }
            for p in model.backend.plans()
        ],
        "estimate": {k: v for k, v in profile.items() if k.startswith(("estimate", "max_tile"))},
        "ipu_model_estimate_images_per_s": args.batch / seconds,
        "seed000_ipu_measured_images_per_s": SEED000_IPU_CSNN_IMAGES_PER_S,
        "output_spikes_equal_reference": True,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(row, indent=1) + "\n")
    json.dump(row, sys.stdout, indent=1)
    print()
    return row


if __name__ == "__main__":
    main()
