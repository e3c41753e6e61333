"""Fixed class lists (issue 42, item 1): one index per class name in every split.

A validation manifest that lacks a class built one class fewer, every later name moved down one
index, silently. ``--classes a,b,c``, ``--classes @FILE`` and ``--classes-from STORE`` fix the
list (in the spec: its hash, the cache key); a build that learns its classes warns where a
store of the same source root indexes them otherwise.
"""

from __future__ import annotations

import dataclasses
import io
import json
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import zarr

from precompute.cli import main
from precompute.errors import ClassListWarning, SourceError, SpecError
from precompute.job import build
from precompute.sources.classlist import classes_flag
from precompute.sources.resolve import infer_fields, resolve_build
from precompute.spec import BuildSpec
from tests.precompute.audio_bytes import encode, tone
from tests.precompute.conftest import jpeg_bytes
from tests.precompute.packeddata import CLASSES, records, write_parquet

TRAIN = {"0.jpg": "bird", "1.jpg": "chirp", "2.jpg": "frog", "3.jpg": "frog"}
VAL = {"4.jpg": "frog", "5.jpg": "bird"}  # no chirp


def _cli(*args: str) -> None:
    """``precompute build ARGS`` at size 8, in process (no Ray)."""
    main(["build", *args, "--size", "8", "--runner", "sequential", "--quiet"])


def _manifest(path: Path, rows: dict[str, str]) -> Path:
    for i, name in enumerate(rows):
        (path.parent / name).write_bytes(jpeg_bytes(seed=i))
    path.write_text("path,label\n" + "".join(f"{k},{v}\n" for k, v in rows.items()))
    return path


def _labels(store: Path) -> dict[str, int]:
    keys = zarr.open_array(str(store / "key"), mode="r")[:]
    labels = zarr.open_array(str(store / "label"), mode="r")[:]
    return {str(k): int(v) for k, v in zip(keys, labels, strict=True) if k}


def _attrs(store: Path) -> dict:
    return json.loads((store / "zarr.json").read_text())["attributes"]["nostall"]


@pytest.fixture
def splits(tmp_path: Path) -> tuple[Path, Path]:
    return _manifest(tmp_path / "train.csv", TRAIN), _manifest(tmp_path / "val.csv", VAL)


