"""dL/dS at a sparse rule's entries over the next layer's live neurons only: where the next layer
sends dL/dI as lists (LayerShape::gradList), each entry's dot runs over the list's entries of its
(step, sample) row instead of the whole gathered row, where that costs less
(codelets/BackwardGather.hpp, listDotsApply). Checked against the masked reference at float
tolerance, in float64 where the spikes and masks agree, with rows on both sides of the choice
(counted from the reference's masks with the header's constants); without a rule the engine
still equals the dense reference."""

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from engine_helpers import (
    assert_grads_close,
    float64_reference_same_masks,
    list_backend,
    make_input,
)

import popsnn
from popsnn import losses, reference, sparse

HEADER = Path(__file__).resolve().parents[2] / "codelets" / "BackwardGather.hpp"
BATCH, STEPS = 6, 10
DEVICES = {"cpu": {}, "ipu-model": {"num_ipus": 1, "tiles_per_ipu": 4}}
RULES = {"window": sparse.window(0.3), "one_sided": sparse.one_sided(0.9)}


def constant(name: str) -> int:
    found = re.findall(rf"\b{name} = (\d+)", HEADER.read_text())
    assert len(found) == 1, f"one {name} in {HEADER}"
    return int(found[0])


def list_dots_apply(entries, live, width):
    """The header's choice (listDotsApply) for rows of `entries` dots and `live` list entries."""
    P = (width + 15) // 16 * 16
    list_cost = entries * (constant("LIST_DOT_PER_LIVE") * live + constant("LIST_DOT_PER_ENTRY"))
    row_cost = constant("GATHER_PER_ROW") + constant("GATHER_PER_LIVE") * live + entries * P
    return list_cost <= row_cost


def make_net(rule):
    """Three hidden layers with the rule: layers 0 and 1 read the lists of layers 1 and 2
    (each wider than the one before, so none pushes instead: Plan.cpp)."""
    return popsnn.Sequential(
        popsnn.Linear(30, 48),
        popsnn.Leaky(beta=0.9, sparse=rule),
        popsnn.Linear(48, 64),
        popsnn.Synaptic(alpha=0.8, beta=0.9, sparse=rule),
        popsnn.Linear(64, 80),
        popsnn.Leaky(beta=0.9, reset_mechanism="zero", sparse=rule),
        popsnn.Linear(80, 3),
        popsnn.Leaky(beta=0.9),
    )


def choices(rec, prof):
    """How many (shard, step, sample) rows with entries take each way, over the layers that
    read a list: (list dots, gathered row)."""
    counts = np.zeros(2, int)
    for l in (0, 1):
        live_next = np.logical_or.accumulate(rec.grad_masks[l + 1][::-1], axis=0)[::-1]
        m = live_next.sum(axis=-1)  # [T, B]: the next layer's list row, all its shards
        width = rec.grad_masks[l + 1].shape[-1]
        size = int(prof[f"layer{l}_shard_size"])
        for first in range(0, rec.grad_masks[l].shape[-1], size):
            e = rec.grad_masks[l][..., first : first + size].sum(axis=-1)
            for entries, live in zip(e[e > 0], m[e > 0]):
                counts[0 if list_dots_apply(int(entries), int(live), width) else 1] += 1
    return counts


def run(rule, device, direct, seed=3):
    net = make_net(rule)
    x, raw = make_input(net, BATCH, STEPS, direct, seed=seed, density=0.5 if direct else 0.9)
    y = raw % 3
    params = net.init_params(seed)
    loss = losses.ce_count_loss()
    backend = list_backend(
        net, params, loss, steps=STEPS, batch=BATCH, device=device, **DEVICES[device]
    )
    value, grads = backend.loss_and_grad(x, y)
    return net, params, loss, x, y, backend, value, grads


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "per_step"])
@pytest.mark.parametrize("device", sorted(DEVICES))
@pytest.mark.parametrize("rule", sorted(RULES))
def test_list_dots_equal_the_masked_reference(rule, device, direct):
    net, params, loss, x, y, backend, value, grads = run(RULES[rule], device, direct)
    ref_value, ref_grads, rec = reference.loss_and_grad(net, params, x, y, loss, num_steps=STEPS)
    prof = backend.profile()
    assert prof["layer1_grad_list_capacity"] > 0 and prof["layer2_grad_list_capacity"] > 0
    assert value == pytest.approx(ref_value, rel=2e-5, abs=1e-7)
    assert_grads_close(grads, ref_grads)
    by_list, gathered = choices(rec, prof)
    assert by_list > 0 and gathered > 0, f"rows {by_list} by list, {gathered} gathered"


@pytest.mark.parametrize("rule", sorted(RULES))
def test_list_dots_equal_the_float64_reference(rule):
    net, params, loss, x, y, backend, value, grads = run(RULES[rule], "cpu", True, seed=5)
    ref_value, ref_grads, rec = float64_reference_same_masks(net, params, x, y, loss, STEPS)
    assert value == pytest.approx(ref_value, rel=2e-5)
    assert_grads_close(grads, ref_grads, rel=2e-5)
    by_list, gathered = choices(rec, backend.profile())
    assert by_list > 0 and gathered > 0


def test_without_a_rule_the_engine_equals_the_dense_reference():
    net, params, loss, x, y, backend, value, grads = run(None, "cpu", True)
    ref_value, ref_grads, _ = reference.loss_and_grad(net, params, x, y, loss, num_steps=STEPS)
    assert all(backend.profile()[f"layer{l}_grad_list_capacity"] == 0 for l in range(4))
    assert value == pytest.approx(ref_value, rel=2e-5, abs=1e-7)
    assert_grads_close(grads, ref_grads)


@pytest.mark.skipif(shutil.which("c++") is None, reason="no C++ compiler")
@pytest.mark.parametrize(
    "flags",
    [["-march=native"], ["-mavx2", "-mfma"], [], ["-DPOPSNN_PLAIN_LOOPS"]],
    ids=["native", "avx2", "baseline", "plain-loops"],
)
def test_list_dots_kernels_and_choice(flags, tmp_path):
    # Both dots against a double loop (every live count from 0 to the whole shard), and the
    # codelets' choice against this file's copy of it, which the tests above count with.
    exe = tmp_path / "list_dots_check"
    subprocess.run(
        [
            "c++",
            "-std=c++17",
            "-O2",
            "-fno-math-errno",
            "-fno-trapping-math",
            f"-I{HEADER.parent}",
            *flags,
        ]
        + [str(Path(__file__).parent / "list_dots_check" / "list_dots_check.cpp"), "-o", str(exe)],
        check=True,
    )
    lines = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split()
    words = iter(lines)
    errors, picks = {}, []
    for word in words:
        if word == "choice":
            entries, live, P, pick = (int(next(words)) for _ in range(4))
            picks.append(pick)
            assert list_dots_apply(entries, live, P) == bool(pick), (entries, live, P)
        else:
            errors[word] = float(next(words))
    assert len(errors) == 6 and max(errors.values()) < 1e-6, errors
    assert len(picks) == 144 and 0 < sum(picks) < len(picks)  # both ways on the grid
