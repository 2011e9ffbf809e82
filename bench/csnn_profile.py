"""The CSNN training step's steady-state profile: `perf record` of bench/csnn_steps.py with a
few steps and with ten more, and per symbol the difference divided by ten. A profile of one
run mixes the graph's build (allocation, page clearing, the runtime's compile-time exchange
bookkeeping) with the steps; the difference leaves the steps only (samples = ms of CPU
time, both threads).

    .venv/bin/python bench/csnn_profile.py [--batch 128] [--extra 10] [--rule none]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent


def samples(steps: int, batch: int, rule: str, out: Path) -> Counter:
    """Per-symbol samples of `steps` training steps (build included)."""
    cmd = ["perf", "record", "-q", "-e", "cpu-clock", "-F", "1000", "-o", str(out)]
    cmd += [sys.executable, str(HERE / "csnn_steps.py"), str(steps), str(batch), rule]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    report = ["perf", "report", "-i", str(out), "--no-children", "--sort", "symbol"]
    text = subprocess.run(
        report + ["-n", "-g", "none", "--stdio"], check=True, capture_output=True, text=True
    ).stdout
    counts: Counter = Counter()
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 4 or line.startswith("#") or not parts[1].isdigit():
            continue
        counts[" ".join(parts[2:]).replace(" - -", "").strip()[:80]] += int(parts[1])
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--extra", type=int, default=10, help="steps added to the second run")
    ap.add_argument("--rule", default="none")
    ap.add_argument("--top", type=int, default=20)
    args = ap.parse_args()
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory() as tmp:
        few = samples(2, args.batch, args.rule, Path(tmp) / "few.data")
        many = samples(2 + args.extra, args.batch, args.rule, Path(tmp) / "many.data")
    load.append(os.getloadavg()[0])
    diff = {k: (many[k] - few[k]) / args.extra for k in set(few) | set(many)}
    step = sum(diff.values())
    print(f"build + 2 steps {sum(few.values())} samples; per further step {step:.1f} ms CPU")
    print(f"B {args.batch}, rule {args.rule}, load {load[0]:.1f} -> {load[1]:.1f}")
    for name, value in sorted(diff.items(), key=lambda kv: -kv[1])[: args.top]:
        print(f"{value:8.1f} {100 * value / step:5.1f}%  {name}")


if __name__ == "__main__":
    main()
