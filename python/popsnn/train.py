"""The training loop behind `popsnn train`: data, network, epochs, evaluation, checkpoints,
metrics and pictures.

    from popsnn import train
    result = train.fit(train.Config(epochs=3, limit_train=1000), output="runs/quick")

`Config` holds every option and `load_config` reads a TOML file (both in popsnn.train_config;
the command line is popsnn.train_cli). The defaults are Sun et al.'s
network: DSNN 784-1000-10, Leaky beta = 0.9, 25 steps, direct input, ce_count loss, Adam,
batch 128, on MNIST (the copy embedded in popsnn), on the fastest available device; trained for
3 epochs with learning rate 5e-4 halved after every epoch (5e-4, 2.5e-4, 1.25e-4), which reaches
>= 97.5% test accuracy on MNIST (docs/accuracy.md has the runs).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from . import checkpoint as _checkpoint
from . import data as _data
from . import distributed as _distributed
from . import encoders as _encoders
from . import layers as _layers
from .model import Model
from .train_config import FIELDS, Config, ConfigError, load_config, make_config

__all__ = ["FIELDS", "Config", "ConfigError", "evaluate", "fit", "load_config", "make_config"]

CHECKPOINT_NAME = "checkpoint.npz"
METRICS_NAME = "metrics.json"
PROBE_SAMPLES = 64  # test samples whose spikes are recorded for rasters and activity
# (inputs, classes) of the named data sets, known before loading them: the model is built,
# and a network that does not fit is refused, before the (for event data, minutes of) loading.
DATASET_SHAPES = {"mnist": (784, 10), "fashion-mnist": (784, 10), "shd": (700, 20)}
DATASET_SHAPES["nmnist"] = (2 * 34 * 34, 10)


def _encode(x, config: Config, rng: np.random.Generator):
    """Images [B, N] to what the model takes: direct current stays [B, N] (the engines exploit
    a constant input); rate and latency give [T, B, N] spikes. Event data is already [T,B,N]."""
    if x.ndim == 3 or config.encoding == "direct":
        return x
    if config.encoding == "rate":
        return _encoders.rate(x, config.num_steps, rng=rng)
    return _encoders.latency(x, config.num_steps)


def evaluate(model: Model, dataset, config: Config, rng=None) -> dict:
    """Loss (for spike-based losses) and accuracy over a whole data set."""
    rng = rng if rng is not None else np.random.default_rng(config.seed)
    correct, loss_sum, count = 0.0, 0.0, 0
    for x, y in _data.batches(dataset, config.batch_size):
        out = model.infer(_encode(x, config, rng))
        correct += model.accuracy(out, y) * len(y)
        if model.loss.uses == "spikes":
            loss_sum += model.loss(out, None, y) * len(y)
        count += len(y)
    return {
        "accuracy": correct / count,
        "loss": loss_sum / count if model.loss.uses == "spikes" else None,
    }


def check_output(folder) -> Path:
    """The output folder, created if needed and checked writable before any training (a run
    must not fail at its first checkpoint, an epoch in)."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ConfigError(
            f"output {folder} exists and is not a folder; pass --output with a "
            f"folder (new or existing)"
        )
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(
            f"cannot create output folder {folder}: {err.strerror}; pass "
            f"--output with a folder you can write"
        ) from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(
            f"output folder {folder} is not writable; pass --output with a folder you can write"
        )
    return folder


def _build_model(config: Config, num_inputs: int, num_classes: int, ranks) -> Model:
    return Model(
        config.network(num_inputs, num_classes * config.population),
        loss=config.make_loss(num_classes),
        optimizer=config.make_optimizer(),
        device=config.device,
        num_steps=config.num_steps,
        batch_size=_distributed.local_batch_size(config.batch_size, ranks),
        seed=config.seed,
        **config.precision_options(),
        **config.device_options(),
    )


def _check_fits(net: _layers.Sequential, dataset, num_classes: int):
    if dataset.num_inputs != net.num_inputs:
        shape = getattr(dataset, "image_shape", (dataset.num_inputs,))
        raise _data.DataError(
            f"{dataset.name} has {dataset.num_inputs} inputs per sample "
            f"({'x'.join(map(str, shape))}) but the network takes {net.num_inputs}; "
            f"images must all have the network's input size (28x28 for the default network)"
        )
    if dataset.num_classes > num_classes:
        raise _data.DataError(
            f"{dataset.name} has {dataset.num_classes} classes but the "
            f"network has {num_classes} outputs"
        )


