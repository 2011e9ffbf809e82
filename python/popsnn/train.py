"""The training loop behind `popsnn train`: data, network, epochs, evaluation, checkpoints,
metrics and pictures.

    from popsnn import train
    result = train.fit(train.Config(epochs=3, limit_train=1000), output="runs/quick")

`Config` holds every option; `load_config` reads a TOML file. The defaults are Sun et al.'s
network: DSNN 784-1000-10, Leaky beta = 0.9, 25 steps, direct input, ce_count loss, Adam,
batch 128, on MNIST (the copy embedded in popsnn), on the fastest available device; trained for
3 epochs with learning rate 5e-4 halved after every epoch (5e-4, 2.5e-4, 1.25e-4), which reaches
>= 97.5% test accuracy on MNIST (docs/accuracy.md has the runs).
"""

from __future__ import annotations

import dataclasses
import json
import numbers
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from . import checkpoint as _checkpoint
from . import data as _data
from . import distributed as _distributed
from . import encoders as _encoders
from . import layers as _layers
from . import losses as _losses
from . import optim as _optim
from . import sparse as _sparse
from . import surrogate as _surrogate
from ._checks import positive_int
from .defaults import NEURON
from .model import DEVICES, Model
from .validation import check_sizes

NEURONS = ("leaky", "synaptic", "rleaky")
SPARSE_LAYERS = ("hidden", "all")
ENCODINGS = ("direct", "rate", "latency")
CHECKPOINT_NAME = "checkpoint.npz"
METRICS_NAME = "metrics.json"
PROBE_SAMPLES = 64  # test samples whose spikes are recorded for rasters and activity


class ConfigError(ValueError):
    """An option that does not exist or has a value it cannot take."""


