"""The CSNN step's arithmetic per kernel: the work the engine's kernels do (multiply-adds,
counted from the densities the step meets) against the dense minimum (every product of
the im2col matrices) and the FMA rate of one core, for Sun et al.'s CSNN on
bench/csnn_steps.py's workload (T 25, the first B MNIST test images, seed 0's initial
weights; with `--rule`, the sparse rule given, as Config.sparse takes it).

The densities come from one forward on the reference (the engine's spikes are identical,
tests/engine/test_engine_conv_network.py): each stage's input spikes, and dL/dI of the
second convolution, which without a rule is one entry per 2 x 2 pool window (25%). With a
rule, dL/dI's non-zero entries are those the engine's backward visited in one training step
(`profile()["active_grads"]`): the input gradient works on exactly those (a window of taps
each), the weight gradient per row on the fewer of them (taps each) and the input's spikes
(kernel area x channels each), here with the entries spread evenly over the rows.
Given `--ms NAME=MS` (CPU ms per step of a kernel, from bench/csnn_profile.py), prints the
rate each kernel ran at (GMAC per CPU second) beside `--peak` (GMAC/s of one core: 16
float multiply-adds a cycle at 2.6 GHz). The profile's ConvForward<MaxPooledOut> also holds
the first convolution (~2 ms of it, event-driven on MNIST), counted here at its dense size.

    .venv/bin/python bench/csnn_work.py [--batch 128] [--rule window:0.2]
        [--ms forward=47 --ms input_grad=62 ...]
"""

from __future__ import annotations

import argparse

import numpy as np
from csnn_steps import workload

import popsnn


def reached(H: int, W: int, k: int, Ho: int, Wo: int) -> np.ndarray:
    """[H, W]: how many output positions of a k x k stride-1 unpadded convolution each input
    entry reaches (its taps inside the output map)."""
    count = np.zeros((H, W), dtype=np.int64)
    for i in range(k):
        for j in range(k):
            count[i : i + Ho, j : j + Wo] += 1
    return count


