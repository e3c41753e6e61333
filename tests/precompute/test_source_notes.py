"""What a build says about its source as a whole: one class only; what `inspect` shows of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from precompute.cli import main
from precompute.format.summary import store_summary
from precompute.sample import make_sample_dataset
from tests.precompute.audio_bytes import encode, tone


def _audio_classes(root: Path, classes: list[str]) -> Path:
    for c, name in enumerate(classes):
        for i in range(3):
            path = root / name / f"{i}.wav"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(encode(tone(300 + 100 * c + 10 * i, 8000, 0.3), 8000, "wav16"))
    return root


def _build(capsys: pytest.CaptureFixture[str], src: Path, out: Path, *flags: str) -> str:
    main(["build", str(src), "--out", str(out), "--runner", "sequential", *flags])
    return capsys.readouterr().err


def test_a_class_folder_build_of_one_class_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _audio_classes(tmp_path / "one", ["dog"])
    err = _build(capsys, src, tmp_path / "one.zarr", "--clip-seconds", "0.5")
    assert "note: 3 inputs (class dog): every input has the same class" in err
    summary = store_summary(tmp_path / "one.zarr")
    assert "note: 3 inputs (class dog): every input has the same class" in summary
    images = make_sample_dataset(tmp_path / "img", 6, num_classes=1, size_range=(16, 24))
    err = _build(capsys, images, tmp_path / "img.zarr", "--size", "16")
    assert "note: 6 inputs (class " in err and "every input has the same class" in err


def test_two_classes_get_no_such_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = _audio_classes(tmp_path / "two", ["dog", "cat"])
    err = _build(capsys, src, tmp_path / "two.zarr", "--clip-seconds", "0.5")
    assert "same class" not in err


def test_a_class_without_an_input_is_kept_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Its folder holds only files no reader takes, or nothing: a class of 0 samples (its index
    kept, as in the other splits), named in the report and the summary, never silently."""
    src = make_sample_dataset(tmp_path / "img", 6, num_classes=2, size_range=(16, 24))
    (src / "emu").mkdir()
    (src / "emu" / "a.heic").write_bytes(b"\0" * 64)
    (src / "fox").mkdir()
    (src / "fox" / ".DS_Store").write_bytes(b"")
    err = _build(capsys, src, tmp_path / "s.zarr", "--size", "16")
    said = "note: 2 classes (e.g. emu): classes without a single input"
    assert said in err and said in store_summary(tmp_path / "s.zarr")
    main(["inspect", "--json", str(tmp_path / "s.zarr")])
    report = json.loads(capsys.readouterr().out)["report"]
    note = report["notes"]["empty_classes"]
    assert (note["count"], note["examples"], note["unit"]) == (2, ["emu", "fox"], "class")
    assert report["classes"][-2:] == ["emu", "fox"] and "single_class" not in report["notes"]


def test_jfif_jpe_and_avif_files_in_class_folders_are_images(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What a browser saves (.jfif), old cameras (.jpe) and phones (.avif) write."""
    from PIL import Image, features

    (tmp_path / "src" / "a").mkdir(parents=True)
    (tmp_path / "src" / "b").mkdir()
    Image.new("RGB", (20, 20), (200, 10, 10)).save(tmp_path / "src" / "a" / "x.jfif", "JPEG")
    Image.new("RGB", (20, 20), (10, 200, 10)).save(tmp_path / "src" / "b" / "y.JPE", "JPEG")
    names = {"a/x.jfif", "b/y.JPE"}
    if features.check("avif"):  # the Pillow installed here reads and writes it
        Image.new("RGB", (20, 20), (10, 10, 200)).save(tmp_path / "src" / "b" / "z.avif")
        names.add("b/z.avif")
    err = _build(capsys, tmp_path / "src", tmp_path / "s.zarr", "--size", "16")
    assert f"{len(names)} samples, {len(names)} valid" in err and "note" not in err
    main(["inspect", "--json", str(tmp_path / "s.zarr")])
    assert "empty_classes" not in capsys.readouterr().out


def test_inspect_names_the_mode_only_for_stores_with_a_spatial_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _audio_classes(tmp_path / "a", ["dog", "cat"])
    _build(capsys, src, tmp_path / "a.zarr", "--clip-seconds", "0.5")
    audio = store_summary(tmp_path / "a.zarr")
    assert "center-crop" not in audio and "variants" not in audio
    assert "fields     2 (format v2), no spatial field" in audio
    images = make_sample_dataset(tmp_path / "img", 4, size_range=(16, 24))
    _build(capsys, images, tmp_path / "i.zarr", "--size", "16", "--mode", "center-crop")
    assert "mode center-crop, variants 1" in store_summary(tmp_path / "i.zarr")


def test_inspect_counts_slots_and_listing_skips_apart_each_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = make_sample_dataset(tmp_path / "src", 4, num_classes=1, size_range=(16, 24))
    [folder] = [p for p in src.iterdir() if p.is_dir()]
    (folder / "zz\nempty.png").write_bytes(b"")  # a slot, left empty; a newline in its name
    (tmp_path / "outside.png").write_bytes((next(folder.glob("*.png"))).read_bytes())
    (folder / "zz_escape.png").symlink_to(tmp_path / "outside.png")  # no slot: listing
    _build(capsys, src, tmp_path / "s.zarr", "--size", "16", "--on-error", "skip")
    summary = store_summary(tmp_path / "s.zarr")
    assert (
        "samples    5 slots, 4 valid, 1 skipped, 1 more input skipped while listing (no slot)"
        in summary
    )
    assert f"skipped    {folder.name}/zz\\nempty.png: empty file" in summary.splitlines()
    assert all(line[:11].strip() for line in summary.splitlines())  # no line runs over
