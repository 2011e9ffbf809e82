"""The training product's options: every loss option and the sparse rule from flags and TOML,
defaults in --help, a network that does not fit refused before data loading, the readable
profile, and plots as matplotlib Figures."""

import dataclasses
import io
import re
from contextlib import redirect_stdout

import numpy as np
import pytest
from test_cli_train import popsnn_cli  # pytest puts this folder on sys.path

import popsnn
from popsnn import engine, losses, plots, profile_report, train
from popsnn.__main__ import main
from popsnn.train_config import Config, ConfigError, make_config


def test_help_shows_every_option_with_its_default():
    out = io.StringIO()
    with redirect_stdout(out), pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(out.getvalue().split())
    for f in dataclasses.fields(Config):
        if f.name in ("plots", "profile"):
            assert "--no-plots" in text and "--profile" in text
            continue
        assert "--" + f.name.replace("_", "-") in text, f.name
    for shown in ("(default: 0.9)", "(default: ce_count)", "(default: 1000)", "(default: 1.0)"):
        assert shown in text, shown
    # One default per option, said once: the device's geometry, all samples.
    assert text.count("(default: the device's)") == 2 and text.count("(default: all)") == 2
    assert not re.search(r"\(default[^)]*\) \(default", text), text


def test_loss_options_reach_the_loss(tmp_path):
    config = tmp_path / "loss.toml"
    config.write_text(
        'loss = "mse_count"\npopulation = 3\ncorrect-rate = 0.8\nincorrect-rate = 0.1\n'
        'sparse = "window:0.3"\nsparse-layers = "all"\n'
    )
    cfg = make_config(config)
    loss = cfg.make_loss(10)
    assert isinstance(loss, losses.mse_count_loss)
    assert (loss.correct_rate, loss.incorrect_rate) == (0.8, 0.1)
    assert loss.population_code and loss.num_classes == 10
    net = cfg.network(784, 30)
    rules = [neuron.sparse for _, neuron in net.pairs]
    assert all(r is not None and r.kind == "window" and r.value == 0.3 for r in rules)
    membrane = Config(loss="mse_membrane", on_target=2.0, off_target=-0.5).make_loss(10)
    assert (membrane.on_target, membrane.off_target) == (2.0, -0.5)


@pytest.mark.parametrize(
    "options, named",
    [
        (dict(loss="ce_count", correct_rate=0.8), "correct_rate applies to the mse_count"),
        (dict(loss="ce_rate", population=2), "population applies to the ce_count and mse_count"),
        (dict(loss="ce_count", on_target=2.0), "on_target applies to the mse_membrane"),
        (dict(max_activity=0.0), "max_activity must be a number in"),
        (dict(device="cpu", tiles_per_ipu=4), "pass --device ipu-model"),
        (dict(device="reference", max_activity=0.5), "reference device has none"),
        (dict(neuron="leaky", alpha=0.5), "alpha applies to the synaptic and alpha neurons"),
        (dict(model="csnn", hidden=[50]), "model=csnn has fixed layers"),
        (dict(sparse_layers="all"), "and sparse is none; pass --sparse"),
        (dict(neuron="alpha"), "neuron alpha needs beta < alpha"),
        (dict(neuron="lapicque", learn_beta=True), "learn_beta does not apply to lapicque"),
        (dict(learn_threshold="yes"), "learn_threshold must be True or False"),
    ],
)
def test_an_option_that_would_be_ignored_is_an_error(options, named):
    with pytest.raises(ConfigError, match=named):
        Config(**options)


@pytest.mark.parametrize(
    "neuron, options",
    [
        (popsnn.Alpha, dict(neuron="alpha", alpha=0.95, learn_beta=True)),
        (popsnn.Lapicque, dict(neuron="lapicque", learn_threshold=True)),
        (popsnn.Leaky, dict(learn_beta=True, learn_threshold=True)),
    ],
)
def test_neuron_options_reach_every_neuron_layer(neuron, options):
    net = Config(**options, hidden=[20, 20]).network(784, 10)
    layers = [layer for layer in net.layers if not isinstance(layer, popsnn.Linear)]
    assert len(layers) == 3 and all(type(layer) is neuron for layer in layers)
    for layer in layers:
        assert layer.learned() == tuple(
            name for name in ("beta", "threshold") if options.get(f"learn_{name}")
        )
        assert getattr(layer, "alpha", 0.95) == 0.95


