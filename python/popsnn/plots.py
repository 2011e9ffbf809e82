"""Pictures of a training run, as matplotlib Figures.

- `plot_curves`: loss per step and per epoch, train and test accuracy per epoch.
- `plot_raster`: the spikes of one sample, one panel per layer (time x neuron).
- `plot_activity`: mean firing rate of every layer after each epoch.

Each returns a `matplotlib.figure.Figure` built without pyplot, so no backend is chosen or
forced and nothing is kept open: show it in a notebook, or `fig.savefig("x.png")` (what
`popsnn train` does with them).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def _figure(**kwargs):
    from matplotlib.figure import Figure

    return Figure(**kwargs)


def plot_curves(history: dict):
    """`history` as `popsnn.train.fit` keeps it: `step_loss` (one value per minibatch) and per
    epoch `epoch`, `train_loss`, `train_accuracy`, `test_accuracy`."""
    fig = _figure(figsize=(11, 4))
    ax_loss, ax_acc = fig.subplots(1, 2)
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
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    fig.tight_layout()
    return fig


def plot_raster(spikes: Sequence[np.ndarray], sample: int = 0, title: str = "Spike raster"):
    """`spikes`: one [T, B, N] array per layer; draws sample `sample` of the batch. Every
    spike of every neuron is a dot (an image of a wide layer would be resampled to the
    figure's few hundred pixel rows and drop most neurons)."""
    fig = _figure(figsize=(8, 2.2 * len(spikes) + 0.6))
    axes = fig.subplots(len(spikes), 1, sharex=True, squeeze=False)[:, 0]
    for i, (ax, s) in enumerate(zip(axes, spikes)):
        grid = np.asarray(s)[:, sample, :]
        steps, neurons = np.nonzero(grid)
        ax.scatter(steps, neurons, s=4, marker="|", c="black", linewidths=0.8)
        ax.set_ylim(-0.5, grid.shape[1] - 0.5)
        rate = float(np.mean(grid))
        ax.set(
            ylabel="neuron", title=f"layer {i + 1}: {s.shape[2]} neurons, {100 * rate:.2f}% active"
        )
    axes[-1].set(xlabel="time step", xlim=(-0.5, np.asarray(spikes[0]).shape[0] - 0.5))
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_activity(history: dict):
    """`history["activity"]`: per epoch, the mean firing rate of each layer."""
    fig = _figure(figsize=(6, 4))
    ax = fig.subplots()
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
    return fig


def _integer_epochs(ax):
    """Whole epochs on the x axis, even for a run of one epoch (MaxNLocator's default of at
    least two ticks would fall back to fractions there)."""
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
