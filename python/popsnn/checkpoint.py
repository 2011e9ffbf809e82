"""Checkpoints: one `.npz` file (no pickle) holding the weights, the optimiser state, and a JSON
document with the epoch, the RNG state, the network description and the run's config.

Files are written atomically (temp file in the same folder, fsync, `os.replace`), so a crash or a
failed save never leaves a half-written checkpoint in place of the previous one. Loading checks
the file and, when given the network it is meant for, the layer shapes; any problem raises
`CheckpointError` saying what is wrong and what to do.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import lzma
import os
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from . import conv as _conv
from . import layers as _layers
from . import sparse as _sparse
from . import surrogate as _surrogate

FORMAT = "popsnn-checkpoint"
VERSION = 1
_META_KEY = "__meta__"


class CheckpointError(ValueError):
    """A checkpoint that cannot be read or does not fit the network it is loaded into."""


# --------------------------------------------------------------------------------------------
# The network description as JSON


_SHAPE_LAYERS = {c.__name__: c for c in (_conv.Conv2d, _conv.MaxPool2d, _conv.AvgPool2d)}


def _neuron_to_dict(neuron) -> dict:
    """The layer's constructor arguments as given (network_from_dict rebuilds it from them):
    every model's constants without a list of models here (Lapicque's beta or R and C may be
    None; trained values are in the weights). `inhibition` is refused until supported."""
    d = {"type": type(neuron).__name__}
    for f in dataclasses.fields(neuron):
        if f.init and f.name != "inhibition":
            d[f.name] = getattr(neuron, f.name)  # a number, or a tuple (one per neuron)
    d["surrogate"] = {"name": neuron.surrogate.name, "param": neuron.surrogate.param}
    if neuron.sparse is not None:
        d["sparse"] = {"kind": neuron.sparse.kind, "value": neuron.sparse.value}
    return d


def network_to_dict(net: _layers.Sequential) -> list:
    """The network description as JSON-able data (inverse: `network_from_dict`). A network
    with convolution or pooling starts with {"type": "Input", "shape": [C, H, W]}."""
    out = [] if net.is_linear else [{"type": "Input", "shape": list(net.input_shape)}]
    for layer in net.layers:
        if isinstance(layer, _layers.Linear):
            out.append(
                {
                    "type": "Linear",
                    "in_features": layer.in_features,
                    "out_features": layer.out_features,
                    "bias": layer.bias,
                }
            )
        elif isinstance(layer, _conv.Flatten):
            out.append({"type": "Flatten"})
        elif type(layer).__name__ in _SHAPE_LAYERS:
            fields = dataclasses.asdict(layer)
            out.append(
                {"type": type(layer).__name__, **{k: _jsonable(v) for k, v in fields.items()}}
            )
        else:
            out.append(_neuron_to_dict(layer))
    return out


def _jsonable(value):
    return list(value) if isinstance(value, tuple) else value


def network_from_dict(layers: list) -> _layers.Sequential:
    built, input_shape = [], None
    for d in layers:
        d = dict(d)
        kind = d.pop("type")
        if kind == "Input":
            input_shape = tuple(d["shape"])
            continue
        if kind == "Linear":
            built.append(_layers.Linear(**d))
            continue
        if kind == "Flatten":
            built.append(_conv.Flatten())
            continue
        if kind in _SHAPE_LAYERS:
            built.append(_SHAPE_LAYERS[kind](**d))
            continue
        cls = {c.__name__: c for c in _layers.NEURON_TYPES}.get(kind)
        if cls is None:
            raise CheckpointError(f"unknown layer type {kind!r} in the network description")
        s = d.pop("surrogate")
        d["surrogate"] = _surrogate.Surrogate(s["name"], s["param"])
        rule = d.pop("sparse")
        d["sparse"] = None if rule is None else _sparse.SparseRule(rule["kind"], rule["value"])
        built.append(cls(**d))
    return _layers.Sequential(*built, input_shape=input_shape)


# --------------------------------------------------------------------------------------------
# Nested state (lists, dicts, arrays, scalars) <-> flat arrays + a JSON skeleton


def _flatten(obj, prefix: str, arrays: dict):
    """JSON skeleton of `obj`; each array is replaced by {"__array__": key} and stored."""
    if isinstance(obj, np.ndarray):
        key = f"{prefix}"
        arrays[key] = obj
        return {"__array__": key}
    if isinstance(obj, dict):
        if not all(isinstance(k, str) for k in obj):
            raise TypeError(f"checkpoint state at {prefix!r}: dict keys must be strings")
        return {"__dict__": {k: _flatten(v, f"{prefix}/{k}", arrays) for k, v in obj.items()}}
    if isinstance(obj, (list, tuple)):
        return {"__list__": [_flatten(v, f"{prefix}/{i}", arrays) for i, v in enumerate(obj)]}
    if isinstance(obj, np.generic):
        return obj.item()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(
        f"checkpoint state at {prefix!r}: cannot store {type(obj).__name__}; "
        f"use arrays, numbers, strings, lists and dicts"
    )


def _unflatten(skeleton, arrays):
    if isinstance(skeleton, dict):
        if "__array__" in skeleton:
            return np.array(arrays[skeleton["__array__"]])
        if "__dict__" in skeleton:
            return {k: _unflatten(v, arrays) for k, v in skeleton["__dict__"].items()}
        if "__list__" in skeleton:
            return [_unflatten(v, arrays) for v in skeleton["__list__"]]
    return skeleton


# --------------------------------------------------------------------------------------------
# Save and load


def save(
    path,
    *,
    net: _layers.Sequential,
    params: list,
    optimizer_state: dict | None = None,
    epoch: int = 0,
    rng_state: dict | None = None,
    config: dict | None = None,
    history: Any | None = None,
) -> Path:
    """Write a checkpoint atomically to `path` (a `.npz` file) and return its path."""
    path = Path(path)
    arrays: dict = {}
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "epoch": int(epoch),
        "network": network_to_dict(net),
        "params": _flatten([dict(p) for p in params], "params", arrays),
        "optimizer": _flatten(optimizer_state, "optimizer", arrays),
        "rng_state": _flatten(rng_state, "rng", arrays),
        "config": _flatten(config, "config", arrays),
        "history": _flatten(history, "history", arrays),
    }
    arrays[_META_KEY] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temp_files(path)
    # The writer's pid in the name tells a live writer's temp file from a killed one's.
    fd, tmp = tempfile.mkstemp(
        prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent
    )
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    # The rename itself is durable only once the folder entry is synced.
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass  # not every file system lets a folder be fsynced; the data is already safe
    return path


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's live process
    return True


def remove_stale_temp_files(path) -> list:
    """Delete the temp files that killed writes of checkpoint `path` left behind (their
    writer's process is gone); a live writer's file is kept. Returns the paths removed."""
    path = Path(path)
    removed = []
    for tmp in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
        pid = tmp.name[len(path.name) + 2 :].split(".", 1)[0]
        if pid.isdigit() and int(pid) > 0 and _pid_alive(int(pid)):
            continue
        try:
            tmp.unlink()
            removed.append(tmp)
        except OSError:
            pass  # gone already, or not ours to delete: it does no harm
    return removed


class Checkpoint(dict):
    """What `load` returns: keys `epoch`, `network` (a Sequential), `params`,
    `optimizer_state`, `rng_state`, `config`, `history`."""


def load(path, net: _layers.Sequential | None = None) -> Checkpoint:
    """Read a checkpoint; with `net`, also check it was made for a network of that shape."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(
            f"checkpoint {path} does not exist; pass the .npz file written by "
            f"a previous run (<output>/checkpoint.npz)"
        )
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        meta = json.loads(arrays.pop(_META_KEY).tobytes().decode())
    except (
        zipfile.BadZipFile,
        ValueError,
        KeyError,
        OSError,
        EOFError,
        RecursionError,
        UnicodeDecodeError,
        zlib.error,
        lzma.LZMAError,
        NotImplementedError,
        RuntimeError,
    ) as err:  # zipfile: unknown method, encrypted
        raise CheckpointError(
            f"checkpoint {path} is damaged or not a popsnn checkpoint "
            f"({type(err).__name__}: {err}); resume from another checkpoint "
            f"or start a fresh run"
        ) from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or meta.get("version") != VERSION:
        got = (meta.get("format"), meta.get("version")) if isinstance(meta, dict) else (None,) * 2
        raise CheckpointError(
            f"{path} is not a popsnn checkpoint of version {VERSION} "
            f"(format {got[0]!r}, version {got[1]!r})"
        )
    try:
        ckpt = _from_meta(meta, arrays)
        check_matches(ckpt, net, path)
    except CheckpointError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, RecursionError) as err:
        # Damaged metadata: whatever broke, the user needs the file and the damage.
        raise CheckpointError(
            f"checkpoint {path} has damaged metadata ({type(err).__name__}: "
            f"{err}); resume from another checkpoint or start a fresh "
            f"run"
        ) from None
    return ckpt


