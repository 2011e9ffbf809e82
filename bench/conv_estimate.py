"""The Mk2 `ipu-model` ESTIMATE of Sun et al.'s CSNN's second convolutional stage (64C5 -> MP2
-> Leaky on the first stage's 12 x 12 x 12 spike maps, B 128, T 25), forward and backward,
from popsnn's cost model (host/src/CycleEstimates.cpp; nothing here ran on an IPU).

Only this stage runs on the engine today (docs/convolution.md): the first stage (direct
input: its convolution is once per batch, ~0.6% of the network's multiply-adds), the
readout, the loss, the optimiser and the exchange between stages are not in the figure, so
128 / (its estimated seconds) is an UPPER BOUND on the whole CSNN's estimated images/s, not
that estimate. Input: the first stage's spikes on real MNIST images, from the reference with
the trained checkpoint of `popsnn train --model csnn` if given (`--checkpoint`), else with
initial weights (activity, hence the event-driven work, differs: the row says which).
At B 128, T 25 the stage's layout (each tile a whole sample's dense float input, its
input-gradient share and their sum) needs more than a Mk2 tile's 624 KiB: run it with
`--memory-bytes-per-tile 1048576` (Mk2 tiles and clock, memory relaxed; the row says so).
dL/dS of the stage's output is dense (no sparse rule: every entry carries gradient, as in
training the CSNN).

    python bench/conv_estimate.py [--checkpoint runs/csnn_ref_s0/checkpoint.npz] [--batch 128]
        [--memory-bytes-per-tile 1048576]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from common import images

from popsnn import _native, checkpoint, reference
from popsnn.engine import codelets_path
from popsnn.train_config import Config

HERE = Path(__file__).resolve().parent
# Sun et al., Table IV: the CSNN's training throughput MEASURED on an IPU Mk2.
SEED000_IPU_CSNN_IMAGES_PER_S = 15566.16
MK2_BYTES_PER_TILE = 624 * 1024


def stage_spec(net, batch: int, steps: int) -> dict:
    stage = net.stages[1]
    conv, pool = stage.ops[0], stage.ops[1]
    leaky = stage.neuron
    return {
        "rows": batch * steps,
        "steps": steps,
        "in_shape": tuple(stage.in_shape),
        "out_channels": conv.out_channels,
        "conv": {"kernel_size": conv.kernel_size, "stride": conv.stride, "padding": conv.padding},
        "pools": [
            {
                "kind": "max",
                "kernel_size": pool.kernel_size,
                "stride": pool.stride,
                "padding": pool.padding,
            }
        ],
        "input_grad": True,
        "neuron": {
            "beta": leaky.beta,
            "threshold": leaky.threshold,
            "reset": leaky.reset_mechanism,
            "surrogate": leaky.surrogate.name,
            "surrogate_param": leaky.surrogate.param,
        },
    }


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", type=Path, default=None)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--steps", type=int, default=25)
    ap.add_argument(
        "--memory-bytes-per-tile",
        type=int,
        default=0,
        help="relax the Mk2's 624 KiB per tile (0: keep it); the row records whether it fits",
    )
    ap.add_argument("--out", type=Path, default=HERE / "results" / "csnn_conv_estimate.json")
    args = ap.parse_args(argv)
    if args.checkpoint is not None:
        trained = checkpoint.load(args.checkpoint)
        net, params, weights = trained["network"], trained["params"], str(args.checkpoint)
    else:
        net = Config(model="csnn", beta=0.5).network(784, 10)
        params, weights = net.init_params(0), "initial (seed 0)"
    x, _ = images(args.batch, 0)
    rec = reference.forward(net, params, x, num_steps=args.steps)
    spikes_in = rec.spikes[0].astype(np.float32)  # [T, B, 12 * 12 * 12]
    grad_out = np.random.default_rng(0).normal(0, 1e-3, rec.spikes[1].shape).astype(np.float32)
    spec = stage_spec(net, args.batch, args.steps)
    p = params[1]
    mk2 = _native.conv_plan(spec, 1472)["tile_bytes"]
    device = {"type": "ipu-model", "codelets": str(codelets_path())}
    if args.memory_bytes_per_tile:
        device["memory_bytes_per_tile"] = args.memory_bytes_per_tile
    got = _native.conv_stage(spec, spikes_in, p["weight"], p["bias"], grad_out, device=device)
    np.testing.assert_array_equal(got["output"].reshape(rec.spikes[1].shape), rec.spikes[1])
    seconds = got["estimate"]["estimate_seconds"]
    row = {
        "experiment": "csnn_conv_stage_estimate",
        "what": "ESTIMATE (popsnn cost model, Mk2 ipu-model geometry): CSNN stage 2 only "
        "(64C5-MP2-Leaky), forward + backward; not measured on an IPU",
        "batch": args.batch,
        "steps": args.steps,
        "weights": weights,
        "input_spike_rate": float(spikes_in.mean()),
        "output_spike_rate": float(rec.spikes[1].mean()),
        "plan": {
            k: got["plan"][k] for k in ("channel_groups", "row_groups", "tile_bytes", "workers")
        },
        "fits_mk2_tile_memory": mk2 <= MK2_BYTES_PER_TILE,
        "memory_bytes_per_tile": args.memory_bytes_per_tile or MK2_BYTES_PER_TILE,
        "estimate": got["estimate"],
        "stage_images_per_s_upper_bound": args.batch / seconds,
        "seed000_ipu_measured_images_per_s": SEED000_IPU_CSNN_IMAGES_PER_S,
        "spikes_equal_reference": True,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(row, indent=1) + "\n")
    json.dump(row, sys.stdout, indent=1)
    print()
    return row


if __name__ == "__main__":
    main()
