"""The active-entry ("input-trace") backward of a Leaky stack, as a NumPy model, and the
multiply-adds of three backward forms counted from a real minibatch's masks (issue 13).

With one beta per layer and a reset that does not cut the leak path per entry (subtract or
none; the zero reset multiplies the carry by 1 - R[t+1] and keeps the live form), write
g_j[s] = m_j[s] s'_j[s] eps_j[s] (+ a membrane loss's dL/dU), non-zero only at active
entries. The BPTT carry delta_j[t] = g_j[t] + beta delta_j[t+1] then never needs forming:
- dW_ij = sum_t delta_j[t] x_i[t] = sum_s g_j[s] xt_i[s], xt_i[s] = sum_{t<=s} beta^(s-t) x_i[t]
  (a forward filter of the layer's input), and the bias's input trace is the filter of 1;
- eps'_i[t] = sum_j W_ij delta_j[t] = yt_i[t], yt[t] = y[t] + beta yt[t+1], y[s] = W g[s]
  (products over the active entries only, then one backward filter).
`trace_form_grads` computes both from the reference's record and is checked against the
reference's BPTT (tests/bench/test_trace_form.py); `count_macs` counts, from the masks, what
the dense products, the engine's live form and the trace form each multiply.

    .venv/bin/python bench/trace_form.py [--dataset fashion] [--hidden 200] [--steps 100]
        [--batch 256] [--b-th 0.05 0.2 0.5 0.95] [--pretrain 30]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from popsnn import Leaky, Synaptic, reference  # noqa: E402


def trace_form_applies(neuron) -> bool:
    """A pure function of the layer's configuration: one fixed beta, a reset that leaves the
    leak path whole (subtract, none), no second current (Synaptic needs a second-order filter,
    RLeaky's recurrence reaches the carry), beta > 0 (the bias trace needs no division)."""
    return (
        type(neuron) is Leaky
        and not isinstance(neuron, Synaptic)
        and np.ndim(neuron.beta) == 0
        and not getattr(neuron, "learn_beta", False)
        and not getattr(neuron, "learn_threshold", False)
        and neuron.reset_mechanism in ("subtract", "none")
    )


def forward_filter(x: np.ndarray, beta: float) -> np.ndarray:
    """xt[s] = x[s] + beta xt[s-1] over axis 0."""
    xt = np.array(x, copy=True)
    for s in range(1, xt.shape[0]):
        xt[s] += beta * xt[s - 1]
    return xt


def backward_filter(y: np.ndarray, beta: float) -> np.ndarray:
    """yt[t] = y[t] + beta yt[t+1] over axis 0."""
    yt = np.array(y, copy=True)
    for t in range(yt.shape[0] - 2, -1, -1):
        yt[t] += beta * yt[t + 1]
    return yt


def _active_g(neuron, U, mask, eps, g_mem):
    dsdu = neuron.surrogate.grad(U - U.dtype.type(neuron.threshold))
    if neuron.sparse is not None:
        dsdu = dsdu * mask
    g = dsdu * eps
    return g if g_mem is None else g + g_mem


def trace_form_grads(net, params, rec, d_spikes, d_membranes=None) -> list:
    """Weight and bias gradients of a Linear/Leaky stack from its forward record, every
    product over active entries only (g); every layer must pass trace_form_applies."""
    T = rec.num_steps
    grads = [None] * len(net)
    eps, g_mem = d_spikes, d_membranes
    for l in reversed(range(len(net))):
        neuron, p = net.stages[l].neuron, params[l]
        if not trace_form_applies(neuron):
            raise ValueError(f"layer {l}: the trace form needs a Leaky layer with one fixed beta")
        beta = rec.membranes[l].dtype.type(neuron.beta)
        g = _active_g(neuron, rec.membranes[l], rec.grad_masks[l], eps, g_mem)
        x = rec._input if l == 0 else rec.spikes[l - 1]
        if x.ndim == 2:  # direct input: the same x at every step
            x = np.broadcast_to(x, (T, *x.shape))
        xt = forward_filter(x, beta)
        n = g.shape[-1]
        grads[l] = {"weight": g.reshape(-1, n).T @ xt.reshape(-1, x.shape[-1])}
        if "bias" in p:
            ones = forward_filter(np.ones((T, 1, 1), g.dtype), beta)
            grads[l]["bias"] = (g * ones).sum(axis=(0, 1))
        if l > 0:
            eps = backward_filter(g @ p["weight"], beta)
        g_mem = None
    return grads


HEADER = Path(__file__).resolve().parents[1] / "codelets" / "BackwardGather.hpp"


def list_dots_apply(entries, live, P):
    """codelets/BackwardGather.hpp's listDotsApply, its constants read from the header: an
    entry's dot over the next layer's dL/dI list (True) or over the gathered row."""
    text = HEADER.read_text()
    c = {k: int(re.search(rf"\b{k} = (\d+)", text).group(1)) for k in LIST_CONSTANTS}
    list_cost = entries * (c["LIST_DOT_PER_LIVE"] * live + c["LIST_DOT_PER_ENTRY"])
    return list_cost <= c["GATHER_PER_ROW"] + c["GATHER_PER_LIVE"] * live + entries * P


LIST_CONSTANTS = ("LIST_DOT_PER_LIVE", "LIST_DOT_PER_ENTRY", "GATHER_PER_ROW", "GATHER_PER_LIVE")


def engine_list_eps(below_mask, live, n, shard):
    """The multiply-adds of the engine's dots at the entries below (below_mask [T, B, n_below])
    where this layer sends dL/dI as lists: per (t, b) and shard below, over the list's `live`
    [T, B] entries where listDotsApply says so, else over the whole row of n."""
    P = (n + 15) // 16 * 16
    total = 0
    for first in range(0, below_mask.shape[-1], shard):
        e = below_mask[..., first : first + shard].sum(axis=-1)
        pick = np.vectorize(lambda k, m: list_dots_apply(int(k), int(m), P))(e, live)
        total += int(np.where(pick, e * live, e * n).sum())
    return total


def dead_rows(mask, shard) -> int:
    """(step, sample) rows of each shard of `shard` neurons with nothing live (no entry at that
    step or a later one): the rows the engine's backward skips whole (skipDeadRow)."""
    total = 0
    for first in range(0, mask.shape[-1], shard):
        row_any = mask[..., first : first + shard].any(axis=-1)  # [T, B]
        total += int((~np.flip(np.logical_or.accumulate(np.flip(row_any, 0), axis=0), 0)).sum())
    return total


def count_macs(net, rec, d_spikes, d_membranes=None, shard=None) -> list:
    """Per layer, the multiply-adds of the weight gradient and of the gradient sent down
    (eps of the layer below, needed at its active entries), counted from the record:
    dense (every entry), live (the engine's form: the carry over live neurons, dW over
    input spikes x live neurons, eps as one dot per active entry below over this layer's
    live neurons) and trace (dW over active entries x the input trace's non-zeros, eps as
    y = W g over active entries, and both filters), and popsnn's dense backward (the live
    form with every neuron live: its weight gradient already skips the input's zeros). The
    output layer's active entries are those with a non-zero g (its rule's dL/dS or dL/dU).
    engine_list_eps: the engine since the list dots (engine_list_eps above; hidden layers after
    the first send lists; `shard`: the layer below's shard size, None for one shard)."""
    out = []
    for l in range(len(net)):
        mask = rec.grad_masks[l]
        if l == len(net) - 1:
            mask = (np.asarray(d_spikes) * mask != 0) | (
                False if d_membranes is None else np.asarray(d_membranes) != 0
            )
        T, B, n = mask.shape
        x = rec._input if l == 0 else rec.spikes[l - 1]
        if x.ndim == 2:
            x = np.broadcast_to(x, (T, *x.shape))
        n_in = x.shape[-1]
        active = mask.sum(axis=-1)  # [T, B]
        live = np.flip(np.logical_or.accumulate(np.flip(mask, 0), axis=0), 0).sum(axis=-1)
        nnz_x = (x != 0).sum(axis=-1)
        nnz_xt = np.logical_or.accumulate(x != 0, axis=0).sum(axis=-1)
        below = rec.grad_masks[l - 1].sum(axis=-1) if l > 0 else np.zeros_like(active)
        row = {
            "layer": l,
            "active_fraction": float(mask.mean()),
            "live_fraction": float(live.sum() / mask.size),
            "dead_row_fraction": dead_rows(mask, shard or n) / (T * B * -(-n // (shard or n))),
            "input_nonzero_fraction": float(nnz_x.sum() / (T * B * n_in)),
            "input_trace_nonzero_fraction": float(nnz_xt.sum() / (T * B * n_in)),
            "dense_dw": T * B * n * n_in,
            "dense_eps": T * B * n * n_in if l > 0 else 0,
            "live_dw": int((live * nnz_x).sum()),
            "live_eps": int((below * live).sum()),
            "live_carry": int(live.sum()),
            # The engine today: one dot per active entry below over this whole layer's
            # (zero-padded) dL/dI row, not over its live neurons (perf: LifBackward's dotPadded).
            "engine_eps": int(below.sum()) * n,
            "engine_list_eps": (
                engine_list_eps(
                    rec.grad_masks[l - 1], live, n, shard or rec.grad_masks[l - 1].shape[-1]
                )
                if 0 < l < len(net) - 1
                else int(below.sum()) * n
            ),
            "popsnn_dense": int(nnz_x.sum()) * n + (T * B * n * n_in if l > 0 else 0) + T * B * n,
            "trace_dw": int((active * nnz_xt).sum()),
            "trace_eps": int(active.sum()) * n_in if l > 0 else 0,
            "trace_filters": T * B * n_in * (2 if l > 0 else 1),
        }
        out.append(row)
    return out


def _totals(rows) -> dict:
    dense = sum(r["dense_dw"] + r["dense_eps"] for r in rows)
    live = sum(r["live_dw"] + r["live_eps"] + r["live_carry"] for r in rows)
    trace = sum(r["trace_dw"] + r["trace_eps"] + r["trace_filters"] for r in rows)
    ours = sum(r["popsnn_dense"] for r in rows)
    engine = live - sum(r["live_eps"] - r["engine_eps"] for r in rows)
    engine_lists = live - sum(r["live_eps"] - r["engine_list_eps"] for r in rows)
    return {
        "dense": dense,
        "popsnn_dense": ours,
        "live": live,
        "engine": engine,
        "engine_lists": engine_lists,
        "engine_lists_x_popsnn_dense": ours / engine_lists,
        "trace": trace,
        "engine_x_popsnn_dense": ours / engine,
        "live_x_popsnn_dense": ours / live,
        "trace_x_popsnn_dense": ours / trace,
        "trace_x_dense": dense / trace,
    }


def count_parser(doc: str, b_th: list, pretrain: int) -> argparse.ArgumentParser:
    """The counting scripts' common options (this one and sparse_work.py)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--dataset", default="fashion")
    ap.add_argument("--hidden", type=int, default=200)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--b-th", type=float, nargs="+", default=b_th)
    ap.add_argument("--pretrain", type=int, default=pretrain, help="dense minibatches first")
    ap.add_argument("--shard", type=int, default=100, help="hidden shard size (cpu: 2 tiles)")
    ap.add_argument("--out", default="", help="write the rows as JSON here")
    return ap


def window_records(args, name: str):
    """Per window B_th of `args.b_th`: (b_th, net, its reference record, dL/dS, dL/dU) on one
    latency-coded minibatch, after `args.pretrain` dense minibatches."""
    from event_tasks import latency_task
    from sparse_bench import SparseCase, _init_params, _net, dense_pretrained

    from popsnn import losses, sparse

    task = latency_task(args.dataset, args.steps)
    case = SparseCase(name, task, args.hidden, args.steps, args.batch, rules=())
    params = _init_params(case)
    if args.pretrain:
        params = dense_pretrained(case, task, params, args.pretrain)
    x, y = task.sample(args.batch, 0)
    for b_th in args.b_th:
        net = _net(case, sparse.window(b_th))
        rec = reference.forward(net, params, x)
        _, d_spikes, d_mem = reference._loss_terms(losses.ce_max_membrane_loss(), rec, y)
        yield b_th, net, rec, d_spikes, d_mem


def write_rows(args, results: list) -> None:
    if args.out:
        Path(args.out).write_text(json.dumps({"args": vars(args), "rows": results}, indent=1))
    print(f"load {os.getloadavg()[0]:.1f}")


def main() -> None:
    args = count_parser(__doc__, [0.05, 0.2, 0.5, 0.95], 0).parse_args()
    results = []
    for b_th, net, rec, d_spikes, d_mem in window_records(args, "trace_form"):
        rows = count_macs(net, rec, d_spikes, d_mem, shard=args.shard)
        tot = _totals(rows)
        results.append({"b_th": b_th, "layers": rows, **tot})
        print(
            f"B_th {b_th}: active {[round(r['active_fraction'], 4) for r in rows]}, live "
            f"{[round(r['live_fraction'], 4) for r in rows]}, rows with nothing live "
            f"{[round(r['dead_row_fraction'], 4) for r in rows]}, input trace non-zero "
            f"{[round(r['input_trace_nonzero_fraction'], 3) for r in rows]}; MACs dense "
            f"{tot['dense']:.3e}, popsnn dense {tot['popsnn_dense']:.3e}, live {tot['live']:.3e} "
            f"({tot['live_x_popsnn_dense']:.1f}x), engine {tot['engine']:.3e} "
            f"({tot['engine_x_popsnn_dense']:.1f}x), with list dots {tot['engine_lists']:.3e} "
            f"({tot['engine_lists_x_popsnn_dense']:.1f}x), trace {tot['trace']:.3e} "
            f"({tot['trace_x_popsnn_dense']:.1f}x popsnn dense, {tot['trace_x_dense']:.1f}x "
            f"dense products); per layer dW live/trace "
            f"{[(r['live_dw'], r['trace_dw']) for r in rows]}, eps live/trace(+filters) "
            f"{[(r['live_eps'], r['trace_eps'], r['trace_filters']) for r in rows]}"
        )
    write_rows(args, results)


if __name__ == "__main__":
    main()
