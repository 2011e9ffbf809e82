"""The options of a training run (`popsnn train`'s flags and TOML keys): `Config`, its checks,
and the TOML reader. Defaults come from popsnn.defaults, the one schema."""

from __future__ import annotations

import dataclasses
import numbers
import os
from dataclasses import MISSING, dataclass, field
from pathlib import Path

from . import data as _data
from . import layers as _layers
from . import losses as _losses
from . import optim as _optim
from . import precision as _precision
from . import sparse as _sparse
from . import surrogate as _surrogate
from ._checks import positive_int
from .conv import Conv2d, Flatten, MaxPool2d
from .defaults import LOSS, NEURON, RUN
from .model import DEVICES
from .validation import check_sizes

NEURONS = ("leaky", "synaptic", "rleaky", "alpha", "lapicque")
# The neurons that take the second decay `alpha`.
_TAKE_ALPHA = ("synaptic", "alpha")
SPARSE_LAYERS = ("hidden", "all")
MODELS = ("dsnn", "csnn")
DEFAULT_HIDDEN = (1000,)  # Sun et al.'s DSNN 784-1000-10
# Per-sample image shapes the CSNN takes, by input size (MNIST and Fashion-MNIST; N-MNIST).
_IMAGE_SHAPES = {784: (1, 28, 28), 2 * 34 * 34: (2, 34, 34)}
ENCODINGS = ("direct", "rate", "latency")


class ConfigError(ValueError):
    """An option that does not exist or has a value it cannot take."""


