"""The whole hostile-input list through every lister (issue 42, item 0).

Symlink loops, a FIFO, a link to ``/dev/zero``, a non-UTF-8 file name and a link out of the
source, placed where each lister looks (class folders, ``path,label`` manifests, field
manifests, segmentation folders, audio folders and manifests, array folders and manifests,
WebDataset shards, Parquet files). Under ``--on-error skip`` each ends as a reasoned skip and
every good input is kept (``precompute check``, in process: the build's listing and shard
tasks); under ``raise`` a build names the file it stopped at, or (entries a folder listing
records whatever ``on_error`` says) records them with the same reasons. A source that is one
hostile file is refused naming it.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from precompute.errors import DecodeError, SourceError, StoreError
from precompute.job import build, check
from precompute.sources.resolve import infer_fields
from precompute.spec import BuildSpec
from tests.precompute.audio_bytes import encode, tone
from tests.precompute.conftest import jpeg_bytes
from tests.precompute.packeddata import Rec, records, write_parquet, write_shards

LOOP = "cannot list: Too many levels of symbolic links"
FIFO = r"not a regular file \(a FIFO\)"
ESCAPES = "symlink leaves the source root; not followed"
NOT_UTF8 = "file name is not valid UTF-8; rename it"
DEVICE = r"not a regular file \(a character device\)"
LOOP_READ = r"Too many levels of symbolic links"

# hostile entry -> the reason a skip records (a regex); a lister that reads an entry only
# when it decodes it (a manifest line) names the same cause
FOLDER = {
    "loop1": LOOP,
    "loop2": LOOP,
    "fifo": FIFO,
    "zero": ESCAPES,
    "caf\\xe9": NOT_UTF8,
    "out": ESCAPES,
}
MANIFEST = {
    "loop1": LOOP_READ,
    "fifo": FIFO,
    "zero": ESCAPES,
    "/dev/zero": DEVICE,
    "out": ESCAPES,
}

# an array manifest refuses a path without an array file's extension before reading it
ARRAY_PATHS = {**MANIFEST, "/dev/zero": r"'/dev/zero' is not an array file"}

Made = tuple[str, BuildSpec, dict[str, str]]


def _png(seed: int) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.full((12, 10), seed % 3, np.uint8), "L").save(buf, "PNG")
    return buf.getvalue()


def _wav(seed: int) -> bytes:
    return encode(tone(200 + 50 * seed, 8000, 0.2), 8000, "wav16")


def _npy(seed: int) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.full((6, 6, 2), seed, np.float32))
    return buf.getvalue()


def _hostile(folder: Path, ext: str, data: bytes, outside: Path) -> None:
    """Every hostile entry, named ``*.ext`` so that the lister considers it, in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    os.symlink(f"loop2{ext}", folder / f"loop1{ext}")
    os.symlink(f"loop1{ext}", folder / f"loop2{ext}")
    os.mkfifo(folder / f"fifo{ext}")
    os.symlink("/dev/zero", folder / f"zero{ext}")
    with open(os.fsencode(folder) + b"/caf\xe9" + ext.encode(), "wb") as f:
        f.write(data)
    outside.mkdir(parents=True, exist_ok=True)
    (outside / f"real{ext}").write_bytes(data)
    os.symlink(outside / f"real{ext}", folder / f"out{ext}")


def _files(folder: Path, ext: str, make: Callable[[int], bytes], n: int = 3) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (folder / f"{i}{ext}").write_bytes(make(i))
    return [f"{i}{ext}" for i in range(n)]


def _lines(names: list[str], ext: str, label: str) -> list[str]:
    """Manifest lines: the good files, then every hostile one a UTF-8 manifest can name."""
    bad = [f"loop1{ext}", f"fifo{ext}", f"zero{ext}", "/dev/zero", f"out{ext}"]
    return [f"{n},{label}" for n in names] + [f"{n},{label}" for n in bad]


SPEC = {"size": 8, "shard_samples": 4, "chunk_samples": 2}


def _spec(src: str, options: dict[str, dict[str, object]] | None = None) -> BuildSpec:
    fields = infer_fields(src, options) if options else ()
    return BuildSpec.from_dict({**SPEC, "fields": [f.to_dict() for f in fields]})


def _classes(tmp: Path, ext: str, make: Callable[[int], bytes], opts: dict | None) -> Made:
    src = tmp / "src"
    _files(src / "a", ext, make)
    _files(src / "b", ext, make)
    _hostile(src / "a", ext, make(9), tmp / "outside")
    return str(src), _spec(str(src), opts), FOLDER


def _manifest(
    tmp: Path, ext: str, make: Callable[[int], bytes], opts: dict | None, why: dict | None = None
) -> Made:
    names = _files(tmp / "src", ext, make)
    _hostile(tmp / "src", ext, make(9), tmp / "outside")
    (tmp / "src" / "m.csv").write_text("path,label\n" + "\n".join(_lines(names, ext, "cat")))
    return str(tmp / "src" / "m.csv"), _spec(str(tmp / "src" / "m.csv"), opts), why or MANIFEST


def _field_manifest(tmp: Path) -> Made:
    names = _files(tmp / "src", ".jpg", lambda i: jpeg_bytes(seed=i))
    _hostile(tmp / "src", ".jpg", jpeg_bytes(), tmp / "outside")
    rows = "\n".join(_lines(names, ".jpg", "cat"))
    (tmp / "src" / "f.csv").write_text("image,label\n" + rows)
    return str(tmp / "src" / "f.csv"), _spec(str(tmp / "src" / "f.csv")), MANIFEST


