"""C++ reads checkpoints written by Python (popsnn/Checkpoint.hpp). examples/cpp_checkpoint,
built against the installed package, loads a file that popsnn.checkpoint.save wrote and
predicts exactly what Python predicts from the same file; damaged files (truncated, wrong
shapes, wrong dtype, NaN, bad metadata) are one line from C++ naming the problem, and the
reader (through the binding) agrees with Python's reader and never crashes on mutated bytes."""

from __future__ import annotations

import io
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest
from engine_helpers import build_against_installed
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import popsnn
from popsnn import _native, checkpoint, losses, optim
from popsnn.model import Model

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cpp_checkpoint"
STEPS, SAMPLES, INPUTS = 8, 6, 12


def _train_three_steps(net, optimizer, data_seed: int) -> Model:
    """`net` trained three steps on the engine (cpu, batch 4) on random input."""
    model = Model(
        net,
        losses.ce_count_loss(),
        optimizer,
        device="cpu",
        num_steps=STEPS,
        batch_size=4,
        seed=5,
    )
    rng = np.random.default_rng(data_seed)
    for _ in range(3):
        model.train_step(rng.uniform(0, 1.5, (4, INPUTS)), rng.integers(0, 3, 4))
    return model


def _trained_checkpoint(path: Path, optimizer=None) -> Path:
    """A small RLeaky/Leaky network trained a few steps on the engine, saved as `popsnn
    train` saves it (weights, optimiser state, config, a history with a NaN)."""
    net = popsnn.Sequential(
        popsnn.Linear(INPUTS, 16),
        popsnn.RLeaky(beta=0.9),
        popsnn.Linear(16, 3, bias=False),
        popsnn.Leaky(beta=0.8),
    )
    model = _train_three_steps(net, optimizer or optim.Adam(lr=0.02), data_seed=1)
    config = {"num_steps": STEPS, "batch_size": 4, "loss": "ce_count", "hidden": [16]}
    return checkpoint.save(
        path,
        net=net,
        params=model.get_params(),
        optimizer_state=model.optimizer_state(),
        epoch=3,
        config=config,
        history={"train_loss": [1.0, float("nan")]},
    )


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> Path:
    return _trained_checkpoint(tmp_path_factory.mktemp("ckpt") / "checkpoint.npz")


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> Path:
    build = build_against_installed(EXAMPLE, tmp_path_factory.mktemp("cpp_checkpoint"))
    return build / "cpp_checkpoint"


def _inputs(tmp_path) -> tuple[np.ndarray, Path]:
    x = np.random.default_rng(9).uniform(0, 1.5, (SAMPLES, INPUTS)).astype("<f4")
    path = tmp_path / "x.f32"
    x.tofile(path)
    return x, path


