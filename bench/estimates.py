"""IPU figures from popsnn's cost model (device="ipu-model"): ESTIMATES, never measurements
on an IPU, labelled so in every row. The DSNN on one Mk2 beside Sun et al.'s measured figures
(`exp_ipu`), and Finkbeiner & Neftci's weak scaling over many IPUs (`exp_weak_scaling`); also
the parsers of the engine's profile text that the sparse experiments use.
"""

from __future__ import annotations

import re
import time

from common import LR, sparse_net
from throughput import dsnn_workload

import popsnn
from popsnn import optim

# Sun et al.'s measured Mk2 figures (Sun et al. (IPU), see docs/papers.md), shown beside our
# estimates.
SEED000_IPU_DSNN_IMAGES_PER_S = 46_297
SEED000_IPU_POPULATION_IMAGES_PER_S = 145_000


def _profile_rows(summary: str) -> list:
    """(name, execs, cycles per exec) of every program step in the engine's profile summary
    table. The engine exposes its per-phase ESTIMATES only as this text (see the README)."""
    rows = []
    for line in summary.splitlines():
        tok = line.split()
        if len(tok) >= 9 and tok[-8] in ("compute", "exchange") and tok[-7].isdigit():
            name = line[: line.rfind(tok[-8])].strip()
            rows.append((name, int(tok[-7]), float(tok[-6])))
    return rows


def backward_estimate_cycles(model) -> float | None:
    """The runtime's cost-model ESTIMATE of backward cycles per train step (rows of the
    backward phase: layer backward, weight gradients and their exchanges), or None."""
    prof = model.profile()
    steps = prof.get("train_steps") or 0
    rows = _profile_rows(prof.get("estimate_summary", ""))
    if not steps or not rows:
        return None
    total = sum(
        e * c
        for name, e, c in rows
        if "backward" in name or "weight_grad" in name or "grad_out" in name
    )
    return total / steps


