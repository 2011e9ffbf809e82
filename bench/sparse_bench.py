"""One sparse-backward case (Perez-Nieves & Goodman; Finkbeiner & Neftci) measured side by
side: popsnn's engine without a rule (dense) and with each rule on every hidden layer.

Per rule, beside the dense row: the test accuracy after a short training run from scratch;
the active fraction of (t, b, j) entries and the gradient error against the dense gradient
(dense NumPy reference, on the same weights and batch); the engine's wall-clock forward,
loss-and-gradient and whole training step, interleaved with the dense model's, and the
backward program's own time as popsnn's runtime measures it (per program, wall clock on this
CPU; loss-and-gradient - forward only where the batch runs in chunks); the trace memory the engine
allocated (measured: its profile's trace bytes) and its cost-model ESTIMATE of backward
cycles. Each rule's speed-up is against the dense timings of its own pair.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass, field

import numpy as np
from common import LR, Task, sparse_net, time_bursts, train_and_test
from estimates import backward_estimate_cycles, engine_memory_bytes

import popsnn
from popsnn import losses, optim, reference

# The sparse models' buffers start this much above the largest hidden layer's mean fraction
# of entries inside the rule (what the gradient trace holds), then grow on overflow: the
# spike buffers to their busiest (t, b), the trace to its total, each on its own.
ACTIVITY_MARGIN = 1.1


@dataclass
class SparseCase:
    """A network, its data and the rules compared with dense training. `activity` "fixed"
    is Finkbeiner & Neftci's worst case: every hidden neuron driven to spike at every step
    (a bias above threshold), for speed only (no accuracy runs)."""

    name: str
    task: Task
    hidden: int
    steps: int
    batch: int
    rules: tuple
    layers: int = 2
    train_steps: int = 0
    test_images: int = 0
    pretrain_steps: int = 0
    activity: str = "natural"
    # Hidden weights at initialisation x this: deep stacks are silent at popsnn's default
    # (PyTorch's) initialisation, and then no rule, nor dense training, has gradient to use.
    init_gain: float = 1.0
    paper: str = ""
    seed: int = 0
    extra: dict = field(default_factory=dict)


def rule_fields(rule) -> dict:
    if rule is None:
        return {"rule": "dense", "b_th": None}
    out = {"rule": rule.kind, "b_th": rule.value if rule.kind == "window" else None}
    if rule.kind == "one_sided":
        out["theta_grad"] = rule.value
    return out


def rule_label(row) -> str:
    if row.get("rule", "window" if row["b_th"] is not None else "dense") == "dense":
        return "dense"
    if row.get("rule") == "one_sided":
        return f"one-sided {row['theta_grad']:g}"
    return f"B_th {row['b_th']:g}"


# Perez-Nieves & Goodman's released code: dt 1 ms, membrane time constant 10 ms.
PAPER_BETA = math.exp(-0.1)


def _net(case: SparseCase, rule):
    shape = (case.task.num_inputs, case.hidden, rule, case.layers, case.task.num_classes)
    if case.extra.get("paper_constants"):
        return sparse_net(*shape, beta=PAPER_BETA, bias=False)
    return sparse_net(*shape)


def _paper_init(params: list, seed: int) -> list:
    """Their Fashion-MNIST initialisation: normal weights of standard deviation
    20 (1 - beta) / sqrt(fan_in); the readout's also x (1 - beta), the scale of its input."""
    rng = np.random.default_rng(seed)
    for k, p in enumerate(params):
        std = 20 * (1 - PAPER_BETA) / math.sqrt(p["weight"].shape[1])
        if k == len(params) - 1:
            std *= 1 - PAPER_BETA
        p["weight"] = rng.normal(0.0, std, p["weight"].shape).astype(np.float32)
    return params


def _init_params(case: SparseCase) -> list:
    params = _net(case, None).init_params(case.seed, np.float32)
    if case.extra.get("paper_constants"):
        return _paper_init(params, case.seed)
    for p in params[: case.layers]:
        p["weight"] *= case.init_gain
    return params


