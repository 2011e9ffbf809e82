"""Data sets for training: MNIST-style IDX images and neuromorphic event recordings.

Two kinds of data set, one interface (`len`, `labels`, `num_classes`, `num_inputs`,
`inputs(indices)`):

- `ImageDataset`: static images; `inputs` gives `[B, N]` pixels scaled to [0, 1]. The training
  loop feeds them as direct current (the same every step) or through an encoder.
- `EventDataset`: spike events per sample; `inputs` bins them into a `[T, B, N]` 0/1 tensor.

Loaders: `load_mnist` (embedded copy, or a folder of IDX files, gzipped or not),
`load_fashion_mnist`, `load_idx_folder`, `load_shd` (HDF5), `load_nmnist` (40-bit binary events).
`batches` walks a data set in (optionally shuffled) minibatches; the last partial batch is kept.

Readers: SHD's HDF5 through h5py. IDX and N-MNIST's binary events are
decoded with NumPy here: each is a fixed header or a 5-byte record, a few lines of
`np.frombuffer`, and the maintained reader of N-MNIST (tonic) would bring librosa, numba and
SciPy (hundreds of MB) into every install for those lines. Every reader validates the file
fully (tests/product/test_loader_fuzz.py fuzzes them).
"""

from __future__ import annotations

import gzip
import lzma
import math
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ._checks import positive_int, positive_real

EMBEDDED_MNIST = Path(__file__).resolve().parent / "datasets" / "mnist"
# Where Debian's dataset-fashion-mnist package installs it (needs root).
FASHION_MNIST_SYSTEM = Path("/usr/share/datasets/fashion-mnist")
# The command that fetches Fashion-MNIST without root (the Makefile's `data` target).
FASHION_MNIST_COMMAND = "make data"


def user_data_dir() -> Path:
    """Where `make data` puts data sets for this user: $POPSNN_DATA, else
    $XDG_DATA_HOME/popsnn, else ~/.local/share/popsnn."""
    if os.environ.get("POPSNN_DATA"):
        return Path(os.environ["POPSNN_DATA"])
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(base) / "popsnn"


