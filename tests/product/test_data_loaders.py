"""Data loaders: IDX (plain and gzipped), the embedded MNIST, SHD (HDF5), N-MNIST (binary
events), batching. Every file is made here, small."""

import gzip
import struct

import numpy as np
import pytest

from popsnn import data


def write_idx(path, array, compress=False):
    codes = {np.uint8: 0x08, np.int32: 0x0C}
    header = struct.pack(">BBBB", 0, 0, codes[array.dtype.type], array.ndim)
    header += struct.pack(f">{array.ndim}I", *array.shape)
    payload = header + array.astype(array.dtype.newbyteorder(">")).tobytes()
    opener = gzip.open if compress else open
    with opener(path, "wb") as f:
        f.write(payload)


def make_idx_folder(folder, n_train=7, n_test=3, size=(28, 28), compress=False, labels=None):
    rng = np.random.default_rng(1)
    folder.mkdir(parents=True, exist_ok=True)
    sfx = ".gz" if compress else ""
    train_x = rng.integers(0, 256, (n_train,) + size, dtype=np.uint8)
    test_x = rng.integers(0, 256, (n_test,) + size, dtype=np.uint8)
    train_y = labels if labels is not None else rng.integers(0, 10, n_train).astype(np.uint8)
    test_y = rng.integers(0, 10, n_test).astype(np.uint8)
    write_idx(folder / f"train-images-idx3-ubyte{sfx}", train_x, compress)
    write_idx(folder / f"train-labels-idx1-ubyte{sfx}", train_y, compress)
    write_idx(folder / f"t10k-images-idx3-ubyte{sfx}", test_x, compress)
    write_idx(folder / f"t10k-labels-idx1-ubyte{sfx}", test_y, compress)
    return train_x, train_y, test_x, test_y


@pytest.mark.parametrize("compress", [False, True])
def test_idx_folder_round_trip_and_scaling(tmp_path, compress):
    train_x, train_y, test_x, test_y = make_idx_folder(tmp_path, compress=compress)
    train, test = data.load_idx_folder(tmp_path)
    assert len(train) == 7 and len(test) == 3 and train.num_inputs == 784
    np.testing.assert_array_equal(train.labels, train_y)
    x = train.inputs(np.array([2, 0]))
    assert x.shape == (2, 784) and x.dtype == np.float32
    np.testing.assert_allclose(x[0], train_x[2].reshape(-1) / 255.0, rtol=1e-6)
    assert 0.0 <= x.min() and x.max() <= 1.0


def test_embedded_mnist_is_the_full_set():
    train, test = data.load_mnist()
    assert (len(train), len(test)) == (60000, 10000)
    assert train.image_shape == (28, 28) and train.images.dtype == np.uint8
    # The first training labels of MNIST are 5 0 4 1 9 2 1 3 1 4; every digit occurs.
    np.testing.assert_array_equal(train.labels[:10], [5, 0, 4, 1, 9, 2, 1, 3, 1, 4])
    assert set(np.unique(test.labels)) == set(range(10))


def test_truncated_and_foreign_files_say_so(tmp_path):
    make_idx_folder(tmp_path)
    path = tmp_path / "train-images-idx3-ubyte"
    path.write_bytes(path.read_bytes()[:-10])
    with pytest.raises(data.DataError, match="truncated"):
        data.load_idx(path)
    path.write_bytes(b"PK\x03\x04 definitely not idx")
    with pytest.raises(data.DataError, match="not an IDX file"):
        data.load_idx(path)