def _prepare_model(config: Config, ranks, train_set, test_set) -> tuple:
    """The model and the data sets it trains on: the model is built before the data are
    loaded where their shape is known (a network that does not fit fails in seconds)."""
    model = None
    if train_set is None and config.dataset in DATASET_SHAPES:
        num_inputs, num_classes = DATASET_SHAPES[config.dataset]
        model = _build_model(config, num_inputs, num_classes, ranks)
    if train_set is None or test_set is None:
        train_set, test_set = _data.load_named(config.dataset, config.data, config.num_steps)
    train_set = train_set.take(config.limit_train)
    test_set = test_set.take(config.limit_test)
    num_classes = train_set.num_classes
    if train_set.num_steps is not None:
        config.num_steps = train_set.num_steps  # event data sets fix the number of steps
    shape = (train_set.num_inputs, num_classes * config.population, config.num_steps)
    if model is None or (model.net.num_inputs, model.net.num_outputs, model.num_steps) != shape:
        model = _build_model(config, train_set.num_inputs, num_classes, ranks)
    _check_fits(model.net, train_set, num_classes * config.population)
    _check_fits(model.net, test_set, num_classes * config.population)
    return _distributed.data_parallel(model, ranks), train_set, test_set


def _new_history() -> dict:
    keys = ("epoch", "train_loss", "train_accuracy", "test_loss", "test_accuracy")
    keys += ("train_images_per_s", "activity", "step_loss", "lr")
    return {key: [] for key in keys}


def _progress_bar(total: int, epoch: int, config: Config, progress: bool):
    from tqdm import tqdm

    # The postfix's img/s counts train-step time only (tqdm's own rate would add data
    # loading), the same figure as the summary's.
    return tqdm(
        total=total,
        unit="img",
        desc=f"epoch {epoch}/{config.epochs}",
        disable=not progress,
        file=sys.stderr,
        leave=True,
        dynamic_ncols=True,
        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} "
        "[{elapsed}<{remaining}{postfix}]",
    )


def _train_epoch(model: Model, train_set, config: Config, rng, bar) -> tuple:
    """One pass over the training set: (step losses, correct, samples, train-step seconds)."""
    losses, correct, seen, seconds = [], 0.0, 0, 0.0
    for x, y in _data.batches(train_set, config.batch_size, shuffle=True, rng=rng):
        x = _encode(x, config, rng)
        start = time.perf_counter()
        loss, out = model.train_step(x, y)
        seconds += time.perf_counter() - start
        losses.append(loss)
        correct += model.accuracy(out, y) * len(y)
        seen += len(y)
        bar.update(len(y))
        bar.set_postfix(
            {
                "img/s": f"{seen / seconds:.0f}",
                "loss": f"{loss:.4f}",
                "acc": f"{100 * correct / seen:.2f}%",
            },
            refresh=False,
        )
    bar.close()
    return losses, correct, seen, seconds


def _record_epoch(history: dict, model: Model, epoch: int, lr: float, trained, test, rec):
    losses, correct, seen, seconds = trained
    history["epoch"].append(epoch)
    history["train_loss"].append(float(np.mean(losses)))
    history["train_accuracy"].append(correct / seen)
    history["test_loss"].append(test["loss"])
    history["test_accuracy"].append(test["accuracy"])
    history["train_images_per_s"].append(seen / seconds)
    history["activity"].append([float(s.mean()) for s in rec.spikes])
    history["step_loss"].extend(losses)
    history["lr"].append(lr)
    if model.loss_scaler is not None:  # float16: where a resumed run's scale starts
        history.setdefault("loss_scale", []).append(model.loss_scaler.scale)


def _save_checkpoint(out_dir: Path, model: Model, epoch: int, rng, config: Config, history):
    _checkpoint.save(
        out_dir / CHECKPOINT_NAME,
        net=model.net,
        params=model.get_params(),
        optimizer_state=model.optimizer_state(),
        epoch=epoch,
        rng_state=rng.bit_generator.state,
        config=config.to_dict(),
        history=history,
    )


