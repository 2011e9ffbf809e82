"""The direct-current layer's products pick their kernel by the measured density of x
(codelets/DenseKernels.hpp): the blocked dense product from a threshold of non-zero entries
up (one for the forward current, one for the weight gradient), the sparse row kernel below.
The engine equals the float32 reference on both sides of each threshold, exactly at it and
one entry below it, for every neuron model, with and without a sparse rule. The shapes make
the dense product use its ragged edges: more inputs than one k block (256), a row count and
a neuron count that are no multiple of the register tile. See engine_helpers for the
tolerances."""

import re
from pathlib import Path

import numpy as np
import pytest
from engine_helpers import assert_grads_close, labels_for, sgd_backend

import popsnn
from popsnn import data, losses, reference, sparse

HEADER = Path(__file__).resolve().parents[2] / "codelets" / "DenseKernels.hpp"
BATCH, STEPS, INPUTS, HIDDEN = 8, 6, 300, 37


def threshold_counts(name: str) -> list[int]:
    """The non-zero counts of x at which the product `name` turns dense: one per instruction
    set the header sets it for (the codelets compiled here take one of them)."""
    found = re.findall(rf"DENSE_{name}_MIN_PER_MILLE\s*=\s*(\d+)", HEADER.read_text())
    assert found, f"no DENSE_{name}_MIN_PER_MILLE in {HEADER}"
    counts = []
    for per_mille in found:
        at = int(per_mille) * BATCH * INPUTS / 1000
        assert at == int(at) and at > 1, "choose a shape where the threshold is a whole count"
        counts.append(int(at))
    return counts


def nonzero_counts() -> dict:
    counts = {"sparse": BATCH * INPUTS // 50, "dense": BATCH * INPUTS}
    for name, short in (("CURRENT", "current"), ("WEIGHT_GRAD", "grad")):
        for at in threshold_counts(name):
            counts[f"below-{short}-{at}"] = at - 1
            counts[f"at-{short}-{at}"] = at
    return counts


def input_with(nonzero: int, seed: int) -> np.ndarray:
    """[BATCH, INPUTS] with exactly `nonzero` non-zero entries, scaled so that the hidden
    layer spikes at every density."""
    rng = np.random.default_rng(seed)
    x = np.zeros(BATCH * INPUTS, np.float32)
    where = rng.choice(x.size, size=nonzero, replace=False)
    x[where] = rng.uniform(0.05, 1.5, nonzero) * np.sqrt(x.size / nonzero)
    return x.reshape(BATCH, INPUTS)


NEURONS = {
    "leaky": lambda: popsnn.Leaky(beta=0.85),
    "leaky-window": lambda: popsnn.Leaky(beta=0.85, sparse=sparse.window(0.5)),
    "synaptic": lambda: popsnn.Synaptic(alpha=0.6, beta=0.8),
    "rleaky": lambda: popsnn.RLeaky(beta=0.8),
}


def check_engine_against_reference(name, inputs, x, seed, hidden=HIDDEN):
    """One cpu-device loss_and_grad of inputs-hidden-5 against the reference on batch x."""
    net = popsnn.Sequential(
        popsnn.Linear(inputs, hidden),
        NEURONS[name](),
        popsnn.Linear(hidden, 5),
        popsnn.Leaky(beta=0.9),
    )
    batch = x.shape[0]
    loss = losses.ce_count_loss()
    y = labels_for(loss, net, np.arange(batch))
    params = net.init_params(seed)
    backend = sgd_backend(net, params, loss, steps=STEPS, batch=batch, device="cpu")
    value, grads = backend.loss_and_grad(x, y)
    ref_value, ref_grads, rec = reference.loss_and_grad(net, params, x, y, loss, num_steps=STEPS)
    assert rec.spikes[0].sum() > 0, "a silent hidden layer tests nothing"
    np.testing.assert_array_equal(backend.infer(x), rec.spikes[-1])
    assert value == pytest.approx(ref_value, rel=2e-5, abs=1e-7)
    assert_grads_close(grads, ref_grads)


@pytest.mark.parametrize("density", sorted(nonzero_counts()))
@pytest.mark.parametrize("name", sorted(NEURONS))
def test_direct_products_equal_the_reference_on_both_sides(name, density):
    nonzero = nonzero_counts()[density]
    x = input_with(nonzero, seed=3)
    assert np.count_nonzero(x) == nonzero
    check_engine_against_reference(name, INPUTS, x, seed=4)


@pytest.mark.parametrize("density", ["sparse", "dense"])
def test_split_products_on_ipu_model_tiles(density):
    # On an IPU geometry the products are split over the tile's workers (by samples for
    # the current, by inputs for the weight gradient), each part choosing on its own slice.
    net = popsnn.Sequential(
        popsnn.Linear(INPUTS, HIDDEN),
        popsnn.Leaky(beta=0.85),
        popsnn.Linear(HIDDEN, 5),
        popsnn.Leaky(beta=0.9),
    )
    x = input_with(nonzero_counts()[density], seed=5)
    loss = losses.ce_count_loss()
    y = labels_for(loss, net, np.arange(BATCH))
    params = net.init_params(6)
    backend = sgd_backend(
        net,
        params,
        loss,
        steps=STEPS,
        batch=BATCH,
        device="ipu-model",
        num_ipus=1,
        tiles_per_ipu=4,
    )
    value, grads = backend.loss_and_grad(x, y)
    ref_value, ref_grads, rec = reference.loss_and_grad(net, params, x, y, loss, num_steps=STEPS)
    np.testing.assert_array_equal(backend.infer(x), rec.spikes[-1])
    assert value == pytest.approx(ref_value, rel=2e-5, abs=1e-7)
    assert_grads_close(grads, ref_grads)


@pytest.mark.parametrize("name", sorted(NEURONS))
@pytest.mark.parametrize("kind", ["images", "scattered"])
def test_grouped_sparse_products_equal_the_reference(name, kind):
    # On AVX-512 hosts the sparse products take groups of 4 samples (x.W) or inputs (x^T.G)
    # over the union of their non-zero entries where the group's own entries fill >= 35% of
    # it (codelets/InputProducts.hpp): MNIST images (19% non-zero, in the same region of
    # every image) take the groups, scattered entries at 2% do not. A batch of 10 leaves a
    # last partial group; 784 inputs are 196 groups.
    batch = 10
    if kind == "images":
        train, _ = data.load_mnist()
        x = np.asarray(train.take(batch).images, np.float32).reshape(batch, -1) / 85.0
    else:
        rng = np.random.default_rng(8)
        x = (rng.random((batch, 784)) < 0.02).astype(np.float32) * 6.0
    check_engine_against_reference(name, 784, x, seed=9)


@pytest.mark.parametrize("name", ["leaky", "synaptic"])
def test_grouped_products_fill_a_ragged_last_block(name):
    # The groups' column blocks are 96 wide: a hidden layer of 186 (one shard of 186 = 96 +
    # 90, or two of 93) leaves a last block of 5 vectors and a masked one, which the grouped
    # kernels once skipped (those columns of the current and the weight gradient unwritten).
    train, _ = data.load_mnist()
    x = np.asarray(train.take(8).images, np.float32).reshape(8, -1) / 85.0
    check_engine_against_reference(name, 784, x, seed=10, hidden=186)
