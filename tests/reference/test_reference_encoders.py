"""Encoders: rate statistics, exact latency spike times, shapes and dtypes."""

from __future__ import annotations

import numpy as np
import pytest

from popsnn import encoders


def test_rate_mean_is_the_clipped_gain_times_x():
    x = np.array([[-0.5, 0.0, 0.1, 0.3, 0.6, 0.9, 1.0, 2.0]], dtype=np.float32)
    spikes = encoders.rate(x, 20000, gain=1.5, rng=0)
    assert spikes.shape == (20000, 1, 8) and spikes.dtype == np.float32
    p = np.clip(1.5 * x, 0, 1)
    # 5 binomial standard deviations: a false failure is a ~1e-6 event per entry.
    tol = 5 * np.sqrt(p * (1 - p) / 20000) + 1e-12
    assert np.all(np.abs(spikes.mean(axis=0) - p) <= tol)
    assert set(np.unique(spikes)) <= {0.0, 1.0}
    assert np.all(spikes[:, 0, [0, 1]] == 0) and np.all(spikes[:, 0, [6, 7]] == 1)


def test_rate_is_reproducible_with_a_seed_and_takes_a_generator():
    x = np.full((2, 3), 0.5)
    assert np.array_equal(encoders.rate(x, 5, rng=7), encoders.rate(x, 5, rng=7))
    gen = np.random.default_rng(1)
    a, b = encoders.rate(x, 50, rng=gen), encoders.rate(x, 50, rng=gen)
    assert not np.array_equal(a, b)


def test_latency_spike_times_are_exact():
    tau, thr, T = 5.0, 0.01, 25
    x = np.array([[1.0, 0.5, 0.2, 0.05, 0.011, 0.01, 0.0]])
    spikes = encoders.latency(x, T, tau=tau, threshold=thr)
    assert spikes.shape == (T, 1, 7)
    # t = tau * ln(x / (x - thr)), rounded to the nearest step
    expect = {
        0: round(5 * np.log(1 / 0.99)),  # 0.05 -> step 0
        1: round(5 * np.log(0.5 / 0.49)),  # 0.10 -> 0
        2: round(5 * np.log(0.2 / 0.19)),  # 0.26 -> 0
        3: round(5 * np.log(0.05 / 0.04)),
    }  # 1.12 -> 1
    for i, t in expect.items():
        assert spikes[:, 0, i].sum() == 1 and spikes[t, 0, i] == 1
    # 0.011: t = 5 ln 11 = 11.99 -> 12 ; at or below the threshold: no spike at all
    assert spikes[:, 0, 4].sum() == 1 and spikes[12, 0, 4] == 1
    assert spikes[:, 0, 5].sum() == 0 and spikes[:, 0, 6].sum() == 0


def test_latency_drops_spikes_past_the_last_step_and_normalize_fits_them():
    x = np.array([[0.011, 0.5]])  # times 11.99 and 0.1
    late = encoders.latency(x, 10, tau=5.0)
    assert late[:, 0, 0].sum() == 0 and late[0, 0, 1] == 1
    fitted = encoders.latency(x, 10, tau=5.0, normalize=True)
    assert fitted[9, 0, 0] == 1 and fitted[0, 0, 1] == 1


def test_direct_repeats_and_copies():
    x = np.arange(6, dtype=np.float64).reshape(2, 3)
    d = encoders.direct(x, 4)
    assert d.shape == (4, 2, 3) and np.all(d == x)
    d[0, 0, 0] = 99
    assert x[0, 0] == 0 and d[1, 0, 0] == 0


def test_integer_input_becomes_float32():
    assert encoders.direct(np.ones((2, 2), dtype=np.uint8), 3).dtype == np.float32
    assert encoders.rate(np.ones((2, 2), dtype=np.uint8), 3, rng=0).dtype == np.float32


@pytest.mark.parametrize(
    "call,match",
    [
        (lambda: encoders.rate(np.ones(3), 0), "num_steps must be a positive integer, got 0"),
        (lambda: encoders.rate(np.array([np.nan]), 3), "x contains 1 NaN or inf"),
        (lambda: encoders.rate(np.ones(3), 3, rng="seed"), "rng must be None, an int seed"),
        (lambda: encoders.latency(np.array([1.5]), 3), r"x must lie in \[0, 1\]"),
        (lambda: encoders.latency(np.ones(3), 3, threshold=1.0), r"threshold must lie in \(0, 1\)"),
        (lambda: encoders.latency(np.ones(3), 3, tau=-1), "tau must be a finite number > 0"),
        (lambda: encoders.direct(np.array(["a"]), 3), "x must hold real numbers"),
    ],
)
def test_bad_arguments_say_what_is_wrong(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()