def _summary(model: Model, config: Config, history: dict, sets, throughput, wall) -> dict:
    train_set, test_set = sets
    return {
        "device": model.device,
        "epochs": len(history["epoch"]),
        "train_samples": len(train_set),
        "test_samples": len(test_set),
        "train_accuracy": history["train_accuracy"][-1] if history["epoch"] else None,
        "test_accuracy": history["test_accuracy"][-1] if history["epoch"] else None,
        # Training throughput of this session: forward + backward + update, data loading and
        # evaluation excluded.
        "train_images_per_s": throughput,
        "wall_seconds": wall,
        "network": _checkpoint.describe_network(model.net).split(" ")[0],
        "neuron": config.neuron,
        "dtype": model.dtype,
        "num_steps": config.num_steps,
        "batch_size": config.batch_size,
    }


def _report(metrics: dict, config: Config, model, probe_x, test_set, out_dir: Path, profile, log):
    """Rank 0's ending: metrics.json, the pictures, the summary and profile in the log."""
    history = metrics["history"]
    out_dir.mkdir(parents=True, exist_ok=True)
    _write_json(out_dir / METRICS_NAME, metrics)
    if config.plots and history["epoch"]:
        _save_plots(model, probe_x, test_set, history, out_dir)
    log(summary_table(metrics["summary"]))
    if config.profile and profile is not None:
        from .profile_report import format_summary

        log(format_summary(profile, config.batch_size, profile["images_per_s"]))
    written = sorted(p.name for p in out_dir.iterdir() if p.suffix in (".npz", ".json", ".png"))
    log(f"written to {out_dir}: {', '.join(written)}")


def fit(
    config: Config | None = None,
    *,
    output=None,
    resume=None,
    progress: bool = True,
    train_set=None,
    test_set=None,
    log=print,
) -> dict:
    """Train as `config` says; write checkpoints, metrics and pictures under `output`
    (default `config.output`). `resume`: a checkpoint to continue from (its epoch count is
    kept; training goes on until `config.epochs` epochs in all). `train_set` / `test_set`
    replace the configured data set (any `popsnn.data` data set). Returns the metrics dict
    that is also written to `<output>/metrics.json`."""
    config = Config() if config is None else config.validate()
    ranks = _distributed.world()  # under mpirun: data-parallel; rank 0 alone logs and writes
    if not ranks.is_root:
        log, progress = (lambda *args, **kwargs: None), False
    out_dir = check_output(output if output is not None else config.output)
    wall_start = time.perf_counter()
    model, train_set, test_set = _prepare_model(config, ranks, train_set, test_set)
    rng = np.random.default_rng(config.seed)
    history, first_epoch = _new_history(), 0
    if resume is not None:
        first_epoch, history = _resume(model, rng, resume, history)
        log(f"popsnn: resumed from {resume} after epoch {first_epoch}")
    model_since = first_epoch + 1  # the first epoch `model` (and its profile) ran here

    sets = (train_set, test_set)
    probe_x = test_set.inputs(np.arange(min(PROBE_SAMPLES, len(test_set))))
    probe_x = _encode(probe_x, config, np.random.default_rng(config.seed))
    train_seconds, trained_samples, train_profile = 0.0, 0, None

    def metrics_so_far() -> dict:
        wall = time.perf_counter() - wall_start
        run = (train_seconds, trained_samples, wall, model_since)
        return _metrics(model, config, history, sets, run)

    for epoch in range(first_epoch + 1, config.epochs + 1):
        # The engines keep the learning rate in device memory: a new rate is a small host
        # write, no recompile. Set every epoch (a resumed run's optimiser state carries the
        # saved run's last rate).
        lr = config.lr_at(epoch)
        model.set_learning_rate(lr)
        bar = _progress_bar(len(train_set), epoch, config, progress)
        trained = _train_epoch(model, train_set, config, rng, bar)
        _, correct, seen, epoch_seconds = trained
        if train_profile is None:  # training steps only: evaluation would mix in inference
            train_profile = dict(model.profile(), images_per_s=seen / epoch_seconds)
        train_seconds += epoch_seconds
        trained_samples += seen
        test = evaluate(model, test_set, config)
        _record_epoch(history, model, epoch, lr, trained, test, model.record(probe_x))
        log(
            f"epoch {epoch}: lr {lr:.3g}, train loss {history['train_loss'][-1]:.4f}, "
            f"train accuracy "
            f"{100 * correct / seen:.2f}%, test accuracy {100 * test['accuracy']:.2f}%, "
            f"{seen / epoch_seconds:.0f} images/s on {model.device}"
        )
        if ranks.is_root:
            _save_checkpoint(out_dir, model, epoch, rng, config, history)
            # After every epoch, so a stopped or killed run keeps its history so far.
            _write_json(out_dir / METRICS_NAME, metrics_so_far())

    metrics = metrics_so_far()
    if ranks.is_root:
        _report(metrics, config, model, probe_x, test_set, out_dir, train_profile, log)
    return metrics


