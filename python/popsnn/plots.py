"""Pictures of a training run (PNG, matplotlib's Agg backend, so no display is needed).

- `plot_curves`: loss per step and per epoch, train and test accuracy per epoch.
- `plot_raster`: the spikes of one sample, one panel per layer (time x neuron).
- `plot_activity`: mean firing rate of every layer after each epoch.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def plot_curves(history: dict, path) -> Path:
    """`history` as `popsnn.train.fit` keeps it: `step_loss` (one value per minibatch) and per
    epoch `epoch`, `train_loss`, `train_accuracy`, `test_accuracy`."""
    plt = _pyplot()
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(11, 4))
    epochs = np.asarray(history.get("epoch", []))
    step_loss = np.asarray(history.get("step_loss", []), float)
    if len(step_loss):
        steps_per_epoch = len(step_loss) / max(len(epochs), 1)
        x = (np.arange(len(step_loss)) + 1) / steps_per_epoch
        ax_loss.plot(x, step_loss, lw=0.6, alpha=0.5, label="per minibatch")
    if len(epochs):
        ax_loss.plot(epochs, history["train_loss"], "o-", label="epoch mean (train)")
        test_loss = history.get("test_loss") or []
        if test_loss and all(v is not None for v in test_loss):  # None: membrane losses
            ax_loss.plot(epochs, history["test_loss"], "s--", label="test")
        ax_acc.plot(epochs, 100 * np.asarray(history["train_accuracy"]), "o-", label="train")
        ax_acc.plot(epochs, 100 * np.asarray(history["test_accuracy"]), "s-", label="test")
    ax_loss.set(xlabel="epoch", ylabel="loss", title="Loss")
    ax_acc.set(xlabel="epoch", ylabel="accuracy (%)", title="Accuracy")
    for ax in (ax_loss, ax_acc):
        _integer_epochs(ax)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.tight_layout()
    return _save(fig, path)


def plot_raster(
    spikes: Sequence[np.ndarray], path, sample: int = 0, title: str = "Spike raster"
) -> Path:
    """`spikes`: one [T, B, N] array per layer; draws sample `sample` of the batch."""
    plt = _pyplot()
    fig, axes = plt.subplots(
        len(spikes), 1, figsize=(8, 2.2 * len(spikes) + 0.6), sharex=True, squeeze=False
    )
    for i, (ax, s) in enumerate(zip(axes[:, 0], spikes)):
        grid = np.asarray(s)[:, sample, :]
        # One cell per (step, neuron): readable for a few steps and thousands of neurons.
        ax.imshow(
            grid.T,
            aspect="auto",
            origin="lower",
            cmap="Greys",
            vmin=0,
            vmax=1,
            interpolation="nearest",
        )
        rate = float(np.mean(grid))
        ax.set(
            ylabel="neuron", title=f"layer {i + 1}: {s.shape[2]} neurons, {100 * rate:.2f}% active"
        )
    axes[-1, 0].set(xlabel="time step", xlim=(-0.5, spikes[0].shape[0] - 0.5))
    fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, path)


def plot_activity(history: dict, path) -> Path:
    """`history["activity"]`: per epoch, the mean firing rate of each layer."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    activity = np.asarray(history.get("activity", []), float)
    epochs = np.asarray(history.get("epoch", []))[: len(activity)]
    if activity.size:
        for layer in range(activity.shape[1]):
            ax.plot(epochs, 100 * activity[:, layer], "o-", label=f"layer {layer + 1}")
        ax.legend()
    ax.set(
        xlabel="epoch", ylabel="mean firing rate (% of neuron-steps)", title="Activity per layer"
    )
    _integer_epochs(ax)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return _save(fig, path)


def _integer_epochs(ax):
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _save(fig, path) -> Path:
    import matplotlib.pyplot as plt

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
