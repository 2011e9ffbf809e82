"""Plots (PNG) and the README's results tables from the JSON files in bench/results/.

`python bench/run.py report` calls write_all(); each part is skipped when its JSON is missing.
The goals: issue 12's speed targets (DSNN_GOALS) and issue 13's sparse ones
(report_sparse.goal_lines); the sparse experiments' tables and plot are in report_sparse.py.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import report_sparse

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
LABELS = {
    "popsnn": "popsnn engine (cpu device)",
    "snntorch": "snnTorch (CPU)",
    "snntorch_compiled": "snnTorch + torch.compile",
    "numpy_step": "NumPy step, hand-written (hoisted, BLAS)",
    "numpy_hoisted": "dense NumPy reference, W x hoisted",
    "numpy_per_step": "dense NumPy reference, per step",
}
SHORT = {
    "popsnn": "popsnn",
    "snntorch": "snnTorch",
    "snntorch_compiled": "snnTorch compiled",
    "numpy_step": "NumPy step",
    "numpy_hoisted": "NumPy ref. hoisted",
    "numpy_per_step": "NumPy ref. per-step",
}
# Issue 12's targets: (row's input, ratio key or "images/s", target, what).
DSNN_GOALS = (
    ("mnist", "popsnn_images_per_s", 30_000, "popsnn >= 30,000 images/s"),
    ("mnist", "popsnn_over_snntorch", 40, "popsnn >= 40x snnTorch"),
    ("mnist", "popsnn_over_numpy_hoisted", 15, "popsnn >= 15x NumPy ref. hoisted"),
    ("mnist", "popsnn_over_snntorch_compiled", 10, "popsnn >= 10x snnTorch compiled"),
    ("mnist", "popsnn_over_numpy_step", 5, "popsnn >= 5x NumPy step"),
    ("uniform", "popsnn_over_numpy_step", 3, "popsnn >= 3x NumPy step"),
)
CSNN_GOAL = 20  # issue 15: the CSNN step >= 20x snnTorch eager at B 128, T 25


def load(results: Path) -> dict:
    """The experiments' rows by name. Files of another shape (e.g. half.json from
    bench/half_precision.py, a dict) belong to tools with their own tables."""
    out = {}
    for f in sorted(results.glob("*.json")):
        try:
            rows = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(rows, list):
            out[f.stem] = rows
    return out


def _f(v, fmt="{:,.0f}"):
    return "n/a" if v is None else fmt.format(v)


# --------------------------------------------------------------------------- tables

LIMIT_NOTE = (
    "*The limit*: the step's matrix products alone (each layer's current, weight "
    "gradient and, past the first layer, input gradient; the first layer's over B "
    "rows when the input is direct current, i.e. hoisted), done densely by NumPy's "
    "BLAS in its own worker, timed in the same run as the systems, as images/s: "
    "about 0.6 GFLOP per step at B=128, T=25. No neuron updates, loss or optimiser "
    "are in it, and sparsity can remove much of the readout's and the backward's "
    "share, so popsnn can exceed it; `popsnn / limit` says how close the engine is "
    "to the machine's dense matmul rate. Measured, not an estimate."
)


def _systems(rows) -> list:
    """The systems that appear in any of the rows (older results lack the newer ones)."""
    return [s for s in LABELS if any(f"{s}_images_per_s" in r for r in rows)]


def _key_cell(row, key) -> str:
    if key == "machine kind":
        return machine_kind(row)
    # Rows from before the dense-input row have no "input": they are MNIST.
    return str(row.get(key, "mnist" if key == "input" else None))


def throughput_table(rows, key_cols) -> str:
    """images/s of every system, popsnn's ratio to each, the limit beside them (the step's
    matrix products at the machine's measured BLAS rate, same run) and peak memory."""
    systems = _systems(rows)
    others = [s for s in systems if s != "popsnn"]
    limit = any("limit_images_per_s" in r for r in rows)
    head = key_cols + [f"{SHORT[s]} img/s" for s in systems]
    head += [f"popsnn / {SHORT[s]}" for s in others]
    if limit:
        head += ["limit img/s (dense products at measured BLAS rate)", "popsnn / limit"]
    memory = any("popsnn_peak_rss_mib" in r for r in rows)
    if memory:
        head += ["peak RSS MiB (" + " / ".join(SHORT[s] for s in systems) + ")"]
    compiled = any(r.get("snntorch_compiled_compile_s") is not None for r in rows)
    if compiled:
        head += ["torch.compile s (apart)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [_key_cell(r, k) for k in key_cols]
        cells += [_f(r.get(f"{s}_images_per_s")) for s in systems]
        cells += [_f(r.get(f"popsnn_over_{s}"), "{:.2f}x") for s in others]
        if limit:
            cells += [_f(r.get("limit_images_per_s")), _f(r.get("popsnn_over_limit"), "{:.2f}")]
        if memory:
            cells.append(" / ".join(_f(r.get(f"{s}_peak_rss_mib")) for s in systems))
        if compiled:
            cells.append(_f(r.get("snntorch_compiled_compile_s"), "{:.0f}"))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def latency_table(rows) -> str:
    """Milliseconds per training step at small batches, and popsnn's ratios."""
    systems = _systems(rows)
    others = [s for s in systems if s != "popsnn"]
    head = ["machine kind", "batch"] + [f"{SHORT[s]} ms/step" for s in systems]
    head += [f"popsnn / {SHORT[s]}" for s in others] + ["limit ms/step"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [machine_kind(r), str(r["batch"])]
        cells += [_f(r.get(f"{s}_step_ms"), "{:.2f}") for s in systems]
        cells += [_f(r.get(f"popsnn_over_{s}"), "{:.1f}x") for s in others]
        cells.append(_f(r.get("limit_step_ms"), "{:.3f}"))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def ipu_table(rows) -> str:
    head = [
        "network",
        "largest batch that fits",
        "ESTIMATED images/s (cost model)",
        "Sun et al. measured on Mk2",
        "estimate / measured",
        "batches refused",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        refused = ", ".join(r.get("batches_refused", {})) or "none"
        lines.append(
            "| "
            + " | ".join(
                [
                    r["network"],
                    str(r.get("batch", "none")),
                    _f(r.get("estimate_images_per_s")) + (" (estimate)" if r.get("batch") else ""),
                    _f(r["seed000_measured_mk2_images_per_s"]),
                    _f(r.get("estimate_over_seed000_measured"), "{:.2f}"),
                    refused,
                ]
            )
            + " |"
        )
    for r in rows:
        if r.get("estimate_top_phases"):
            lines.append(
                f"\nWhere the estimated time of `{r['network']}` goes (cost model, "
                f"per training step at batch {r['batch']}): "
                + "; ".join(
                    f"{p['step']} {100 * p['share']:.0f}%" for p in r["estimate_top_phases"]
                )
                + "."
            )
    return "\n".join(lines)


ARMS = {
    "in_process_with_others": "one process, interleaved with snnTorch and NumPy steps "
    "(the harness before)",
    "in_process_with_others_bursts": "one process, interleaved with snnTorch and NumPy, "
    "each turn a burst of back-to-back steps",
    "worker_with_others": "own worker process, interleaved with the others' workers, "
    "bursts (the harness now)",
    "worker_alone": "own worker process, no other system running, bursts",
}


def isolation_table(rows) -> str:
    r0 = rows[0]
    lines = [
        f"DSNN 784-{r0.get('hidden', 1000)}-10, B={r0['batch']}, T={r0.get('steps', 25)}; "
        f"{r0['repeats']} rounds per arm and trial (one step per turn in the first arm, a "
        f"burst of back-to-back steps in the others); arms alternate.\n",
        "| trial | how popsnn was timed | popsnn ms/step (median) | min | 1-min load |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['trial']} | {ARMS.get(r['arm'], r['arm'])} | "
            f"{r['popsnn_step_ms_median']:.1f} | {r['popsnn_step_ms_min']:.1f} | "
            f"{r['load_average_1']:.1f} |"
        )
    return "\n".join(lines)


def same_engine_rows(res: dict, commit, kind=None) -> list:
    """Rows of the other throughput experiments that ran exactly the dsnn configuration
    (784-1000-10 Leaky, B=128, T=25, direct input), on a loaded machine their spread says
    how far one run's figure can be trusted. Only runs of the engine sources at commit
    (older result files come from other kernels and would pass for this run's spread) and
    of the machine kind, when given (rows that did not record theirs pass)."""
    picks = [
        ("batch", lambda r: r.get("batch") == 128),
        ("width", lambda r: r.get("hidden") == 1000),
        ("neurons", lambda r: r.get("neuron") == "Leaky"),
        ("population", lambda r: r.get("steps") == 25 and r.get("outputs") == 10),
    ]
    out = []
    for name, keep in picks:
        out += [
            r
            for r in res.get(name) or []
            if keep(r)
            and not r.get("quick")
            and _same_engine(commit, r["machine"].get("git_commit"))
            and (kind is None or machine_kind(r) in (kind, "unrecorded"))
        ]
    return out


ENGINE_PATHS = ("codelets", "host", "include", "python")


def _same_engine(a, b) -> bool:
    """Whether commits a and b hold the same engine sources (git diff; False if unknown)."""
    if not a or not b:
        return False
    if a == b:
        return True
    diff = subprocess.run(
        ["git", "diff", "--quiet", a, b, "--", *ENGINE_PATHS],
        cwd=Path(__file__).parent.parent,
        capture_output=True,
    )
    return diff.returncode == 0


def _dsnn_goals(res: dict) -> list:
    """Issue 12's speed targets against the dsnn rows (MNIST and U[0, 1] input) and the
    latency (or batch) rows at batch 8; the MNIST row's spread over the other experiments'
    identical configuration beside it."""
    lines = []
    rows = res.get("dsnn") or []
    for kind in dict.fromkeys(machine_kind(r) for r in rows):
        lines += _dsnn_kind_goals(res, [r for r in rows if machine_kind(r) == kind], kind)
    small = [
        r
        for name in ("latency", "batch")
        for r in res.get(name) or []
        if r.get("batch") == 8 and r.get("popsnn_over_snntorch")
    ]
    for kind in dict.fromkeys(machine_kind(r) for r in small):
        r = next(r for r in small if machine_kind(r) == kind)
        v = r["popsnn_over_snntorch"]
        lines.append(
            f"| DSNN batch 8, {kind} machine: popsnn >= 20x snnTorch at batch 8 | {v:.2f}x "
            f"({r['experiment']} run) | {'yes' if v >= 20 else 'no'} |"
        )
    return lines


def machine_kind(row) -> str:
    """The row's machine kind (bench/common.vector_isa); rows saved before it was recorded
    say "unrecorded"."""
    return row.get("machine", {}).get("vector_isa") or "unrecorded"


def _dsnn_kind_goals(res: dict, kind_rows: list, kind: str) -> list:
    """The DSNN_GOALS lines of one machine kind's dsnn run."""
    lines = []
    by_input = {r.get("input", "mnist"): r for r in kind_rows}
    same = same_engine_rows(res, kind_rows[0]["machine"].get("git_commit"), kind)
    for inp, key, target, what in DSNN_GOALS:
        d = by_input.get(inp)
        if d is None:
            continue
        v = d.get(key)
        fmt = "{:,.0f}" if key.endswith("images_per_s") else "{:.2f}x"
        others = [r[key] for r in same if r.get(key)] if inp == "mnist" else []
        spread = (
            f"; the same configuration in the other experiments' runs: "
            f"{fmt.format(min(others))} to {fmt.format(max(others))}"
            if others
            else ""
        )
        if key.endswith("images_per_s") and d.get("limit_images_per_s"):
            # An absolute figure moves with the machine's speed (a VM's runs differ up to
            # ~1.7x): the run's own dense limit beside it says which phase it caught.
            spread += f"; this run's dense limit {d['limit_images_per_s']:,.0f}"
        label = ("MNIST input" if inp == "mnist" else "U[0,1] input") + f", {kind} machine"
        if v is None:
            lines.append(f"| DSNN B=128, {label}: {what} | not measured in the dsnn run | n/a |")
            continue
        lines.append(
            f"| DSNN B=128, {label}: {what} | {_f(v, fmt)} (dsnn run){spread} | "
            f"{'yes' if v >= target else 'no'} |"
        )
    return lines


def _csnn_goals(res: dict) -> list:
    """Issue 15's speed target per machine kind: the csnn run's dense row (no sparse rule)."""
    lines = []
    for r in res.get("csnn") or []:
        v = r.get("popsnn_over_snntorch")
        if r.get("sparse") or r.get("quick") or v is None:
            continue
        lines.append(
            f"| CSNN B=128, {machine_kind(r)} machine: popsnn >= {CSNN_GOAL}x snnTorch eager | "
            f"{v:.2f}x (csnn run) | {'yes' if v >= CSNN_GOAL else 'no'} |"
        )
    return lines


def goals(res: dict) -> str:
    lines = ["| goal | measured | met? |", "|---|---|---|"]
    lines += _dsnn_goals(res)
    lines += _csnn_goals(res)
    lines += report_sparse.goal_lines(res)
    return "\n".join(lines)


def tables(res: dict) -> str:
    parts = []
    any_row = next((rows[0] for rows in res.values() if rows), None)
    if any_row:
        m = any_row["machine"]
        loads = [
            rows[0]["machine"].get("load_average_1_5_15")
            for rows in res.values()
            if rows and "machine" in rows[0]
        ]
        loads = [l[0] for l in loads if l]
        load = (
            f"; 1-minute load average at the start of the experiments "
            f"{min(loads):.1f} to {max(loads):.1f} on {m['cores']} cores"
            if loads
            else ""
        )
        parts.append(
            f"Machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}, NumPy "
            f"{m['numpy']}, torch {m.get('torch')}, snnTorch {m.get('snntorch')}, "
            f"popsnn {m['popsnn']}{load}. A load above the number of cores means "
            f"other processes (other engineers' builds and tests) were competing for "
            f"the CPU: these are measurements on a shared, loaded machine."
        )
    quick = sorted({k for k, rows in res.items() for r in rows if r.get("quick")})
    if quick:
        parts.append(f"Taken with --quick (smaller settings): {', '.join(quick)}.")
    parts.append("### Goals\n\n" + goals(res))
    titles = {
        "dsnn": (
            "DSNN 784-1000-10, T=25, B=128, Adam, ce_count: MNIST and U[0,1] input",
            ["machine kind", "hidden", "batch", "input"],
        ),
        "batch": ("Batch sweep (DSNN, T=25)", ["batch"]),
        "width": ("Hidden-width sweep (B=128, T=25)", ["hidden"]),
        "neurons": ("Neuron models (DSNN, B=128, T=25)", ["machine kind", "neuron"]),
        "rate": ("Rate-coded input (new spikes every step: nothing to hoist)", ["hidden", "batch"]),
        "population": (
            "Population code (Sun et al., section V): 25 steps x 10 outputs vs 1 step x "
            "500 outputs",
            ["steps", "outputs"],
        ),
    }
    for name, (title, keys) in titles.items():
        if res.get(name):
            text = f"### {title}\n\n" + throughput_table(res[name], keys)
            if not all(r.get("timing") for r in res[name]):
                text += (
                    "\n\n*Timed with the earlier harness (all systems in one process): "
                    "popsnn's figures here are understated, see \"How the systems are "
                    'timed" above.*'
                )
            if name == "population" and any("test_accuracy" in r for r in res[name]):
                text += "\n\nShort training (popsnn engine, cpu device, MNIST): " + "; ".join(
                    f"{r['steps']} step(s) x {r['outputs']} outputs: test accuracy "
                    f"{r['test_accuracy']:.3f} on {r['test_images']} images after "
                    f"{r['train_steps']} minibatches of {r['batch']}"
                    for r in res[name]
                )
                text += "."
            parts.append(text)
    if res.get("latency"):
        parts.append(
            "### Small batches (Sun et al.'s headline is batch 8): milliseconds per "
            "training step (DSNN 784-1000-10, T=25)\n\n" + latency_table(res["latency"])
        )
    if any("limit_images_per_s" in r for rows in res.values() for r in rows):
        parts.append(LIMIT_NOTE)
    if res.get("isolation"):
        parts.append(
            "### Timing isolation (A/B): popsnn's step beside the other systems\n\n"
            + isolation_table(res["isolation"])
        )
    if res.get("ipu"):
        parts.append(
            "### DSNN on the IPU Mk2 geometry (device='ipu-model'): ESTIMATES from "
            "popsnn's cost model, not measurements on an IPU\n\n" + ipu_table(res["ipu"])
        )
    parts += report_sparse.sections(res)
    return "\n\n".join(parts) + "\n"


# --------------------------------------------------------------------------- plots


def sweep_lines(ax, rows, key) -> int:
    """One line per system and machine kind (a file kept per kind holds both): the first kind
    solid, the others dotted, a system's colour the same on both. Returns the number of kinds."""
    kinds = list(dict.fromkeys(machine_kind(r) for r in rows))
    for k, kind in enumerate(kinds):
        of_kind = [r for r in rows if machine_kind(r) == kind]
        suffix = f" ({kind})" if len(kinds) > 1 else ""
        for i, (s, label) in enumerate(LABELS.items()):
            pts = [(r[key], r[f"{s}_images_per_s"]) for r in of_kind if r.get(f"{s}_images_per_s")]
            if pts:
                style = dict(marker="o", color=f"C{i}", linestyle=":" if k else "-")
                ax.plot(*zip(*pts), label=label + suffix, **style)
        pts = [(r[key], r["limit_images_per_s"]) for r in of_kind if r.get("limit_images_per_s")]
        if pts:
            limit = "limit: dense products at measured BLAS rate"
            ax.plot(*zip(*pts), "k:" if k else "k--", label=limit + suffix)
    return len(kinds)


def sweep_plot(plt, rows, name, key, xlabel, results: Path) -> Path:
    """images/s against a swept setting (log-log), saved as results/<name>.png."""
    fig, ax = plt.subplots(figsize=(6, 4))
    kinds = sweep_lines(ax, rows, key)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("training images/s (median)")
    ax.set_yscale("log")
    ax.set_xscale("log", base=2)
    ax.set_title(f"{name}: measured on this CPU (not an IPU)")
    ax.grid(alpha=0.3)
    if kinds > 1:  # twice the lines: the legend beside the plot, not over it
        fig.set_size_inches(10, 4)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    else:
        ax.legend(fontsize=8)
    fig.tight_layout()
    path = results / f"{name}.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plots(res: dict, results: Path) -> list:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []

    for name, key, xlabel in (
        ("batch", "batch", "batch size"),
        ("latency", "batch", "batch size"),
        ("width", "hidden", "hidden neurons"),
    ):
        if res.get(name):
            written.append(sweep_plot(plt, res[name], name, key, xlabel, results))
    for name, key in (("neurons", "neuron"), ("population", "outputs")):
        rows = res.get(name)
        if not rows:
            continue
        fig, ax = plt.subplots(figsize=(6, 4))
        shown = _systems(rows)
        width = 0.8 / max(len(shown), 1)
        for i, s in enumerate(shown):
            vals = [r.get(f"{s}_images_per_s") or 0 for r in rows]
            ax.bar([j + i * width for j in range(len(rows))], vals, width, label=LABELS[s])
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(rows))])
        kinds = len({machine_kind(r) for r in rows}) > 1
        ax.set_xticklabels(
            [
                (f"{r[key]} ({machine_kind(r)})" if kinds else str(r[key]))
                if name == "neurons"
                else f"T={r['steps']}, {r['outputs']} out"
                for r in rows
            ]
        )
        ax.set_yscale("log")
        ax.set_ylabel("training images/s (median)")
        ax.set_title(f"{name}: measured on this CPU (not an IPU)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        path = results / f"{name}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    written += report_sparse.plot(res, results, plt)
    return written


def write_all(results: Path, readme: Path) -> None:
    res = load(results)
    for p in plots(res, results):
        print(f"wrote {p}")
    text = tables(res)
    (results / "tables.md").write_text(text)
    print(f"wrote {results / 'tables.md'}")
    if readme.exists():
        doc = readme.read_text()
        if BEGIN in doc and END in doc:
            head, rest = doc.split(BEGIN, 1)
            tail = rest.split(END, 1)[1]
            readme.write_text(head + BEGIN + "\n" + text + END + tail)
            print(f"updated the results section of {readme}")