_IDX_DTYPES = {
    0x08: np.uint8,
    0x09: np.int8,
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


class DataError(ValueError):
    """Data that cannot be used as given; the message says what to do."""


# --------------------------------------------------------------------------------------------
# Data sets


@dataclass
class ImageDataset:
    """Static samples: `images` [S, ...] (uint8 0..255 or float in [0, 1]), `labels` [S]."""

    images: np.ndarray
    labels: np.ndarray
    num_classes: int
    name: str = "images"

    def __post_init__(self):
        self.labels = _check_labels(self.name, self.labels, self.num_classes)
        if len(self.images) != len(self.labels):
            raise DataError(
                f"{self.name}: {len(self.images)} images but {len(self.labels)} "
                f"labels; the image and label files must come from the same split"
            )

    num_steps = None  # static: the same input at every step

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def num_inputs(self) -> int:
        return int(np.prod(self.images.shape[1:]))

    @property
    def image_shape(self) -> tuple:
        return tuple(self.images.shape[1:])

    def inputs(self, indices) -> np.ndarray:
        """Pixels of the samples `indices`, flattened to [B, N], float32 in [0, 1]."""
        x = self.images[indices].reshape(len(indices), -1)
        if x.dtype == np.uint8:
            return x.astype(np.float32) / np.float32(255.0)
        return x.astype(np.float32, copy=False)

    def take(self, count: int | None) -> ImageDataset:
        """The first `count` samples (all of them when None)."""
        if count is None:
            return self
        count = _check_limit(count, len(self))
        return ImageDataset(self.images[:count], self.labels[:count], self.num_classes, self.name)


@dataclass
class EventDataset:
    """Spike events, stored flat: sample i owns `times[offsets[i]:offsets[i+1]]` (seconds)
    and the same slice of `units` (input channel ids in [0, num_inputs))."""

    times: np.ndarray
    units: np.ndarray
    offsets: np.ndarray
    labels: np.ndarray
    num_classes: int
    num_inputs: int
    num_steps: int
    max_time: float
    name: str = "events"
    dropped_events: int = field(default=0)

    def __post_init__(self):
        self.labels = _check_labels(self.name, self.labels, self.num_classes)
        positive_int("num_steps", self.num_steps)
        positive_real("max_time", self.max_time)
        if len(self.offsets) != len(self.labels) + 1:
            raise DataError(
                f"{self.name}: {len(self.offsets) - 1} recordings but {len(self.labels)} labels"
            )
        if len(self.units) and (self.units.min() < 0 or self.units.max() >= self.num_inputs):
            raise DataError(
                f"{self.name}: input channel ids must lie in [0, {self.num_inputs}), "
                f"got {int(self.units.min())}..{int(self.units.max())}; "
                f"pass num_inputs= large enough for the recording"
            )

    def __len__(self) -> int:
        return len(self.labels)

    def inputs(self, indices) -> np.ndarray:
        """Spikes of the samples `indices` as a [T, B, N] float32 tensor of 0/1: an input spikes
        in a time bin if it has at least one event there."""
        indices = np.asarray(indices)
        out = np.zeros((self.num_steps, len(indices), self.num_inputs), np.float32)
        for b, i in enumerate(indices):
            lo, hi = self.offsets[i], self.offsets[i + 1]
            t = self.times[lo:hi]
            keep = t < self.max_time  # events after max_time were counted in dropped_events
            bins = np.minimum(
                (t[keep] / self.max_time * self.num_steps).astype(np.int64), self.num_steps - 1
            )
            out[bins, b, self.units[lo:hi][keep]] = 1.0
        return out

    def take(self, count: int | None) -> EventDataset:
        if count is None:
            return self
        count = _check_limit(count, len(self))
        end = self.offsets[count]
        return EventDataset(
            self.times[:end],
            self.units[:end],
            self.offsets[: count + 1],
            self.labels[:count],
            self.num_classes,
            self.num_inputs,
            self.num_steps,
            self.max_time,
            self.name,
        )


def _check_labels(name: str, labels, num_classes: int) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.dtype.kind not in "iu":
        raise DataError(
            f"{name}: labels must be a 1-D array of integers, got shape "
            f"{labels.shape} dtype {labels.dtype}"
        )
    positive_int("num_classes", num_classes)
    if len(labels) and (labels.min() < 0 or labels.max() >= num_classes):
        raise DataError(
            f"{name}: labels must lie in [0, {num_classes}), got "
            f"{int(labels.min())}..{int(labels.max())}; check the label file or "
            f"give the network as many outputs as there are classes"
        )
    return labels.astype(np.int64, copy=False)


def _check_limit(count, size: int) -> int:
    count = positive_int("limit", count)
    return min(count, size)


# --------------------------------------------------------------------------------------------
# Batching


def batches(
    dataset, batch_size: int, *, shuffle: bool = False, rng: np.random.Generator | None = None
) -> Iterator[tuple]:
    """Yield `(x, y)` minibatches over the whole data set. The last batch holds the remainder
    (smaller than `batch_size`), so every sample is trained on or evaluated exactly once."""
    batch_size = positive_int("batch_size", batch_size)
    order = np.arange(len(dataset))
    if shuffle:
        if rng is None:
            raise ValueError(
                "batches(shuffle=True) needs rng=np.random.default_rng(seed), "
                "so that the order is reproducible"
            )
        order = rng.permutation(len(dataset))
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        yield dataset.inputs(idx), dataset.labels[idx]


# --------------------------------------------------------------------------------------------
# IDX files (MNIST, Fashion-MNIST)


def _open_maybe_compressed(path: Path):
    with open(path, "rb") as f:
        head = f.read(6)
    if head[:2] == b"\x1f\x8b":
        return gzip.open(path, "rb")
    if head == b"\xfd7zXZ\x00":
        return lzma.open(path, "rb")
    return open(path, "rb")


def load_idx(path) -> np.ndarray:
    """Read one IDX file (gzip, xz or plain) into an array of its stored shape and type."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"IDX file {path} does not exist")
    try:
        with _open_maybe_compressed(path) as f:
            raw = f.read()
    except (OSError, EOFError, lzma.LZMAError, zlib.error) as err:
        raise DataError(
            f"{path}: cannot read or decompress it ({err}); the file is damaged, fetch it again"
        ) from None
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in _IDX_DTYPES:
        raise DataError(
            f"{path} is not an IDX file (bad magic number {raw[:4].hex()}); "
            f"expected MNIST-style files such as train-images-idx3-ubyte[.gz]"
        )
    dtype = np.dtype(_IDX_DTYPES[raw[2]])
    ndim = raw[3]
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DataError(
            f"{path}: the header announces {ndim} dimensions but the file ends "
            f"after {len(raw)} bytes; the file is truncated or damaged"
        )
    shape = tuple(int(v) for v in np.frombuffer(raw[4:header], ">u4"))
    if 0 in shape:  # an empty file; its other sizes still have to describe a real array
        raise DataError(
            f"{path}: header says shape {shape}, which holds no samples; the file is "
            f"truncated or damaged, fetch it again"
        )
    expected = header + math.prod(shape) * dtype.itemsize
    if len(raw) != expected:
        raise DataError(
            f"{path}: header says shape {shape} ({expected} bytes) but the file has "
            f"{len(raw)} bytes; the file is truncated or damaged, fetch it again"
        )
    return np.frombuffer(raw, dtype, offset=header).reshape(shape).astype(dtype.newbyteorder("="))


def _find_idx(folder: Path, split: str, kind: str) -> Path:
    """The file of `split` ("train" or "test") and `kind` ("images" or "labels") in `folder`,
    accepting the usual spellings (train-images-idx3-ubyte, t10k-..., train-images.idx3-ubyte,
    with or without .gz)."""
    prefixes = ("train",) if split == "train" else ("t10k", "test")
    found = []
    for p in sorted(folder.iterdir()):
        name = p.name.lower()
        if p.is_file() and name.startswith(prefixes) and kind in name and "idx" in name:
            found.append(p)
    if not found:
        listing = ", ".join(sorted(p.name for p in folder.iterdir())[:10]) or "nothing"
        raise FileNotFoundError(
            f"no {split} {kind} IDX file in {folder} (it holds: {listing}); expected e.g. "
            f"{'train' if split == 'train' else 't10k'}-{kind}-idx{3 if kind == 'images' else 1}"
            f"-ubyte[.gz]. For MNIST run `make data` or omit --data to use the embedded copy"
        )
    # Prefer the uncompressed file when both are there (faster to read).
    found.sort(key=lambda p: p.suffix == ".gz")
    return found[0]


def load_idx_folder(
    folder, name: str | None = None, num_classes: int = 10
) -> tuple[ImageDataset, ImageDataset]:
    """(train, test) image data sets from a folder of IDX files."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(
            f"data folder {folder} does not exist; pass --data with a folder "
            f"of IDX files (train-images-idx3-ubyte[.gz], ...)"
        )
    name = name or folder.name
    out = []
    for split in ("train", "test"):
        images = load_idx(_find_idx(folder, split, "images"))
        labels = load_idx(_find_idx(folder, split, "labels"))
        if images.ndim < 2 or labels.ndim != 1:
            raise DataError(
                f"{folder}: {split} images must be [S, H, W] and labels [S], got "
                f"{images.shape} and {labels.shape}"
            )
        out.append(ImageDataset(images, labels, num_classes, f"{name}/{split}"))
    if out[0].image_shape != out[1].image_shape:
        raise DataError(
            f"{folder}: train images are {out[0].image_shape} but test images are "
            f"{out[1].image_shape}; both splits must have the same image size"
        )
    return out[0], out[1]