def _from_meta(meta: dict, arrays: dict) -> Checkpoint:
    epoch = meta["epoch"]
    if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
        raise ValueError(f"epoch must be an integer >= 0, got {epoch!r}")
    if not isinstance(meta["network"], list) or not all(
        isinstance(d, dict) for d in meta["network"]
    ):
        raise ValueError("the network description must be a list of layer objects")
    ckpt = Checkpoint(
        epoch=epoch,
        network=network_from_dict(meta["network"]),
        params=_unflatten(meta["params"], arrays),
        optimizer_state=_unflatten(meta["optimizer"], arrays),
        rng_state=_unflatten(meta["rng_state"], arrays),
        config=_unflatten(meta["config"], arrays),
        history=_unflatten(meta["history"], arrays),
    )
    if not isinstance(ckpt["params"], list) or not all(isinstance(p, dict) for p in ckpt["params"]):
        raise ValueError("the weights must be a list of per-layer dicts of arrays")
    for key, kind in (
        ("optimizer_state", dict),
        ("rng_state", dict),
        ("config", dict),
        ("history", dict),
    ):
        if ckpt[key] is not None and not isinstance(ckpt[key], kind):
            raise ValueError(
                f"{key} must be a {kind.__name__} or null, got {type(ckpt[key]).__name__}"
            )
    return ckpt


