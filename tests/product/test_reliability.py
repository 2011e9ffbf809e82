"""Bad inputs, faults and concurrent use (issue 10): each gets one clear error, before any
state changes or long work, and nothing is lost."""

import gzip
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from test_data_loaders import make_idx_folder  # pytest puts this folder on sys.path

import popsnn
from popsnn import checkpoint, data, optim, train
from popsnn.checkpoint import CheckpointError
from popsnn.model import Model, available_devices
from popsnn.train import Config, ConfigError

DEVICES = ["reference"] + [d for d in ("cpu",) if d in available_devices()]


def tiny_net():
    return popsnn.Sequential(
        popsnn.Linear(12, 8), popsnn.Leaky(beta=0.9), popsnn.Linear(8, 3), popsnn.Leaky(beta=0.9)
    )


def tiny_batch(batch=4, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((batch, 12)).astype(np.float32) * 2, rng.integers(0, 3, batch)


# ---------------------------------------------------------------- 1: one Model, two threads


@pytest.mark.parametrize("device", DEVICES)
def test_one_model_used_from_two_threads_gives_the_serial_result(device):
    x, y = tiny_batch()
    steps = 6
    shared = Model(
        tiny_net(), device=device, num_steps=5, batch_size=4, optimizer=optim.Adam(lr=1e-2)
    )
    serial = Model(
        tiny_net(), device=device, num_steps=5, batch_size=4, optimizer=optim.Adam(lr=1e-2)
    )
    for _ in range(2 * steps):
        serial.train_step(x, y)
    start = threading.Barrier(2)
    errors = []

    def work():
        start.wait()
        try:
            for _ in range(steps):
                shared.train_step(x, y)
                shared.infer(x)
        except Exception as err:  # surfaced in the assertion below
            errors.append(err)

    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    # The same batch every step: whatever the interleaving, 12 whole steps = serial's 12.
    for got, want in zip(shared.get_params(), serial.get_params()):
        for key in want:
            np.testing.assert_array_equal(got[key], want[key])


# ---------------------------------------------------------------- 4: optimiser state


def trained(device="reference"):
    model = Model(
        tiny_net(), device=device, num_steps=5, batch_size=4, optimizer=optim.Adam(lr=1e-2)
    )
    model.train_step(*tiny_batch())
    return model


def damaged_states(state):
    def edit(fn):
        s = {
            "name": state["name"],
            "hyper": dict(state["hyper"]),
            "state": [
                [l, k, {f: (np.array(v) if isinstance(v, np.ndarray) else v) for f, v in d.items()}]
                for l, k, d in state["state"]
            ],
        }
        fn(s)
        return s

    yield "shape", edit(lambda s: s["state"][0][2].update(exp_avg=np.zeros((2, 2))))
    yield "no parameter", edit(lambda s: s["state"].append([7, "weight", {}]))
    yield "no entry", edit(lambda s: s["state"].pop())
    yield "NaN", edit(lambda s: s["state"][-1][2]["exp_avg_sq"].fill(np.nan))
    yield "step", edit(lambda s: s["state"][-1][2].update(step=-3))
    yield "fields", edit(lambda s: s["state"][-1][2].update(extra=np.zeros(3)))
    yield "hyperparameters", edit(lambda s: s["hyper"].update(bogus=1))
    yield "state_dict is for", edit(lambda s: s.update(name="sgd"))


@pytest.mark.parametrize("device", DEVICES)
def test_bad_optimizer_state_is_refused_before_anything_changes(device):
    model = trained(device)
    good = model.optimizer_state()
    for fragment, bad in damaged_states(good):
        with pytest.raises(ValueError, match=fragment):
            model.load_optimizer_state(bad)
        now = model.optimizer_state()
        assert now["hyper"] == good["hyper"]
        for (_, _, a), (_, _, b) in zip(now["state"], good["state"]):
            for f in b:
                np.testing.assert_array_equal(a[f], b[f])


# ---------------------------------------------------------------- 5: corrupt .gz


def test_corrupt_gzip_names_the_file(tmp_path):
    path = tmp_path / "train-images-idx3-ubyte.gz"
    blob = bytearray(gzip.compress(b"\x00\x00\x08\x01" + b"\x00\x00\x00\x05" + bytes(5)))
    blob[12:20] = b"\xff" * 8  # deflate stream damaged, header intact
    path.write_bytes(bytes(blob))
    with pytest.raises(data.DataError, match=str(path)):
        data.load_idx(path)


# ---------------------------------------------------------------- 6: the CLI


def popsnn_cli(*args):
    return subprocess.run(
        [sys.executable, "-m", "popsnn", *args], capture_output=True, text=True, timeout=300
    )


def test_cli_refuses_an_output_that_is_a_file_before_training(tmp_path):
    out = tmp_path / "taken"
    out.write_text("not a folder")
    r = popsnn_cli("train", "--device", "reference", "--output", str(out), "--no-progress")
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and "is not a folder" in r.stderr
    assert "epoch" not in r.stdout  # refused before any training


def test_cli_os_errors_are_one_line(monkeypatch, capsys):
    def fail(*args, **kwargs):
        raise PermissionError(13, "Permission denied", "/data/train-images-idx3-ubyte")

    monkeypatch.setattr(train, "fit", fail)
    from popsnn.__main__ import main

    assert main(["train", "--device", "reference"]) == 2
    err = capsys.readouterr().err
    assert err == "popsnn train: error: /data/train-images-idx3-ubyte Permission denied\n"


def test_cli_unreadable_config_is_one_line(tmp_path):
    config = tmp_path / "c.toml"
    config.write_bytes(b"lr = 0.1\n\xff\xfe\n")
    r = popsnn_cli("train", "--config", str(config))
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and "not UTF-8" in r.stderr and str(config) in r.stderr


# ---------------------------------------------------------------- 8, 9: sizes and typed TOML


@pytest.mark.parametrize("device", DEVICES)
def test_huge_sizes_are_refused_before_allocation(device):
    with pytest.raises(ValueError, match="num_steps=.*larger than"):
        Model(tiny_net(), device=device, num_steps=2**40, batch_size=1)
    with pytest.raises(ValueError, match="GiB of state.*lower num_steps or batch_size"):
        Model(tiny_net(), device=device, num_steps=10**6, batch_size=10**6)
    with pytest.raises(ConfigError, match="GiB"):
        Config(num_steps=10**6, batch_size=10**6)


@pytest.mark.parametrize(
    "text, fragment",
    [
        ('plots = "no"', "plots must be true or false"),
        ('epochs = "3"', "epochs"),
        ("lr = true", "lr"),
        ("dataset = 5", "dataset"),
        ("data = 5", "data must be a string"),
        ("seed = 1.5", "seed"),
        ('[train]\nbeta = "high"', "beta"),
        ("train = 3", "[train] must be a table"),
    ],
)
def test_wrong_typed_toml_names_the_option_and_the_file(tmp_path, text, fragment):
    config = tmp_path / "c.toml"
    config.write_text(text + "\n")
    with pytest.raises(ConfigError, match="c.toml") as info:
        train.make_config(config)
    assert fragment in str(info.value)


def test_typed_config_values():
    with pytest.raises(ConfigError, match="plots must be true or false, got 'no'"):
        Config(plots="no")
    assert Config(plots=False).plots is False
    assert Config(output=Path("runs") / "x").output == str(Path("runs") / "x")  # JSON-able


# ---------------------------------------------------------------- 10: every device alike


@pytest.mark.parametrize("device", DEVICES)
def test_every_device_refuses_batch_and_step_mismatches(device):
    model = Model(tiny_net(), device=device, num_steps=5, batch_size=4)
    x, y = tiny_batch(batch=6)
    with pytest.raises(ValueError, match="6 samples, more than the model's batch_size=4"):
        model.train_step(x, y)
    with pytest.raises(ValueError, match="6 samples"):
        model.infer(x)
    spikes = np.zeros((7, 4, 12), np.float32)
    with pytest.raises(ValueError, match="num_steps=5 but x has 7 time steps"):
        model.infer(spikes)
    with pytest.raises(ValueError, match="num_steps=5 but x has 7 time steps"):
        model.loss_and_grad(spikes, y[:4])


# ---------------------------------------------------------------- 11: SHD NaN times


def test_shd_nan_times_are_refused_and_counted(tmp_path):
    h5py = pytest.importorskip("h5py")
    path = tmp_path / "shd_nan.h5"
    with h5py.File(path, "w") as f:
        vt = h5py.vlen_dtype(np.float32)
        vu = h5py.vlen_dtype(np.uint16)
        f.create_dataset("spikes/times", (3,), dtype=vt)[...] = [
            np.array([0.1, 0.2]),
            np.array([np.nan, 0.3, np.nan]),
            np.array([0.5]),
        ]
        f.create_dataset("spikes/units", (3,), dtype=vu)[...] = [
            np.array([0, 1]),
            np.array([2, 3, 4]),
            np.array([5]),
        ]
        f.create_dataset("labels", data=np.array([0, 1, 2], np.uint8))
    with pytest.raises(
        data.DataError,
        match=r"shd_nan.h5: 2 event\(s\) in 1 recording\(s\) "
        r"\(first: sample 1\) have a NaN time",
    ):
        data.load_shd(path)


# ---------------------------------------------------------------- 12, 13: checkpoints


def saved(tmp_path):
    model = trained()
    return checkpoint.save(
        tmp_path / "c.npz",
        net=model.net,
        params=model.get_params(),
        optimizer_state=model.optimizer_state(),
        epoch=1,
        rng_state=np.random.default_rng(0).bit_generator.state,
        config={},
        history={"epoch": [1]},
    )


def rewrite_meta(path, edit):
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    import json

    meta = json.loads(arrays["__meta__"].tobytes())
    meta = edit(meta)
    arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    np.savez(path, **arrays)


@pytest.mark.parametrize(
    "edit",
    [
        lambda m: [1, 2],
        lambda m: {**m, "epoch": "one"},
        lambda m: {**m, "network": {"type": "Linear"}},
        lambda m: {**m, "network": [{"type": "Leaky", "beta": 0.9}]},
        lambda m: {**m, "params": {"__list__": [{"__array__": ["not", "a", "key"]}]}},
        lambda m: {**m, "params": {"__dict__": 3}},
        lambda m: {**m, "params": {"__list__": [{"__dict__": {"weight": 3}}, 5]}},
        lambda m: {**m, "optimizer": [1]},
    ],
)
def test_damaged_checkpoint_metadata_names_the_file(tmp_path, edit):
    path = saved(tmp_path)
    rewrite_meta(path, edit)
    with pytest.raises(CheckpointError, match=f"checkpoint {path}|{path} is not"):
        checkpoint.load(path)


def test_stale_temp_files_of_killed_writes_are_cleaned_up(tmp_path):
    # A writer killed mid-save leaves its temp file; the next save removes it.
    code = (
        "import os, sys, numpy as np, popsnn\n"
        "from popsnn import checkpoint\n"
        "net = popsnn.Sequential(popsnn.Linear(3, 2), popsnn.Leaky(beta=0.5))\n"
        "real_savez = np.savez\n"
        "def die(f, **a):\n"
        "    f.write(b'partial'); f.flush(); os._exit(9)\n"
        "np.savez = die\n"
        "checkpoint.save(sys.argv[1], net=net, params=net.init_params(0))\n"
    )
    target = tmp_path / "checkpoint.npz"
    r = subprocess.run([sys.executable, "-c", code, str(target)], timeout=120)
    assert r.returncode == 9
    stale = list(tmp_path.glob(".checkpoint.npz.*.tmp"))
    assert len(stale) == 1 and not target.exists()
    live = tmp_path / f".checkpoint.npz.{os.getpid()}.abcdefgh.tmp"  # a live writer's
    live.write_bytes(b"in progress")
    net = tiny_net()
    checkpoint.save(target, net=net, params=net.init_params(0))
    assert not stale[0].exists() and live.exists()
    assert checkpoint.load(target, net)["epoch"] == 0


def test_resume_from_a_checkpoint_that_does_not_fit_names_the_file(tmp_path):
    make_idx_folder(tmp_path / "d", n_train=8, n_test=4, size=(3, 4))
    tr, te = data.load_idx_folder(tmp_path / "d")
    config = Config(
        hidden=[8],
        epochs=1,
        num_steps=5,
        batch_size=4,
        device="reference",
        plots=False,
        output=str(tmp_path / "run"),
    )
    quiet = dict(train_set=tr, test_set=te, progress=False, log=lambda *_: None)
    train.fit(config, **quiet)
    path = tmp_path / "run" / "checkpoint.npz"
    rewrite_meta(path, lambda m: {**m, "rng_state": {"__dict__": {"bit_generator": "nope"}}})
    config.epochs = 2
    with pytest.raises(CheckpointError, match=f"checkpoint {path} does not fit"):
        train.fit(config, resume=path, **quiet)