def load_mnist(path=None) -> tuple[ImageDataset, ImageDataset]:
    """MNIST (train 60,000, test 10,000) from a folder of IDX files, or the copy embedded in
    popsnn when `path` is None (works offline)."""
    return load_idx_folder(EMBEDDED_MNIST if path is None else path, name="mnist")


def fashion_mnist_folder() -> Path | None:
    """The installed Fashion-MNIST: `make data`'s folder, else the Debian package's; None
    when neither holds it."""
    for folder in (user_data_dir() / "fashion-mnist", FASHION_MNIST_SYSTEM):
        if folder.is_dir():
            return folder
    return None


def load_fashion_mnist(path=None) -> tuple[ImageDataset, ImageDataset]:
    """Fashion-MNIST from a folder of IDX files; by default where `make data` puts it
    (`user_data_dir()/fashion-mnist`), else where Debian's `dataset-fashion-mnist` installs it."""
    folder = Path(path) if path is not None else fashion_mnist_folder()
    if folder is None:
        raise FileNotFoundError(
            f"Fashion-MNIST is not installed: run `{FASHION_MNIST_COMMAND}` "
            f"in popsnn's source folder (no root needed; it unpacks into "
            f"{user_data_dir() / 'fashion-mnist'}), or pass the folder of "
            f"its IDX files"
        )
    return load_idx_folder(folder, name="fashion-mnist")


# --------------------------------------------------------------------------------------------
# Event data: SHD (HDF5) and N-MNIST (binary)


