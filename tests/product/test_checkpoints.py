"""Checkpoints: round trip, atomic writes, clear errors for damaged or mismatched files."""

import os

import numpy as np
import pytest

import popsnn
from popsnn import checkpoint, optim, sparse, surrogate
from popsnn.checkpoint import CheckpointError


def small_net(hidden=6):
    return popsnn.Sequential(
        popsnn.Linear(5, hidden),
        popsnn.Synaptic(
            alpha=0.7, beta=0.8, surrogate=surrogate.atan(3.0), sparse=sparse.window(0.4)
        ),
        popsnn.Linear(hidden, 4),
        popsnn.RLeaky(beta=0.9, reset_mechanism="zero"),
    )


def adam_state(net, params):
    opt = optim.Adam(lr=1e-2)
    grads = [{k: np.ones_like(v) for k, v in p.items()} for p in params]
    opt.step(params, grads)
    return opt


def test_round_trip_of_everything(tmp_path):
    net = small_net()
    params = net.init_params(3)
    opt = adam_state(net, params)
    rng = np.random.default_rng(11)
    rng.random(7)
    path = checkpoint.save(
        tmp_path / "c.npz",
        net=net,
        params=params,
        optimizer_state=opt.state_dict(),
        epoch=4,
        rng_state=rng.bit_generator.state,
        config={"lr": 0.01, "hidden": [6]},
        history={"test_accuracy": [0.5, 0.75]},
    )
    got = checkpoint.load(path, net)
    assert got["epoch"] == 4
    assert checkpoint.network_to_dict(got["network"]) == checkpoint.network_to_dict(net)
    for a, b in zip(got["params"], params):
        assert a.keys() == b.keys()
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])
            assert a[k].dtype == b[k].dtype
    restored = optim.Adam(lr=1.0)
    restored.load_state_dict(got["optimizer_state"])
    # The restored optimiser continues exactly as the original one.
    p1 = [{k: v.copy() for k, v in p.items()} for p in params]
    p2 = [{k: v.copy() for k, v in p.items()} for p in params]
    grads = [{k: np.full_like(v, 0.5) for k, v in p.items()} for p in params]
    opt.step(p1, grads)
    restored.step(p2, grads)
    for a, b in zip(p1, p2):
        for k in a:
            np.testing.assert_array_equal(a[k], b[k])
    rng2 = np.random.default_rng(0)
    rng2.bit_generator.state = got["rng_state"]
    assert rng2.random() == rng.random()
    assert got["config"] == {"lr": 0.01, "hidden": [6]}
    assert got["history"] == {"test_accuracy": [0.5, 0.75]}


def test_corrupt_file_is_reported(tmp_path):
    path = tmp_path / "c.npz"
    path.write_bytes(b"this is not a zip file")
    with pytest.raises(CheckpointError, match="damaged or not a popsnn checkpoint"):
        checkpoint.load(path)
    net = small_net()
    checkpoint.save(path, net=net, params=net.init_params(0))
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(CheckpointError, match="damaged"):
        checkpoint.load(path)
    with pytest.raises(CheckpointError, match="does not exist"):
        checkpoint.load(tmp_path / "missing.npz")


def test_other_network_shape_is_refused(tmp_path):
    net = small_net(hidden=6)
    path = checkpoint.save(tmp_path / "c.npz", net=net, params=net.init_params(0))
    with pytest.raises(CheckpointError, match="5-6-4 .* but this run builds 5-8-4"):
        checkpoint.load(path, small_net(hidden=8))


def test_failed_save_leaves_the_previous_checkpoint_intact(tmp_path):
    net = small_net()
    params = net.init_params(0)
    path = checkpoint.save(tmp_path / "c.npz", net=net, params=params, epoch=1)
    before = path.read_bytes()
    with pytest.raises(TypeError, match="cannot store"):
        checkpoint.save(path, net=net, params=params, epoch=2, config={"bad": object()})
    assert path.read_bytes() == before
    assert checkpoint.load(path, net)["epoch"] == 1
    assert os.listdir(tmp_path) == ["c.npz"]  # no temp file left behind


def test_crash_while_writing_leaves_the_previous_checkpoint_intact(tmp_path, monkeypatch):
    net = small_net()
    params = net.init_params(0)
    path = checkpoint.save(tmp_path / "c.npz", net=net, params=params, epoch=1)
    before = path.read_bytes()

    def disk_full(f, **arrays):
        f.write(b"half a checkpoint")
        raise OSError("No space left on device")

    monkeypatch.setattr(checkpoint.np, "savez", disk_full)
    with pytest.raises(OSError, match="No space"):
        checkpoint.save(path, net=net, params=params, epoch=2)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["c.npz"]
