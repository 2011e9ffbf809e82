"""`popsnn.event_data`: the published N-MNIST / SHD archives checked (MD5), unpacked (only the
members the loaders read) and validated before anything lands in the data folder. The
archives here are small ones made by the test, their checksums put in place of the published
ones; no network."""

import hashlib
import zipfile

import h5py
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from popsnn import data, event_data


def encode_nmnist(x, y, p, t):
    ev = np.zeros((len(x), 5), np.uint8)
    t = np.asarray(t)
    ev[:, 0], ev[:, 1], ev[:, 2] = x, y, (np.asarray(p) << 7) | ((t >> 16) & 0x7F)
    ev[:, 3], ev[:, 4] = (t >> 8) & 0xFF, t & 0xFF
    return ev.tobytes()


def shd_bytes(tmp_path, n=3):
    path = tmp_path / "built.h5"
    with h5py.File(path, "w") as f:
        times = f.create_dataset("spikes/times", (n,), h5py.vlen_dtype(np.float32))
        units = f.create_dataset("spikes/units", (n,), h5py.vlen_dtype(np.uint16))
        for i in range(n):
            times[i], units[i] = np.array([0.1, 0.5], np.float32), np.array([i, 699], np.uint16)
        f.create_dataset("labels", data=np.arange(n, dtype=np.uint8))
    return path.read_bytes()


def make_zip(path, members: dict):
    with zipfile.ZipFile(path, "w") as z:
        for name, raw in members.items():
            z.writestr(name, raw)
    return path


@pytest.fixture
def registered(monkeypatch):
    """Take the checksum of each archive the test builds as the published one."""

    def register(path):
        md5 = hashlib.md5(path.read_bytes()).hexdigest()
        known = event_data.ARCHIVES[path.name]
        archives = {
            **event_data.ARCHIVES,
            path.name: event_data.Archive(known.dataset, md5, known.member),
        }
        monkeypatch.setattr(event_data, "ARCHIVES", archives)
        return path

    return register


def nmnist_members(split):
    raw = encode_nmnist([1, 33], [2, 0], [0, 1], [0, 300_000])
    return {f"{split}/{d}/{k:05d}.bin": raw for d in (0, 7) for k in (1, 2)}


def test_nmnist_and_shd_archives_install_and_load(tmp_path, registered):
    arch = tmp_path / "downloads"
    arch.mkdir()
    train = make_zip(arch / "Train.zip", {**nmnist_members("Train"), "__MACOSX/._x": b"junk"})
    test = make_zip(arch / "Test.zip", nmnist_members("Test"))
    shd = make_zip(arch / "shd_train.h5.zip", {"shd_train.h5": shd_bytes(tmp_path)})
    for path in (train, test, shd):
        registered(path)
    target = tmp_path / "data"
    lines = event_data.install([train, test, shd], target)
    assert lines[0].startswith("Train.zip: MD5 ok, 4 recordings") and "1 other member" in lines[0]
    assert "3 recordings" in lines[2]
    assert not (target / "nmnist" / "__MACOSX").exists()
    assert sorted(p.name for p in target.iterdir()) == ["nmnist", "shd"]  # no staging left
    tr, te = data.load_named("nmnist", target / "nmnist", num_steps=4)
    assert len(tr) == len(te) == 4 and tr.labels.tolist() == [0, 0, 7, 7]
    assert len(data.load_shd(target / "shd" / "shd_train.h5")) == 3


def test_installed_sets_are_found_without_a_path(tmp_path, registered, monkeypatch):
    monkeypatch.setenv("POPSNN_DATA", str(tmp_path / "data"))
    with pytest.raises(FileNotFoundError, match="make event-data"):
        data.load_named("nmnist")
    for split in ("Train", "Test"):
        registered(make_zip(tmp_path / f"{split}.zip", nmnist_members(split)))
    assert event_data.main([str(tmp_path / "Train.zip"), str(tmp_path / "Test.zip")]) == 0
    train, test = data.load_named("nmnist", num_steps=3)
    assert train.num_inputs == 2312 and len(test) == 4


def test_a_wrong_checksum_is_refused_before_anything_is_unpacked(
    tmp_path, registered, capsys, monkeypatch
):
    monkeypatch.setenv("POPSNN_DATA", str(tmp_path / "data"))
    good = registered(make_zip(tmp_path / "Test.zip", nmnist_members("Test")))
    other = tmp_path / "other"
    other.mkdir()
    bad = make_zip(other / "Train.zip", nmnist_members("Train"))  # not the published file
    assert event_data.main([str(good), str(bad)]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Train.zip: MD5" in err and "fetch it again" in err
    with pytest.raises(data.DataError, match="MD5"):
        event_data.install([good, bad], tmp_path / "data")
    assert not (tmp_path / "data").exists()  # the good archive was not unpacked either


def test_unknown_names_missing_files_and_foreign_members(tmp_path, registered):
    with pytest.raises(data.DataError, match="not a known archive name; expected one of Train.zip"):
        event_data.check_archive(make_zip(tmp_path / "nmnist.zip", {}))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        event_data.check_archive(tmp_path / "Train.zip")
    # Members outside the loaders' layout (a path escaping the folder among them) are never
    # written; an archive with none of the expected members is refused.
    evil = registered(make_zip(tmp_path / "Train.zip", {"../../evil.bin": b"x" * 5}))
    with pytest.raises(data.DataError, match="holds no member like"):
        event_data.install([evil], tmp_path / "data")
    assert not (tmp_path / "evil.bin").exists()
    assert list((tmp_path / "data").iterdir()) == []  # the staging folder is gone


def test_a_damaged_recording_inside_a_good_archive_is_refused(tmp_path, registered):
    members = nmnist_members("Train")
    members["Train/7/00003.bin"] = b"\x01\x02\x03"  # not a whole 5-byte event
    path = registered(make_zip(tmp_path / "Train.zip", members))
    with pytest.raises(data.DataError, match="5-byte"):
        event_data.install([path], tmp_path / "data")
    assert not (tmp_path / "data" / "nmnist").exists()


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    raw=st.binary(max_size=300),
    payload=st.binary(max_size=40),
    cut=st.integers(0, 400),
    as_zip=st.booleans(),
)
def test_fuzzed_archives_install_or_say_why(
    tmp_path_factory, monkeypatch, raw, payload, cut, as_zip
):
    folder = tmp_path_factory.mktemp("fuzz")
    path = folder / "shd_test.h5.zip"
    if as_zip:  # a real zip around junk, truncated anywhere
        make_zip(path, {"shd_test.h5": payload})
        raw = path.read_bytes()[:cut] if cut < len(path.read_bytes()) else path.read_bytes()
    path.write_bytes(raw)
    md5 = hashlib.md5(raw).hexdigest()
    known = event_data.ARCHIVES[path.name]
    monkeypatch.setitem(
        event_data.ARCHIVES, path.name, event_data.Archive(known.dataset, md5, known.member)
    )
    try:
        event_data.install([path], folder / "data")
    except data.DataError as err:
        assert str(path) in str(err) and "\n" not in str(err)
        assert not (folder / "data" / "shd").exists()