@dataclass
class Config:
    """Every option of a training run (the CLI's flags and the TOML file's keys)."""

    dataset: str = "mnist"  # mnist | fashion-mnist | shd | nmnist
    data: str | None = None  # folder of IDX files; None: the default location
    hidden: list = field(default_factory=lambda: [1000])
    neuron: str = "leaky"  # leaky | synaptic | rleaky
    beta: float = NEURON["beta"]
    alpha: float = NEURON["alpha"]  # Synaptic only
    threshold: float = NEURON["threshold"]
    surrogate: str = "fast_sigmoid"  # the DSNN recipe's; neurons default to atan
    sparse: str = "none"  # none | window:B_TH | one_sided:THETA_GRAD
    sparse_layers: str = "hidden"  # hidden | all: which layers the sparse rule covers
    encoding: str = "direct"  # direct | rate | latency
    loss: str = "ce_count"
    optimizer: str = "adam"  # adam | adamw | sgd
    lr: float = 5e-4  # learning rate of the first epoch
    lr_decay: float = 0.5  # lr of epoch e is lr * lr_decay**(e-1); 1: constant
    batch_size: int = 128
    num_steps: int = 25
    epochs: int = 3  # 3 reach >= 97.5% test accuracy on MNIST
    device: str = "auto"  # auto | reference | cpu | ipu-model | ipu
    seed: int = 0
    limit_train: int | None = None
    limit_test: int | None = None
    output: str = "runs/popsnn"
    plots: bool = True

    def __post_init__(self):
        self.validate()

    def validate(self) -> Config:
        """Check every option (types, ranges, the network they build); a ConfigError naming
        the option otherwise."""
        try:
            return self._validate()
        except ConfigError:
            raise
        except (ValueError, TypeError) as err:
            raise ConfigError(str(err)) from None

    def _validate(self) -> Config:
        for name in ("data", "output"):  # folders may come as Path objects; kept as text
            if isinstance(getattr(self, name), os.PathLike):
                setattr(self, name, os.fspath(getattr(self, name)))
        if isinstance(self.hidden, (int, str)):
            self.hidden = _parse_hidden(self.hidden)
        if not isinstance(self.hidden, (list, tuple)):
            raise ConfigError(
                f"hidden must be a list of layer widths such as [1000] or "
                f'"500,500", got {self.hidden!r}'
            )
        self.hidden = [positive_int("hidden", h) for h in self.hidden]
        _choice("dataset", self.dataset, _data.DATASETS)
        _choice("neuron", self.neuron, NEURONS)
        _choice("sparse_layers", self.sparse_layers, SPARSE_LAYERS)
        _choice("encoding", self.encoding, ENCODINGS)
        _choice("device", self.device, ("auto",) + DEVICES)
        _choice("loss", self.loss, _losses.NAMES)
        _choice("optimizer", self.optimizer, _optim.NAMES)
        for name in ("batch_size", "num_steps", "epochs"):
            setattr(self, name, positive_int(name, getattr(self, name)))
        for name in ("limit_train", "limit_test"):
            if getattr(self, name) is not None:
                setattr(self, name, positive_int(name, getattr(self, name)))
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ConfigError(f"seed must be an integer >= 0, got {self.seed!r}")
        decay = self.lr_decay
        if isinstance(decay, bool) or not isinstance(decay, (int, float)) or not 0 < decay <= 1:
            raise ConfigError(
                f"lr_decay must be a number in (0, 1] (the factor the learning "
                f"rate is multiplied by after each epoch; 1 keeps it constant), "
                f"got {decay!r}"
            )
        self.lr_decay = float(decay)
        net = self.network(784, 10)  # checks beta, alpha, threshold, surrogate, sparse
        check_sizes(net, self.num_steps, self.batch_size)  # before any data is loaded
        self.make_optimizer()
        _check_types(self)  # the options the checks above take in any type (plots, ...)
        return self

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def sparse_rule(self) -> _sparse.SparseRule | None:
        text = str(self.sparse).strip().lower()
        if text in ("none", "", "off"):
            return None
        kind, _, value = text.partition(":")
        if kind not in ("window", "one_sided") or not value:
            raise ConfigError(
                f"sparse must be 'none', 'window:B_TH' or 'one_sided:THETA_GRAD' "
                f"(e.g. window:0.5), got {self.sparse!r}"
            )
        try:
            number = float(value)
        except ValueError:
            raise ConfigError(f"sparse {self.sparse!r}: {value!r} is not a number") from None
        return _sparse.window(number) if kind == "window" else _sparse.one_sided(number)

    def network(self, num_inputs: int, num_outputs: int) -> _layers.Sequential:
        """The network. The sparse rule covers the hidden layers, and the readout too with
        sparse_layers="all": masking the readout's surrogate leaves an output neuron that sits
        far from threshold on every step (silent, or firing throughout) with no gradient at
        all, and on MNIST that cost 20+ points of accuracy (docs/accuracy.md); Perez-Nieves &
        Goodman keep
        its readout dense as well (it does not spike)."""
        rule = self.sparse_rule()
        sizes = [num_inputs] + list(self.hidden) + [num_outputs]
        layers = []
        for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            readout = i == len(sizes) - 2
            common = dict(
                threshold=self.threshold,
                surrogate=_surrogate.get(self.surrogate),
                sparse=None if readout and self.sparse_layers == "hidden" else rule,
            )
            layers.append(_layers.Linear(n_in, n_out))
            if self.neuron == "leaky":
                layers.append(_layers.Leaky(beta=self.beta, **common))
            elif self.neuron == "synaptic":
                layers.append(_layers.Synaptic(alpha=self.alpha, beta=self.beta, **common))
            else:
                layers.append(_layers.RLeaky(beta=self.beta, **common))
        return _layers.Sequential(*layers)

    def make_optimizer(self, lr: float | None = None) -> _optim.Optimizer:
        return _optim.get(self.optimizer, lr=self.lr if lr is None else lr)

    def lr_at(self, epoch: int) -> float:
        """Learning rate of epoch `epoch` (1-based): lr * lr_decay**(epoch - 1)."""
        return self.lr * self.lr_decay ** (epoch - 1)


FIELDS = tuple(f.name for f in dataclasses.fields(Config))
_TYPES = {
    "str": ((str,), "a string"),
    "int": ((numbers.Integral,), "an integer"),
    "float": ((numbers.Real,), "a number"),
    "bool": ((bool,), "true or false"),
}


def _check_types(config: Config) -> None:
    """Every option has the type its field declares (a string where a bool belongs, such as
    plots = "no", is an error, not a truthy value)."""
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        kind = f.type  # annotations are text here: "int", "str | None"
        optional = kind.endswith(" | None")
        kind = kind.removesuffix(" | None")
        if kind not in _TYPES or (optional and value is None):
            continue  # hidden (a list, or widths as text) has its own parser
        types, wanted = _TYPES[kind]
        if not isinstance(value, types) or (kind != "bool" and isinstance(value, bool)):
            raise ConfigError(
                f"option {f.name} must be {wanted}"
                f"{' or unset' if optional else ''}, got {value!r} "
                f"({type(value).__name__})"
            )