def _events_dataset(
    times_list, units_list, labels, *, num_classes, num_inputs, num_steps, max_time, name
) -> EventDataset:
    lengths = np.array([len(t) for t in times_list], np.int64)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    times = np.concatenate(times_list).astype(np.float64) if len(times_list) else np.zeros(0)
    units = np.concatenate(units_list).astype(np.int64) if len(units_list) else np.zeros(0, int)
    nan = np.isnan(times)
    if np.any(nan):
        # Refused rather than dropped: a recording with holes would train silently on less.
        samples = np.unique(np.searchsorted(offsets, np.flatnonzero(nan), side="right") - 1)
        raise DataError(
            f"{name}: {int(nan.sum())} event(s) in {len(samples)} recording(s) "
            f"(first: sample {int(samples[0])}) have a NaN time; repair or remove "
            f"those recordings"
        )
    if np.any(times < 0):
        raise DataError(f"{name}: event times must be >= 0, got {float(times.min())}")
    if max_time is None:
        # Cover every event of the data set so nothing is lost to the binning.
        max_time = float(np.nextafter(times.max(), np.inf)) if len(times) else 1.0
    dropped = int(np.count_nonzero(times >= max_time))
    return EventDataset(
        times,
        units,
        offsets,
        np.asarray(labels),
        num_classes,
        num_inputs,
        num_steps,
        max_time,
        name,
        dropped,
    )


def load_shd(
    path,
    *,
    num_steps: int = 100,
    max_time: float | None = 1.4,
    num_inputs: int = 700,
    num_classes: int | None = None,
) -> EventDataset:
    """The Spiking Heidelberg Digits (or SSC) from one HDF5 file with `spikes/times` (seconds),
    `spikes/units` and `labels`. Events at or after `max_time` seconds are dropped (counted in
    `dropped_events`); `max_time=None` covers the longest recording."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"SHD file {path} does not exist; download shd_train.h5 / "
            f"shd_test.h5 (gunzipped) and pass its path"
        )
    try:
        import h5py
    except ImportError:
        raise ImportError("reading SHD needs h5py: pip install h5py") from None
    times, units, labels = _read_shd(path, h5py)
    if num_classes is None:
        num_classes = int(labels.max()) + 1 if len(labels) else 1
    try:
        return _events_dataset(
            times,
            units,
            labels,
            num_classes=num_classes,
            num_inputs=num_inputs,
            num_steps=num_steps,
            max_time=max_time,
            name=path.stem,
        )
    except (TypeError, ValueError) as err:  # DataError included: say which file
        raise DataError(f"{path}: {str(err).removeprefix(path.stem + ': ')}") from None


def _read_shd(path: Path, h5py) -> tuple:
    """(times, units, labels) of an SHD file, each recording checked; any damage is a
    DataError naming the file."""
    try:
        with h5py.File(path, "r") as f:
            for key in ("spikes/times", "spikes/units", "labels"):
                if key not in f or not isinstance(f[key], h5py.Dataset):
                    raise DataError(
                        f"{path} has no dataset '{key}'; an SHD file holds "
                        f"spikes/times, spikes/units and labels"
                    )
            times = [np.asarray(t, np.float64).reshape(-1) for t in f["spikes/times"]]
            units = [np.asarray(u).reshape(-1) for u in f["spikes/units"]]
            labels = np.asarray(f["labels"]).reshape(-1)
    except DataError:
        raise
    except (OSError, ValueError, TypeError, KeyError, RuntimeError) as err:
        raise DataError(
            f"{path} is not a readable SHD HDF5 file ({type(err).__name__}: {err})"
        ) from None
    if len(times) != len(units) or len(times) != len(labels):
        raise DataError(
            f"{path}: {len(times)} spike-time lists, {len(units)} unit lists and "
            f"{len(labels)} labels; the three must have one entry per recording"
        )
    for i, (t, u) in enumerate(zip(times, units)):
        if len(t) != len(u) or u.dtype.kind not in "iu":
            raise DataError(
                f"{path}: recording {i} has {len(t)} times but {len(u)} units "
                f"of type {u.dtype}; each event needs a time and an integer unit"
            )
    if labels.dtype.kind not in "iu":
        raise DataError(f"{path}: labels must be integers, got {labels.dtype}")
    return times, [u.astype(np.int64) for u in units], labels.astype(np.int64)


NMNIST_SIZE = 34  # the ATIS sensor crop of N-MNIST is 34 x 34 pixels


def read_nmnist_events(path) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x, y, polarity, timestamp in microseconds) of one N-MNIST .bin file: 40 bits per event,
    byte 0 = x, byte 1 = y, byte 2 bit 7 = polarity, then a 23-bit timestamp."""
    try:
        raw = np.fromfile(path, np.uint8)
    except OSError as err:
        raise DataError(f"{path}: cannot read it ({err})") from None
    if raw.size % 5:
        raise DataError(
            f"{path}: {raw.size} bytes is not a whole number of 5-byte N-MNIST "
            f"events; the file is truncated or not an N-MNIST recording"
        )
    ev = raw.reshape(-1, 5).astype(np.int64)
    x, y = ev[:, 0], ev[:, 1]
    polarity = ev[:, 2] >> 7
    timestamp = ((ev[:, 2] & 0x7F) << 16) | (ev[:, 3] << 8) | ev[:, 4]
    return x, y, polarity, timestamp


