"""`popsnn train --model csnn` end to end on a slice of the embedded MNIST (Sun et al.'s CSNN on
the reference and on the engine's cpu device), its checkpoint read back, and its refusals."""

import json

import numpy as np
from test_cli_train import popsnn_cli  # pytest puts this folder on sys.path

from popsnn import checkpoint, reference


def test_csnn_trains_writes_metrics_and_a_checkpoint_that_reloads(tmp_path):
    out = tmp_path / "run"
    args = ["train", "--model", "csnn", "--device", "reference", "--limit-train", "64"]
    args += ["--limit-test", "32", "--batch-size", "32", "--num-steps", "3", "--epochs", "1"]
    r = popsnn_cli(*args, "--output", str(out))
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "metrics.json").read_text())["summary"]
    assert summary["network"] == "1x28x28-12x12x12-64x4x4-10"
    assert summary["device"] == "reference" and summary["train_samples"] == 64
    ckpt = checkpoint.load(out / "checkpoint.npz")
    net = ckpt["network"]
    assert net.input_shape == (1, 28, 28) and not net.is_linear
    assert ckpt["params"][1]["weight"].shape == (64, 12, 5, 5)
    x = np.zeros((3, 2, 784), np.float32)
    assert reference.forward(net, ckpt["params"], x).spikes[-1].shape == (3, 2, 10)


def test_csnn_trains_on_the_engine_cpu_device(tmp_path):
    out = tmp_path / "run"
    args = ["train", "--model", "csnn", "--device", "cpu", "--limit-train", "64"]
    args += ["--limit-test", "32", "--batch-size", "32", "--num-steps", "3", "--epochs", "1"]
    r = popsnn_cli(*args, "--output", str(out))
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "metrics.json").read_text())["summary"]
    assert summary["device"] == "cpu" and summary["train_samples"] == 64
    ckpt = checkpoint.load(out / "checkpoint.npz")
    assert ckpt["params"][1]["weight"].shape == (64, 12, 5, 5)
    assert ckpt["optimizer_state"] is not None


def test_csnn_refusals_are_one_line(tmp_path):
    r = popsnn_cli("train", "--model", "csnn", "--dataset", "shd", "--output", str(tmp_path))
    assert r.returncode != 0 and "model=csnn takes images" in r.stderr
    r = popsnn_cli(
        "train",
        "--model",
        "csnn",
        "--device",
        "cpu",
        "--neuron",
        "synaptic",
        "--output",
        str(tmp_path),
    )
    assert r.returncode != 0 and "runs leaky neurons only for now" in r.stderr
    r = popsnn_cli("train", "--model", "mlp", "--output", str(tmp_path))
    assert r.returncode != 0 and "dsnn" in r.stderr