def dense_pretrained(case: SparseCase, task, params: list, minibatches: int) -> list:
    """`params` after `minibatches` of dense Adam training on the reference (the work and
    trace counts need no engine)."""
    model = popsnn.Model(
        _net(case, None),
        loss=losses.ce_max_membrane_loss(),
        optimizer=optim.Adam(lr=LR),
        device="reference",
        num_steps=case.steps,
        batch_size=case.batch,
        params=params,
    )
    xs, ys = task.sample(case.batch * minibatches, 1)
    for k in range(minibatches):
        sl = slice(k * case.batch, (k + 1) * case.batch)
        model.train_step(xs[:, sl], ys[sl])
    return model.get_params()


def _model(case, rule, params=None, device="cpu", **opts):
    return popsnn.Model(
        _net(case, rule),
        loss=losses.ce_max_membrane_loss(),
        optimizer=optim.Adam(lr=LR),
        device=device,
        num_steps=case.steps,
        batch_size=case.batch,
        seed=case.seed,
        params=_init_params(case) if params is None else params,
        **opts,
    )


def _grad_error(dense, approx, suffix="") -> dict:
    """Cosine similarity and relative norm error of two gradients (lists of param dicts),
    all parameters flattened into one vector."""
    a = np.concatenate([g.ravel() for layer in dense for g in layer.values()]).astype(np.float64)
    b = np.concatenate([g.ravel() for layer in approx for g in layer.values()]).astype(np.float64)
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    cos = float(a @ b / (na * nb)) if na and nb else float("nan")
    return {
        f"grad_cosine{suffix}": cos,
        f"grad_rel_norm_error{suffix}": float(np.linalg.norm(a - b) / na) if na else float("nan"),
    }


def trace_memory(model, hidden_layers: int = 2) -> dict:
    """The BPTT trace memory the engine allocated, MEASURED: its profile's
    `layer{l}_trace_bytes` (surrogate values plus spike ids and gradient-trace ids) per
    layer, summed over the hidden layers (those that carry the rule) and over all layers."""
    prof = model.profile()
    out, layer = {}, 0
    while f"layer{layer}_trace_bytes" in prof:
        for part in ("trace", "surrogate_trace", "id_trace"):
            out[f"layer{layer}_{part}_bytes"] = float(prof[f"layer{layer}_{part}_bytes"])
        out[f"layer{layer}_buffer_capacity"] = prof.get(f"layer{layer}_buffer_capacity")
        out[f"layer{layer}_trace_capacity"] = prof.get(f"layer{layer}_trace_capacity")
        out[f"layer{layer}_shard_size"] = prof.get(f"layer{layer}_shard_size")
        out[f"layer{layer}_grad_list_capacity"] = prof.get(f"layer{layer}_grad_list_capacity")
        # The engine's per-layer choice: a rule's layer too live for the compressed backward
        # runs the dense one (1), and the live fraction it counted.
        out[f"layer{layer}_dense_backward"] = prof.get(f"layer{layer}_dense_backward")
        out[f"layer{layer}_live_fraction"] = prof.get(f"layer{layer}_live_fraction")
        layer += 1
    if not layer:
        return {}
    hidden = range(min(hidden_layers, layer))
    out["trace_bytes_hidden"] = sum(out[f"layer{l}_trace_bytes"] for l in hidden)
    out["trace_bytes_all"] = sum(out[f"layer{l}_trace_bytes"] for l in range(layer))
    out["max_activity"] = prof.get("max_activity")
    out["trace_activity"] = prof.get("trace_activity")
    out["spike_activity"] = prof.get("spike_activity")
    out["grad_list_activity"] = prof.get("grad_list_activity")  # dL/dI lists (1: dense)
    return out


def exchange_bytes_per_call(model, x, y) -> int | None:
    """Bytes one loss_and_grad moves between tiles, COUNTED by popsnn's CPU runtime (its
    profile summary; no timing, so the machine's load does not matter)."""

    def total():
        found = re.search(
            r"exchange bytes\s+(\d+) within IPUs, (\d+) between IPUs",
            model.backend._engine.profile_summary(),
        )
        return int(found.group(1)) + int(found.group(2)) if found else None

    before = total()
    model.loss_and_grad(x, y)
    after = total()
    return after - before if before is not None and after is not None else None