def _shapes(net: _layers.Sequential) -> list:
    return [(type(s.neuron).__name__, s.in_shape, s.out_shape, s.ops) for s in net.stages]


def check_matches(ckpt: Checkpoint, net: _layers.Sequential | None, path="checkpoint"):
    """Raise CheckpointError when the checkpoint's network or weights do not fit `net`."""
    if net is not None and _shapes(ckpt["network"]) != _shapes(net):
        raise CheckpointError(
            f"checkpoint {path} is for the network {_describe(ckpt['network'])} but this run "
            f"builds {_describe(net)}; use the same --hidden and --neuron as the run that "
            f"wrote it, or start a fresh run without --resume"
        )
    reference = ckpt["network"].init_params(0)
    if len(ckpt["params"]) != len(reference):
        raise CheckpointError(
            f"checkpoint {path} has weights for {len(ckpt['params'])} layers "
            f"but its network has {len(reference)}"
        )
    for i, (got, want) in enumerate(zip(ckpt["params"], reference)):
        for key, value in want.items():
            if not isinstance(got.get(key), np.ndarray) or got[key].shape != value.shape:
                shape = np.shape(got[key]) if key in got else "nothing"
                raise CheckpointError(
                    f"checkpoint {path}: layer {i} {key} is {shape}, "
                    f"expected {value.shape}; the file is damaged"
                )


def _describe(net: _layers.Sequential) -> str:
    return describe_network(net)


def describe_network(net: _layers.Sequential) -> str:
    """e.g. "784-1000-10 (Leaky)" or "1x28x28-12x12x12-64x4x4-10 (Leaky)": each stage's size."""
    shapes = [net.input_shape] + [s.out_shape for s in net.stages]
    kinds = sorted({type(s.neuron).__name__ for s in net.stages})
    return "-".join("x".join(map(str, s)) for s in shapes) + f" ({'/'.join(kinds)})"