def test_cpp_predicts_what_python_predicts_from_the_same_checkpoint(saved, example, tmp_path):
    x, xpath = _inputs(tmp_path)
    run = subprocess.run(
        [str(example), str(saved), str(xpath), str(SAMPLES)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("checkpoint epoch 3: 2 layers")
    cpp_classes = [int(line.split()[3]) for line in lines[1:]]
    cpp_counts = np.array([[float(v) for v in line.split()[5:]] for line in lines[1:]])

    ckpt = checkpoint.load(saved)
    for device in ("cpu", "reference"):
        model = Model(
            ckpt["network"],
            device=device,
            num_steps=STEPS,
            batch_size=SAMPLES,
            params=ckpt["params"],
        )
        counts = model.infer(x).sum(axis=0)
        np.testing.assert_array_equal(cpp_counts, counts, err_msg=device)
        assert cpp_classes == list(np.argmax(counts, axis=1)), device
    assert cpp_counts.sum() > 0  # the comparison is about spikes, not silence


def test_the_cpp_reader_reads_what_python_saved(saved):
    got = _native.load_checkpoint(str(saved))
    ckpt = checkpoint.load(saved)
    assert (got["epoch"], got["num_steps"], got["batch_size"]) == (3, STEPS, 4)
    assert [(l["neuron"], l["inputs"], l["outputs"]) for l in got["layers"]] == [
        ("RLeaky", INPUTS, 16),
        ("Leaky", 16, 3),
    ]
    assert (got["optimizer"], got["lr"]) == ("adam", pytest.approx(0.02))
    for mine, theirs in zip(got["params"], ckpt["params"]):
        assert sorted(mine) == sorted(theirs)
        for key in theirs:
            np.testing.assert_array_equal(mine[key], theirs[key])
    steps, first, second = got["optimizer_state"]
    entries = {(l, k): s for l, k, s in ckpt["optimizer_state"]["state"]}
    assert steps == 3
    for (l, key), s in entries.items():
        np.testing.assert_array_equal(first[l][key], s["exp_avg"])
        np.testing.assert_array_equal(second[l][key], s["exp_avg_sq"])


def test_the_cpp_reader_derives_lapicques_constants_as_python(tmp_path):
    given = [dict(beta=0.85), dict(R=4.0, C=1.25), dict(beta=0.9, C=3.0, time_step=0.5)]
    layers = []
    for i, kw in enumerate(given):
        layers += [popsnn.Linear(INPUTS if i == 0 else 5, 5), popsnn.Lapicque(**kw)]
    net = popsnn.Sequential(*layers)
    config = {"num_steps": STEPS, "batch_size": 4, "loss": "ce_count"}
    path = checkpoint.save(
        tmp_path / "lapicque.npz", net=net, params=net.init_params(), config=config
    )
    got = _native.load_checkpoint(str(path))["layers"]
    for mine, (_, neuron) in zip(got, net.pairs):
        assert mine["neuron"] == "Lapicque"
        assert (mine["beta"], mine["gain"]) == (np.float32(neuron.decay), np.float32(neuron.gain))


def _constants_checkpoint(path: Path) -> tuple:
    """A network with per-neuron and learned constants (one per layer and per neuron) trained
    a few Adam steps on the engine and saved: (path, net)."""
    net = popsnn.Sequential(
        popsnn.Linear(INPUTS, 10),
        popsnn.Synaptic(
            alpha=np.linspace(0.5, 0.7, 10),
            beta=np.linspace(0.7, 0.9, 10),
            threshold=np.linspace(0.3, 0.6, 10),
            learn_beta=True,
        ),
        popsnn.Linear(10, 3),
        popsnn.Leaky(
            beta=0.85, threshold=0.1, reset_mechanism="zero", learn_beta=True, learn_threshold=True
        ),
    )
    model = _train_three_steps(net, optim.Adam(lr=0.005), data_seed=2)
    config = {"num_steps": STEPS, "batch_size": 4, "loss": "ce_count"}
    path = checkpoint.save(
        path,
        net=net,
        params=model.get_params(),
        optimizer_state=model.optimizer_state(),
        config=config,
    )
    return path, net


def test_the_cpp_reader_carries_per_neuron_and_learned_constants(example, tmp_path):
    path, net = _constants_checkpoint(tmp_path / "constants.npz")
    got = _native.load_checkpoint(str(path))
    ckpt = checkpoint.load(path)
    hidden, out = got["layers"]
    np.testing.assert_array_equal(hidden["betas"], np.float32(net.pairs[0][1].beta))
    np.testing.assert_array_equal(hidden["alphas"], np.float32(net.pairs[0][1].alpha))
    np.testing.assert_array_equal(hidden["thresholds"], np.float32(net.pairs[0][1].threshold))
    assert (hidden["learn_beta"], hidden["learn_threshold"]) == (True, False)
    assert (out["learn_beta"], out["learn_threshold"], out["betas"]) == (True, True, [])
    for mine, theirs in zip(got["params"], ckpt["params"]):
        assert sorted(mine) == sorted(theirs)
        for key in theirs:
            np.testing.assert_array_equal(mine[key], theirs[key])
    assert np.shape(got["params"][1]["beta"]) == () and np.shape(got["params"][0]["beta"]) == (10,)
    steps, first, _ = got["optimizer_state"]
    entries = {(l, k): s for l, k, s in ckpt["optimizer_state"]["state"]}
    assert steps == 3 and (1, "threshold") in entries
    np.testing.assert_array_equal(first[1]["threshold"], entries[1, "threshold"]["exp_avg"])
    _assert_cpp_predicts_what_python_predicts(example, path, tmp_path)


def _assert_cpp_predicts_what_python_predicts(example, path: Path, tmp_path: Path) -> None:
    """The C++ engine built from the file predicts the spike counts Python's engine and
    reference predict from it."""
    x, xpath = _inputs(tmp_path)
    run = subprocess.run(
        [str(example), str(path), str(xpath), str(SAMPLES)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    cpp_counts = np.array(
        [[float(v) for v in line.split()[5:]] for line in run.stdout.splitlines()[1:]]
    )
    ckpt = checkpoint.load(path)
    for device in ("cpu", "reference"):
        model = Model(
            ckpt["network"],
            device=device,
            num_steps=STEPS,
            batch_size=SAMPLES,
            params=ckpt["params"],
        )
        np.testing.assert_array_equal(cpp_counts, model.infer(x).sum(axis=0), err_msg=device)
    assert cpp_counts.sum() > 0


def test_the_cpp_reader_carries_alpha_with_every_form_of_its_constants(example, tmp_path):
    """Alpha trained on the engine (a learned per-neuron beta, whose tau_alpha the vertices
    compute; a layer of fixed constants, whose tau_alpha the reader computes) and read by C++."""
    net = popsnn.Sequential(
        popsnn.Linear(INPUTS, 10),
        popsnn.Alpha(
            alpha=np.linspace(0.85, 0.95, 10),
            beta=np.linspace(0.6, 0.8, 10),
            learn_beta=True,
            learn_threshold=True,
            reset_mechanism="subtract",
            threshold=0.4,
        ),
        popsnn.Linear(10, 3),
        popsnn.Alpha(alpha=0.9, beta=0.7, threshold=0.1),
    )
    model = _train_three_steps(net, optim.Adam(lr=0.005), data_seed=3)
    config = {"num_steps": STEPS, "batch_size": 4, "loss": "ce_count"}
    path = checkpoint.save(
        tmp_path / "alpha.npz", net=net, params=model.get_params(), config=config
    )
    hidden, out = _native.load_checkpoint(str(path))["layers"]
    assert (hidden["neuron"], out["neuron"]) == ("Alpha", "Alpha")
    np.testing.assert_array_equal(hidden["alphas"], np.float32(net.pairs[0][1].alpha))
    assert (hidden["learn_beta"], hidden["learn_threshold"]) == (True, True)
    tau = popsnn.reference._tau_alpha(np.float32(0.9), np.float32(0.7))  # NumPy's float32
    assert out["gain"] == pytest.approx(float(tau), rel=2.5e-7)  # the C library's: an ulp at most
    _assert_cpp_predicts_what_python_predicts(example, path, tmp_path)


def test_the_cpp_reader_refuses_what_its_engine_does_not_run_in_one_line(tmp_path):
    net = popsnn.Sequential(
        popsnn.Conv2d(1, 2, 3),
        popsnn.Leaky(beta=0.8),
        popsnn.Flatten(),
        popsnn.Linear(2 * 4 * 4, 3),
        popsnn.Leaky(beta=0.8),
        input_shape=(1, 6, 6),
    )
    config = {"num_steps": STEPS, "batch_size": 4, "loss": "ce_count"}
    path = checkpoint.save(tmp_path / "conv.npz", net=net, params=net.init_params(), config=config)
    assert checkpoint.load(path, net)["params"]  # Python reads it
    with pytest.raises(ValueError) as err:
        _native.load_checkpoint(str(path))
    message = str(err.value)
    assert "Conv2d" in message and "device='reference'" in message and "\n" not in message


def test_sgd_momentum_state_and_a_deflated_file_are_read(tmp_path):
    path = _trained_checkpoint(tmp_path / "sgd.npz", optim.SGD(lr=0.1, momentum=0.9))
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    np.savez_compressed(tmp_path / "deflated.npz", **arrays)
    for p in (path, tmp_path / "deflated.npz"):
        got = _native.load_checkpoint(str(p))
        steps, first, _ = got["optimizer_state"]
        assert got["optimizer"] == "sgd" and steps == 1
        buffers = {(l, k): s for l, k, s in checkpoint.load(path)["optimizer_state"]["state"]}
        np.testing.assert_array_equal(first[0]["weight"], buffers[(0, "weight")]["momentum_buffer"])


# --------------------------------------------------------------------------------------------
# Damaged files


def _rewrite(src: Path, dst: Path, change) -> Path:
    """`src`'s arrays and metadata, changed by change(arrays, meta), saved as `dst`."""
    with np.load(src) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(arrays.pop("__meta__").tobytes())
    change(arrays, meta)
    arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    np.savez(dst, **arrays)
    return dst


def _set(key, value):
    def change(arrays, meta):
        arrays[key] = value(arrays[key])

    return change


DAMAGE = {
    "truncated": (None, "truncated"),
    "transposed weight": (
        _set("params/0/weight", lambda a: a.T.copy()),
        "layer 0 weight is float32 [16, 12], expected [16, 12]",
    ),
    "int weight": (
        _set("params/1/weight", lambda a: a.astype(np.int32)),
        "layer 1 weight is int32 [3, 16], expected float32 or float64",
    ),
    "NaN weight": (
        _set("params/0/bias", lambda a: np.where(np.arange(a.size) == 2, np.nan, a)),
        "layer 0 bias holds NaN, inf or a value beyond float32 (element 2)",
    ),
    "NaN Adam moment": (
        _set("optimizer/state/0/2/exp_avg", lambda a: a * np.inf),
        "exp_avg holds NaN, inf",
    ),
    "missing array": (lambda arrays, meta: arrays.pop("params/1/weight"), "must name an array"),
    "bad beta": (
        lambda arrays, meta: meta["network"][1].update(beta=1.5),
        "beta",
    ),
    "beta below float32": (  # -0.0 as a float32: it passed the [0, 1] check Python fails
        lambda arrays, meta: meta["network"][1].update(beta=-1.03e-194),
        "network layer 0 beta is too small for float32 (it would round to zero)",
    ),
    "unknown neuron": (
        lambda arrays, meta: meta["network"][3].update(type="Izhikevich"),
        "neuron type must be one of Leaky, Synaptic, RLeaky, Lapicque",
    ),
    "newer version": (lambda arrays, meta: meta.update(version=2), "this popsnn reads version 1"),
}


@pytest.mark.parametrize("case", list(DAMAGE))
def test_damaged_checkpoints_are_one_line_from_cpp(saved, example, tmp_path, case):
    change, expected = DAMAGE[case]
    bad = tmp_path / "bad.npz"
    if change is None:
        bad.write_bytes(saved.read_bytes()[:-300])
    else:
        _rewrite(saved, bad, change)
    _, xpath = _inputs(tmp_path)
    run = subprocess.run(
        [str(example), str(bad), str(xpath), str(SAMPLES)], capture_output=True, text=True
    )
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.stdout == ""  # refused before anything was built or printed
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"cpp_checkpoint: checkpoint {bad}"), lines
    if case == "transposed weight":
        expected = "layer 0 weight is float32 [12, 16], expected [16, 12]"
    assert expected in lines[0]
    with pytest.raises(ValueError, match="checkpoint"):
        _native.load_checkpoint(str(bad))


def test_a_missing_file_and_a_wrong_input_size_are_one_line(saved, example, tmp_path):
    _, xpath = _inputs(tmp_path)
    for args, expected in (
        ([str(tmp_path / "none.npz"), str(xpath), str(SAMPLES)], "cannot be opened"),
        ([str(saved), str(xpath), str(SAMPLES + 1)], "check SAMPLES"),
        ([str(saved), str(xpath), "six"], "SAMPLES must be a whole number"),
    ):
        run = subprocess.run([str(example), *args], capture_output=True, text=True)
        assert run.returncode == 1 and len(run.stderr.splitlines()) == 1, run.stderr
        assert expected in run.stderr


# --------------------------------------------------------------------------------------------
# Fuzzing: mutated bytes never crash the reader; what it accepts, Python reads the same.


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_mutated_checkpoints_are_refused_cleanly_or_read_as_python_reads_them(
    saved, tmp_path, data
):
    raw = bytearray(saved.read_bytes())
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        raw = raw[: data.draw(st.integers(0, len(raw)))]
    path = tmp_path / "fuzzed.npz"
    path.write_bytes(bytes(raw))
    try:
        got = _native.load_checkpoint(str(path))
    except ValueError as err:
        assert len(str(err).splitlines()) == 1 and str(err).startswith(f"checkpoint {path}")
        return
    theirs = checkpoint.load(path)["params"]
    for mine, ref in zip(got["params"], theirs):
        for key in ref:
            np.testing.assert_array_equal(mine[key], np.asarray(ref[key], np.float32))


def test_metadata_fuzz_never_crashes(saved, tmp_path):
    """Deep nesting and odd JSON values in the metadata: refused in one line, no crash."""
    for meta in (b"[" * 100_000, b'{"format": "popsnn-checkpoint", "version": 1}', b"\xff\xfe"):
        bad = io.BytesIO()
        np.savez(bad, __meta__=np.frombuffer(meta, np.uint8))
        path = tmp_path / "meta.npz"
        path.write_bytes(bad.getvalue())
        with pytest.raises(ValueError, match=f"checkpoint {path}"):
            _native.load_checkpoint(str(path))


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 100) | st.floats(-2, 2) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)


def _paths(value, prefix=()):
    """Every place in the metadata a value sits at, as key/index paths."""
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, prefix + (i,))


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_mutated_metadata_is_refused_cleanly_or_read_as_python_reads_it(saved, tmp_path, data):
    def change(arrays, meta):
        where = data.draw(st.sampled_from(sorted((p for p in _paths(meta) if p), key=repr)))
        parent = meta
        for key in where[:-1]:
            parent = parent[key]
        parent[where[-1]] = data.draw(_JSON)

    path = _rewrite(saved, tmp_path / "meta.npz", change)
    try:
        got = _native.load_checkpoint(str(path))
    except ValueError as err:
        assert len(str(err).splitlines()) == 1 and str(err).startswith(f"checkpoint {path}")
        return
    theirs = checkpoint.load(path)
    assert got["epoch"] == theirs["epoch"]
    for mine, ref in zip(got["params"], theirs["params"], strict=True):
        assert sorted(mine) == sorted(ref)
        for key in ref:
            np.testing.assert_array_equal(mine[key], np.asarray(ref[key], np.float32))
