"""What is stored, chosen: 16-bit pixels kept, one channel, a W x H frame; streamed and augmented.

Real PNG/JPEG files, real builds (in this process, no Ray), real StoreLoader batches.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import zarr
from PIL import Image

from loaders import StoreLoader
from loaders.augment import EvalAugment, TrainAugment
from loaders.augment.image.ops import ColorJitter
from precompute import BuildSpec, build
from precompute.cli import main
from precompute.errors import SpecError
from precompute.fields import FieldSpec
from precompute.format.layout import open_store_info


def _build(src: Path, out: Path, **spec: Any) -> Path:
    build(str(src), str(out), BuildSpec(**spec), runner="sequential", progress=False)
    return out


def _array(store: Path, name: str = "image") -> np.ndarray:
    return np.asarray(zarr.open_array(str(store / name), mode="r")[:])


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Class folders of 16-bit grey PNGs of 40 x 30 using the whole 16-bit range."""
    root = tmp_path_factory.mktemp("wide")
    rng = np.random.default_rng(7)
    for c in ("a", "b"):
        (root / c).mkdir()
        for i in range(4):
            Image.fromarray(rng.integers(0, 65536, (30, 40), dtype=np.uint16)).save(
                root / c / f"{i}.png"
            )
    return root


@pytest.fixture(scope="module")
def grey8(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Class folders of 8-bit grey and colour images of 40 x 30."""
    root = tmp_path_factory.mktemp("grey8")
    rng = np.random.default_rng(8)
    for c in ("a", "b"):
        (root / c).mkdir()
        for i in range(4):
            Image.fromarray(rng.integers(0, 256, (30, 40), dtype=np.uint8)).save(
                root / c / f"{i}.png"
            )
    return root


def _sources(src: Path, store: Path) -> list[np.ndarray]:
    keys = _array(store, "key")
    return [np.asarray(Image.open(src / str(k))) for k in keys]


def test_a_16_bit_source_round_trips_exactly(wide: Path, tmp_path: Path) -> None:
    out = tmp_path / "s"
    main(["build", str(wide), "--out", str(out), "--size", "40x30", "--mode", "squash",
          "--channels", "1", "--bit-depth", "16", "--quiet", "--runner", "sequential"])  # fmt: skip
    stored = _array(out)
    assert stored.dtype == np.uint16 and stored.shape == (8, 30, 40, 1)
    for got, want in zip(stored, _sources(wide, out), strict=True):
        assert np.array_equal(got[..., 0], want)  # every 16-bit value, exactly
    info = open_store_info(out)
    assert info.layout.version == 2 and dict(info.fields[0].options)["bit_depth"] == 16
    batch = next(iter(StoreLoader(out, 8, shuffle=False, drop_last=False)))
    assert batch["image"].dtype == torch.uint16
    assert np.array_equal(batch["image"].numpy(), stored[batch["index"].numpy()])
    floats = next(iter(StoreLoader(out, 8, shuffle=False, drop_last=False, dtype="float32")))
    want = batch["image"].to(torch.float32) / 65535.0
    torch.testing.assert_close(floats["image"], want, rtol=1e-6, atol=0)


def test_sixteen_bits_augment_as_eight_bits_do(grey8: Path, tmp_path: Path) -> None:
    """An 8-bit source stored at 16 bits (v * 257) augments to what its 8-bit store gives."""
    frame = {"size": "40x30", "mode": "squash"}  # the sources' own size: no resize
    eight = _build(grey8, tmp_path / "8", **frame, fields=_fields(3, 8))
    sixteen = _build(grey8, tmp_path / "16", **frame, fields=_fields(3, 16))
    assert np.array_equal(_array(sixteen), _array(eight).astype(np.uint16) * 257)
    aug = TrainAugment(size=24, jitter=ColorJitter(0.4, 0.4, 0.4), path="grid")
    a = next(iter(StoreLoader(eight, 8, augment=aug, seed=3)))
    b = next(iter(StoreLoader(sixteen, 8, augment=aug, seed=3)))
    assert torch.equal(a["index"], b["index"])
    torch.testing.assert_close(a["image"], b["image"], atol=1e-5, rtol=1e-5)


def _fields(channels: int, bits: int) -> tuple[FieldSpec, ...]:
    image = FieldSpec("image", "image", {"channels": channels, "bit_depth": bits})
    return (image, FieldSpec("label", "label", {"classes": 2}))


def test_a_one_channel_store_streams_and_augments(grey8: Path, tmp_path: Path) -> None:
    out = tmp_path / "s"
    main(["build", str(grey8), "--out", str(out), "--size", "32", "--channels", "1",
          "--quiet", "--runner", "sequential"])  # fmt: skip
    rgb = _build(grey8, tmp_path / "rgb", size=32)  # grey sources as 3 equal channels (v1)
    one = _array(out)
    assert one.shape == (8, 32, 32, 1) and np.array_equal(one[..., 0], _array(rgb)[..., 1])
    assert (out / "image" / "zarr.json").is_file() and one.nbytes * 3 == _array(rgb).nbytes
    for aug in (TrainAugment(size=24, path="grid"), EvalAugment(size=24, path="grid")):
        mine = next(iter(StoreLoader(out, 4, augment=aug, seed=1)))
        theirs = next(iter(StoreLoader(rgb, 4, augment=aug, seed=1)))
        assert mine["image"].shape == (4, 1, 24, 24)
        torch.testing.assert_close(mine["image"][:, 0], theirs["image"][:, 0])


def test_jpeg_takes_grey_images_and_refuses_16_bits_naming_both(
    grey8: Path, tmp_path: Path
) -> None:
    pytest.importorskip("simplejpeg")
    grey = _build(grey8, tmp_path / "g", size=32, fields=_fields(1, 8), codecs={"image": "jpeg:95"})
    raw = _build(grey8, tmp_path / "raw", size=32, fields=_fields(1, 8))
    batch = next(iter(StoreLoader(grey, 8, shuffle=False, drop_last=False)))
    assert batch["image"].shape == (8, 32, 32, 1)
    diff = np.abs(batch["image"].numpy().astype(int) - _array(raw)[batch["index"].numpy()])
    assert diff.mean() < 3  # lossy, close
    with pytest.raises(SpecError, match=r"codec 'jpeg' cannot store field 'image': JPEG stores "
                       r"uint8 values, the field's are uint16"):  # fmt: skip
        BuildSpec(size=32, fields=_fields(1, 16), codecs={"image": "jpeg:95"})


# -- a W x H frame: keypoints and boxes mapped exactly ----------------------------------------

W, H = 64, 48


def _frame_source(root: Path) -> Path:
    """Images of several sizes with keypoints and boxes, in one JSONL manifest."""
    rng = np.random.default_rng(3)
    lines = []
    for i, (w, h) in enumerate([(120, 40), (50, 90), (64, 48), (33, 77), (200, 150)]):
        path = root / f"{i}.png"
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(path)
        pts = [[float(rng.uniform(0, w)), float(rng.uniform(0, h)), 1.0] for _ in range(4)]
        x0, y0 = float(rng.uniform(0, w / 2)), float(rng.uniform(0, h / 2))
        boxes = [[x0, y0, x0 + w / 3, y0 + h / 3, 0]]
        lines.append(json.dumps({"image": path.name, "keypoints": pts, "boxes": boxes}))
    (root / "m.jsonl").write_text("\n".join(lines) + "\n")
    return root / "m.jsonl"


def _expected(w: int, h: int, mode: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """``(box (left, top, right, bottom), (out_w, out_h, offset_x, offset_y))`` by hand.

    The centre crop's box has the frame's aspect ratio: the whole height of a source wider
    than the frame (``h * W / H`` of its width), else its whole width.
    """
    if mode == "squash":
        return (0, 0, w, h), (W, H, 0, 0)
    if mode == "center-crop":
        cw, ch = (h * W / H, float(h)) if w * H >= h * W else (float(w), w * H / W)
        left, top = (w - cw) / 2, (h - ch) / 2
        return (left, top, left + cw, top + ch), (W, H, 0, 0)
    if w * H >= h * W:
        nw, nh = W, max(1, round(h * W / w))
    else:
        nw, nh = max(1, round(w * H / h)), H
    return (0, 0, w, h), (nw, nh, (W - nw) // 2, (H - nh) // 2)


@pytest.mark.parametrize("mode", ["letterbox", "center-crop", "squash"])
def test_a_w_x_h_store_maps_keypoints_and_boxes_exactly(tmp_path: Path, mode: str) -> None:
    manifest = _frame_source(tmp_path)
    out = tmp_path / "s"
    main(["build", str(manifest), "--out", str(out), "--size", f"{W}x{H}", "--mode", mode,
          "--quiet", "--runner", "sequential"])  # fmt: skip
    assert _array(out).shape == (5, H, W, 3)
    points, boxes, keys = _array(out, "keypoints"), _array(out, "boxes"), _array(out, "key")
    rows = {
        json.loads(line)["image"]: json.loads(line) for line in manifest.read_text().splitlines()
    }
    for k, key in enumerate(keys):
        doc = rows[str(key)]
        w, h = Image.open(tmp_path / str(key)).size
        (left, top, right, bottom), (ow, oh, ox, oy) = _expected(w, h, mode)
        sx, sy = ow / (right - left), oh / (bottom - top)  # docs/FORMAT.md: the exact map
        src = np.asarray(doc["keypoints"], np.float32).astype(np.float64)  # checked: float32
        x, y = (src[:, 0] - left) * sx + ox, (src[:, 1] - top) * sy + oy
        inside = (src[:, 0] >= left) & (src[:, 0] < right) & (src[:, 1] >= top)
        inside &= src[:, 1] < bottom
        assert np.array_equal(points[k, :, 0], x.astype(np.float32))
        assert np.array_equal(points[k, :, 1], y.astype(np.float32))
        assert np.array_equal(points[k, :, 2] > 0, inside)
        x0, y0, x1, y1, _ = doc["boxes"][0]
        if mode != "center-crop":  # the whole source is kept: the box is only mapped
            want = [(x0 - left) * sx + ox, (y0 - top) * sy + oy, (x1 - left) * sx + ox,
                    (y1 - top) * sy + oy, 0.0]  # fmt: skip
            assert np.array_equal(boxes[k, 0], np.asarray(want, np.float32))
    loaded = next(iter(StoreLoader(out, 5, augment=TrainAugment(size=(24, 32), flip=None))))
    assert loaded["image"].shape == (5, 3, 24, 32) and loaded["keypoints"].shape == (5, 4, 3)
