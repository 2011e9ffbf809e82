"""Property tests of every loader of files from outside (IDX, SHD, N-MNIST, checkpoints, TOML
config): any input either loads or raises popsnn's own error type with a message naming the
file -- never a raw zlib/h5py/JSON/Unicode error."""

import gzip
import json
import lzma

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import popsnn
from popsnn import checkpoint, data, train

FUZZ = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def loads_or_names_file(load, path, error):
    try:
        return load()
    except error as err:
        assert str(path) in str(err), f"{type(err).__name__} does not name {path}: {err}"
        return None


# ---------------------------------------------------------------- IDX


def idx_bytes():
    """Mostly IDX-like: a real magic number and header, a payload of any length."""
    header = st.builds(
        lambda code, dims: (
            bytes([0, 0, code, len(dims)]) + b"".join(int(d).to_bytes(4, "big") for d in dims)
        ),
        st.sampled_from([0x08, 0x09, 0x0B, 0x0C, 0x0D, 0x0E, 0x07]),
        st.lists(st.integers(0, 2**32 - 1) | st.integers(0, 5), max_size=4),
    )
    return st.one_of(
        st.binary(max_size=64), st.tuples(header, st.binary(max_size=64)).map(lambda p: p[0] + p[1])
    )


@FUZZ
@given(raw=idx_bytes(), wrap=st.sampled_from(["plain", "gzip", "xz", "broken-gzip"]))
def test_idx_files(tmp_path, raw, wrap):
    path = tmp_path / "train-images-idx3-ubyte"
    if wrap == "gzip":
        raw = gzip.compress(raw)
    elif wrap == "xz":
        raw = lzma.compress(raw)
    elif wrap == "broken-gzip":
        raw = gzip.compress(raw)[:-5] + b"\x01\x02"
    path.write_bytes(raw)
    array = loads_or_names_file(lambda: data.load_idx(path), path, data.DataError)
    if array is not None:
        assert array.ndim == raw_ndim(path)


def raw_ndim(path):
    with data._open_maybe_compressed(path) as f:
        return f.read(4)[3]


# ---------------------------------------------------------------- SHD (HDF5)

h5_values = st.one_of(
    st.lists(
        st.lists(st.floats(allow_nan=True, allow_infinity=True, width=32), max_size=4), max_size=3
    ).map(lambda v: ("vlen_f", v)),
    st.lists(st.lists(st.integers(-3, 800), max_size=4), max_size=3).map(lambda v: ("vlen_i", v)),
    st.lists(st.integers(-5, 30), max_size=4).map(lambda v: ("ints", v)),
    st.lists(st.floats(-2, 2), max_size=4).map(lambda v: ("floats", v)),
    st.just(("group", None)),
    st.just(("missing", None)),
)


def write_h5(path, entries):
    import h5py

    with h5py.File(path, "w") as f:
        for key, (kind, value) in entries.items():
            if kind == "missing":
                continue
            if kind == "group":
                f.create_group(key)
            elif kind.startswith("vlen"):
                dtype = h5py.vlen_dtype(np.float32 if kind == "vlen_f" else np.int32)
                d = f.create_dataset(key, (len(value),), dtype=dtype)
                for i, v in enumerate(value):
                    d[i] = np.array(v, dtype.metadata["vlen"])
            else:
                f.create_dataset(
                    key, data=np.array(value, np.int64 if kind == "ints" else np.float64)
                )


@FUZZ
@given(
    times=h5_values,
    units=h5_values,
    labels=h5_values,
    junk=st.binary(max_size=40),
    as_junk=st.booleans(),
)
def test_shd_files(tmp_path, times, units, labels, junk, as_junk):
    pytest.importorskip("h5py")
    path = tmp_path / "shd_train.h5"
    if as_junk:
        path.write_bytes(junk)
    else:
        write_h5(path, {"spikes/times": times, "spikes/units": units, "labels": labels})
    ds = loads_or_names_file(
        lambda: data.load_shd(path, num_steps=4, max_time=None), path, data.DataError
    )
    if ds is not None:
        assert ds.inputs(np.arange(len(ds))).shape == (4, len(ds), 700)


