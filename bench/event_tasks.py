"""The sparse experiments' data: Fashion-MNIST latency-coded, N-MNIST and SHD.

Fashion-MNIST is real (`make data`). No N-MNIST or SHD recording can be downloaded on these
machines (docs/papers.md), so unless the real set is found (`<data dir>/nmnist/Train|Test`,
`<data dir>/shd/shd_train.h5|shd_test.h5`, `popsnn.data.user_data_dir()`), a recording is
GENERATED here in the published file format and read back through popsnn's own loaders:

* N-MNIST-format: real MNIST digits seen by a simulated event camera making N-MNIST's three
  saccades (the image moved along a triangle in 34 x 34 pixels; an ON or OFF event wherever a
  pixel's intensity changes by more than a contrast threshold between two frames);
* SHD-format: 20 classes of synthetic "spoken digits" over 700 channels: each class a fixed
  sequence of formant-like bands sweeping across channels, every sample warped in time,
  shifted in channel and spiking at random (Poisson), with background noise.

Rows say which (`data_source`); accuracy on a generated set is not comparable to the papers'.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from common import Task, _dataset, image_task

from popsnn import data, encoders

NMNIST_FRAMES = 30  # three saccades of 10 frames, 10 ms each (N-MNIST: ~100 ms per saccade)
NMNIST_FRAME_US = 10_000
NMNIST_CONTRAST = 0.15  # intensity change (pixels in [0, 1]) that makes an event
SHD_CLASSES, SHD_CHANNELS, SHD_SECONDS = 20, 700, 0.8


def latency_task(dataset: str, steps: int) -> Task:
    """Perez-Nieves & Goodman's image input: one spike per pixel at most, brighter earlier
    (`popsnn.encoders.latency`); Fashion-MNIST in the papers' setting. The spikes come as
    uint8, which the engine lists without a float copy (a quarter of the bytes to read)."""
    return image_task(dataset, lambda x: encoders.latency(x, steps).astype(np.uint8))


def event_task(name: str, steps: int, train_n: int, test_n: int, seed: int = 0) -> Task:
    """N-MNIST ("nmnist") or SHD ("shd") binned into `steps` time bins: the real set if it is
    in the data folder, else one generated here (`train_n` + `test_n` recordings)."""
    if name not in ("nmnist", "shd"):
        raise ValueError(f"event data set must be 'nmnist' or 'shd', got {name!r}")
    real = data.user_data_dir() / name
    if (real / "Train").is_dir() or (real / "shd_train.h5").is_file():
        train, test = data.load_named(name, real, num_steps=steps)
        return Task(name, train, test, lambda x: x, f"{name} (real, {real})")
    with tempfile.TemporaryDirectory(prefix=f"popsnn-bench-{name}-") as tmp:
        if name == "nmnist":
            write_nmnist(Path(tmp), train_n, test_n, seed)
        else:
            write_shd(Path(tmp), train_n, test_n, seed)
        train, test = data.load_named(name, tmp, num_steps=steps)
    source = (
        "generated N-MNIST-format recording: MNIST digits through a simulated event camera"
        if name == "nmnist"
        else "generated SHD-format recording: synthetic formant sweeps, 20 classes"
    )
    return Task(name, train, test, lambda x: x, f"{source} ({train_n} train, {test_n} test)")


# --------------------------------------------------------------------------- N-MNIST format


def _saccade_path() -> np.ndarray:
    """(dx, dy) per frame: N-MNIST's three saccades, a triangle of side 3 pixels."""
    corners = np.array([(0, 0), (3, 3), (6, 0), (0, 0)], float)
    per = NMNIST_FRAMES // 3
    path = [c0 + (c1 - c0) * k / per for c0, c1 in zip(corners, corners[1:]) for k in range(per)]
    return np.rint(path).astype(int)


def nmnist_events(image: np.ndarray, rng) -> tuple:
    """(x, y, polarity, timestamp in microseconds) of one 28 x 28 image in [0, 1] seen by the
    simulated camera: an event wherever a pixel changes by more than NMNIST_CONTRAST between
    consecutive frames (ON if brighter), at a random time within the frame."""
    frames = np.zeros((NMNIST_FRAMES, data.NMNIST_SIZE, data.NMNIST_SIZE), np.float32)
    for f, (dx, dy) in enumerate(_saccade_path()):
        frames[f, dy : dy + 28, dx : dx + 28] = image
    diff = np.diff(frames, axis=0, prepend=frames[:1] * 0)
    f, y, x = np.nonzero(np.abs(diff) > NMNIST_CONTRAST)
    polarity = (diff[f, y, x] > 0).astype(int)
    t = f * NMNIST_FRAME_US + rng.integers(0, NMNIST_FRAME_US, len(f))
    order = np.argsort(t, kind="stable")
    return x[order], y[order], polarity[order], t[order]


