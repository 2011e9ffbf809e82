"""Instructions (callgrind) of the DSNN training step with the hidden layer's constants one per
layer, one per neuron (fixed), or learned (beta, or beta and threshold), for the codelets of a
git revision (--before) and of the working tree: the cost of per-neuron constants before and
after a codelet change.

The codelets are built for AVX2 (`-O3 -mavx2 -mfma -fno-math-errno`: valgrind 3.19 has no
AVX-512) with only the instantiations this network uses (Leaky, subtract reset, no rule); the
host side is the installed package for both. DSNN 784-1000-10, B 32, T 25, Adam, direct input
of MNIST's density (19% of pixels non-zero), cpu device with POPSNN_NUM_THREADS=1 and
POPSNN_CPU_TILES=2; a process that trains 1 step against one that trains 4: (4 - 1) steps.
Instruction counts do not depend on the machine's load.

    .venv/bin/python bench/per_neuron_instructions.py [--before REV]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from codelets_ab import build_codelets, export_codelets  # noqa: E402

import popsnn  # noqa: E402
from popsnn import optim  # noqa: E402
from popsnn.backends import engine as engine_backend  # noqa: E402

VARIANTS = ("one per layer", "per neuron", "beta learned per neuron", "both learned per neuron")
BATCH, STEPS, HIDDEN = 32, 25, 1000
INSTANCES = (
    ("LifForward.cpp", "LifForward<popsnn::Leaky,popsnn::ResetSubtract,popsnn::NoRule,float>"),
    (
        "LifBackward.cpp",
        "LifBackward<popsnn::Leaky,popsnn::ResetSubtract,popsnn::DenseTrace,float>",
    ),
)


def build_avx2_codelets(src: Path, build: Path) -> Path:
    """src's codelets with this network's instantiations, built for AVX2 into build/ab.gp."""
    for name, instance in INSTANCES:
        with open(src / name, "a") as f:
            f.write(f"\ntemplate class {instance};\n")
    return build_codelets(src, build, "-O3 -mavx2 -mfma -fno-math-errno")


def hidden_neuron(variant: str):
    if variant == "one per layer":
        return popsnn.Leaky(beta=0.95)
    beta = np.full(HIDDEN, 0.95)
    if variant == "per neuron":
        return popsnn.Leaky(beta=beta)
    if variant == "beta learned per neuron":
        return popsnn.Leaky(beta=beta, learn_beta=True)
    return popsnn.Leaky(beta=beta, learn_beta=True, learn_threshold=True)


def train(gp: str, variant: str, steps: int) -> None:
    """The workload callgrind counts: `steps` training steps with the codelets in `gp`."""
    net = popsnn.Sequential(
        popsnn.Linear(784, HIDDEN),
        hidden_neuron(variant),
        popsnn.Linear(HIDDEN, 10),
        popsnn.Leaky(beta=0.95),
    )
    rng = np.random.default_rng(0)
    x = (rng.random((BATCH, 784)) * (rng.random((BATCH, 784)) < 0.19)).astype(np.float32)
    y = rng.integers(0, 10, BATCH)
    engine_backend.codelets_path = lambda: Path(gp)
    model = popsnn.Model(
        net, optimizer=optim.Adam(lr=1e-3), device="cpu", num_steps=STEPS, batch_size=BATCH
    )
    for _ in range(steps):
        loss, _ = model.train_step(x, y)
    print(f"loss {loss!r}")


def instructions(gp: Path, variant: str, steps: int) -> tuple[int, str]:
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        cmd = [
            "valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
            sys.executable, __file__, "step", str(gp), variant, str(steps),
        ]  # fmt: skip
        env = dict(os.environ, POPSNN_NUM_THREADS="1", POPSNN_CPU_TILES="2", OMP_NUM_THREADS="1")
        run = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
        text = Path(out).read_text()
    loss = re.search(r"^loss (.*)$", run.stdout, re.M).group(1)
    return int(re.search(r"^summary:\s+(\d+)", text, re.M).group(1)), loss


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "step":
        return train(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="main", help="git revision of the 'before' codelets")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        gps = {
            args.before: build_avx2_codelets(
                export_codelets(args.before, tmp / "src_before"), tmp / "before"
            ),
            "working tree": build_avx2_codelets(
                export_codelets(None, tmp / "src_after"), tmp / "after"
            ),
        }
        print(
            "| codelets | hidden layer's beta, threshold | instructions per 3 steps | loss 1 / 4 |"
        )
        print("|---|---|---|---|")
        for which, gp in gps.items():
            for variant in VARIANTS:
                one, loss1 = instructions(gp, variant, 1)
                four, loss4 = instructions(gp, variant, 4)
                print(
                    f"| {which} | {variant} | {(four - one) / 1e6:.2f} M | {loss1} / {loss4} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