# --------------------------------------------------------------------------- the parts


def _start_rows(case: SparseCase, repeats: int) -> list:
    settings = [None] + list(case.rules)
    return [
        {
            "experiment": "sparse",
            "case": case.name,
            **rule_fields(rule),
            "hidden": case.hidden,
            "layers": case.layers,
            "inputs": case.task.num_inputs,
            "classes": case.task.num_classes,
            "steps": case.steps,
            "batch": case.batch,
            "dataset": case.task.name,
            "data_source": case.task.source,
            "encoding": "events" if case.task.name in ("nmnist", "shd") else "latency",
            "activity": case.activity,
            "paper": case.paper,
            "repeats": repeats,
            "init_gain": case.init_gain,
            **case.extra,
            "_rule": rule,
        }
        for rule in settings
    ]


def _train_rows(case: SparseCase, rows: list):
    """Accuracy of every setting after `train_steps` minibatches from scratch; the densely
    trained weights (or `pretrain_steps` of dense training, or the initial weights) are where
    gradients and speed are compared. Fixed activity: its own biases, never trained."""
    trained = None
    if case.train_steps and case.activity == "natural":
        for row in rows:
            model = _model(case, row["_rule"])
            row.update(train_and_test(model, case.task, case.train_steps, case.test_images, 0))
            if row["_rule"] is None:
                trained = model.get_params()
            del model  # gigabytes at the papers' sizes: freed before the next is built
    elif case.pretrain_steps and case.activity == "natural":
        model = _model(case, None)
        train_and_test(model, case.task, case.pretrain_steps, 0, case.seed)
        trained = model.get_params()
        del model
        for row in rows:
            row["weights"] = f"after {case.pretrain_steps} dense minibatches"
    if trained is not None:
        return trained
    params = _init_params(case)
    if case.activity == "fixed":
        for p in params[: case.layers]:
            p["bias"][:] = 10.0  # far above the threshold (1): every neuron spikes every step
        for row in rows:
            row["weights"] = "initialisation, hidden biases 10 (every neuron spikes every step)"
    return params


def _gradient_rows(case: SparseCase, rows: list, params, x, y) -> dict:
    """Activity and gradient error of every rule against the dense gradient (reference), on
    `params` and at initialisation; returns the buffered (spike or candidate) masks."""
    h, loss = case.layers, losses.ce_max_membrane_loss()
    fixed = case.activity == "fixed"
    dense_net = _net(case, None)
    _, dense_grads, _ = reference.loss_and_grad(dense_net, params, x, y, loss)
    init = params if fixed else _init_params(case)
    _, dense_init, _ = reference.loss_and_grad(dense_net, init, x, y, loss)
    masks = {}
    for k, row in enumerate(rows):
        net = _net(case, row["_rule"])
        _, grads, rec = reference.loss_and_grad(net, params, x, y, loss)
        active = [float(m.mean()) for m in rec.grad_masks[:h]]
        row["active_fraction_per_layer"] = active
        row["active_fraction"] = float(np.mean(active))
        row["hidden_spike_rate"] = float(np.mean([s.mean() for s in rec.spikes[:h]]))
        row.update(_grad_error(dense_grads, grads))
        # The readout has no rule, its gradient is exact and dominates the norm: the hidden
        # layers' own error is the one that says what the rule costs.
        row.update(_grad_error(dense_grads[:h], grads[:h], "_hidden"))
        for l in range(h):
            row.update(_grad_error(dense_grads[l : l + 1], grads[l : l + 1], f"_layer{l}"))
            # Adam gives every coordinate a similar step whatever its size: weights the rule
            # leaves with no gradient at all matter more than the cosine suggests.
            row[f"zero_weight_grad_fraction_layer{l}"] = float(np.mean(grads[l]["weight"] == 0))
        _, grads0, rec0 = reference.loss_and_grad(net, init, x, y, loss)
        row.update(_grad_error(dense_init[:h], grads0[:h], "_hidden_at_init"))
        row["active_fraction_at_init"] = float(np.mean([m.mean() for m in rec0.grad_masks[:h]]))
        # What the id buffers must hold at a step: the spikes (the entries inside the rule
        # go to the gradient trace, sized by their total).
        masks[k] = [np.asarray(s) > 0 for s in rec.spikes[:h]]
        row["buffered_fraction_per_layer"] = [float(m.mean()) for m in masks[k]]
        row["trace_fraction_per_layer"] = [float(np.mean(m)) for m in rec.grad_masks[:h]]
    return masks