def engine_memory_bytes(model) -> float | None:
    """All the memory the engine's graph allocates over its tiles (the profile summary's
    "Memory (estimate): X MiB in total" line), in bytes, or None."""
    m = re.search(
        r"Memory \(estimate\):\s*([0-9.]+)\s*(KiB|MiB|GiB)\s+in total",
        model.profile().get("estimate_summary", ""),
    )
    if not m:
        return None
    return float(m.group(1)) * {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[m.group(2)]


def _top_phases(prof: dict, n: int) -> list:
    """The n program steps with the most ESTIMATED cycles per train step, with their share
    of the total: where the cost model says the time goes."""
    rows = _profile_rows(prof.get("estimate_summary", ""))
    steps = prof.get("train_steps") or 1
    total = sum(e * c for _, e, c in rows) or 1.0
    merged: dict = {}
    for name, e, c in rows:
        merged[name] = merged.get(name, 0.0) + e * c
    top = sorted(merged.items(), key=lambda kv: -kv[1])[:n]
    return [{"step": k, "cycles_per_train_step": v / steps, "share": v / total} for k, v in top]


def exp_ipu(
    batches=(128, 64, 32, 16, 8, 4, 2, 1),
    steps_run=2,
    hidden=1000,
    population=True,
    tiles_per_ipu=None,
):
    """The DSNN (and the one-step, 500-output population code) on the runtime's Mk2
    geometry (device="ipu-model", 1 IPU x 1,472 tiles x 624 KiB unless told otherwise): the
    largest batch of `batches` that fits, and the runtime's cost-model ESTIMATE of images/s
    there. ESTIMATES, never measurements on an IPU; Sun et al.'s measured figures beside them."""
    from popsnn import engine

    rows = []
    configs = [("dsnn", dict(hidden=hidden, steps=25), SEED000_IPU_DSNN_IMAGES_PER_S)]
    if population:
        configs.append(
            (
                "population",
                dict(hidden=hidden, steps=1, outputs=500, population=True),
                SEED000_IPU_POPULATION_IMAGES_PER_S,
            )
        )
    opts = {} if tiles_per_ipu is None else {"tiles_per_ipu": tiles_per_ipu}
    for name, cfg, paper in configs:
        row = {
            "experiment": "ipu",
            "network": name,
            **cfg,
            "seed000_measured_mk2_images_per_s": paper,
            "note": "estimate from popsnn's IPU cost model on the ipu-model device, not "
            "measured on an IPU",
        }
        refused = {}
        for b in batches:
            work = dsnn_workload(batch=b, **cfg)
            try:
                model = popsnn.Model(
                    work.net,
                    loss=work.loss,
                    optimizer=optim.Adam(lr=work.lr),
                    device="ipu-model",
                    num_steps=work.num_steps,
                    batch_size=b,
                    seed=work.seed,
                    **opts,
                )
            except engine.NetworkDoesNotFit as err:
                refused[b] = str(err).split(" Fix:")[0]
                continue
            t0 = time.perf_counter()
            for _ in range(steps_run):
                model.train_step(work.x, work.y)
            wall = (time.perf_counter() - t0) / steps_run
            prof = model.profile()
            est_s = prof["estimate_seconds"] / prof["train_steps"]
            row.update(
                {
                    "batch": b,
                    "tiles": prof.get("tiles"),
                    "estimate_seconds_per_step": est_s,
                    "estimate_images_per_s": b / est_s,
                    "estimate_over_seed000_measured": b / est_s / paper,
                    "estimate_max_tile_bytes": prof.get("max_tile_bytes"),
                    "estimate_top_phases": _top_phases(prof, 5),
                    "simulation_wall_s_per_step": wall,
                }
            )
            break
        row["batches_refused"] = refused
        if "batch" not in row:
            row["estimate_images_per_s"] = None
        rows.append(row)
    return rows


def weak_scaling_net(inputs: int, width: int, layers: int, classes: int, rule):
    """Finkbeiner & Neftci's scaling network: `layers` Leaky layers of `width` neurons with
    `rule`, then a readout that never fires."""
    return sparse_net(inputs, width, rule, layers, classes)


def exp_weak_scaling(
    ipus=(1, 2, 4, 8, 16),
    layers_per_ipu=12,
    width=1000,
    steps=25,
    batch=8,
    max_activity=0.05,
    tiles_per_ipu=None,
    seed=0,
):
    """Finkbeiner & Neftci's weak scaling as cost-model ESTIMATES: per number of IPUs, a
    network of `layers_per_ipu` x IPUs hidden layers of `width` (so the neurons per IPU stay
    fixed: 16 IPUs x 12 x 1,000 = 192,000 neurons, ~190 M weights: their 190k neurons and
    180 M parameters point to depth, as dense layers' weights grow with the square of the
    width), the one-sided rule,
    id buffers of `max_activity` (their 5%), on a generated SHD-format batch; the estimated
    time per training step and the weak-scaling efficiency t(1 IPU) / t(k IPUs). ESTIMATES
    from the ipu-model device, never measurements on an IPU."""
    from event_tasks import event_task

    from popsnn import sparse

    task = event_task("shd", steps, max(batch, 20), 1, seed)  # every class once at least
    x, y = task.sample(batch, seed)
    rows = []
    for k in ipus:
        layers = layers_per_ipu * k
        net = weak_scaling_net(
            task.num_inputs, width, layers, task.num_classes, sparse.one_sided(0.9)
        )
        row = {
            "experiment": "weak_scaling",
            "ipus": k,
            "hidden_layers": layers,
            "width": width,
            "neurons": layers * width,
            "parameters": sum(p.size for layer in net.init_params(seed) for p in layer.values()),
            "steps": steps,
            "batch": batch,
            "max_activity": max_activity,
            "data_source": task.source,
            "note": "estimate from popsnn's IPU cost model on the ipu-model device, not "
            "measured on an IPU",
        }
        opts = {"num_ipus": k, "max_activity": max_activity, "on_overflow": "grow"}
        if tiles_per_ipu:
            opts["tiles_per_ipu"] = tiles_per_ipu
        row.update(_estimate_step(net, x, y, steps, batch, seed, opts))
        rows.append(row)
    base = next((r for r in rows if r.get("estimate_seconds_per_step")), None)
    # 1 = perfect weak scaling: k IPUs take as long for k times the neurons as one for one.
    for r in rows:
        if base and r.get("estimate_seconds_per_step"):
            r["weak_scaling_efficiency_estimate"] = (
                base["estimate_seconds_per_step"] / r["estimate_seconds_per_step"]
            )
    return rows


def _estimate_step(net, x, y, steps, batch, seed, opts) -> dict:
    """One training step of `net` on the ipu-model device: the cost model's ESTIMATED time
    and where it goes, or why the network was refused."""
    from popsnn import engine, losses

    t0 = time.perf_counter()
    try:
        model = popsnn.Model(
            net,
            loss=losses.ce_max_membrane_loss(),
            optimizer=optim.Adam(lr=LR),
            device="ipu-model",
            num_steps=steps,
            batch_size=batch,
            seed=seed,
            **opts,
        )
        model.train_step(x, y)
    except engine.NetworkDoesNotFit as err:
        return {"refused": str(err).split(" Fix:")[0]}
    prof = model.profile()
    est_s = prof["estimate_seconds"] / prof["train_steps"]
    return {
        "tiles": prof.get("tiles"),
        "max_activity_used": prof.get("max_activity"),
        "estimate_seconds_per_step": est_s,
        "estimate_samples_per_s": batch / est_s,
        "estimate_exchange_bytes_between_ipus": prof.get("estimate_exchange_bytes_between_ipus"),
        "estimate_top_phases": _top_phases(prof, 3),
        "simulation_wall_s": time.perf_counter() - t0,
    }
