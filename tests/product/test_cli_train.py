"""`popsnn train` end to end, as a user runs it: a subprocess on a slice of the embedded MNIST."""

import json
import subprocess
import sys

import pytest
from test_data_loaders import make_idx_folder  # pytest puts this folder on sys.path

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def popsnn_cli(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "popsnn", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )


def test_train_end_to_end_writes_metrics_checkpoint_and_pictures(tmp_path):
    config = tmp_path / "quick.toml"
    config.write_text('hidden = "64"\nnum-steps = 8\nepochs = 5\nlr = 0.002\n')
    out = tmp_path / "run"
    # Flags override the file: 2 epochs, not 5.
    r = popsnn_cli(
        "train",
        "--config",
        str(config),
        "--epochs",
        "2",
        "--device",
        "reference",
        "--limit-train",
        "1000",
        "--limit-test",
        "300",
        "--batch-size",
        "100",
        "--output",
        str(out),
    )
    assert r.returncode == 0, r.stderr
    assert "img/s" in r.stderr and "acc=" in r.stderr  # the progress bar
    assert "test accuracy" in r.stdout and "training images/s" in r.stdout  # summary table
    metrics = json.loads((out / "metrics.json").read_text())
    summary = metrics["summary"]
    assert summary["epochs"] == 2 and summary["device"] == "reference"
    assert summary["network"] == "784-64-10" and summary["num_steps"] == 8
    assert (summary["train_samples"], summary["test_samples"]) == (1000, 300)
    assert summary["test_accuracy"] > 0.3  # chance is 0.1
    assert summary["train_images_per_s"] > 0
    assert (out / "checkpoint.npz").stat().st_size > 100_000
    for name in ("curves.png", "raster.png", "activity.png"):
        assert (out / name).read_bytes()[:8] == PNG_SIGNATURE

    # Resuming to 3 epochs runs one more epoch only.
    r = popsnn_cli(
        "train",
        "--config",
        str(config),
        "--epochs",
        "3",
        "--device",
        "reference",
        "--limit-train",
        "1000",
        "--limit-test",
        "300",
        "--batch-size",
        "100",
        "--output",
        str(out),
        "--resume",
        "--no-progress",
    )
    assert r.returncode == 0, r.stderr
    assert "resumed" in r.stdout and "epoch 3:" in r.stdout and "epoch 2:" not in r.stdout
    assert json.loads((out / "metrics.json").read_text())["summary"]["epochs"] == 3


@pytest.mark.parametrize(
    "args, message",
    [
        (["--hiden", "10"], "unknown option(s) --hiden; valid options: "),
        (["--device", "gpu"], "device must be one of auto, reference, cpu, ipu-model, ipu"),
        (["--data", "/nonexistent/mnist"], "data folder /nonexistent/mnist does not exist"),
        (["--neuron", "hodgkin"], "neuron must be one of leaky, synaptic, rleaky"),
        (["--resume", "/nonexistent/c.npz"], "checkpoint /nonexistent/c.npz does not exist"),
    ],
)
def test_bad_input_is_a_clear_error(tmp_path, args, message):
    r = popsnn_cli("train", "--device", "reference", "--output", str(tmp_path), *args)
    assert r.returncode == 2
    assert message in r.stderr
    assert "Traceback" not in r.stderr


def test_cmakedir_still_works():
    r = popsnn_cli("--version")
    assert r.returncode == 0 and r.stdout.strip()


def test_data_flag_reads_a_folder_of_gzipped_idx_files(tmp_path):
    make_idx_folder(tmp_path / "idx", n_train=20, n_test=10, compress=True)
    r = popsnn_cli(
        "train",
        "--data",
        str(tmp_path / "idx"),
        "--device",
        "reference",
        "--hidden",
        "8",
        "--num-steps",
        "3",
        "--epochs",
        "1",
        "--no-progress",
        "--no-plots",
        "--output",
        str(tmp_path / "run"),
    )
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "run" / "metrics.json").read_text())["summary"]
    assert (summary["train_samples"], summary["test_samples"]) == (20, 10)
    assert not (tmp_path / "run" / "curves.png").exists()