def _peak_fractions(masks, shard_sizes) -> list:
    """Per hidden layer, the largest fraction of one shard's neurons buffered at any (t, b):
    a buffer's capacity must cover the PEAK over (t, b, shard), not the mean."""
    peaks = []
    for m, size in zip(masks, shard_sizes):
        size = int(size or m.shape[-1])
        counts = [
            m[..., k : k + size].sum(axis=-1).max() / min(size, m.shape[-1] - k)
            for k in range(0, m.shape[-1], size)
        ]
        peaks.append(float(max(counts)))
    return peaks


def _engine(case: SparseCase, row: dict, params, x, y, **extra):
    """The engine model of a row, its buffers sized just above the activity measured on
    these weights and inputs (a (t, b) whose shard holds more grows them: the engine
    recompiles and redoes the step, nothing is dropped). One training step grows them and
    gives the cost model's estimates; then the weights go back and the learning rate to 0,
    so that every timed call sees the same weights, hence the same activity. `extra`: more
    device options (e.g. grad_list_activity=1.0: dL/dI exchanged dense)."""
    opts = {}
    if row["_rule"] is not None:
        least = 1.0 / case.hidden
        start = min(1.0, max(ACTIVITY_MARGIN * max(row["trace_fraction_per_layer"]), least))
        spikes = min(1.0, max(ACTIVITY_MARGIN * max(row["buffered_fraction_per_layer"]), least))
        opts.update(
            max_activity=spikes,  # one step's buffer: grows to the busiest step
            spike_activity=spikes,
            trace_activity=start,
            on_overflow="grow",
        )
        row["max_activity_start"] = row["spike_activity_start"] = spikes
        row["trace_activity_start"] = start
    opts.update(extra)  # after the rule's sizes: e.g. trace_activity=1.0, the dense backward
    m = _model(case, row["_rule"], params=params, **opts)
    m.train_step(x, y)
    est = {
        "backward_estimate_cycles": backward_estimate_cycles(m),
        "engine_memory_bytes_estimate": engine_memory_bytes(m),
        **trace_memory(m, case.layers),
    }
    m.set_params(params)
    m.set_learning_rate(0.0)
    est["exchange_bytes_per_call"] = exchange_bytes_per_call(m, x, y)
    return m, est


def _program_meter(model, prog: int):
    """(runs, seconds) so far of one of the engine's programs, as popsnn's runtime measured
    them on this CPU (wall clock around that program alone)."""

    def read():
        p = model.backend._engine.profile()
        return p.get(f"program{prog}_runs", 0.0), p.get(f"program{prog}_seconds", 0.0)

    return read


def _meters(name: str, m) -> dict:
    """The batch in one piece: program 0 is the forward, 2 the loss and backward (what
    loss_and_grad runs after the forward). In chunks the backward shares its program with
    the forward: not timed alone (the derived figure stays)."""
    if m.backend._engine.layout().get("sample_chunks", 1) != 1:
        return {}
    return {f"{name}/grad": _program_meter(m, 2), f"{name}/infer": _program_meter(m, 0)}


