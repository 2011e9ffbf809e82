"""The sparse backward's work per layer and pass (issue 13): what popsnn's dense backward does
against what the rule leaves, counted from one real minibatch's masks, so the ratio is the
ceiling of the backward's speed-up with the engine's algorithm (every unit of work costing
the same on both sides).

Passes, per layer (784-200-200-10 as seed 003 unless --hidden; the reference's record; the
counts are bench/trace_form.py's count_macs plus the rows and the readout):
- carry: the BPTT entries updated (dense: every (t, b, j); rule: the live ones, an entry
  at or before its neuron's last active step);
- dW: the weight gradient's multiply-adds (both skip the input's zeros: non-zero inputs x
  neurons, live neurons only for the rule);
- dL/dS: the products forming the layer below's dL/dS (dense: W . dL/dI at every entry; rule:
  one dot per active entry below, over this layer's dL/dI list where the engine takes it
  (listDotsApply), else over the whole row; `every dot over the live list`: the list always);
- rows: the (t, b, shard) rows walked (dense: all; rule: those with anything live); the rule's
  per-row cost (~100 ns measured, docs/performance/sparse-backward.md) is a floor no
  multiply-add count shows.
The readout has no rule: the engine runs its dense backward (`readout as run`), while the
live form would do its carry and dW only over its non-zero g and the layer below's live
entries (`readout in proportion`). Units: one multiply-add or one entry update each.

    .venv/bin/python bench/sparse_work.py [--dataset fashion] [--hidden 200] [--steps 100]
        [--batch 256] [--b-th 0.05 0.2] [--pretrain 30] [--out F.json]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from trace_form import count_macs, count_parser, dead_rows, window_records, write_rows  # noqa: E402


def passes(net, rec, d_spikes, d_mem, shard: int) -> list:
    """Per layer, dense and rule work of each pass (count_macs' counts, renamed), and rows."""
    rows = count_macs(net, rec, d_spikes, d_mem, shard=shard)
    out = []
    for l, r in enumerate(rows):
        T, B, n = rec.grad_masks[l].shape
        shards = -(-n // shard)
        x = rec._input if l == 0 else rec.spikes[l - 1]
        if x.ndim == 2:
            x = np.broadcast_to(x, (T, *x.shape))
        nnz_x = int((x != 0).sum())
        readout = l == len(rows) - 1
        dense_dlds = r["popsnn_dense"] - nnz_x * n - T * B * n  # W . dL/dI at every entry
        p = {
            "layer": l,
            "active_fraction": r["active_fraction"],
            "live_fraction": r["live_fraction"],
            "carry": (T * B * n, T * B * n if readout else r["live_carry"]),
            "dW": (nnz_x * n, nnz_x * n if readout else r["live_dw"]),
            "dL/dS": (dense_dlds, r["engine_list_eps"]),
            "dL/dS_over_live": (dense_dlds, r["live_eps"]),  # every dot over the list
            "rows": (T * B * shards, T * B * shards - dead_rows(rec.grad_masks[l], shard)),
        }
        if readout:  # what the live form would leave of the readout's dense backward
            p["readout_in_proportion"] = (r["live_carry"], r["live_dw"])
        out.append(p)
    return out


def totals(layers) -> dict:
    """Summed work (carry + dW + dL/dS, rows apart), dense against the rule as run and against
    the rule with the readout in proportion: the work ratios are the speed-up ceilings."""
    keys = ("carry", "dW", "dL/dS")
    dense = sum(p[k][0] for p in layers for k in keys)
    rule = sum(p[k][1] for p in layers for k in keys)
    c, w = layers[-1]["readout_in_proportion"]
    lean = rule - layers[-1]["carry"][1] - layers[-1]["dW"][1] + c + w
    dots = sum(p["dL/dS"][1] - p["dL/dS_over_live"][1] for p in layers)
    return {
        "ceiling_every_dot_over_live": dense / (lean - dots),
        "dense_work": dense,
        "rule_work": rule,
        "ceiling": dense / rule,
        "rule_work_readout_in_proportion": lean,
        "ceiling_readout_in_proportion": dense / lean,
        "dense_rows": sum(p["rows"][0] for p in layers[:-1]),
        "rule_rows": sum(p["rows"][1] for p in layers[:-1]),
    }


def _fmt(pair) -> str:
    d, s = pair
    return f"{d:.3g} / {s:.3g} ({d / max(s, 1):.1f}x)"


def main() -> None:
    args = count_parser(__doc__, [0.05, 0.2], 30).parse_args()
    results = []
    for b_th, net, rec, d_spikes, d_mem in window_records(args, "work"):
        layers = passes(net, rec, d_spikes, d_mem, args.shard)
        tot = totals(layers)
        results.append({"b_th": b_th, "layers": layers, **tot})
        print(f"T {args.steps}, B {args.batch}, window({b_th}): dense / rule (ratio)")
        for p in layers:
            print(
                f"  layer {p['layer']}: active {100 * p['active_fraction']:.1f}%, live "
                f"{100 * p['live_fraction']:.1f}%; carry {_fmt(p['carry'])}; dW {_fmt(p['dW'])}; "
                f"dL/dS below {_fmt(p['dL/dS'])}; rows {_fmt(p['rows'])}"
            )
        print(
            f"  total {tot['dense_work']:.3g} / {tot['rule_work']:.3g}: ceiling "
            f"{tot['ceiling']:.1f}x; readout in proportion "
            f"{tot['rule_work_readout_in_proportion']:.3g}: "
            f"{tot['ceiling_readout_in_proportion']:.1f}x,"
            f" and every dot over the live list {tot['ceiling_every_dot_over_live']:.1f}x;"
            f" hidden rows walked {tot['rule_rows']} of {tot['dense_rows']}"
        )
    write_rows(args, results)


if __name__ == "__main__":
    main()
