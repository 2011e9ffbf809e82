"""Loss values by hand, loss gradients by finite differences, population codes, accuracy."""

from __future__ import annotations

import numpy as np
import pytest
from _reference_nets import LOSS_CASES

from popsnn import losses


def test_ce_count_by_hand():
    spikes = np.zeros((3, 2, 2))
    spikes[:, 0, 0] = 1  # sample 0: counts (3, 0), label 0
    spikes[0, 1, 1] = 1  # sample 1: counts (0, 1), label 0
    value = losses.ce_count_loss()(spikes, None, np.array([0, 0]))
    expect = (np.log(1 + np.exp(-3)) + np.log(1 + np.exp(1))) / 2
    assert value == pytest.approx(expect, rel=1e-14)


def test_ce_rate_by_hand():
    spikes = np.zeros((2, 1, 2))
    spikes[0, 0, 0] = 1  # step 0 logits (1, 0); step 1 logits (0, 0); label 0
    value = losses.ce_rate_loss()(spikes, None, np.array([0]))
    assert value == pytest.approx((np.log(1 + np.exp(-1)) + np.log(2)) / 2, rel=1e-14)


def test_mse_count_targets_truncate_like_snntorch():
    T = 7
    spikes = np.zeros((T, 1, 2))
    # targets int(7 * 0.5) = 3 and int(7 * 0.2) = 1 spikes; counts are 0
    value = losses.mse_count_loss(0.5, 0.2)(spikes, None, np.array([1]))
    assert value == pytest.approx((1**2 + 3**2) / 2 / T, rel=1e-14)


def test_population_blocks_are_contiguous():
    T, C, K = 2, 6, 3
    spikes = np.zeros((T, 1, C))
    spikes[0, 0, 2] = spikes[1, 0, 3] = 1  # neurons 2 and 3 -> classes 1 and 1
    counts = losses.class_counts(spikes, K)
    np.testing.assert_array_equal(counts, [[0, 2, 0]])
    pop = losses.ce_count_loss(population_code=True, num_classes=K)
    assert pop(spikes, None, np.array([1])) == pytest.approx(
        -np.log(np.exp(2) / (np.exp(2) + 2)), rel=1e-14
    )
    # mse_count with a population: targets scale with C/K = 2 neurons per class
    mse = losses.mse_count_loss(1.0, 0.0, population_code=True, num_classes=K)
    assert mse(spikes, None, np.array([1])) == pytest.approx(
        ((0 - 0) ** 2 + (2 - 4) ** 2 + 0) / 3 / T, rel=1e-14
    )


def test_mse_membrane_and_ce_max_membrane_by_hand():
    mem = np.array([[[0.5, 2.0]], [[1.5, -1.0]]])  # T=2, B=1, C=2
    on_off = losses.mse_membrane_loss(on_target=1.0, off_target=-0.5)
    expect = ((0.5 - 1) ** 2 + (2 + 0.5) ** 2 + (1.5 - 1) ** 2 + (-1 + 0.5) ** 2) / 4
    assert on_off(None, mem, np.array([0])) == pytest.approx(expect, rel=1e-14)
    value = losses.ce_max_membrane_loss()(None, mem, np.array([0]))  # max = (1.5, 2.0)
    assert value == pytest.approx(np.log(1 + np.exp(0.5)), rel=1e-14)
    _, d_u = losses.ce_max_membrane_loss().backward(None, mem, np.array([0]))
    assert d_u[0, 0, 0] == 0 and d_u[1, 0, 1] == 0 and d_u[1, 0, 0] < 0 < d_u[0, 0, 1]


@pytest.mark.parametrize("name", sorted(LOSS_CASES))
def test_loss_gradients_match_finite_differences(name):
    loss = LOSS_CASES[name]()
    rng = np.random.default_rng(0)
    spikes = rng.random((4, 3, 4))  # smooth stand-ins for spikes, membranes
    membranes = rng.normal(size=(4, 3, 4))
    y = rng.integers(0, loss.num_classes or 4, 3)
    d_s, d_u = loss.backward(spikes, membranes, y)
    for array, grad in ((spikes, d_s), (membranes, d_u)):
        fd = np.empty_like(array)
        for i in np.ndindex(array.shape):
            keep = array[i]
            array[i] = keep + 1e-6
            up = loss(spikes, membranes, y)
            array[i] = keep - 1e-6
            down = loss(spikes, membranes, y)
            array[i] = keep
            fd[i] = (up - down) / 2e-6
        np.testing.assert_allclose(grad, fd, rtol=1e-6, atol=1e-9)
    used = d_s if loss.uses == "spikes" else d_u
    assert np.abs(used).sum() > 0


def test_accuracy_ties_go_to_the_lowest_index():
    spikes = np.zeros((1, 3, 3))
    spikes[0, 0, [0, 2]] = 1  # tie between 0 and 2 -> 0
    spikes[0, 1, [1, 2]] = 1  # tie between 1 and 2 -> 1
    # sample 2: no spikes -> class 0
    assert losses.accuracy(spikes, np.array([0, 1, 0])) == 1.0
    assert losses.accuracy(spikes, np.array([2, 2, 1])) == 0.0


def test_accuracy_with_population_code():
    spikes = np.zeros((2, 2, 4))
    spikes[:, 0, 3] = 1  # class 1 (neurons 2, 3)
    spikes[0, 1, 0] = 1  # class 0
    assert losses.accuracy(spikes, np.array([1, 0]), num_classes=2) == 1.0


def test_get_by_name_and_snntorch_spelling():
    assert isinstance(losses.get("ce_count"), losses.ce_count_loss)
    assert isinstance(losses.get("mse_count_loss", correct_rate=0.9), losses.mse_count_loss)
    assert losses.get("ce_rate").name == "ce_rate"
    assert losses.ce_count_loss().num_classes is None
    assert losses.ce_count_loss(True, 5).num_classes == 5


def test_float32_in_float32_out():
    spikes = (np.random.default_rng(0).random((3, 2, 4)) < 0.5).astype(np.float32)
    d_s, d_u = losses.ce_count_loss().backward(spikes, None, np.array([0, 3]))
    assert d_s.dtype == np.float32 and d_u.dtype == np.float32