def test_classes_from_the_train_store_keep_every_index_in_val(
    splits: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train, val = splits
    _cli(str(train), "--out", str(tmp_path / "train.zarr"))
    _cli(
        str(val),
        "--out",
        str(tmp_path / "val.zarr"),
        "--classes-from",
        str(tmp_path / "train.zarr"),
    )
    t, v = _labels(tmp_path / "train.zarr"), _labels(tmp_path / "val.zarr")
    assert t == {"0.jpg": 0, "1.jpg": 1, "2.jpg": 2, "3.jpg": 2}
    assert v == {"4.jpg": 2, "5.jpg": 0}  # frog is 2 in both stores, not 1
    attrs = _attrs(tmp_path / "val.zarr")
    assert attrs["spec"]["classes"] == ["bird", "chirp", "frog"]  # in the spec: the hash
    assert attrs["report"]["classes"] == ["bird", "chirp", "frog"]
    assert attrs["report"]["num_classes"] == 3
    assert attrs["report"]["notes"]["empty_classes"]["examples"] == ["chirp"]  # kept, said
    capsys.readouterr()
    main(["inspect", str(tmp_path / "val.zarr")])
    assert "classes    3: bird, chirp, frog (fixed: --classes)" in capsys.readouterr().out


def test_classes_flag_file_and_order(
    splits: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, val = splits
    _cli(str(val), "--out", str(tmp_path / "a"), "--classes", "frog, bird,chirp")
    assert _labels(tmp_path / "a") == {"4.jpg": 0, "5.jpg": 1}  # the list's order, not sorted
    (tmp_path / "names.txt").write_text("frog\n\nbird, the early\nchirp\n")
    assert classes_flag(f"@{tmp_path / 'names.txt'}", None) == ["frog", "bird, the early", "chirp"]
    for bad, said in (
        ("a,b,a", "classes names 'a' twice (at 0 and 2)"),
        ("a,,b", "classes[1] must be a class name"),
        (f"@{tmp_path / 'none.txt'}", "cannot read the class list"),
    ):
        with pytest.raises(SystemExit) as exited:
            _cli(str(val), "--out", str(tmp_path / "b"), "--classes", bad)
        assert exited.value.code == 2 and said in capsys.readouterr().err
    with pytest.raises(SpecError, match="exclude each other"):
        classes_flag("a", str(tmp_path / "a"))


def test_a_name_not_in_the_list_is_a_per_input_error(
    splits: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train, _ = splits
    with pytest.raises(SystemExit) as exited:
        _cli(str(train), "--out", str(tmp_path / "a"), "--classes", "bird,frog")
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"{train}: 1.jpg: label 'chirp' is not one of the 2 classes of --classes" in err
    out = tmp_path / "b"
    _cli(str(train), "--out", str(out), "--classes", "bird,frog", "--on-error", "skip")
    skipped = _attrs(out)["report"]["skipped"]
    assert skipped == [
        {"key": "1.jpg", "reason": "label 'chirp' is not one of the 2 classes of --classes"}
    ]
    assert _labels(out) == {"0.jpg": 0, "2.jpg": 1, "3.jpg": 1}


def test_the_list_is_part_of_the_spec_hash_only_when_given() -> None:
    plain = BuildSpec()
    assert "classes" not in plain.to_dict()  # stores built before keep their hash
    fixed = BuildSpec(classes=("a", "b"))
    assert fixed.digest() != plain.digest()
    assert fixed.digest() != BuildSpec(classes=("b", "a")).digest()  # the order is the labels
    assert BuildSpec.from_dict(fixed.to_dict()) == fixed
    with pytest.raises(SpecError, match="classes must be a list of class names"):
        BuildSpec.from_dict({"classes": "a,b"})


def test_a_list_for_a_source_without_class_names_is_refused(tmp_path: Path) -> None:
    from tests.precompute.fielddata import make_segmentation

    src = make_segmentation(tmp_path / "seg", n=2)
    fields = infer_fields(str(src), {"mask": {"classes": 3}})
    with pytest.raises(SpecError, match="--classes names the classes of a label; this source"):
        resolve_build(str(src), BuildSpec(fields=fields, classes=("a",)))


# -- every source with class names -----------------------------------------------------------


def _wav(i: int) -> bytes:
    return encode(tone(200 + 40 * i, 8000, 0.1), 8000, "wav16")


def _npy(i: int) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.full((4, 4, 2), i, np.float32))
    return buf.getvalue()


def _folders(ext: str, make: Callable[[int], bytes]) -> Callable[[Path], str]:
    def write(root: Path) -> str:
        for i, name in enumerate(("dog", "cat", "dog")):  # no class eel
            (root / name).mkdir(parents=True, exist_ok=True)
            (root / name / f"{i}{ext}").write_bytes(make(i))
        return str(root)

    return write


def _names_manifest(ext: str, make: Callable[[int], bytes], head: str) -> Callable[[Path], str]:
    def write(root: Path) -> str:
        root.mkdir(parents=True)
        rows = []
        for i, name in enumerate(("dog", "cat", "dog")):
            (root / f"{i}{ext}").write_bytes(make(i))
            rows.append(f"{i}{ext},{name}")
        (root / "m.csv").write_text(f"{head}\n" + "\n".join(rows) + "\n")
        return str(root / "m.csv")

    return write


def _parquet(root: Path) -> str:  # ClassLabel names cat, dog, eel (integers 0..2)
    return str(write_parquet(root / "d.parquet", records(6)))


def _webdataset(root: Path) -> str:  # cls members holding class names
    import webdataset as wds

    root.mkdir(parents=True)
    with wds.TarWriter(str(root / "s.tar")) as sink:
        for r in records(6):
            sink.write({"__key__": r.stem, r.ext: r.data, "cls": CLASSES[r.label]})
    return str(root / "s.tar")


AUDIO = {"audio": {"clip_seconds": 0.1}}
SOURCES: dict[str, tuple[Callable[[Path], str], dict | None]] = {
    "class folders": (_folders(".jpg", lambda i: jpeg_bytes(seed=i)), None),
    "path,label manifest": (
        _names_manifest(".jpg", lambda i: jpeg_bytes(seed=i), "path,label"),
        None,
    ),
    "field manifest": (_names_manifest(".jpg", lambda i: jpeg_bytes(seed=i), "image,label"), None),
    "audio folders": (_folders(".wav", _wav), AUDIO),
    "audio manifest": (_names_manifest(".wav", _wav, "path,label"), AUDIO),
    "array folders": (_folders(".npy", _npy), None),
    "parquet classlabel": (_parquet, None),
    "webdataset names": (_webdataset, None),
}
FIXED = ("eel", "dog", "cat")  # another order than sorted, and a class no input has


def _named(src: str, spec: BuildSpec) -> tuple[dict[str, str], tuple[str, ...], BuildSpec]:
    """Each item's class name, the source's class names, the resolved spec."""
    source, resolved, _ = resolve_build(src, spec)
    names = dict(source.classes)["label"]
    return {it.key: names[int(it.value("label"))] for it in source.items}, names, resolved


@pytest.mark.parametrize("kind", sorted(SOURCES))
def test_every_source_of_class_names_takes_the_list(kind: str, tmp_path: Path) -> None:
    write, options = SOURCES[kind]
    src = write(tmp_path / "src")
    fields = infer_fields(src, options) if options else ()
    learned, names, _ = _named(src, BuildSpec(fields=fields))
    assert names != FIXED
    fixed, names, resolved = _named(src, BuildSpec(fields=fields, classes=FIXED))
    assert names == FIXED and fixed == learned  # each input keeps its class, by name
    for f in resolved.fields:
        if f.name == "label":
            assert f.options["classes"] == 3  # the list's count: a model's output size
    strict = BuildSpec(fields=fields, classes=("dog",))
    with pytest.raises(SourceError, match="is not one of the 1 classes of --classes"):
        resolve_build(src, strict)
    kept, _, _ = _named(src, dataclasses.replace(strict, on_error="skip"))
    assert set(kept.values()) == {"dog"}


# -- the warning -----------------------------------------------------------------------------


def test_a_class_set_that_shifts_labels_against_a_store_beside_it_warns(
    splits: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train, val = splits
    spec = BuildSpec(size=8)
    build(str(train), str(tmp_path / "train.zarr"), spec, progress=False, runner="sequential")
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        build(str(val), str(tmp_path / "val.zarr"), spec, progress=False, runner="sequential")
    shifts = [str(w.message) for w in said if issubclass(w.category, ClassListWarning)]
    assert shifts == [
        f"{val} builds 2 classes (bird, frog) but {tmp_path / 'train.zarr'}, built from the same "
        f"folder ({train}), has 3 (bird, chirp, frog): 'frog' is 1 here and 2 there, so one "
        f"label means two classes; give both builds one list (--classes-from "
        f"{tmp_path / 'train.zarr'}, or --classes)"
    ]
    capsys.readouterr()  # the command line says it on one line, loudly
    _cli(str(val), "--out", str(tmp_path / "val2.zarr"))
    err = capsys.readouterr().err
    assert err.count("precompute: WARNING: ") == 1 and "train.zarr" in err  # not val.zarr
    with warnings.catch_warnings(record=True) as said:  # one list: nothing to say
        warnings.simplefilter("always")
        fixed = dataclasses.replace(spec, classes=("bird", "chirp", "frog"))
        build(str(val), str(tmp_path / "val3.zarr"), fixed, progress=False, runner="sequential")
    assert not [w for w in said if issubclass(w.category, ClassListWarning)]


def test_the_cache_warns_of_a_cached_store_of_the_same_root(
    splits: tuple[Path, Path], tmp_path: Path
) -> None:
    from service import Cache

    def sequential(request) -> None:  # the build itself, in process
        build(str(request.source), str(request.out), request.spec, progress=False,
              runner="sequential")  # fmt: skip

    train, val = splits
    cache = Cache(tmp_path / "cache", builder=sequential)
    train_store = cache.get_or_build(train, {"size": 8})
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        cache.get_or_build(val, {"size": 8})
    shifts = [str(w.message) for w in said if issubclass(w.category, ClassListWarning)]
    assert len(shifts) == 1 and str(train_store) in shifts[0]
    assert "'frog' is 1 here and 2 there" in shifts[0]


def test_a_build_warns_of_a_store_the_default_cache_holds_for_its_root(
    splits: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``precompute build`` asks the default cache (``nostall.cached_stores``) too."""
    from service import Cache

    def sequential(request) -> None:
        build(str(request.source), str(request.out), request.spec, progress=False,
              runner="sequential")  # fmt: skip

    train, val = splits
    monkeypatch.setenv("NOSTALL_CACHE", str(tmp_path / "cache"))
    cached = Cache(tmp_path / "cache", builder=sequential).get_or_build(train, {"size": 8})
    elsewhere = tmp_path / "out" / "val.zarr"  # nothing beside it
    elsewhere.parent.mkdir()
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        build(str(val), str(elsewhere), BuildSpec(size=8), progress=False, runner="sequential")
    shifts = [str(w.message) for w in said if issubclass(w.category, ClassListWarning)]
    assert len(shifts) == 1 and str(cached) in shifts[0], shifts
    assert "'frog' is 1 here and 2 there" in shifts[0]
    monkeypatch.setenv("NOSTALL_CACHE", str(tmp_path / "no-cache"))  # none there: none said
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        build(str(val), str(tmp_path / "out" / "v2.zarr"), BuildSpec(size=8), progress=False,
              runner="sequential")  # fmt: skip
    assert not [w for w in said if issubclass(w.category, ClassListWarning)]
    assert not (tmp_path / "no-cache").exists()  # asked, never made


def _class_folders(root: Path, rows: dict[str, str]) -> Path:
    for i, (name, cls) in enumerate(rows.items()):
        (root / cls).mkdir(parents=True, exist_ok=True)
        (root / cls / name).write_bytes(jpeg_bytes(seed=i))
    return root


def _shifts(said: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in said if issubclass(w.category, ClassListWarning)]


def test_sibling_class_folders_of_one_dataset_are_compared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``data/split/train/<class>`` and ``data/split/val/<class>`` (val lacks one): a warning."""
    from service import Cache

    train = _class_folders(tmp_path / "split" / "train", TRAIN)
    val = _class_folders(tmp_path / "split" / "val", VAL)
    spec = BuildSpec(size=8)
    stores = tmp_path / "stores"
    build(str(train), str(stores / "train.zarr"), spec, progress=False, runner="sequential")
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        build(str(val), str(stores / "val.zarr"), spec, progress=False, runner="sequential")
    assert _shifts(said) == [
        f"{val} builds 2 classes (bird, frog) but {stores / 'train.zarr'}, built from a sibling "
        f"folder ({train}), has 3 (bird, chirp, frog): 'frog' is 1 here and 2 there, so one "
        f"label means two classes; give both builds one list (--classes-from "
        f"{stores / 'train.zarr'}, or --classes)"
    ]

    def sequential(request) -> None:  # the cache compares its siblings too
        build(str(request.source), str(request.out), request.spec, progress=False,
              runner="sequential")  # fmt: skip

    monkeypatch.setenv("NOSTALL_CACHE", str(tmp_path / "cache"))
    cached = Cache(tmp_path / "cache", builder=sequential)
    held = str(cached.get_or_build(train, {"size": 8}))
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        cached.get_or_build(val, {"size": 8})
    shifts = _shifts(said)  # the cache's own, and its builder's (a build like any other)
    assert any(s.startswith(f"cache {tmp_path / 'cache'}: {val} builds 2") for s in shifts)
    assert all(held in s and "sibling folder" in s for s in shifts), shifts
    (tmp_path / "alone").mkdir()  # precompute build asks the default cache
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        build(str(val), str(tmp_path / "alone" / "v.zarr"), spec, progress=False,
              runner="sequential")  # fmt: skip
    shifts = _shifts(said)
    assert len(shifts) == 1 and f"but {held}, built from a sibling folder" in shifts[0]


def test_an_unrelated_dataset_in_the_same_folder_is_not_compared(
    splits: tuple[Path, Path], tmp_path: Path
) -> None:
    """3 sound events beside manifests of other classes: no label of theirs is one of these."""
    train, _ = splits
    spec = BuildSpec(size=8)
    build(str(train), str(tmp_path / "train.zarr"), spec, progress=False, runner="sequential")
    events = _manifest(tmp_path / "segs.csv", {"7.jpg": "low", "8.jpg": "mid", "9.jpg": "high"})
    with warnings.catch_warnings(record=True) as said:
        warnings.simplefilter("always")
        build(str(events), str(tmp_path / "segs.zarr"), spec, progress=False, runner="sequential")
    assert _shifts(said) == []


def test_class_lists_alike_where_one_holds_the_other_or_most_names_are_shared(
    tmp_path: Path,
) -> None:
    from precompute.pipeline.check import alike, kinship

    six = ("down", "go", "marvin", "no", "up", "yes")
    assert alike(six[:5], six) and alike(six, six[1:])  # a split lacks a class
    assert alike((*six[:5], "left"), six)  # each lacks another: 5 of 7 names shared
    assert not alike(("high", "low", "mid"), six)
    assert not alike(("down", "high", "low", "mid"), six)  # one shared name of 9
    for d in ("d/split/train", "d/split/val", "e/split/val"):
        (tmp_path / d).mkdir(parents=True)
    d = tmp_path / "d"
    assert kinship(str(d / "train.csv"), str(d / "val.csv")) == "the same folder"
    assert kinship(str(d / "split/train"), str(d / "split/val")) == "a sibling folder"
    assert kinship("s3://b/d/train", "s3://b/d/val") == "a sibling folder"
    assert kinship(str(d / "split/train"), str(tmp_path / "e/split/val")) is None


def test_multi_label_names_are_indexed_by_the_list(tmp_path: Path) -> None:
    rows = [["dog", "cat"], ["dog"], ["cat"]]
    lines = []
    for i, tags in enumerate(rows):
        (tmp_path / f"{i}.jpg").write_bytes(jpeg_bytes(seed=i))
        lines.append(json.dumps({"image": f"{i}.jpg", "labels": tags}))
    (tmp_path / "m.jsonl").write_text("\n".join(lines) + "\n")
    fields = infer_fields(str(tmp_path / "m.jsonl"))
    source, spec, _ = resolve_build(
        str(tmp_path / "m.jsonl"), BuildSpec(fields=fields, classes=FIXED)
    )
    assert dict(source.classes) == {"labels": FIXED}
    assert [sorted(FIXED[i] for i in it.value("labels")) for it in source.items] == [
        sorted(t) for t in rows
    ]
    assert {f.name: f.options.get("classes") for f in spec.fields}["labels"] == 3  # multi-hot width
