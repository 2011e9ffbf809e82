"""`popsnn train`: one flag per training option (defaults shown in --help), and one clear
line for every error."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from . import checkpoint as _checkpoint
from . import data as _data
from . import distributed as _distributed
from . import train as _train
from .train_config import _DEFAULTS, FIELDS, Config, make_config

_FLAG_HELP = {
    "dataset": "data set: mnist (embedded copy), fashion-mnist, shd or nmnist",
    "data": "folder of the data set: IDX files (train-images-idx3-ubyte[.gz], ...) for "
    "(fashion-)mnist, shd_train.h5 + shd_test.h5 for shd, Train/ + Test/ for nmnist",
    "model": "network: dsnn (Linear layers of widths --hidden) or csnn (Sun et al.'s "
    "12C5-MP2-64C5-MP2-10 convolutional SNN; every device with leaky neurons)",
    "hidden": "hidden layer widths, comma-separated (dsnn)",
    "neuron": "neuron model: leaky, synaptic, rleaky, alpha or lapicque",
    "beta": "membrane decay beta",
    "alpha": "synaptic current decay alpha (synaptic and alpha only)",
    "threshold": "firing threshold",
    "surrogate": "surrogate gradient: fast_sigmoid, atan, sigmoid or straight_through",
    "sparse": "sparse backward rule: none, window:B_TH or one_sided:THETA_GRAD",
    "sparse_layers": "layers the sparse rule covers: hidden (the readout keeps the dense "
    "surrogate) or all",
    "encoding": "input encoding: direct (current), rate or latency",
    "loss": "loss function: ce_count, ce_rate, mse_count, mse_membrane or ce_max_membrane",
    "population": "output neurons per class; above 1 a population code (ce_count, mse_count)",
    "correct_rate": "mse_count: target firing rate of the label's output neurons",
    "incorrect_rate": "mse_count: target firing rate of the other output neurons",
    "on_target": "mse_membrane: membrane target of the label's output neuron",
    "off_target": "mse_membrane: membrane target of the other output neurons",
    "optimizer": "adam, adamw or sgd",
    "lr": "learning rate of the first epoch",
    "lr_decay": "multiply the learning rate by this after every epoch (1: constant)",
    "batch_size": "minibatch size",
    "num_steps": "time steps per sample",
    "epochs": "epochs (in all, when resuming)",
    "device": "auto, reference, cpu, ipu-model or ipu",
    "dtype": "float32, or float16: half storage of weights, traces and exchanged values, "
    "float32 sums and master weights (reference and engine devices; Linear layers on the engine)",
    "loss_scale": "float16: dynamic (skip steps whose gradients overflow, halve the scale; "
    "double it after 2000 good steps) or a number (a static scale)",
    "max_activity": "engines: fraction of a layer's neurons a spike buffer holds per step "
    "(1: never overflows; lower: less memory)",
    "num_ipus": "ipu-model / ipu: number of IPUs",
    "tiles_per_ipu": "ipu-model / ipu: tiles per IPU",
    "seed": "seed of init and shuffling",
    "limit_train": "use only the first N training samples (default: all)",
    "limit_test": "use only the first N test samples (default: all)",
    "output": "folder for checkpoint.npz, metrics.json and the PNG pictures",
}
# Options that are off unless their flag is given.
_SWITCHES = {
    "learn_beta": "train each neuron layer's beta as a parameter (not lapicque)",
    "learn_threshold": "train each neuron layer's threshold as a parameter",
}
_FLAG_TYPES = {
    "population": int,
    "correct_rate": float,
    "incorrect_rate": float,
    "on_target": float,
    "off_target": float,
    "max_activity": float,
    "num_ipus": int,
    "tiles_per_ipu": int,
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
        if name in _SWITCHES or name in ("plots", "profile"):
            continue
        flag = "--" + name.replace("_", "-")
        parser.add_argument(
            flag,
            dest=name,
            type=_FLAG_TYPES.get(name, str),
            default=None,
            help=_with_default(_FLAG_HELP[name], name),
        )
    for name, text in _SWITCHES.items():
        parser.add_argument(
            "--" + name.replace("_", "-"),
            dest=name,
            action="store_const",
            const=True,
            default=None,
            help=text,
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
    parser.add_argument(
        "--profile",
        dest="profile",
        action="store_const",
        const=True,
        default=None,
        help="print where a training step's time goes: per phase and layer, compute, "
        "exchange and sync (IPU cost-model estimates) beside the measured images/s",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _with_default(text: str, name: str) -> str:
    default = _DEFAULTS.get(name)
    if isinstance(default, list) or name == "hidden":
        default = ",".join(map(str, Config().hidden))
    shown = "the device's" if default is None and name in ("num_ipus", "tiles_per_ipu") else default
    if default is None and shown is None:
        return text
    return f"{text} (default: {shown})".replace("%", "%%")


_QUIET_RANK_WAIT_S = 10.0

# The engine's fixes name its Python options; the CLI's user gets the flags.
_FIX_FLAGS = (
    ("tiles_per_ipu", "--tiles-per-ipu"),
    ("num_ipus", "--num-ipus"),
    ("max_activity", "--max-activity"),
    ("a smaller batch", "a smaller --batch-size"),
    ("fewer steps", "fewer --num-steps"),
)


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    if "does not fit" in text:
        for option, flag in _FIX_FLAGS:
            text = text.replace(option, flag)
    return text


def run_cli(args) -> int:
    overrides = {name: getattr(args, name) for name in FIELDS}
    try:
        config = make_config(args.config, **overrides)
        resume = None
        if args.resume is not None:
            resume = args.resume or str(Path(config.output) / _train.CHECKPOINT_NAME)
        _train.fit(config, resume=resume, progress=not args.no_progress)
    except OSError as err:  # a file or folder the run needs: name it, no traceback
        where = f" {err.filename}" if err.filename else ""
        _error(f"{where.strip()} {err.strerror or err}".strip(), same_on_every_rank=False)
        return 2
    except _train.ConfigError as err:  # the flags are every rank's: rank 0 says it once
        _error(_one_line(err), same_on_every_rank=True)
        return 2
    except (
        _data.DataError,
        _checkpoint.CheckpointError,
        ValueError,
        TypeError,
        ImportError,
        RuntimeError,
        MemoryError,
    ) as err:
        _error(_one_line(err), same_on_every_rank=False)
        return 2
    return 0


def _error(text: str, same_on_every_rank: bool) -> None:
    """One line on stderr. Under mpirun an error of the options is said by rank 0 alone;
    others (a file one host lacks, say) by each rank that meets them, naming it."""
    rank, size = _distributed.launched_rank()
    if size == 1:
        print(f"popsnn train: error: {text}", file=sys.stderr)
    elif rank == 0 or not same_on_every_rank:
        print(f"popsnn train (rank {rank} of {size}): error: {text}", file=sys.stderr, flush=True)
    else:
        # mpirun ends the job when the first rank exits non-zero: leave rank 0 the time to
        # say it (it exits first and ends this rank's wait).
        time.sleep(_QUIET_RANK_WAIT_S)