# ---------------------------------------------------------------- N-MNIST


@FUZZ
@given(raw=st.binary(max_size=60))
def test_nmnist_files(tmp_path, raw):
    (tmp_path / "3").mkdir(exist_ok=True)
    path = tmp_path / "3" / "00001.bin"
    path.write_bytes(raw)
    ds = loads_or_names_file(lambda: data.load_nmnist(tmp_path, num_steps=3), path, data.DataError)
    if ds is not None:
        assert ds.labels.tolist() == [3] and ds.inputs(np.array([0])).shape == (3, 1, 2312)


# ---------------------------------------------------------------- checkpoints

NET = popsnn.Sequential(popsnn.Linear(3, 2), popsnn.Leaky(beta=0.5))
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.floats(allow_nan=False)
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["__array__", "__dict__", "__list__", "type", "epoch", "x"]),
            inner,
            max_size=3,
        )
    ),
    max_leaves=8,
)


@FUZZ
@given(
    field=st.sampled_from(
        [
            "epoch",
            "network",
            "params",
            "optimizer",
            "rng_state",
            "config",
            "history",
            "format",
            "version",
        ]
    ),
    value=json_values,
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), max_size=3),
)
def test_checkpoint_files(tmp_path, field, value, flips):
    path = tmp_path / "c.npz"
    checkpoint.save(path, net=NET, params=NET.init_params(0), epoch=2, history={"epoch": [1]})
    if flips:  # damaged bytes anywhere in the archive
        blob = bytearray(path.read_bytes())
        for at, byte in flips:
            blob[at % len(blob)] = byte
        path.write_bytes(bytes(blob))
    else:  # well-formed archive, damaged metadata
        with np.load(path) as z:
            arrays = {k: z[k] for k in z.files}
        meta = json.loads(arrays["__meta__"].tobytes())
        meta[field] = value
        arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
        np.savez(path, **arrays)
    loads_or_names_file(lambda: checkpoint.load(path, NET), path, checkpoint.CheckpointError)


@pytest.mark.parametrize(
    "offset, value",
    [
        (8, 0x01),  # flag bit 0: "encrypted"
        (10, 99),
    ],
)  # an unknown compression method
def test_checkpoint_zip_entries_zipfile_cannot_read(tmp_path, offset, value):
    # zipfile raises RuntimeError / NotImplementedError for these, not BadZipFile.
    path = tmp_path / "c.npz"
    checkpoint.save(path, net=NET, params=NET.init_params(0), epoch=2, history={"epoch": [1]})
    blob = bytearray(path.read_bytes())
    central = blob.find(b"PK\x01\x02")
    blob[central + offset] = value
    path.write_bytes(bytes(blob))
    with pytest.raises(checkpoint.CheckpointError, match=str(path)):
        checkpoint.load(path, NET)


# ---------------------------------------------------------------- TOML config

toml_values = st.one_of(
    st.booleans(),
    st.integers(-2, 10**12),
    st.floats(allow_nan=True),
    st.text(max_size=8),
    st.lists(st.integers(-1, 50), max_size=3),
)


def toml_literal(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return (
            "nan"
            if value != value
            else (
                "inf"
                if value == float("inf")
                else "-inf"
                if value == float("-inf")
                else repr(value)
            )
        )
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid TOML basic string
    return repr(value).replace("True", "true")


@FUZZ
@given(
    options=st.dictionaries(st.sampled_from(train.FIELDS + ("bogus",)), toml_values, max_size=4),
    raw=st.binary(max_size=40),
    as_raw=st.booleans(),
)
def test_toml_config_files(tmp_path, options, raw, as_raw):
    path = tmp_path / "run.toml"
    if as_raw:
        path.write_bytes(raw)
    else:
        path.write_text("".join(f"{k} = {toml_literal(v)}\n" for k, v in options.items()))
    config = loads_or_names_file(lambda: train.make_config(path), path, train.ConfigError)
    if config is not None:
        assert isinstance(config.plots, bool) and all(h > 0 for h in config.hidden)
