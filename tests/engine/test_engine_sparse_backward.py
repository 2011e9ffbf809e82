"""The first layer's weight gradient on spike-step input finds the non-zero inputs 16 at a
time (codelets/SparseBackward.hpp): every value that is not exactly zero counts, -0.0 does
not, and the inputs past the last whole block of 16 are visited one by one. Checked against
the dense reference, with and without a sparse rule (the rule's reference masks its
surrogate the same way)."""

import numpy as np
import pytest
from engine_helpers import assert_grads_close, engine_and_reference

import popsnn
from popsnn import losses, sparse

BATCH, STEPS, INPUTS = 5, 9, 37  # 37 = two blocks of 16 and a tail of 5


def spike_steps_with_odd_values(seed=3):
    """Mostly zeros, some ones, and the values a branch-free test could get wrong: -0.0,
    a denormal, a negative value, a value in the tail past the last block of 16."""
    rng = np.random.default_rng(seed)
    x = (rng.random((STEPS, BATCH, INPUTS)) < 0.15).astype(np.float32)
    x[..., [3, 21]] = 0.0  # never fire (input 3 only -0.0)
    x[0, 0, 3] = -0.0
    x[1, 1, 17] = np.float32(1e-39)  # denormal: not zero
    x[2, 2, 20] = -0.75
    x[3, 3, 36] = 1.0  # the tail
    x[4, 4, 32] = 2.0  # the tail's first input
    return x


@pytest.mark.parametrize("rule", [None, sparse.window(0.4)], ids=["dense", "window"])
def test_weight_gradient_on_spike_steps_matches_the_reference(rule):
    net = popsnn.Sequential(
        popsnn.Linear(INPUTS, 20),
        popsnn.Leaky(beta=0.9, sparse=rule),
        popsnn.Linear(20, 3),
        popsnn.Leaky(beta=0.9),
    )
    x = spike_steps_with_odd_values()
    y = np.arange(BATCH) % 3
    _, value, grads, spikes, (ref_value, ref_grads, rec) = engine_and_reference(
        net, losses.ce_count_loss(), x, y, batch=BATCH, steps=STEPS, seed=2
    )
    np.testing.assert_array_equal(spikes, rec.spikes[-1])
    assert value == pytest.approx(ref_value, rel=2e-5, abs=1e-7)
    assert_grads_close(grads, ref_grads)
    # Inputs that are zero at every (step, sample) get exactly zero weight gradient, and the
    # odd values above do reach the gradient.
    never = np.all(x == 0, axis=(0, 1))
    assert never[[3, 21]].all()
    assert np.all(grads[0]["weight"][:, never] == 0)
    assert np.any(grads[0]["weight"][:, 36] != 0)
