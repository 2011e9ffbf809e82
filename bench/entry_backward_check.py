"""The sparse backward of Leaky layers computed per gradient-trace ENTRY, checked against
popsnn.reference in float64: the formulas a backward whose work follows the entries (not the
live rows) would use (docs/performance/sparse-backward.md, "The backward's floor at almost no
activity").

For a Leaky layer with the subtract reset and one beta, dL/dU[t] = sum_{t' >= t}
beta^(t'-t) a[t'], where a[t'] = dS/dU[t'] * dL/dS[t'] is non-zero only at the rule's entries
(the reset is detached, as in the reference). So, with E_i[t] = sum_{s <= t} beta^(t-s) x_i[s]
(the layer's input filtered by beta):
    dL/dW_ji = sum_t' a_j[t'] E_i[t']          (entry rows only)
    dL/db_j  = sum_t' a_j[t'] (1 - beta^(t'+1)) / (1 - beta)
    dL/dx_i[t] = sum_{t' >= t} beta^(t'-t) (W^T a[t'])_i   (wanted at the layer below's
                                                              entries only)
No carry is walked step by step. Plain Python loops: a check of the algebra, not a kernel.

    .venv/bin/python bench/entry_backward_check.py [--steps 40] [--batch 3] [--window 0.3]
"""

from __future__ import annotations

import argparse

import numpy as np

import popsnn
from popsnn import reference, sparse


class EntryLayer:
    """One hidden Leaky layer's gradients from dL/dS at its entries (dl_ds(t, b, j))."""

    def __init__(self, neuron, p, membranes, mask, beta, dl_ds, layer_in):
        self.w, self.beta = p["weight"], beta
        n = self.w.shape[0]
        dsdu = neuron.surrogate.grad(membranes - neuron.threshold) * mask
        self.grad = {"weight": np.zeros_like(self.w), "bias": np.zeros(n)}
        self.rows = []  # per sample: {t': W^T a[t']} at its entry rows
        for b in range(dsdu.shape[1]):
            sent = {}
            for t in sorted(set(np.nonzero(dsdu[:, b, :])[0])):
                js = np.nonzero(dsdu[t, b])[0]
                a = np.zeros(n)
                a[js] = dsdu[t, b, js] * np.array([dl_ds(t, b, j) for j in js])
                eligibility = sum(beta ** (t - s) * layer_in[s, b] for s in range(t + 1))
                self.grad["weight"] += np.outer(a, eligibility)
                self.grad["bias"] += a * (1 - beta ** (t + 1)) / (1 - beta)
                sent[t] = self.w.T @ a
            self.rows.append(sent)

    def dl_dinput(self, t, b, i):
        """dL/d(layer input)[t, b, i]: the layer below's dL/dS, queried at its entries."""
        return sum(self.beta ** (s - t) * v[i] for s, v in self.rows[b].items() if s >= t)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--batch", type=int, default=3)
    ap.add_argument("--window", type=float, default=0.3)
    args = ap.parse_args()
    beta, hidden, outputs = 0.9, 25, 4
    net = popsnn.Sequential(
        popsnn.Linear(30, hidden),
        popsnn.Leaky(beta=beta, sparse=sparse.window(args.window)),
        popsnn.Linear(hidden, hidden),
        popsnn.Leaky(beta=beta, sparse=sparse.window(args.window)),
        popsnn.Linear(hidden, outputs),
        popsnn.Leaky(beta=beta),
    )
    rng = np.random.default_rng(0)
    params = net.init_params(1, dtype=np.float64)
    for p in params:
        p["weight"] = p["weight"] * 3.0  # enough spikes for every layer to have entries
    x = (rng.random((args.steps, args.batch, 30)) < 0.2).astype(np.float64)
    rec = reference.forward(net, params, x)
    d_out = rng.standard_normal(rec.spikes[-1].shape)
    want = reference.backward(net, params, rec, d_out)
    # The readout (no rule) densely, as the reference does: dL/dS of layer 1 everywhere.
    readout = net.stages[2].neuron
    d_u = readout.surrogate.grad(rec.membranes[2] - readout.threshold) * d_out
    for t in range(args.steps - 2, -1, -1):
        d_u[t] += beta * d_u[t + 1]
    dl_ds1 = d_u @ params[2]["weight"]

    def layer(l, dl_ds, layer_in):
        stage = net.stages[l]
        return EntryLayer(
            stage.neuron, params[l], rec.membranes[l], rec.grad_masks[l], beta, dl_ds, layer_in
        )

    layer1 = layer(1, lambda t, b, j: dl_ds1[t, b, j], rec.spikes[0])
    layer0 = layer(0, layer1.dl_dinput, x)
    for l, got in ((1, layer1.grad), (0, layer0.grad)):
        kept = float(rec.grad_masks[l].mean())
        for k in ("weight", "bias"):
            scale = max(np.abs(want[l][k]).max(), 1e-30)
            err = np.abs(got[k] - want[l][k]).max() / scale
            print(f"layer {l} ({kept:.1%} of entries kept) d{k}: max error / max |grad| {err:.1e}")


if __name__ == "__main__":
    main()