@dataclass
class Config:
    """Every option of a training run (the CLI's flags and the TOML file's keys)."""

    dataset: str = "mnist"  # mnist | fashion-mnist | shd | nmnist
    data: str | None = None  # folder of IDX files; None: the default location
    model: str = "dsnn"  # dsnn: Linear layers of widths `hidden`; csnn: Sun et al.'s CSNN
    hidden: list = field(default_factory=lambda: list(DEFAULT_HIDDEN))
    neuron: str = "leaky"  # leaky | synaptic | rleaky | alpha | lapicque
    beta: float = NEURON["beta"]
    alpha: float = NEURON["alpha"]  # synaptic and alpha only
    threshold: float = NEURON["threshold"]
    learn_beta: bool = False  # train beta (per layer) as a parameter
    learn_threshold: bool = False  # train the threshold (per layer) as a parameter
    surrogate: str = "fast_sigmoid"  # the DSNN recipe's; neurons default to atan
    sparse: str = "none"  # none | window:B_TH | one_sided:THETA_GRAD
    sparse_layers: str = "hidden"  # hidden | all: which layers the sparse rule covers
    encoding: str = "direct"  # direct | rate | latency
    loss: str = LOSS["name"]  # ce_count | ce_rate | mse_count | mse_membrane | ce_max_membrane
    population: int = 1  # output neurons per class; > 1: a population code (ce/mse_count)
    correct_rate: float = LOSS["correct_rate"]  # mse_count: target rate of the label's neurons
    incorrect_rate: float = LOSS["incorrect_rate"]  # mse_count: target rate of the others
    on_target: float = LOSS["on_target"]  # mse_membrane: the label's membrane target
    off_target: float = LOSS["off_target"]  # mse_membrane: the others' target
    optimizer: str = "adam"  # adam | adamw | sgd
    lr: float = 5e-4  # learning rate of the first epoch
    lr_decay: float = 0.5  # lr of epoch e is lr * lr_decay**(e-1); 1: constant
    batch_size: int = 128
    num_steps: int = 25
    epochs: int = 3  # 3 reach >= 97.5% test accuracy on MNIST
    device: str = "auto"  # auto | reference | cpu | ipu-model | ipu
    dtype: str = "float32"  # float32 | float16 (half storage, float32 accumulation)
    loss_scale: str | float = "dynamic"  # float16: "dynamic" (GradScaler's rule) or a number
    max_activity: float = RUN["max_activity"]  # engines: spike-buffer capacity per neuron-step
    num_ipus: int | None = None  # ipu-model / ipu: IPUs (None: the device's default)
    tiles_per_ipu: int | None = None  # ipu-model / ipu: tiles per IPU (None: the default)
    seed: int = 0
    limit_train: int | None = None
    limit_test: int | None = None
    output: str = "runs/popsnn"
    plots: bool = True
    profile: bool = False  # print where a training step's time goes (IPU cost-model estimates)

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
        _choice("model", self.model, MODELS)
        if self.model == "csnn" and self.dataset == "shd":
            raise ConfigError("model=csnn takes images; shd is not one: use model=dsnn")
        if self.model == "csnn" and self.device not in ("auto", "reference"):
            if self.neuron != "leaky":
                raise ConfigError(
                    f"model=csnn on device {self.device!r} runs leaky neurons only for now, "
                    f"not {self.neuron}; use --neuron leaky or --device reference"
                )
        _choice("neuron", self.neuron, NEURONS)
        _choice("sparse_layers", self.sparse_layers, SPARSE_LAYERS)
        _choice("encoding", self.encoding, ENCODINGS)
        _choice("device", self.device, ("auto",) + DEVICES)
        _choice("loss", self.loss, _losses.NAMES)
        _choice("optimizer", self.optimizer, _optim.NAMES)
        self._check_ignored_network_options()
        for name in ("batch_size", "num_steps", "epochs"):
            setattr(self, name, positive_int(name, getattr(self, name)))
        self.population = positive_int("population", self.population)
        for name in ("limit_train", "limit_test", "num_ipus", "tiles_per_ipu"):
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
        _check_max_activity(self.max_activity)
        self.precision_options()
        net = self.network(784, 10 * self.population)  # checks neuron options and sparse
        check_sizes(net, self.num_steps, self.batch_size)  # before any data is loaded
        self.make_loss(10)
        self.device_options()
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
        if self.model == "csnn":
            return self._csnn(num_inputs, num_outputs, rule)
        sizes = [num_inputs] + list(self.hidden) + [num_outputs]
        layers = []
        for i, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:])):
            layers.append(_layers.Linear(n_in, n_out))
            layers.append(self._neuron(rule, readout=i == len(sizes) - 2))
        return _layers.Sequential(*layers)

    def _neuron(self, rule, readout: bool):
        common = dict(
            threshold=self.threshold,
            learn_threshold=self.learn_threshold,
            surrogate=_surrogate.get(self.surrogate),
            sparse=None if readout and self.sparse_layers == "hidden" else rule,
        )
        if self.neuron == "lapicque":
            return _layers.Lapicque(beta=self.beta, **common)
        common["learn_beta"] = self.learn_beta
        if self.neuron == "leaky":
            return _layers.Leaky(beta=self.beta, **common)
        if self.neuron == "synaptic":
            return _layers.Synaptic(alpha=self.alpha, beta=self.beta, **common)
        if self.neuron == "alpha":
            return _layers.Alpha(alpha=self.alpha, beta=self.beta, **common)
        return _layers.RLeaky(beta=self.beta, **common)

    def _csnn(self, num_inputs: int, num_outputs: int, rule) -> _layers.Sequential:
        """Sun et al.'s CSNN: 12C5-MP2-64C5-MP2-N (`hidden` set is refused earlier)."""
        if num_inputs not in _IMAGE_SHAPES:
            raise ConfigError(
                f"model=csnn takes images (mnist, fashion-mnist, nmnist); {self.dataset} has "
                f"{num_inputs} inputs per sample; use model=dsnn"
            )
        if self.neuron not in ("leaky", "synaptic"):
            raise ConfigError(
                f"model=csnn runs leaky or synaptic neurons, not {self.neuron}; use --neuron leaky"
            )
        shape = _IMAGE_SHAPES[num_inputs]
        net = _layers.Sequential(
            Conv2d(shape[0], 12, 5),
            MaxPool2d(2),
            self._neuron(rule, readout=False),
            Conv2d(12, 64, 5),
            MaxPool2d(2),
            self._neuron(rule, readout=False),
            input_shape=shape,
        )
        flat = net.num_outputs
        return _layers.Sequential(
            *net.layers,
            Flatten(),
            _layers.Linear(flat, num_outputs),
            self._neuron(rule, readout=True),
            input_shape=shape,
        )

    def _check_ignored_network_options(self) -> None:
        """An option the chosen network would not use, set away from its default, is an
        error (it would be ignored otherwise)."""
        if self.alpha != _DEFAULTS["alpha"] and self.neuron not in _TAKE_ALPHA:
            raise ConfigError(
                f"option alpha applies to the {' and '.join(_TAKE_ALPHA)} neurons, not "
                f"{self.neuron}; pass --neuron synaptic or leave alpha at its default"
            )
        if self.model == "csnn" and tuple(self.hidden) != DEFAULT_HIDDEN:
            raise ConfigError(
                f"option hidden sets the dsnn's layer widths; model=csnn has fixed layers "
                f"(12C5-MP2-64C5-MP2-10), got hidden {self.hidden}: drop --hidden or use "
                f"--model dsnn"
            )
        if self.sparse_layers != _DEFAULTS["sparse_layers"] and self.sparse_rule() is None:
            raise ConfigError(
                f"option sparse_layers={self.sparse_layers!r} picks the layers a sparse rule "
                f"covers, and sparse is none; pass --sparse window:B_TH (or one_sided:THETA) "
                f"or leave sparse_layers at its default"
            )
        if self.neuron == "alpha" and not self.beta < self.alpha:
            raise ConfigError(
                f"neuron alpha needs beta < alpha (snnTorch's rule), got alpha {self.alpha}, "
                f"beta {self.beta}; pass e.g. --alpha 0.95 --beta 0.9"
            )
        if self.learn_beta is True and self.neuron == "lapicque":
            raise ConfigError(
                "learn_beta does not apply to lapicque neurons (their decay comes from R and "
                "C); use --neuron leaky or drop --learn-beta"
            )

    def make_loss(self, num_classes: int) -> _losses.Loss:
        """The loss with its options. An option the chosen loss does not take, set away from
        its default, is an error (it would be ignored otherwise)."""
        takes = _LOSS_OPTIONS.get(self.loss, ())
        for name in _LOSS_OPTION_NAMES:
            if name not in takes and getattr(self, name) != _DEFAULTS[name]:
                users = [k for k, v in _LOSS_OPTIONS.items() if name in v]
                raise ConfigError(
                    f"option {name} applies to the {' and '.join(users)} loss(es), not "
                    f"{self.loss}; pass --loss {users[0]} or leave {name} at its default"
                )
        kwargs = {k: getattr(self, k) for k in takes if k != "population"}
        if self.population > 1:
            kwargs.update(population_code=True, num_classes=num_classes)
        return _losses.get(self.loss, **kwargs)

    def device_options(self) -> dict:
        """Options of the engine devices, the ones set away from their defaults."""
        options = {
            name: getattr(self, name)
            for name in ("max_activity", "num_ipus", "tiles_per_ipu")
            if getattr(self, name) != _DEFAULTS[name]
        }
        if options and self.device == "reference":
            raise ConfigError(
                f"option(s) {', '.join(options)} configure popsnn's engine; the reference "
                f"device has none: pass --device cpu or ipu-model, or drop them"
            )
        ipu = {k: v for k, v in options.items() if k != "max_activity"}
        if ipu and self.device not in ("ipu-model", "ipu"):
            raise ConfigError(
                f"option(s) {', '.join(ipu)} describe an IPU; pass --device ipu-model (or "
                f"ipu), or drop them (device {self.device} uses this machine's threads)"
            )
        return options

    def precision_options(self) -> dict:
        """Model's dtype and loss_scale, checked before any data is loaded (the engine
        refuses, in one line, what its half path has not built when the Model is made)."""
        dtype = _precision.check_dtype(self.dtype)
        if dtype == "float32":
            if self.loss_scale != _DEFAULTS["loss_scale"]:
                raise ConfigError(
                    f"loss_scale applies to --dtype float16 only, got loss_scale "
                    f"{self.loss_scale!r} with float32; drop it or pass --dtype float16"
                )
            return {"dtype": dtype}
        scale = self.loss_scale
        if isinstance(scale, str) and scale != "dynamic":
            try:
                scale = float(scale)
            except ValueError:
                scale = self.loss_scale  # make_scaler names it
        return {"dtype": dtype, "loss_scale": _precision.make_scaler(dtype, scale)}

    def make_optimizer(self, lr: float | None = None) -> _optim.Optimizer:
        return _optim.get(self.optimizer, lr=self.lr if lr is None else lr)

    def lr_at(self, epoch: int) -> float:
        """Learning rate of epoch `epoch` (1-based): lr * lr_decay**(epoch - 1)."""
        return self.lr * self.lr_decay ** (epoch - 1)


FIELDS = tuple(f.name for f in dataclasses.fields(Config))
_DEFAULTS = {f.name: f.default for f in dataclasses.fields(Config) if f.default is not MISSING}
# The loss options each loss takes (population: any loss with a population code).
_LOSS_OPTIONS = {
    "ce_count": ("population",),
    "mse_count": ("population", "correct_rate", "incorrect_rate"),
    "mse_membrane": ("on_target", "off_target"),
}
_LOSS_OPTION_NAMES = ("population", "correct_rate", "incorrect_rate", "on_target", "off_target")


def _check_max_activity(value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise ConfigError(
            f"max_activity must be a number in (0, 1] (the fraction of a layer's neurons "
            f"a spike buffer holds per step; 1 never overflows), got {value!r}"
        )


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