def _choice(name, value, choices):
    if value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}; got {value!r}")


def _parse_hidden(value) -> list:
    if isinstance(value, int):
        return [value]
    text = value.strip()
    if text in ("", "none"):
        return []
    try:
        return [int(v) for v in text.replace(" ", "").split(",")]
    except ValueError:
        raise ConfigError(
            f"hidden must be comma-separated layer widths such as 1000 or 500,500, got {value!r}"
        ) from None


def make_config(file=None, **overrides) -> Config:
    """Defaults, then the TOML `file`, then `overrides` (None values are ignored)."""
    values = {}
    if file is not None:
        values.update(load_config(file))
        try:
            Config(**values)
        except ConfigError as err:  # the file's own values: name the file
            raise ConfigError(f"config file {file}: {err}") from None
    unknown = sorted(set(overrides) - set(FIELDS))
    if unknown:
        raise ConfigError(
            f"unknown option(s) {', '.join(unknown)}; valid options: {', '.join(FIELDS)}"
        )
    values.update({k: v for k, v in overrides.items() if v is not None})
    return Config(**values)


def load_config(path) -> dict:
    """Options from a TOML file (keys as in `Config`, '-' or '_' alike); unknown keys fail."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        try:
            import tomli as tomllib
        except ImportError:
            raise ConfigError(
                "reading a TOML config needs Python >= 3.11 or `pip install tomli`"
            ) from None
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    try:
        raw = tomllib.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as err:
        raise ConfigError(
            f"config file {path} is not UTF-8 text (byte {err.start}); save it as UTF-8"
        ) from None
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"config file {path} is not valid TOML: {err}") from None
    except OSError as err:
        raise ConfigError(f"config file {path} cannot be read: {err.strerror}") from None
    raw = raw.get("train", raw)  # accept a [train] table or top-level keys
    if not isinstance(raw, dict):
        raise ConfigError(f"config file {path}: [train] must be a table of options")
    values = {str(k).replace("-", "_"): v for k, v in raw.items()}
    unknown = sorted(set(values) - set(FIELDS))
    if unknown:
        raise ConfigError(
            f"config file {path}: unknown option(s) {', '.join(unknown)}; valid "
            f"options: {', '.join(FIELDS)}"
        )
    return values


# --------------------------------------------------------------------------------------------
# The loop


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
    from tqdm import tqdm

    config = Config() if config is None else config.validate()
    ranks = _distributed.world()  # under mpirun: data-parallel; rank 0 alone logs and writes
    if not ranks.is_root:
        log, progress = (lambda *args, **kwargs: None), False
    out_dir = check_output(output if output is not None else config.output)
    wall_start = time.perf_counter()

    if train_set is None or test_set is None:
        train_set, test_set = _data.load_named(config.dataset, config.data, config.num_steps)
    train_set = train_set.take(config.limit_train)
    test_set = test_set.take(config.limit_test)
    num_classes = train_set.num_classes
    net = config.network(train_set.num_inputs, num_classes)
    _check_fits(net, train_set, num_classes)
    _check_fits(net, test_set, num_classes)
    if train_set.num_steps is not None:
        config.num_steps = train_set.num_steps  # event data sets fix the number of steps

    model = Model(
        net,
        loss=_losses.get(config.loss),
        optimizer=config.make_optimizer(),
        device=config.device,
        num_steps=config.num_steps,
        batch_size=_distributed.local_batch_size(config.batch_size, ranks),
        seed=config.seed,
    )
    model = _distributed.data_parallel(model, ranks)
    rng = np.random.default_rng(config.seed)
    history = {
        "epoch": [],
        "train_loss": [],
        "train_accuracy": [],
        "test_loss": [],
        "test_accuracy": [],
        "train_images_per_s": [],
        "activity": [],
        "step_loss": [],
        "lr": [],
    }
    first_epoch = 0
    if resume is not None:
        first_epoch, history = _resume(model, rng, resume, history)
        log(f"popsnn: resumed from {resume} after epoch {first_epoch}")
    model_since = first_epoch + 1  # the first epoch `model` (and its profile) ran here

    probe_x = test_set.inputs(np.arange(min(PROBE_SAMPLES, len(test_set))))
    probe_x = _encode(probe_x, config, np.random.default_rng(config.seed))
    train_seconds = 0.0
    trained_samples = 0
    for epoch in range(first_epoch + 1, config.epochs + 1):
        # The engines keep the learning rate in device memory: a new rate is a small host
        # write, no recompile. Set every epoch (a resumed run's optimiser state carries the
        # saved run's last rate).
        lr = config.lr_at(epoch)
        model.set_learning_rate(lr)
        losses, correct, seen, epoch_seconds = [], 0.0, 0, 0.0
        # The postfix's img/s counts train-step time only (tqdm's own rate would add data
        # loading), the same figure as the summary's.
        bar = tqdm(
            total=len(train_set),
            unit="img",
            desc=f"epoch {epoch}/{config.epochs}",
            disable=not progress,
            file=sys.stderr,
            leave=True,
            dynamic_ncols=True,
            bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} "
            "[{elapsed}<{remaining}{postfix}]",
        )
        for x, y in _data.batches(train_set, config.batch_size, shuffle=True, rng=rng):
            x = _encode(x, config, rng)
            start = time.perf_counter()
            loss, out = model.train_step(x, y)
            epoch_seconds += time.perf_counter() - start
            losses.append(loss)
            correct += model.accuracy(out, y) * len(y)
            seen += len(y)
            bar.update(len(y))
            bar.set_postfix(
                {
                    "img/s": f"{seen / epoch_seconds:.0f}",
                    "loss": f"{loss:.4f}",
                    "acc": f"{100 * correct / seen:.2f}%",
                },
                refresh=False,
            )
        bar.close()
        train_seconds += epoch_seconds
        trained_samples += seen
        test = evaluate(model, test_set, config)
        rec = model.record(probe_x)
        history["epoch"].append(epoch)
        history["train_loss"].append(float(np.mean(losses)))
        history["train_accuracy"].append(correct / seen)
        history["test_loss"].append(test["loss"])
        history["test_accuracy"].append(test["accuracy"])
        history["train_images_per_s"].append(seen / epoch_seconds)
        history["activity"].append([float(s.mean()) for s in rec.spikes])
        history["step_loss"].extend(losses)
        history["lr"].append(lr)
        log(
            f"epoch {epoch}: lr {lr:.3g}, train loss {history['train_loss'][-1]:.4f}, "
            f"train accuracy "
            f"{100 * correct / seen:.2f}%, test accuracy {100 * test['accuracy']:.2f}%, "
            f"{seen / epoch_seconds:.0f} images/s on {model.device}"
        )
        if ranks.is_root:
            _checkpoint.save(
                out_dir / CHECKPOINT_NAME,
                net=net,
                params=model.get_params(),
                optimizer_state=model.optimizer_state(),
                epoch=epoch,
                rng_state=rng.bit_generator.state,
                config=config.to_dict(),
                history=history,
            )

    wall = time.perf_counter() - wall_start
    summary = {
        "device": model.device,
        "epochs": len(history["epoch"]),
        "train_samples": len(train_set),
        "test_samples": len(test_set),
        "train_accuracy": history["train_accuracy"][-1] if history["epoch"] else None,
        "test_accuracy": history["test_accuracy"][-1] if history["epoch"] else None,
        # Training throughput of this session: forward + backward + update, data loading and
        # evaluation excluded.
        "train_images_per_s": trained_samples / train_seconds if train_seconds else None,
        "wall_seconds": wall,
        "network": "-".join(
            str(n) for n in [net.num_inputs] + [l.out_features for l, _ in net.pairs]
        ),
        "neuron": config.neuron,
        "num_steps": config.num_steps,
        "batch_size": config.batch_size,
    }
    metrics = {
        "config": config.to_dict(),
        "summary": summary,
        "history": history,
        # The profile covers the epochs this session ran (one model throughout: the
        # learning rate changes without a rebuild).
        "profile": _jsonable(dict(model.profile(), epochs=[model_since, epoch_label(history)])),
    }
    if not ranks.is_root:
        return metrics
    out_dir.mkdir(parents=True, exist_ok=True)
    _write_json(out_dir / METRICS_NAME, metrics)
    if config.plots and history["epoch"]:
        from . import plots

        plots.plot_curves(history, out_dir / "curves.png")
        plots.plot_activity(history, out_dir / "activity.png")
        plots.plot_raster(
            model.record(probe_x[:, :1] if probe_x.ndim == 3 else probe_x[:1]).spikes,
            out_dir / "raster.png",
            title=f"Spike raster, test sample 0 (label "
            f"{int(test_set.labels[0])}), after epoch {epoch_label(history)}",
        )
    log(summary_table(summary))
    written = sorted(p.name for p in out_dir.iterdir() if p.suffix in (".npz", ".json", ".png"))
    log(f"written to {out_dir}: {', '.join(written)}")
    return metrics


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


# --------------------------------------------------------------------------------------------
# Command line: `popsnn train`

_FLAG_HELP = {
    "dataset": "data set: mnist (embedded copy), fashion-mnist, shd or nmnist",
    "data": "folder of the data set: IDX files (train-images-idx3-ubyte[.gz], ...) for "
    "(fashion-)mnist, shd_train.h5 + shd_test.h5 for shd, Train/ + Test/ for nmnist",
    "hidden": "hidden layer widths, comma-separated (default 1000)",
    "neuron": "neuron model: leaky, synaptic or rleaky",
    "beta": "membrane decay beta",
    "alpha": "synaptic current decay alpha (synaptic only)",
    "threshold": "firing threshold",
    "surrogate": "surrogate gradient: fast_sigmoid, atan, sigmoid or straight_through",
    "sparse": "sparse backward rule: none, window:B_TH or one_sided:THETA_GRAD",
    "sparse_layers": "layers the sparse rule covers: hidden (default; the readout keeps the "
    "dense surrogate) or all",
    "encoding": "input encoding: direct (current), rate or latency",
    "loss": "loss function",
    "optimizer": "adam, adamw or sgd",
    "lr": "learning rate of the first epoch",
    "lr_decay": "multiply the learning rate by this after every epoch (1: constant)",
    "batch_size": "minibatch size",
    "num_steps": "time steps per sample",
    "epochs": "epochs (in all, when resuming)",
    "device": "auto, reference, cpu, ipu-model or ipu",
    "seed": "seed of init and shuffling",
    "limit_train": "use only the first N training samples",
    "limit_test": "use only the first N test samples",
    "output": "folder for checkpoint.npz, metrics.json and the PNG pictures",
}
_FLAG_TYPES = {
    "beta": float,
    "alpha": float,
    "threshold": float,
    "lr": float,
    "lr_decay": float,
    "batch_size": int,
    "num_steps": int,
    "epochs": int,
    "seed": int,
    "limit_train": int,
    "limit_test": int,
}


def add_arguments(parser) -> None:
    """The flags of `popsnn train`: one per Config field (default: the config file's value,
    else Config's default)."""
    parser.add_argument("--config", metavar="FILE", help="TOML file of options (flags win)")
    for name in FIELDS:
        if name == "plots":
            continue
        flag = "--" + name.replace("_", "-")
        parser.add_argument(
            flag,
            dest=name,
            type=_FLAG_TYPES.get(name, str),
            default=None,
            help=_FLAG_HELP.get(name),
        )
    parser.add_argument(
        "--steps", dest="num_steps", type=int, default=None, help="same as --num-steps"
    )
    parser.add_argument(
        "--no-plots",
        dest="plots",
        action="store_const",
        const=False,
        default=None,
        help="do not draw the PNG pictures",
    )
    parser.add_argument(
        "--resume",
        nargs="?",
        const="",
        default=None,
        metavar="CHECKPOINT",
        help="continue from a checkpoint (default: <output>/checkpoint.npz)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run_cli(args) -> int:
    overrides = {name: getattr(args, name) for name in FIELDS}
    try:
        config = make_config(args.config, **overrides)
        resume = None
        if args.resume is not None:
            resume = args.resume or str(Path(config.output) / CHECKPOINT_NAME)
        fit(config, resume=resume, progress=not args.no_progress)
    except OSError as err:  # a file or folder the run needs: name it, no traceback
        where = f" {err.filename}" if err.filename else ""
        print(f"popsnn train: error:{where} {err.strerror or err}", file=sys.stderr)
        return 2
    except (
        ConfigError,
        _data.DataError,
        _checkpoint.CheckpointError,
        ValueError,
        TypeError,
        ImportError,
        RuntimeError,
        MemoryError,
    ) as err:
        print(
            f"popsnn train: error: {' '.join(str(err).split()) or type(err).__name__}",
            file=sys.stderr,
        )
        return 2
    return 0
