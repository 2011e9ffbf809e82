"""Markdown rows for docs/accuracy.md from the metrics.json files of `popsnn train` runs.

.venv/bin/python docs/accuracy/table.py docs/accuracy/mnist/*.json
"""

import json
import sys
from pathlib import Path


def settings(c: dict) -> str:
    lr = f"lr {c['lr']:g}"
    decay = c.get("lr_decay", 1.0)
    lr += f" ×{decay:g}/epoch" if decay != 1.0 else " constant"
    parts = [lr, f"batch {c['batch_size']}"]
    if c.get("sparse", "none") != "none":
        parts.append(f"sparse {c['sparse']} ({c.get('sparse_layers', 'all')} layers)")
    return ", ".join(parts)


def row(path: Path) -> str:
    m = json.loads(path.read_text())
    c, s, h = m["config"], m["summary"], m["history"]
    accs = " / ".join(f"{100 * a:.2f}" for a in h["test_accuracy"])
    return (
        f"| {path.stem} | {c['dataset']} | {s['device']} | seed {c['seed']} | {settings(c)} | "
        f"{s['epochs']} | {accs} | {s['train_images_per_s']:.0f} | {s['wall_seconds']:.0f} s |"
    )


if __name__ == "__main__":
    print(
        "| run | data set | device | seed | settings | epochs | test accuracy per epoch (%) "
        "| train images/s | wall time |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for p in sys.argv[1:]:
        print(row(Path(p)))
