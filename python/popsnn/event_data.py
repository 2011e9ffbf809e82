"""Install the published N-MNIST and SHD archives where popsnn looks for them.

No package registry carries these recordings (docs/data.md), so they cannot be fetched like
Fashion-MNIST (`make data`). Once their archives are on disk, however they were obtained,

    python -m popsnn.event_data Train.zip Test.zip shd_train.h5.zip shd_test.h5.zip
    make event-data ARCHIVES="Train.zip Test.zip shd_train.h5.zip shd_test.h5.zip"

checks each against the MD5 its publishers give (a damaged or different file is refused before
anything is unpacked), unpacks only the members the loaders read (`Train|Test/<digit>/*.bin`,
`shd_*.h5`: no other path can be written, whatever the archive holds), reads them back through
popsnn's own loaders (which validate every record), and only then moves them into
`user_data_dir()/nmnist/` or `user_data_dir()/shd/`, so a failed install leaves nothing behind.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from . import data


@dataclass(frozen=True)
class Archive:
    dataset: str  # the folder under user_data_dir(): "nmnist" or "shd"
    md5: str  # as published with the data set (and used by its common readers)
    member: str  # regular expression of the members to unpack, relative to the archive root


_NMNIST_BIN = r"(Train|Test)/[0-9]/[0-9A-Za-z_.-]+\.bin"
ARCHIVES = {
    "Train.zip": Archive("nmnist", "20959b8e626244a1b502305a9e6e2031", _NMNIST_BIN),
    "Test.zip": Archive("nmnist", "69ca8762b2fe404d9b9bad1103e97832", _NMNIST_BIN),
    "shd_train.h5.zip": Archive("shd", "f3252aeb598ac776c1b526422d90eecb", r"shd_train\.h5"),
    "shd_test.h5.zip": Archive("shd", "1503a5064faa34311c398fb0a1ed0a6f", r"shd_test\.h5"),
}


def md5_of(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_archive(path) -> Archive:
    """The known archive `path` is, its checksum verified; a DataError otherwise."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"archive {path} does not exist")
    known = ARCHIVES.get(path.name)
    if known is None:
        raise data.DataError(
            f"{path}: not a known archive name; expected one of {', '.join(ARCHIVES)} "
            f"(keep the published file names)"
        )
    got = md5_of(path)
    if got != known.md5:
        raise data.DataError(
            f"{path}: MD5 {got}, but the published {path.name} has {known.md5}; the download "
            f"is damaged or another version: fetch it again"
        )
    return known


def _unpack(path: Path, archive: Archive, into: Path) -> tuple[list[str], int]:
    """Extract the members matching `archive.member` (a leading folder of the archive's own
    name is allowed, as some mirrors add one) into `into`; (paths written, members skipped)."""
    pattern = re.compile(rf"(?:[^/]+/)?({archive.member})")
    written, skipped = [], 0
    try:
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                m = pattern.fullmatch(info.filename)
                if info.is_dir():
                    continue
                if m is None:
                    skipped += 1  # e.g. __MACOSX/ resource forks: reported, never written
                    continue
                target = into / m.group(1)
                target.parent.mkdir(parents=True, exist_ok=True)
                with z.open(info) as src, open(target, "wb") as dst:
                    shutil.copyfileobj(src, dst)
                written.append(m.group(1))
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as err:
        raise data.DataError(f"{path}: cannot unpack it ({err}); fetch it again") from None
    if not written:
        raise data.DataError(
            f"{path}: holds no member like {archive.member!r}; not the published {path.name}"
        )
    return written, skipped


def _validate(dataset: str, staged: Path, written: list[str]) -> int:
    """Read what was unpacked through popsnn's loaders (each checks every record); the number
    of recordings."""
    if dataset == "shd":
        return sum(len(data.load_shd(staged / name, max_time=None)) for name in written)
    splits = sorted({name.split("/")[0] for name in written})
    return sum(len(data.load_nmnist(staged / split)) for split in splits)


def install(paths, target: Path | None = None) -> list[str]:
    """Check, unpack, validate and install every archive of `paths` into `target` (default
    `data.user_data_dir()`); one summary line per archive. Every checksum is checked before
    anything is unpacked."""
    target = Path(target) if target is not None else data.user_data_dir()
    checked = [(Path(p), check_archive(p)) for p in paths]
    lines = []
    for path, archive in checked:
        target.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".install-", dir=target) as tmp:
            staged = Path(tmp)
            written, skipped = _unpack(path, archive, staged)
            try:
                recordings = _validate(archive.dataset, staged, written)
            except data.DataError as err:  # it names the staged copy: say which archive
                raise data.DataError(f"{path}: a recording in it is damaged: {err}") from None
            dest = target / archive.dataset
            for top in sorted({name.split("/")[0] for name in written}):
                shutil.rmtree(dest / top, ignore_errors=True)
                if (dest / top).is_file():
                    (dest / top).unlink()
                dest.mkdir(parents=True, exist_ok=True)
                shutil.move(str(staged / top), dest / top)
        note = f", {skipped} other member(s) not unpacked" if skipped else ""
        lines.append(f"{path.name}: MD5 ok, {recordings:,} recordings -> {dest}{note}")
    return lines


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    try:
        for line in install(argv):
            print(line)
    except (FileNotFoundError, data.DataError) as err:
        print(f"popsnn.event_data: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
