"""bench/sparse_work.py's per-pass counts against brute force over a small record: the dense
side's passes, the rule's live entries, rows walked and dots, and the ceilings' totals."""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import sparse_work  # noqa: E402
from test_trace_form import _case, _net  # noqa: E402

from popsnn import losses, reference, sparse  # noqa: E402


def _live(mask):
    return np.flip(np.logical_or.accumulate(np.flip(mask, 0), 0), 0)


def test_passes_by_brute_force():
    net = _net(sparse.window(0.4))  # 30-24-16-5, T 14, B 4
    params, x, y = _case(net)
    rec = reference.forward(net, params, x)
    _, d_spikes, d_mem = reference._loss_terms(losses.get("ce_count"), rec, y)
    layers = sparse_work.passes(net, rec, d_spikes, d_mem, shard=8)
    T, B = 14, 4
    m0, m1 = rec.grad_masks[0], rec.grad_masks[1]
    live0, live1 = _live(m0), _live(m1)
    s0, s1 = rec.spikes[0] != 0, rec.spikes[1] != 0
    assert layers[0]["carry"] == (T * B * 24, live0.sum())
    assert layers[0]["dW"] == ((x != 0).sum() * 24, (live0.sum(-1) * (x != 0).sum(-1)).sum())
    assert layers[1]["dW"] == (s0.sum() * 16, (live1.sum(-1) * s0.sum(-1)).sum())
    assert layers[0]["dL/dS"] == (0, 0)  # nothing below the first layer
    # Layer 1 forms dL/dS of layer 0: dense W . dL/dI at every entry; the rule one dot per
    # active entry of layer 0, over layer 1's live neurons at most.
    dense, rule = layers[1]["dL/dS"]
    assert dense == T * B * 24 * 16
    assert layers[1]["dL/dS_over_live"][1] == (m0.sum(-1) * live1.sum(-1)).sum() <= rule
    assert rule <= m0.sum() * 16
    # The readout has no rule: run dense on both sides.
    assert layers[2]["carry"] == (T * B * 5, T * B * 5)
    assert layers[2]["dW"] == (s1.sum() * 5, s1.sum() * 5)
    # Rows of each 8-neuron shard (24: 3 shards) with anything live at that step or later.
    walked = sum(
        live0[t, b, f : f + 8].any() for t in range(T) for b in range(B) for f in (0, 8, 16)
    )
    assert layers[0]["rows"] == (T * B * 3, walked) and walked < T * B * 3
    tot = sparse_work.totals(layers)
    keys = ("carry", "dW", "dL/dS")
    assert tot["dense_work"] == sum(p[k][0] for p in layers for k in keys)
    assert tot["rule_work"] == sum(p[k][1] for p in layers for k in keys)
    assert tot["ceiling"] == tot["dense_work"] / tot["rule_work"] > 1
    assert tot["ceiling_every_dot_over_live"] >= tot["ceiling_readout_in_proportion"]
    assert tot["ceiling_readout_in_proportion"] >= tot["ceiling"]