def floor(work: dict, grads: int, rows: int, args) -> None:
    """Each kernel's time at the FMA rate (the floor) and the bytes its inner loop moves:
    the scatter and the weight gradient by inputs load a tap (a dL/dI run) and load and
    store their output per multiply-add (12 bytes); the input gradient's window runs load
    one weight per multiply-add (4 bytes; dL/dx in registers, loaded and stored once per
    run of 64 floats), from L2 when a position reads all kH rows of runs (80 KB in the
    CSNN), from L1 when one kernel row's runs (16 KB) serve a batch of positions."""
    # 5 runs of 64 floats a position with entries (at most one a non-zero dL/dI entry)
    runs = 5 * 64 * min(grads, rows * 64)
    moved = {
        "forward (2nd conv)": 12 * work["forward (2nd conv)"][0],
        "weight_grad (2nd conv, the fewer)": 12 * work["weight_grad (2nd conv, the fewer)"][0],
        "input_grad (2nd conv, window runs)": 4 * grads * 5 * 64 + 8 * runs,
    }
    total = sum(done for done, _ in work.values())
    print(
        f"floor: {total / 1e6:.0f} MMAC a step = {1e3 * total / (args.peak * 1e9):.1f} ms of one "
        f"core at {args.peak:.1f} GMAC/s (16 a cycle at {args.ghz} GHz)"
    )
    for name, nbytes in moved.items():
        ms = 1e3 * work[name][0] / (args.peak * 1e9)
        print(f"{name:38s} floor {ms:5.1f} ms, {nbytes / 1e9:5.2f} GB through L1")
    l2 = 4 * grads * 5 * 64  # the weight runs' bytes, all from L2 position by position
    print(
        f"input_grad weights from L2 position by position: {l2 / 1e9:.2f} GB = "
        f"{1e3 * l2 / (32 * args.ghz * 1e9):.1f} ms at 32 bytes a cycle"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--ms", action="append", default=[], help="kernel=CPU ms per step")
    ap.add_argument("--ghz", type=float, default=2.45, help="core clock (this AMD EPYC's)")
    ap.add_argument("--peak", type=float, help="GMAC/s of one core (default: 16 a cycle)")
    ap.add_argument("--rule", default="none", help="sparse rule: none, window:B, one_sided:G")
    args = ap.parse_args()
    args.peak = args.peak or 16 * args.ghz  # two 8-float FMAs a cycle (AVX2; AVX-512 fuses 16)
    model, x, y = workload(args.batch, args.rule)
    ref = popsnn.Model(
        model.net,
        device="reference",
        num_steps=25,
        batch_size=args.batch,
        params=model.get_params(),
    )
    rec = ref.record(x)
    T, B = 25, args.batch
    s1 = np.asarray(rec.spikes[0]).reshape(T * B, 12, 12, 12)  # stage 2's input
    s2 = np.asarray(rec.spikes[1]).reshape(T * B, 64 * 16)  # the readout's input
    rows = T * B
    taps, c, P = 12 * 25, 64, 64
    per_spike = reached(12, 12, 5, 8, 8)  # positions each input entry reaches
    # Per row, the products of the input's spikes (each its reached positions x c channels).
    by_inputs = ((s1 != 0).sum(axis=1).reshape(rows, -1) * per_spike.reshape(1, -1)).sum(1) * c
    event = int(by_inputs.sum())
    dense = rows * P * taps * c
    grads = rows * c * 16  # one dL/dI entry per pool window, each window of `taps`
    if args.rule != "none":  # the entries the rule keeps, as the engine's backward visited
        model.train_step(x, y)
        grads = int(model.backend.profile()["active_grads"][1])
    per_row = grads / rows
    # ConvWeightGrad's choice per row (GRADIENT_PRODUCT_COST 2): by gradients when cheaper.
    spikes = (s1 != 0).reshape(rows, -1).sum(1)
    by_grads = 2 * per_row * taps <= spikes * 25 * c + P * c
    weight = int(np.where(by_grads, per_row * taps, by_inputs).sum())
    work = {
        "forward (2nd conv)": (event, dense),
        "weight_grad (2nd conv, the fewer)": (weight, dense),
        "input_grad (2nd conv, window runs)": (grads * taps, dense),
        "first conv (dense count, once a sample)": (B * 576 * 25 * 12, B * 576 * 25 * 12),
        "readout (dense count, fwd + 2 bwd)": (3 * rows * 1024 * 10, 3 * rows * 1024 * 10),
    }
    print(
        f"B {B}, T {T}: stage 2 input (stage 1 spikes) {100 * (s1 != 0).mean():.2f}% "
        f"non-zero, readout input {100 * (s2 != 0).mean():.2f}%; "
        f"2nd conv dL/dI {100 * grads / (rows * c * P):.2f}% non-zero (rule {args.rule}; "
        f"none: one per pool window)"
    )
    print(f"weight gradient rows by gradients: {100 * by_grads.mean():.1f}%")
    print(f"{'kernel':38s} {'done MMAC':>10s} {'dense MMAC':>11s} {'done/dense':>10s}")
    for name, (done, full) in work.items():
        print(f"{name:38s} {done / 1e6:10.1f} {full / 1e6:11.1f} {done / full:10.3f}")
    floor(work, grads, rows, args)
    keys = {
        "forward": "forward (2nd conv)",
        "weight_grad": "weight_grad (2nd conv, the fewer)",
        "input_grad": "input_grad (2nd conv, window runs)",
    }
    for item in args.ms:
        name, ms = item.split("=")
        done = work[keys[name]][0]
        rate = done / (float(ms) * 1e-3) / 1e9
        print(
            f"{name}: {rate:.1f} GMAC per CPU second = {100 * rate / args.peak:.0f}% "
            f"of one core's {args.peak} GMAC/s"
        )


if __name__ == "__main__":
    main()