def test_cli_switches_set_learned_neuron_constants(tmp_path):
    run = popsnn_cli(
        "train", "--neuron", "alpha", "--alpha", "0.95", "--learn-beta", "--learn-threshold",
        "--hidden", "16", "--num-steps", "3", "--epochs", "1", "--limit-train", "32",
        "--limit-test", "32", "--batch-size", "16", "--device", "reference", "--no-plots",
        "--output", str(tmp_path), cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    saved = np.load(tmp_path / "checkpoint.npz", allow_pickle=False)
    assert any("beta" in name for name in saved.files), saved.files
    assert any("threshold" in name for name in saved.files), saved.files


def test_a_network_that_does_not_fit_fails_before_data_loading(monkeypatch, tmp_path):
    def no_loading(*args, **kwargs):
        raise AssertionError("the data were loaded before the fit check")

    monkeypatch.setattr(popsnn.data, "load_named", no_loading)
    config = Config(
        device="ipu-model", tiles_per_ipu=2, hidden=[4000], plots=False, output=str(tmp_path)
    )
    with pytest.raises(engine.NetworkDoesNotFit, match="does not fit"):
        train.fit(config, progress=False, log=lambda *a: None)


def test_cli_names_the_flags_that_fix_a_network_that_does_not_fit(tmp_path):
    r = popsnn_cli(
        "train", "--device", "ipu-model", "--tiles-per-ipu", "2", "--hidden", "4000",
        "--output", str(tmp_path),
    )  # fmt: skip
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "does not fit" in lines[0]
    for flag in ("--tiles-per-ipu", "--num-ipus", "--batch-size", "--max-activity"):
        assert flag in lines[0], flag


def trained_ipu_model(steps=2):
    net = popsnn.Sequential(
        popsnn.Linear(784, 64),
        popsnn.Leaky(beta=0.9),
        popsnn.Linear(64, 10),
        popsnn.Leaky(beta=0.9),
    )
    model = popsnn.Model(net, device="ipu-model", batch_size=16, num_steps=8)
    rng = np.random.default_rng(0)
    for _ in range(steps):
        model.train_step(rng.random((16, 784), dtype=np.float32), np.arange(16) % 10)
    return model


def test_profile_summary_accounts_for_every_estimated_cycle():
    profile = trained_ipu_model().profile()
    groups = profile_report.by_phase(profile_report.program_rows(profile["estimate_summary"]))
    assert {("forward", "layer 0"), ("backward", "layer 1"), ("loss", "-")} <= set(groups)
    total = lambda key: sum(g[key] for g in groups.values())  # noqa: E731
    assert total("compute") == profile["estimate_compute_cycles"]
    assert total("exchange") == profile["estimate_exchange_cycles"]
    text = profile_report.format_summary(profile, 16, measured_images_per_s=123.0)
    assert "ESTIMATES" in text and "not measured" in text and "123 images/s" in text


@pytest.mark.parametrize("device", ["reference", "cpu"])
def test_profile_counts_steps_whose_optimiser_runs_on_the_host(device):
    """Data-parallel training and popsnn.torch step the optimiser on the host after
    loss_and_grad: the profile's per-step figures must divide by those steps too."""
    net = popsnn.Sequential(popsnn.Linear(12, 8), popsnn.Leaky(beta=0.9))
    model = popsnn.Model(net, device=device, batch_size=4, num_steps=3)
    x, y = np.ones((4, 12), np.float32), np.arange(4) % 8
    model.train_step(x, y)
    model.loss_and_grad(x, y)
    model.backend.loss_grad_and_spikes(x, y)
    model.infer(x)  # inference is not a training step
    assert model.profile()["train_steps"] == 3


def test_cli_profile_prints_the_summary(tmp_path):
    r = popsnn_cli(
        "train", "--device", "cpu", "--hidden", "32", "--num-steps", "4", "--epochs", "1",
        "--limit-train", "256", "--limit-test", "64", "--batch-size", "64", "--no-plots",
        "--no-progress", "--profile", "--output", str(tmp_path),
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "ESTIMATES" in r.stdout and "forward" in r.stdout and "measured here" in r.stdout


def test_plots_return_figures_without_choosing_a_backend():
    import matplotlib
    from matplotlib.figure import Figure

    backend = matplotlib.get_backend()
    spikes = np.zeros((5, 1, 1000), np.float32)
    spikes[1, 0, 0] = spikes[3, 0, 999] = spikes[4, 0, 500] = 1
    raster = plots.plot_raster([spikes])
    history = {
        "epoch": [1, 2],
        "train_loss": [1.0, 0.5],
        "test_loss": [1.1, 0.6],
        "train_accuracy": [0.5, 0.7],
        "test_accuracy": [0.4, 0.6],
        "step_loss": [1.2, 1.0, 0.7, 0.5],
        "activity": [[0.1, 0.2], [0.1, 0.15]],
    }
    figures = [raster, plots.plot_curves(history), plots.plot_activity(history)]
    assert all(isinstance(f, Figure) for f in figures)
    assert matplotlib.get_backend() == backend
    # Every spike is drawn, whichever neuron of the wide layer fired.
    drawn = raster.axes[0].collections[0].get_offsets()
    assert sorted(map(tuple, np.asarray(drawn).astype(int))) == [(1, 0), (3, 999), (4, 500)]
    for ax in (*figures[1].axes, *figures[2].axes):  # every epoch axis: whole epochs
        ticks = ax.xaxis.get_major_locator()()
        assert all(float(t).is_integer() for t in ticks), ax.get_title()
    # A run of one epoch too (the locator's default of two ticks would give 0.945, 0.96, ...).
    one = {k: v[:1] for k, v in history.items() if k != "step_loss"}
    one["step_loss"] = [1.2, 1.0, 0.7]
    for fig in (plots.plot_curves(one), plots.plot_activity(one)):
        for ax in fig.axes:
            low, high = ax.get_xlim()
            shown = [t for t in ax.xaxis.get_major_locator()() if low <= t <= high]
            assert shown and all(float(t).is_integer() for t in shown), (ax.get_title(), shown)
