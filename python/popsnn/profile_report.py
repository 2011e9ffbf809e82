"""A readable summary of an engine's profile: per phase and layer of a training step, the
compute, exchange and sync cycles of the runtime's IPU cost model (ESTIMATES, never
measurements on an IPU), the estimated images/s of the target the model was compiled for,
and the images/s measured here beside them.

The engine reports its program steps as a table (`profile()["estimate_summary"]`); this
module groups its rows: `Execute(layerN/forward)` is layer N's forward phase, the hoisted
first-layer products (`direct_current`, `direct_weight_grad`) belong to layer 0, and an
exchange belongs to the compute step it feeds (the next one in program order).
"""

from __future__ import annotations

import re

_ROW = re.compile(
    r"^(?P<name>.+?)\s+(?P<kind>compute|exchange|host|sync|other)\s+(?P<execs>\d+)"
    r"\s+(?P<cycles>\d+)\s+(?P<compute>\d+)\s+(?P<exchange>\d+)\s+(?P<bytes>\d+)"
    r"\s+\d+\s+\d+\s*$"
)
_PHASE = re.compile(r"^Execute\(layer(?P<layer>\d+)/(?P<phase>\w+)\)$")
_LAYER0 = {"direct_current": "forward", "direct_weight_grad": "backward"}


def program_rows(summary: str) -> list:
    """The table's rows as dicts (name, kind, execs, cycles per exec, compute, exchange,
    exchange bytes)."""
    rows = []
    for line in summary.splitlines():
        match = _ROW.match(line)
        if match:
            fields = match.groupdict()
            rows.append({k: v if k in ("name", "kind") else int(v) for k, v in fields.items()})
    return rows


def _phase_of(name: str) -> tuple:
    match = _PHASE.match(name)
    if match:
        return match["phase"], f"layer {match['layer']}"
    inner = name[len("Execute(") : -1] if name.startswith("Execute(") else name
    if inner in _LAYER0:
        return _LAYER0[inner], "layer 0"
    return inner, "-"


def by_phase(rows: list) -> dict:
    """{(phase, layer): {compute, exchange, sync, bytes}} in cycles summed over executions;
    an exchange counts towards the compute step after it."""
    groups: dict = {}
    pending = []
    for row in rows:
        if row["kind"] != "compute":
            pending.append(row)
            continue
        key = _phase_of(row["name"])
        for r in pending + [row]:
            g = groups.setdefault(key, {"compute": 0, "exchange": 0, "sync": 0, "bytes": 0})
            n = r["execs"]
            g["compute"] += n * r["compute"]
            g["exchange"] += n * r["exchange"]
            g["sync"] += n * max(r["cycles"] - r["compute"] - r["exchange"], 0)
            g["bytes"] += n * r["bytes"]
        pending = []
    if pending:
        key = ("other", "-")
        for r in pending:
            g = groups.setdefault(key, {"compute": 0, "exchange": 0, "sync": 0, "bytes": 0})
            g["exchange"] += r["execs"] * r["exchange"]
            g["bytes"] += r["execs"] * r["bytes"]
    return groups


def format_summary(profile: dict, batch_size: int, measured_images_per_s=None) -> str:
    """The text `popsnn train --profile` prints, from a profile taken over training steps."""
    steps = max(int(profile.get("train_steps") or 0), 1)
    clock = float(profile.get("tile_clock_hz") or 1.33e9)
    groups = by_phase(program_rows(profile.get("estimate_summary", "")))
    total = sum(sum(g[k] for k in ("compute", "exchange", "sync")) for g in groups.values())
    width = max([len(phase) for phase, _ in groups] + [12])
    lines = [
        f"Profile of a training step on device {profile.get('device')} "
        f"({int(profile.get('tiles', 0))} tiles), averaged over {steps} step(s).",
        "Cycles are ESTIMATES of popsnn's IPU cost model for that target, not measurements.",
        f"{'phase':<{width}} {'layer':<8} {'compute':>12} {'exchange':>12} {'sync':>10} "
        f"{'exch. bytes':>12} {'share':>6}",
    ]
    for (phase, layer), g in sorted(groups.items(), key=lambda kv: -sum(kv[1].values())):
        cycles = g["compute"] + g["exchange"] + g["sync"]
        if not cycles:  # e.g. the optimiser, when the host steps it (data-parallel training)
            continue
        lines.append(
            f"{phase:<{width}} {layer:<8} {g['compute'] // steps:>12,} "
            f"{g['exchange'] // steps:>12,} {g['sync'] // steps:>10,} {g['bytes'] // steps:>12,} "
            f"{100 * cycles / max(total, 1):>5.1f}%"
        )
    ranks = int(profile.get("mpi_ranks") or 1)
    if total:
        seconds = total / steps / clock
        lines.append(
            f"estimate: {total // steps:,} cycles per step at {clock / 1e9:.2f} GHz = "
            f"{batch_size / seconds:,.0f} images/s on this target (an estimate, not measured)"
        )
    if ranks > 1:
        allreduced = int(profile.get("allreduced_bytes_per_step", 0))
        lines.append(
            f"(data-parallel over {ranks} MPI ranks: the cycles are one rank's share of each "
            f"batch of {batch_size}, the images/s all ranks' together; the optimiser runs on "
            f"the host and the MPI allreduce of {allreduced:,} bytes per step is not in the "
            f"estimate)"
        )
    if measured_images_per_s:
        lines.append(f"measured here: {measured_images_per_s:,.0f} images/s (wall clock)")
    if profile.get("device") == "cpu":
        lines.append(
            "(device cpu compiles for this machine's threads as tiles; --device ipu-model "
            "gives the estimate for a Mk2 IPU)"
        )
    return "\n".join(lines)
