"""Build notes and the summary's arithmetic, through real builds of real files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from precompute import BuildSpec, build
from precompute.notes import NOTES, collecting, note

pytestmark = pytest.mark.ray


def _xray_folder(root: Path) -> Path:
    """Class folders of 12-bit X-rays in 16-bit PNGs, one 8-bit photo, one escaping link."""
    rng = np.random.default_rng(0)
    for c in ("a", "b"):
        (root / c).mkdir(parents=True)
        for i in range(3):
            wide = (rng.random((24, 24)) * 4095).astype(np.uint16)
            Image.fromarray(wide).save(root / c / f"x{i}.png")  # 16-bit grey (I;16)
        photo = (rng.random((24, 24, 3)) * 255).astype(np.uint8)
        Image.fromarray(photo).save(root / c / "photo.png")
    full = (rng.random((24, 24)) * 65535).astype(np.uint16)
    Image.fromarray(full).save(root / "a" / "full.png")  # real 16-bit data: no note
    (root / "a" / "broken.png").write_bytes(b"not a png")  # a slot, skipped
    os.symlink("/etc/hostname", root / "b" / "escape.png")  # skipped while listing: no slot
    return root


def test_twelve_bit_grey_is_kept_and_named_in_the_report_and_summary(
    ray_local: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _xray_folder(tmp_path / "src")
    spec = BuildSpec(size=16, shard_samples=4, chunk_samples=2, on_error="skip")
    attrs = build(str(src), str(tmp_path / "out"), spec)
    report = attrs["report"]
    notes = report["notes"]
    assert list(notes) == ["gray_low_bits", "grey_as_rgb"]
    assert notes["gray_low_bits"]["count"] == 6  # across shards: the six x*.png, not full.png
    assert notes["grey_as_rgb"]["count"] == 7  # every grey PNG (full.png too), not the photos
    assert notes["gray_low_bits"]["examples"][0] == "a/x0.png"
    assert notes["gray_low_bits"]["says"] == NOTES["gray_low_bits"]
    lines = capsys.readouterr().err.strip().splitlines()
    built = next(line for line in lines if line.startswith("built "))
    # 10 slots: 9 decoded, broken.png empty; the escaping link has no slot
    assert ": 10 samples, 9 valid, 1 skipped, 1 more input skipped while listing" in built
    assert lines[-2].startswith("note: 6 inputs (e.g. a/x0.png): 16-bit grey with every value")
    assert lines[-1].startswith("note: 7 inputs (e.g. a/full.png): grey sources stored as 3")
    assert report["num_samples"] == report["num_valid"] + 1 == 10
    assert len(report["skipped"]) == 2 and report["skipped_listing"] == 1
    on_disk = json.loads((tmp_path / "out" / "zarr.json").read_text())
    assert on_disk["attributes"]["nostall"]["report"]["notes"] == notes


def test_notes_outside_a_build_go_nowhere_and_unknown_names_are_refused() -> None:
    note("gray_low_bits", "k")  # no build collecting: dropped
    with collecting() as sink:
        note("gray_low_bits", "k1")
        with collecting() as inner:
            note("gray_low_bits", "k2")
        assert inner == {"gray_low_bits": ["k2"]}
    assert sink == {"gray_low_bits": ["k1"]}
    with pytest.raises(KeyError, match="unknown build note 'nope'"):
        note("nope", "k")


def _exif_rotated_jpeg(path: Path, spot: tuple[int, int]) -> None:
    """A 48 x 24 (w x h) JPEG whose EXIF orientation 6 shows it as 24 x 48, white at ``spot``.

    ``spot`` is ``(x, y)`` in the displayed (rotated) frame: a 4 x 4 white square there.
    """
    shown = np.zeros((48, 24, 3), np.uint8)  # displayed: h 48, w 24
    x, y = spot
    shown[y - 2 : y + 2, x - 2 : x + 2] = 255
    raw = np.rot90(shown, 1)  # orientation 6 shows the file turned 90 degrees clockwise
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(np.ascontiguousarray(raw)).save(path, quality=95, exif=exif.tobytes())


def test_keypoints_follow_the_exif_orientation_and_lost_ones_are_noted(
    ray_local: None, tmp_path: Path
) -> None:
    src = tmp_path / "kp"
    (src / "img").mkdir(parents=True)
    lines = []
    for i, spot in enumerate([(6, 16), (18, 40), (12, 24)]):
        _exif_rotated_jpeg(src / "img" / f"{i}.jpg", spot)
        with Image.open(src / "img" / f"{i}.jpg") as im:
            assert im.size == (48, 24)  # as stored in the file: the points are not in this frame
        points = [[spot[0], spot[1], 2]]
        points.append([30.0, 5.0, 2] if i == 0 else [1.0, 1.0, 2])  # outside the 24-wide frame
        points.append([12.0, 2.0, 2])  # cut off by center-crop (48 high -> the middle 24)
        lines.append(json.dumps({"image": f"img/{i}.jpg", "keypoints": points, "label": i % 2}))
    (src / "p.jsonl").write_text("\n".join(lines) + "\n")
    spec = BuildSpec(size=24, mode="center-crop", shard_samples=4, chunk_samples=2)
    attrs = build(str(src / "p.jsonl"), str(tmp_path / "out"), spec, progress=False)
    import zarr

    group = zarr.open_group(str(tmp_path / "out"), mode="r")
    keys, images, points = group["key"][:], group["image"][:], group["keypoints"][:]
    for j, key in enumerate(keys):
        x, y, v = points[j, 0]
        if v == 0:  # the (18, 40) spot is below the centre crop: cut off, noted
            assert key == "img/1.jpg"
            continue
        assert images[j, int(y), int(x)].min() > 200, (key, x, y)  # on the white square
    notes = attrs["report"]["notes"]
    assert notes["keypoints_outside"]["examples"] == ["img/0.jpg"]
    assert notes["keypoints_cropped"]["count"] == 3