def load_nmnist(
    folder, *, num_steps: int = 30, max_time: float | None = None, size: int = NMNIST_SIZE
) -> EventDataset:
    """N-MNIST recordings from a folder with one subfolder per digit (`0/`..`9/`, *.bin files),
    e.g. the `Train/` or `Test/` folder of the published set. Input channel =
    polarity*size*size + y*size + x (2 x 34 x 34 = 2,312 inputs); times in seconds."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"N-MNIST folder {folder} does not exist")
    times, units, labels = [], [], []
    for digit in range(10):
        for f in sorted((folder / str(digit)).glob("*.bin")):
            x, y, p, t = read_nmnist_events(f)
            if len(x) and (x.max() >= size or y.max() >= size):
                raise DataError(
                    f"{f}: pixel ({int(x.max())}, {int(y.max())}) outside the "
                    f"{size}x{size} sensor; pass size= of the recording"
                )
            times.append(t * 1e-6)
            units.append(p * size * size + y * size + x)
            labels.append(digit)
    if not labels:
        raise FileNotFoundError(
            f"no N-MNIST recordings in {folder}: expected subfolders 0..9 "
            f"holding .bin files (the Train/ or Test/ folder of N-MNIST)"
        )
    return _events_dataset(
        times,
        units,
        labels,
        num_classes=10,
        num_inputs=2 * size * size,
        num_steps=num_steps,
        max_time=max_time,
        name=folder.name,
    )


# --------------------------------------------------------------------------------------------
# Named data sets (the CLI's --dataset)

DATASETS = ("mnist", "fashion-mnist", "shd", "nmnist")


def load_named(name: str, path=None, num_steps: int = 25) -> tuple:
    """(train, test) of a named data set. `path`: the folder holding it (by default the
    embedded MNIST, `make data`'s Fashion-MNIST, `make event-data`'s `user_data_dir()/shd` or
    `/nmnist`); SHD wants shd_train.h5 and shd_test.h5 in it, N-MNIST its Train/ and Test/
    folders. `num_steps`: time bins for the event data sets."""
    if name == "mnist":
        return load_mnist(path)
    if name == "fashion-mnist":
        return load_fashion_mnist(path)
    if name not in DATASETS:
        raise ValueError(f"dataset must be one of {list(DATASETS)}, got {name!r}")
    folder = Path(path) if path is not None else user_data_dir() / name
    if path is None and not folder.is_dir():
        raise FileNotFoundError(
            f"{name} is not shipped with popsnn: install its published archives with "
            f"`make event-data ARCHIVES=...` (docs/data.md) or pass --data with the folder "
            f"that holds it ({_EVENT_LAYOUT[name]})"
        )
    if name == "shd":
        train = load_shd(folder / "shd_train.h5", num_steps=num_steps)
        test = load_shd(folder / "shd_test.h5", num_steps=num_steps, num_classes=train.num_classes)
    else:
        train = load_nmnist(folder / "Train", num_steps=num_steps)
        test = load_nmnist(folder / "Test", num_steps=num_steps)
    return same_time_bins(train, test)


def same_time_bins(*sets: EventDataset) -> tuple:
    """The sets binned alike: each one's own span would give train and test different time-bin
    widths (a step would mean a different duration in each). Both spans already cover all of
    their events, so the longer one covers both and drops nothing."""
    span = max(s.max_time for s in sets)
    for s in sets:
        s.max_time = span
    return sets


_EVENT_LAYOUT = {
    "shd": "shd_train.h5 and shd_test.h5, gunzipped",
    "nmnist": "the Train/ and Test/ folders of N-MNIST",
}