def _segmentation(tmp: Path) -> Made:
    src = tmp / "src"
    for name in _files(src / "images", ".png", _png):
        (src / "masks").mkdir(parents=True, exist_ok=True)
        (src / "masks" / name).write_bytes(_png(1))
    _hostile(src / "images", ".png", _png(2), tmp / "outside")
    spec = _spec(str(src), {"mask": {"classes": 3}})
    return str(src), spec, {f"images/{k}": v for k, v in FOLDER.items()}


def _packed(tmp: Path, ext: str) -> Made:
    src = tmp / "src"
    recs = records(6)
    other = [Rec(f"other/{r.key}", r.data, r.label) for r in records(2, seed=5)]  # other keys
    if ext == ".tar":
        write_shards(src, recs, per_shard=3)
        data = (write_shards(tmp / "other", other) / "shard-000000.tar").read_bytes()
    else:
        write_parquet(src / "data.parquet", recs)
        data = write_parquet(tmp / "other" / "o.parquet", other).read_bytes()
    _hostile(src / "more", ext, data, tmp / "outside")
    return str(src), _spec(str(src)), {f"more/{k}": v for k, v in FOLDER.items()}


AUDIO = {"audio": {"clip_seconds": 0.1}}
LISTERS: dict[str, Callable[[Path], Made]] = {
    "class folders": lambda t: _classes(t, ".jpg", lambda i: jpeg_bytes(seed=i), None),
    "path,label manifest": lambda t: _manifest(t, ".jpg", lambda i: jpeg_bytes(seed=i), None),
    "field manifest": _field_manifest,
    "segmentation folder": _segmentation,
    "audio folders": lambda t: _classes(t, ".wav", _wav, AUDIO),
    "audio manifest": lambda t: _manifest(t, ".wav", _wav, AUDIO),
    "array folders": lambda t: _classes(t, ".npy", _npy, None),
    "array manifest": lambda t: _manifest(t, ".npy", _npy, None, ARRAY_PATHS),
    "webdataset": lambda t: _packed(t, ".tar"),
    "parquet": lambda t: _packed(t, ".parquet"),
}


def _owner(key: str, hostile: dict[str, str]) -> str | None:
    """The hostile entry a reported key names (a file, a shard, or a cell inside one)."""
    for name in sorted(hostile, key=len, reverse=True):
        stem = name if name.startswith("/") else f"{name}."
        if stem in key:
            return name
    return None


@pytest.mark.timeout(120)
@pytest.mark.parametrize("lister", sorted(LISTERS))
def test_every_hostile_entry_is_a_reasoned_skip(lister: str, tmp_path: Path) -> None:
    src, spec, hostile = LISTERS[lister](tmp_path)
    report = check(src, spec, progress=False, runner="sequential")
    found: dict[str, list[str]] = {}
    for key, reason in report.bad:
        owner = _owner(key, hostile)
        assert owner is not None, f"a good input was reported bad: {key}: {reason}"
        found.setdefault(owner, []).append(reason)
    assert sorted(found) == sorted(hostile)
    for name, reasons in found.items():
        assert all(re.search(hostile[name], r) for r in reasons), (name, reasons)
    assert report.num_inputs - len(report.bad) >= 3  # the good inputs, kept


@pytest.mark.timeout(120)
@pytest.mark.parametrize("lister", sorted(LISTERS))
def test_raise_names_the_hostile_file(lister: str, tmp_path: Path) -> None:
    """Under ``raise``: an error naming a hostile entry, or the listing's records of them all."""
    import dataclasses

    src, spec, hostile = LISTERS[lister](tmp_path)
    strict = dataclasses.replace(spec, on_error="raise")
    try:
        attrs = build(src, str(tmp_path / "out"), strict, progress=False, runner="sequential")
    except (SourceError, DecodeError) as exc:
        assert _owner(str(exc), hostile) is not None, str(exc)
        return
    skipped = {s["key"]: s["reason"] for s in attrs["report"]["skipped"]}
    assert sorted(_owner(k, hostile) for k in skipped) == sorted(hostile)
    assert all(re.search(hostile[_owner(k, hostile) or ""], r) for k, r in skipped.items())


@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", ["m.csv", "f.jsonl", "d.parquet", "s.tar", "scene.npy"])
@pytest.mark.parametrize("entry", ["loop", "fifo", "zero"])
def test_a_source_that_is_one_hostile_file_is_refused_naming_it(
    name: str, entry: str, tmp_path: Path
) -> None:
    path = tmp_path / name
    if entry == "loop":
        os.symlink(name, path)
    elif entry == "fifo":
        os.mkfifo(path)
    else:
        os.symlink("/dev/zero", path)
    options = None
    if name == "scene.npy":  # a scene: the hostile cube, with a good ground truth
        np.save(tmp_path / "gt.npy", np.ones((6, 6), np.uint8))
        options = {"position": {"patch": 3, "labels": str(tmp_path / "gt.npy")}}
    with pytest.raises((SourceError, DecodeError, StoreError)) as info:
        spec = _spec(str(path), options)
        build(str(path), str(tmp_path / "out"), spec, progress=False, runner="sequential")
    assert str(path) in str(info.value)
