"""popsnn.train: options, resume equivalence, bad input."""

import json

import numpy as np
import pytest

from popsnn import checkpoint, data, train
from popsnn.train import Config, ConfigError


@pytest.fixture(scope="module")
def mnist_slice():
    full_train, full_test = data.load_mnist()
    return full_train.take(300), full_test.take(100)


def quick_config(tmp_path, **kw):
    base = dict(
        hidden=[64],
        num_steps=5,
        batch_size=32,
        lr=5e-3,
        device="reference",
        output=str(tmp_path),
        plots=False,
    )
    base.update(kw)
    return Config(**base)


def test_defaults_are_seed_000s_network():
    c = Config()
    net = c.network(784, 10)
    assert [l.out_features for l, _ in net.pairs] == [1000, 10]
    assert all(type(n).__name__ == "Leaky" and n.beta == 0.9 for _, n in net.pairs)
    assert (c.num_steps, c.encoding, c.loss, c.optimizer, c.batch_size, c.dataset) == (
        25,
        "direct",
        "ce_count",
        "adam",
        128,
        "mnist",
    )


def test_config_file_then_flags(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text(
        'hidden = [300, 200]\nneuron = "synaptic"\nbatch-size = 32\nlr = 0.01\n'
        'sparse = "window:0.5"\n'
    )
    c = train.make_config(path, lr=0.002, epochs=None)
    assert c.hidden == [300, 200] and c.neuron == "synaptic" and c.batch_size == 32
    assert c.lr == 0.002 and c.epochs == 3 and c.lr_decay == 0.5
    net = c.network(784, 10)
    assert net.pairs[0][1].sparse.kind == "window" and net.pairs[0][1].alpha == 0.8


def test_unknown_and_bad_options_list_the_valid_ones(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text("hiden = 100\n")
    with pytest.raises(
        ConfigError, match="unknown option.*hiden.*valid options: dataset, data, model, hidden"
    ):
        train.make_config(path)
    with pytest.raises(ConfigError, match="unknown option.*colour"):
        train.make_config(colour="red")
    with pytest.raises(ConfigError, match="neuron must be one of leaky, synaptic, rleaky"):
        Config(neuron="izhikevich")
    with pytest.raises(ConfigError, match="device must be one of .*reference.*ipu-model"):
        Config(device="tpu")
    with pytest.raises(ConfigError, match="beta must lie in"):
        Config(beta=1.5)
    with pytest.raises(ConfigError, match="window:B_TH"):
        Config(sparse="window")
    with pytest.raises(ValueError, match="batch_size must be a positive integer"):
        Config(batch_size=0)


def test_fit_learns_and_writes_metrics(tmp_path, mnist_slice):
    tr, te = mnist_slice
    m = train.fit(
        quick_config(tmp_path, epochs=2),
        train_set=tr,
        test_set=te,
        progress=False,
        log=lambda *_: None,
    )
    saved = json.loads((tmp_path / "metrics.json").read_text())
    assert saved["summary"] == pytest.approx(m["summary"])
    assert saved["summary"]["epochs"] == 2 and saved["summary"]["device"] == "reference"
    assert saved["summary"]["test_accuracy"] > 0.3  # chance is 0.1
    assert len(saved["history"]["step_loss"]) == 2 * 10  # 300 samples / 32: 10 batches
    assert len(saved["history"]["activity"][0]) == 2  # one rate per layer


def test_a_stopped_run_keeps_the_metrics_of_its_finished_epochs(tmp_path, mnist_slice):
    tr, te = mnist_slice

    def stop_in_epoch_two(line):  # as Ctrl-C during epoch 2 would
        if line.startswith("epoch 2:"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train.fit(
            quick_config(tmp_path, epochs=3),
            train_set=tr,
            test_set=te,
            progress=False,
            log=stop_in_epoch_two,
        )
    saved = json.loads((tmp_path / "metrics.json").read_text())
    assert saved["summary"]["epochs"] == 1 and saved["history"]["epoch"] == [1]
    assert len(saved["history"]["step_loss"]) == 10  # 300 samples / 32: 10 batches
    assert saved["summary"]["test_accuracy"] == saved["history"]["test_accuracy"][0]
    assert checkpoint.load(tmp_path / "checkpoint.npz")["epoch"] == 1


def test_resume_gives_the_same_weights_as_an_uninterrupted_run(tmp_path, mnist_slice):
    tr, te = mnist_slice
    quiet = dict(train_set=tr, test_set=te, progress=False, log=lambda *_: None)
    # rate encoding, so the RNG state must be restored too, not just the weights.
    straight = train.fit(quick_config(tmp_path / "a", epochs=2, encoding="rate"), **quiet)
    train.fit(quick_config(tmp_path / "b", epochs=1, encoding="rate"), **quiet)
    resumed = train.fit(
        quick_config(tmp_path / "b", epochs=2, encoding="rate"),
        resume=tmp_path / "b" / "checkpoint.npz",
        **quiet,
    )
    a = checkpoint.load(tmp_path / "a" / "checkpoint.npz")
    b = checkpoint.load(tmp_path / "b" / "checkpoint.npz")
    assert a["epoch"] == b["epoch"] == 2
    for pa, pb in zip(a["params"], b["params"]):
        for k in pa:
            np.testing.assert_array_equal(pa[k], pb[k])
    assert straight["history"]["test_accuracy"] == resumed["history"]["test_accuracy"]
    assert straight["history"]["step_loss"] == resumed["history"]["step_loss"]


def test_resume_into_another_network_is_refused_and_keeps_the_checkpoint(tmp_path, mnist_slice):
    tr, te = mnist_slice
    quiet = dict(train_set=tr, test_set=te, progress=False, log=lambda *_: None)
    train.fit(quick_config(tmp_path, epochs=1), **quiet)
    before = (tmp_path / "checkpoint.npz").read_bytes()
    with pytest.raises(
        checkpoint.CheckpointError, match="784-64-10 .* but this run builds 784-32-10"
    ):
        train.fit(
            quick_config(tmp_path, epochs=2, hidden=[32]),
            resume=tmp_path / "checkpoint.npz",
            **quiet,
        )
    assert (tmp_path / "checkpoint.npz").read_bytes() == before


def test_wrong_image_size_says_what_to_do(tmp_path, mnist_slice):
    tr, _ = mnist_slice
    big = data.ImageDataset(np.zeros((10, 32, 32), np.uint8), np.zeros(10, np.int64), 10, "big")
    with pytest.raises(
        data.DataError,
        match=r"1024 inputs per sample \(32x32\) but the network "
        r"takes 784",
    ):
        train.fit(
            quick_config(tmp_path), train_set=tr, test_set=big, progress=False, log=lambda *_: None
        )


def test_event_data_trains_with_its_own_time_steps(tmp_path):
    rng = np.random.default_rng(0)
    labels = np.arange(40) % 2
    times, units = [], []
    for y in labels:  # class 0 fires on channels 0-4, class 1 on 5-9
        n = 30
        times.append(rng.random(n))
        units.append(rng.integers(0, 5, n) + 5 * y)
    ds = data._events_dataset(
        times, units, labels, num_classes=2, num_inputs=10, num_steps=6, max_time=1.0, name="toy"
    )
    m = train.fit(
        quick_config(tmp_path, epochs=3, hidden=[16], batch_size=8, lr=2e-2),
        train_set=ds,
        test_set=ds,
        progress=False,
        log=lambda *_: None,
    )
    assert m["summary"]["num_steps"] == 6
    assert m["summary"]["test_accuracy"] >= 0.9


def write_shd(path, labels, rng):
    h5py = pytest.importorskip("h5py")
    with h5py.File(path, "w") as f:
        times = f.create_dataset("spikes/times", (len(labels),), dtype=h5py.vlen_dtype(np.float32))
        units = f.create_dataset("spikes/units", (len(labels),), dtype=h5py.vlen_dtype(np.uint16))
        for i, y in enumerate(labels):  # class y fires on channels 100*y .. 100*y + 49
            times[i] = np.sort(rng.random(40) * 1.3).astype(np.float32)
            units[i] = (rng.integers(0, 50, 40) + 100 * y).astype(np.uint16)
        f.create_dataset("labels", data=np.asarray(labels, np.uint8))


def test_shd_folder_trains_from_the_config(tmp_path):
    rng = np.random.default_rng(0)
    write_shd(tmp_path / "shd_train.h5", np.arange(48) % 3, rng)
    write_shd(tmp_path / "shd_test.h5", np.arange(12) % 3, rng)
    config = quick_config(
        tmp_path / "run",
        dataset="shd",
        data=str(tmp_path),
        num_steps=7,
        hidden=[16],
        epochs=3,
        batch_size=8,
        lr=2e-2,
    )
    m = train.fit(config, progress=False, log=lambda *_: None)
    assert m["summary"]["network"] == "700-16-3" and m["summary"]["num_steps"] == 7
    assert m["summary"]["test_accuracy"] > 0.6  # chance is 1/3
    with pytest.raises(FileNotFoundError, match="pass --data with the folder"):
        train.fit(quick_config(tmp_path / "run", dataset="nmnist"), progress=False)


def test_learning_rate_decays_per_epoch(tmp_path, mnist_slice):
    c = Config()
    assert [c.lr_at(e) for e in (1, 2, 3)] == pytest.approx([5e-4, 2.5e-4, 1.25e-4])
    assert Config(lr_decay=1).lr_at(3) == c.lr
    for bad in (0, 1.5, -0.5, True, "half"):
        with pytest.raises(ConfigError, match="lr_decay must be a number in"):
            Config(lr_decay=bad)
    tr, te = mnist_slice
    quiet = dict(train_set=tr, test_set=te, progress=False, log=lambda *_: None)
    decayed = train.fit(quick_config(tmp_path / "a", epochs=2), **quiet)["history"]
    constant = train.fit(quick_config(tmp_path / "b", epochs=2, lr_decay=1.0), **quiet)["history"]
    assert decayed["lr"] == pytest.approx([5e-3, 2.5e-3])
    assert constant["lr"] == pytest.approx([5e-3, 5e-3])
    # Same first epoch; the second one takes smaller steps.
    assert decayed["step_loss"][:10] == constant["step_loss"][:10]
    assert decayed["step_loss"][10:] != constant["step_loss"][10:]


def test_sparse_rule_covers_the_hidden_layers_unless_asked_for_all():
    net = Config(sparse="window:0.5", hidden=[100, 50]).network(784, 10)
    assert [n.sparse is not None for _, n in net.pairs] == [True, True, False]
    net = Config(sparse="one_sided:0.9", sparse_layers="all").network(784, 10)
    assert [n.sparse.kind for _, n in net.pairs] == ["one_sided", "one_sided"]
    assert all(n.sparse is None for _, n in Config().network(784, 10).pairs)
    with pytest.raises(ConfigError, match="sparse_layers must be one of hidden, all"):
        Config(sparse_layers="readout")