def test_missing_folder_and_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        data.load_idx_folder(tmp_path / "nope")
    make_idx_folder(tmp_path)
    (tmp_path / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(FileNotFoundError, match="no test labels IDX file"):
        data.load_idx_folder(tmp_path)


def test_labels_out_of_range(tmp_path):
    make_idx_folder(tmp_path, labels=np.array([0, 1, 2, 3, 4, 5, 12], np.uint8))
    with pytest.raises(data.DataError, match=r"labels must lie in \[0, 10\), got 0..12"):
        data.load_idx_folder(tmp_path)


def test_train_and_test_image_sizes_must_agree(tmp_path):
    make_idx_folder(tmp_path)
    write_idx(tmp_path / "t10k-images-idx3-ubyte", np.zeros((3, 32, 32), np.uint8))
    with pytest.raises(data.DataError, match="same image size"):
        data.load_idx_folder(tmp_path)


def test_batches_keep_the_partial_last_batch_and_shuffle_reproducibly():
    ds = data.ImageDataset(np.arange(10 * 4, dtype=np.uint8).reshape(10, 4), np.arange(10) % 3, 3)
    sizes = [len(y) for _, y in data.batches(ds, 4)]
    assert sizes == [4, 4, 2]
    seen = np.concatenate(
        [y for _, y in data.batches(ds, 4, shuffle=True, rng=np.random.default_rng(5))]
    )
    again = np.concatenate(
        [y for _, y in data.batches(ds, 4, shuffle=True, rng=np.random.default_rng(5))]
    )
    np.testing.assert_array_equal(seen, again)
    assert sorted(seen.tolist()) == sorted(ds.labels.tolist())
    assert not np.array_equal(seen, ds.labels)  # shuffled
    with pytest.raises(ValueError, match="rng"):
        next(data.batches(ds, 4, shuffle=True))


def test_shd_events_are_binned(tmp_path):
    h5py = pytest.importorskip("h5py")
    path = tmp_path / "shd_tiny.h5"
    times = [np.array([0.0, 0.05, 0.5, 0.99]), np.array([0.3, 1.2])]
    units = [np.array([0, 3, 3, 699]), np.array([1, 2])]
    with h5py.File(path, "w") as f:
        vt = h5py.vlen_dtype(np.float32)
        vu = h5py.vlen_dtype(np.uint16)
        f.create_dataset("spikes/times", (2,), dtype=vt)[...] = times
        f.create_dataset("spikes/units", (2,), dtype=vu)[...] = units
        f.create_dataset("labels", data=np.array([3, 19], np.uint8))
    ds = data.load_shd(path, num_steps=10, max_time=1.0)
    assert len(ds) == 2 and ds.num_classes == 20 and ds.num_inputs == 700
    assert ds.dropped_events == 1  # the event at 1.2 s lies past max_time
    x = ds.inputs(np.array([0, 1]))
    assert x.shape == (10, 2, 700)
    expected = np.zeros_like(x)
    expected[0, 0, 0] = expected[0, 0, 3] = expected[5, 0, 3] = expected[9, 0, 699] = 1
    expected[3, 1, 1] = 1
    np.testing.assert_array_equal(x, expected)
    # max_time=None covers every event.
    assert data.load_shd(path, num_steps=10, max_time=None).dropped_events == 0
    with pytest.raises(FileNotFoundError, match="SHD file"):
        data.load_shd(tmp_path / "missing.h5")


def encode_nmnist(x, y, p, t):
    out = bytearray()
    for xi, yi, pi, ti in zip(x, y, p, t):
        out += bytes([xi, yi, (pi << 7) | ((ti >> 16) & 0x7F), (ti >> 8) & 0xFF, ti & 0xFF])
    return bytes(out)


def test_nmnist_events_decode_and_bin(tmp_path):
    x, y, p, t = [1, 33, 0], [2, 33, 0], [0, 1, 1], [0, 5_000_000, 8_388_607]
    raw = encode_nmnist(x, y, p, t)
    for digit in (3, 7):
        (tmp_path / str(digit)).mkdir()
        (tmp_path / str(digit) / "00001.bin").write_bytes(raw)
    got = data.read_nmnist_events(tmp_path / "3" / "00001.bin")
    for g, want in zip(got, (x, y, p, t)):
        np.testing.assert_array_equal(g, want)
    ds = data.load_nmnist(tmp_path, num_steps=4, max_time=10.0)
    assert ds.num_inputs == 2312 and ds.labels.tolist() == [3, 7]
    spikes = ds.inputs(np.array([1]))
    assert spikes.shape == (4, 1, 2312) and spikes.sum() == 3
    assert spikes[0, 0, 2 * 34 + 1] == 1  # off event at (1, 2), t=0
    assert spikes[2, 0, 34 * 34 + 33 * 34 + 33] == 1  # on event at (33, 33), t=5 s
    assert spikes[3, 0, 34 * 34] == 1  # on event at (0, 0), t=8.39 s
    (tmp_path / "3" / "bad.bin").write_bytes(raw[:-2])
    with pytest.raises(data.DataError, match="5-byte"):
        data.load_nmnist(tmp_path)


def test_nmnist_train_and_test_share_one_time_bin_width(tmp_path):
    # Train recordings last 8 s, test recordings 2 s: a step must mean the same time in both.
    for split, last_us in (("Train", 8_000_000), ("Test", 2_000_000)):
        for digit in (0, 1):
            (tmp_path / split / str(digit)).mkdir(parents=True)
            raw = encode_nmnist([1, 2], [1, 2], [1, 1], [0, last_us])
            (tmp_path / split / str(digit) / "00001.bin").write_bytes(raw)
    train, test = data.load_named("nmnist", tmp_path, num_steps=4)
    assert train.max_time == test.max_time > 8.0
    assert train.dropped_events == test.dropped_events == 0
    # The test set's last event (2 s) falls in the first quarter of the shared 8 s span.
    spikes = test.inputs(np.array([0]))
    assert spikes[0, 0].sum() == 2 and spikes[1:].sum() == 0


@pytest.mark.skipif(
    data.fashion_mnist_folder() is None,
    reason="Fashion-MNIST is not installed (optional: `make data` fetches it)",
)
def test_fashion_mnist_where_make_data_or_debian_puts_it():
    train, test = data.load_fashion_mnist()
    assert (len(train), len(test)) == (60000, 10000) and train.image_shape == (28, 28)
    assert set(np.unique(train.labels)) == set(range(10))


def test_fashion_mnist_found_in_the_user_data_folder_else_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setenv("POPSNN_DATA", str(tmp_path))
    monkeypatch.setattr(data, "FASHION_MNIST_SYSTEM", tmp_path / "no-such-folder")
    with pytest.raises(FileNotFoundError, match=f"make data.*{tmp_path}"):
        data.load_fashion_mnist()
    folder = tmp_path / "fashion-mnist"  # where `make data` unpacks it
    folder.mkdir()
    for split, count in (("train", 3), ("t10k", 2)):
        write_idx(folder / f"{split}-images-idx3-ubyte", np.full((count, 2, 2), 7, np.uint8))
        write_idx(folder / f"{split}-labels-idx1-ubyte", np.arange(count, dtype=np.uint8))
    train, test = data.load_fashion_mnist()
    assert (len(train), len(test)) == (3, 2) and train.name == "fashion-mnist/train"
