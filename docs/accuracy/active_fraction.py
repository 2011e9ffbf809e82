"""Fraction of active (gradient-carrying) entries of the sparse backward, measured on the
trained weights of a `popsnn train` run.

    .venv/bin/python docs/accuracy/active_fraction.py RUN_FOLDER [--samples 1024]

Loads RUN_FOLDER/checkpoint.npz, rebuilds the run's network (with its sparse rule), runs the dense
reference forward on the first test samples and prints, per layer, the share of (t, b, j) entries
whose surrogate gradient the backward uses (the reference's `Record.grad_masks`), and the spike
rate. With `--rule window:0.5` (or one_sided:0.9) the mask of that rule is measured instead of the
run's own (e.g. on the weights of a dense run); `--layers all` measures the readout's mask too.
"""

import argparse
import json
import sys
from pathlib import Path

from popsnn import checkpoint, data, reference, train


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("--samples", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--rule", default=None, help="sparse rule to measure instead of the run's")
    ap.add_argument(
        "--layers",
        default=None,
        choices=("hidden", "all"),
        help="sparse_layers to measure instead of the run's (runs made before the "
        "option existed masked all layers)",
    )
    args = ap.parse_args(argv)
    run = Path(args.run)
    cfg = json.loads((run / "metrics.json").read_text())["config"]
    if args.rule is not None:
        cfg["sparse"] = args.rule
    if args.layers is not None:
        cfg["sparse_layers"] = args.layers
    config = train.Config(**cfg)
    _, test = data.load_named(config.dataset, config.data, config.num_steps)
    test = test.take(args.samples)
    net = config.network(test.num_inputs, test.num_classes)
    params = checkpoint.load(run / "checkpoint.npz")["params"]
    active = None
    spikes = None
    n = 0
    for x, _y in data.batches(test, args.batch):
        rec = reference.forward(net, params, x, config.num_steps)
        a = [float(m.mean()) * len(x) for m in rec.grad_masks]
        s = [float(sp.mean()) * len(x) for sp in rec.spikes]
        active = a if active is None else [u + v for u, v in zip(active, a)]
        spikes = s if spikes is None else [u + v for u, v in zip(spikes, s)]
        n += len(x)
    result = {
        "run": str(run),
        "rule": config.sparse,
        "layers": config.sparse_layers,
        "samples": n,
        "active_fraction": [v / n for v in active],
        "spike_rate": [v / n for v in spikes],
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