def encode_nmnist(x, y, polarity, t) -> bytes:
    """N-MNIST's 40-bit events: x, y, polarity in bit 7 then the 23-bit timestamp."""
    ev = np.zeros((len(x), 5), np.uint8)
    ev[:, 0], ev[:, 1] = x, y
    ev[:, 2] = (polarity << 7) | ((t >> 16) & 0x7F)
    ev[:, 3], ev[:, 4] = (t >> 8) & 0xFF, t & 0xFF
    return ev.tobytes()


def write_nmnist(folder: Path, train_n: int, test_n: int, seed: int) -> None:
    """`folder/Train/<digit>/*.bin` and `folder/Test/...` from MNIST's own train and test
    images (the real N-MNIST was recorded from the same digits)."""
    rng = np.random.default_rng(seed)
    train, test = _dataset("mnist")
    for split, ds, n in (("Train", train, train_n), ("Test", test, test_n)):
        idx = rng.choice(len(ds.labels), size=n, replace=False)
        pixels = ds.inputs(idx)
        for k, (i, img) in enumerate(zip(idx, pixels)):
            out = folder / split / str(int(ds.labels[i]))
            out.mkdir(parents=True, exist_ok=True)
            raw = encode_nmnist(*nmnist_events(img.reshape(28, 28), rng))
            (out / f"{k:05d}.bin").write_bytes(raw)


# --------------------------------------------------------------------------- SHD format


def _shd_classes(rng) -> list:
    """Per class: three segments, each 2-3 bands (start channel, end channel) sweeping over
    the segment's third of the recording."""
    return [
        [
            [tuple(rng.integers(40, SHD_CHANNELS - 40, 2)) for _ in range(rng.integers(2, 4))]
            for _ in range(3)
        ]
        for _ in range(SHD_CLASSES)
    ]


def shd_events(pattern, rng, rate_hz: float = 60.0, width: int = 12) -> tuple:
    """(times in s, units) of one recording of a class `pattern`: warped in time (0.8-1.2x),
    shifted by up to 8 channels, each band's channels Poisson at `rate_hz`, plus noise."""
    speed, shift = rng.uniform(0.8, 1.2), rng.integers(-8, 9)
    seg = SHD_SECONDS / 3 / speed
    times, units = [], []
    for s, bands in enumerate(pattern):
        for c0, c1 in bands:
            n = rng.poisson(rate_hz * seg * 2 * width)
            t = rng.uniform(0, seg, n)
            centre = c0 + (c1 - c0) * t / seg + shift
            u = np.rint(centre + rng.uniform(-width, width, n)).astype(int)
            times.append(s * seg + t)
            units.append(u)
    noise = rng.poisson(2.0 * SHD_CHANNELS * SHD_SECONDS)
    times.append(rng.uniform(0, SHD_SECONDS, noise))
    units.append(rng.integers(0, SHD_CHANNELS, noise))
    t, u = np.concatenate(times), np.concatenate(units)
    keep = (u >= 0) & (u < SHD_CHANNELS)
    order = np.argsort(t[keep])
    return t[keep][order], u[keep][order]


def write_shd(folder: Path, train_n: int, test_n: int, seed: int) -> None:
    """`folder/shd_train.h5` and `shd_test.h5` in SHD's layout (spikes/times, spikes/units,
    labels), the classes shared by both splits."""
    import h5py

    rng = np.random.default_rng(seed)
    classes = _shd_classes(rng)
    folder.mkdir(parents=True, exist_ok=True)
    for split, n in (("train", train_n), ("test", test_n)):
        # Every class in turn (shuffled): the loader counts the classes from the labels.
        labels = rng.permutation(np.arange(n) % SHD_CLASSES)
        with h5py.File(folder / f"shd_{split}.h5", "w") as f:
            times = f.create_dataset("spikes/times", (n,), h5py.vlen_dtype(np.float32))
            units = f.create_dataset("spikes/units", (n,), h5py.vlen_dtype(np.uint16))
            for i, label in enumerate(labels):
                times[i], units[i] = shd_events(classes[label], rng)
            f.create_dataset("labels", data=labels.astype(np.uint8))