def _time_rows(case: SparseCase, rows: list, masks: dict, params, x, y, repeats: int):
    """Interleaved timings in bursts (common.time_bursts), two engine models alive at a time
    (each holds gigabytes at the papers' sizes): the dense one, and each rule's in turn
    against it. The backward is timed alone where the runtime can (`_meters`)."""

    def calls(m):
        return {
            "grad": lambda: m.loss_and_grad(x, y),
            "infer": lambda: m.infer(x),
            "train": lambda: m.train_step(x, y),
        }

    dense_model, est = _engine(case, rows[0], params, x, y)
    rows[0].update(est)
    shards = [est.get(f"layer{l}_shard_size") for l in range(case.layers)]
    for k, row in enumerate(rows):
        row["buffered_peak_fraction_per_layer"] = _peak_fractions(masks[k], shards)
    dense_t = []
    for row in rows[1:] or [None]:
        fns = {f"dense/{k}": f for k, f in calls(dense_model).items()}
        meters = _meters("dense", dense_model)
        m = None
        if row is not None:
            m, est = _engine(case, row, params, x, y)
            row.update(est)
            fns.update({f"sparse/{k}": f for k, f in calls(m).items()})
            meters.update(_meters("sparse", m))
        t = time_bursts(fns, repeats, meters=meters)
        dense_t.append(t)
        if row is not None:
            _timing_fields(row, t, "sparse")
            dense = {}
            _timing_fields(dense, t, "dense")
            row["dense_backward_s_same_run"] = dense["backward_s"]
            row["dense_backward_s_derived_same_run"] = dense["backward_s_derived"]
            row["dense_train_step_s_same_run"] = t["dense/train"]
            row["backward_speedup"] = _ratio(dense["backward_s"], row["backward_s"])
            row["backward_speedup_derived"] = _ratio(
                dense["backward_s_derived"], row["backward_s_derived"]
            )
            row["train_step_speedup"] = t["dense/train"] / t["sparse/train"]
        del m, fns, meters

    def med(key):
        vals = [t[key] for t in dense_t if t.get(key) is not None]
        return statistics.median(vals) if vals else None

    keys = ("grad", "infer", "train", "grad:meter", "grad:meter_min", "infer:meter")
    _timing_fields(rows[0], {f"dense/{k}": med(f"dense/{k}") for k in keys}, "dense")
    rows[0]["backward_speedup"] = 1.0 if rows[0]["backward_s"] else None
    rows[0]["train_step_speedup"] = 1.0


def _ratio(a, b):
    return a / b if a and b else None


def _timing_fields(row, t: dict, name: str):
    """backward_s: the backward program's own time per call (median over the bursts; _min:
    their least), else (chunked batch) the derived one; backward_s_derived = loss_and_grad -
    infer, two separately timed calls, kept for comparison."""
    grad_s, infer_s = t[f"{name}/grad"], t[f"{name}/infer"]
    derived = max(grad_s - infer_s, 0.0)
    measured = t.get(f"{name}/grad:meter")
    row.update(
        forward_s=infer_s,
        forward_program_s=t.get(f"{name}/infer:meter"),
        loss_and_grad_s=grad_s,
        backward_s=measured if measured is not None else derived,
        backward_s_min=t.get(f"{name}/grad:meter_min"),
        backward_timing="program" if measured is not None else "derived",
        backward_s_derived=derived,
        train_step_s=t[f"{name}/train"],
    )


def _compare(rows: list):
    """Each row against the dense one: trace memory saved (measured, over the hidden layers,
    which carry the rule, and over all layers), the cost model's backward speed-up
    (estimate) and the accuracy change."""
    dense = rows[0]
    for row in rows:
        for part, key in (
            ("hidden", "trace_memory_saved_pct"),
            ("all", "trace_memory_saved_pct_all_layers"),
        ):
            d, r = dense.get(f"trace_bytes_{part}"), row.get(f"trace_bytes_{part}")
            row[key] = 100.0 * (1 - r / d) if d and r is not None else None
        if dense["backward_estimate_cycles"] and row["backward_estimate_cycles"]:
            row["backward_speedup_estimate"] = (
                dense["backward_estimate_cycles"] / row["backward_estimate_cycles"]
            )
        if dense.get("test_accuracy") is not None and row.get("test_accuracy") is not None:
            row["accuracy_change"] = row["test_accuracy"] - dense["test_accuracy"]


def run_case(case: SparseCase, repeats: int) -> list:
    """The rows of one case: dense first, then one per rule (see the module docstring)."""
    rows = _start_rows(case, repeats)
    params = _train_rows(case, rows)
    x, y = case.task.sample(case.batch, case.seed)
    masks = _gradient_rows(case, rows, params, x, y)
    _time_rows(case, rows, masks, params, x, y, repeats)
    _compare(rows)
    for row in rows:
        del row["_rule"]
    return rows
