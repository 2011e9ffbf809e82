"""The active-entry (input-trace) backward of bench/trace_form.py against the reference's
BPTT with the masked surrogate (float64, window and one-sided rules, subtract and no reset,
spike and membrane losses, spike and direct input), the layers it refuses, and its counts."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import trace_form  # noqa: E402

import popsnn  # noqa: E402
from popsnn import losses, reference, sparse  # noqa: E402


def _net(rule, reset="subtract", sizes=(30, 24, 16, 5), bias=True):
    mods = []
    for k in range(len(sizes) - 1):
        mods += [
            popsnn.Linear(sizes[k], sizes[k + 1], bias=bias),
            popsnn.Leaky(beta=0.9, reset_mechanism=reset, sparse=rule if k < 2 else None),
        ]
    return popsnn.Sequential(*mods)


def _case(net, direct=False, seed=0):
    params = net.init_params(seed, np.float64)
    for p in params:
        p["weight"] *= 3.0  # enough spikes that every layer has active entries
    rng = np.random.default_rng(seed)
    T, B = 14, 4
    shape = (B, 30) if direct else (T, B, 30)
    x = (rng.random(shape) < 0.3).astype(np.float64)
    return params, x, rng.integers(0, 5, B)


@pytest.mark.parametrize("reset", ["subtract", "none"])
@pytest.mark.parametrize("rule", [sparse.window(0.4), sparse.one_sided(0.5), None])
@pytest.mark.parametrize("loss", ["ce_count", "mse_membrane"])
def test_trace_form_equals_reference_bptt(rule, reset, loss):
    net = _net(rule, reset)
    params, x, y = _case(net)
    _, want, rec = reference.loss_and_grad(net, params, x, y, losses.get(loss))
    if rule is not None:
        assert 0 < rec.grad_masks[0].mean() < 1, "the rule must cut some entries"
    _, d_spikes, d_mem = reference._loss_terms(losses.get(loss), rec, y)
    got = trace_form.trace_form_grads(net, params, rec, d_spikes, d_mem)
    for lw, lg in zip(want, got, strict=True):
        for k in lw:
            assert np.abs(lw[k]).max() > 0
            np.testing.assert_allclose(lg[k], lw[k], rtol=1e-9, atol=1e-12)


def test_trace_form_direct_input_without_bias():
    net = _net(sparse.window(0.4), bias=False)
    params, x, y = _case(net, direct=True, seed=3)
    _, want, rec = reference.loss_and_grad(net, params, x, y, "ce_count", num_steps=14)
    _, d_spikes, d_mem = reference._loss_terms(losses.get("ce_count"), rec, y)
    got = trace_form.trace_form_grads(net, params, rec, d_spikes, d_mem)
    for lw, lg in zip(want, got, strict=True):
        np.testing.assert_allclose(lg["weight"], lw["weight"], rtol=1e-9, atol=1e-12)


def test_layers_that_keep_the_live_form():
    assert trace_form.trace_form_applies(popsnn.Leaky(beta=0.9))
    assert trace_form.trace_form_applies(popsnn.Leaky(beta=0.9, reset_mechanism="none"))
    # The zero reset multiplies the carry by 1 - R[t+1]: the leak path is cut per entry.
    assert not trace_form.trace_form_applies(popsnn.Leaky(beta=0.9, reset_mechanism="zero"))
    assert not trace_form.trace_form_applies(popsnn.Leaky(beta=np.full(4, 0.9)))
    assert not trace_form.trace_form_applies(popsnn.Leaky(beta=0.9, learn_beta=True))
    assert not trace_form.trace_form_applies(popsnn.Synaptic(alpha=0.8, beta=0.9))
    net = _net(None, reset="zero")
    params, x, y = _case(net)
    rec = reference.forward(net, params, x)
    with pytest.raises(ValueError, match="layer 2: the trace form needs"):
        trace_form.trace_form_grads(net, params, rec, np.zeros_like(rec.spikes[-1]))


def test_counts_follow_the_masks():
    net = _net(sparse.window(0.4))
    params, x, y = _case(net)
    rec = reference.forward(net, params, x)
    _, d_spikes, d_mem = reference._loss_terms(losses.get("ce_count"), rec, y)
    rows = trace_form.count_macs(net, rec, d_spikes, d_mem)
    T, B = 14, 4
    mask0 = rec.grad_masks[0]
    live0 = np.flip(np.logical_or.accumulate(np.flip(mask0, 0), 0), 0)
    assert rows[0]["dense_dw"] == T * B * 24 * 30
    assert rows[0]["dense_eps"] == 0 and rows[1]["dense_eps"] == T * B * 16 * 24
    assert rows[0]["live_carry"] == live0.sum() >= mask0.sum()
    assert rows[0]["live_dw"] == sum(
        live0[t, b].sum() * (x[t, b] != 0).sum() for t in range(T) for b in range(B)
    )
    seen = np.logical_or.accumulate(x != 0, axis=0).sum(-1)
    assert rows[0]["trace_dw"] == (mask0.sum(-1) * seen).sum()
    assert rows[1]["trace_eps"] == rec.grad_masks[1].sum() * 24
    assert rows[1]["engine_eps"] == mask0.sum() * 16 >= rows[1]["live_eps"]
    assert rows[0]["active_fraction"] == pytest.approx(mask0.mean())


def test_engine_list_dots_count_follows_the_choice():
    # The engine since its list dots: per (t, b) and shard below, e entries dot over the list's
    # live neurons of the layer above where listDotsApply picks it, else over its whole row.
    net = _net(sparse.window(0.4))
    params, x, y = _case(net)
    rec = reference.forward(net, params, x)
    _, d_spikes, d_mem = reference._loss_terms(losses.get("ce_count"), rec, y)
    rows = trace_form.count_macs(net, rec, d_spikes, d_mem, shard=10)
    mask0, mask1 = rec.grad_masks[0], rec.grad_masks[1]
    live1 = np.flip(np.logical_or.accumulate(np.flip(mask1, 0), 0), 0).sum(-1)
    want, picks = 0, set()
    for t in range(14):
        for b in range(4):
            for first in (0, 10, 20):
                e = int(mask0[t, b, first : first + 10].sum())
                pick = trace_form.list_dots_apply(e, int(live1[t, b]), 16)
                picks.add(pick)
                want += e * int(live1[t, b]) if pick else e * 16
    assert picks == {True, False}, "rows on both sides of the choice"
    assert rows[1]["engine_list_eps"] == want <= rows[1]["engine_eps"]
    assert rows[0]["engine_list_eps"] == rows[0]["engine_eps"] == 0  # nothing below layer 0
    assert rows[2]["engine_list_eps"] == rows[2]["engine_eps"]  # the output sends no list


def test_dead_rows_by_brute_force():
    # Rows (t, b) of a shard with no entry at t or later, against a loop over every row.
    rng = np.random.default_rng(4)
    mask = rng.random((9, 5, 23)) < 0.02
    mask[:, 0] = False  # a silent sample: every row dead
    for shard in (23, 10, 4):
        expected = 0
        for first in range(0, 23, shard):
            for b in range(5):
                for t in range(9):
                    expected += not mask[t:, b, first : first + shard].any()
        assert trace_form.dead_rows(mask, shard) == expected
        assert 9 <= expected < 9 * 5 * -(-23 // shard)  # both kinds of row