def _metrics(model: Model, config: Config, history: dict, sets, run) -> dict:
    """What metrics.json holds. `run`: this session's train-step seconds, images trained, wall
    seconds and first epoch; `history`: every epoch so far (a resumed run's included)."""
    train_seconds, trained_samples, wall, model_since = run
    throughput = trained_samples / train_seconds if train_seconds else None
    return {
        "config": config.to_dict(),
        "summary": _summary(model, config, history, sets, throughput, wall),
        "history": history,
        # The profile covers the epochs this session ran (one model throughout: the
        # learning rate changes without a rebuild).
        "profile": _jsonable(dict(model.profile(), epochs=[model_since, epoch_label(history)])),
    }


def _save_plots(model: Model, probe_x, test_set, history: dict, out_dir: Path) -> None:
    from . import plots

    raster = plots.plot_raster(
        model.record(probe_x[:, :1] if probe_x.ndim == 3 else probe_x[:1]).spikes,
        title=f"Spike raster, test sample 0 (label "
        f"{int(test_set.labels[0])}), after epoch {epoch_label(history)}",
    )
    figures = {
        "curves.png": plots.plot_curves(history),
        "activity.png": plots.plot_activity(history),
        "raster.png": raster,
    }
    for name, fig in figures.items():
        fig.savefig(out_dir / name, dpi=110)


def _resume(model: Model, rng: np.random.Generator, path, fresh_history: dict) -> tuple:
    """Load checkpoint `path` into `model` and `rng`; returns (epoch, history). Anything in
    the file that does not fit is a CheckpointError naming the file."""
    ckpt = _checkpoint.load(path, model.net)
    history = ckpt["history"]
    try:
        if not isinstance(history, dict) or any(
            not isinstance(history.get(k), list) for k in fresh_history if k != "lr"
        ):
            raise ValueError(f"its history lacks the lists {sorted(fresh_history)}")
        history.setdefault("lr", [])
        rng_state = np.random.default_rng().bit_generator
        rng_state.state = ckpt["rng_state"]  # checked on a scratch generator first
        model.set_params(ckpt["params"])
        if ckpt["optimizer_state"] is not None:
            model.load_optimizer_state(ckpt["optimizer_state"])
        if model.loss_scaler is not None and history.get("loss_scale"):
            model.loss_scaler.scale = float(history["loss_scale"][-1])
        rng.bit_generator.state = ckpt["rng_state"]
    except (ValueError, TypeError, KeyError) as err:
        raise _checkpoint.CheckpointError(
            f"checkpoint {path} does not fit this run: {err}"
        ) from None
    return ckpt["epoch"], history


def epoch_label(history) -> int:
    return history["epoch"][-1] if history["epoch"] else 0


def summary_table(summary: dict) -> str:
    def pct(v):
        return "-" if v is None else f"{100 * v:.2f}%"

    rows = [
        ("device", summary["device"]),
        (
            "network",
            f"{summary['network']} ({summary['neuron']}, T={summary['num_steps']}, "
            f"batch {summary['batch_size']})",
        ),
        ("epochs", str(summary["epochs"])),
        ("train samples / test samples", f"{summary['train_samples']} / {summary['test_samples']}"),
        ("train accuracy (last epoch)", pct(summary["train_accuracy"])),
        ("test accuracy", pct(summary["test_accuracy"])),
        (
            "training images/s",
            "-"
            if summary["train_images_per_s"] is None
            else f"{summary['train_images_per_s']:.1f}",
        ),
        ("wall time", f"{summary['wall_seconds']:.1f} s"),
    ]
    width = max(len(k) for k, _ in rows)
    line = "-" * (width + 3 + max(len(v) for _, v in rows))
    return "\n".join([line] + [f"{k:<{width}} | {v}" for k, v in rows] + [line])


def _jsonable(obj):
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    return obj


def _write_json(path: Path, obj):
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(_jsonable(obj), indent=2))
    tmp.replace(path)
