"""Fixtures of the precompute tests: tiny real datasets and bad inputs (Ray: tests/conftest.py)."""

from __future__ import annotations

import io
import shutil
import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from PIL import Image

from precompute.sample import make_image, make_sample_dataset
from tests.precompute.packeddata import build_seq, write_folder


@pytest.fixture(scope="session")
def small_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40 images of 16-48 px in 4 classes: every odd mode (L, LA, RGBA, P, CMYK, I;16, EXIF)."""
    return make_sample_dataset(tmp_path_factory.mktemp("small"), 40, size_range=(16, 48))


def jpeg_bytes(w: int = 40, h: int = 30, seed: int = 0) -> bytes:
    buf = io.BytesIO()
    make_image(seed, 0, 0, (w, h)).save(buf, "JPEG", quality=90)
    return buf.getvalue()


def png_bomb_header(w: int, h: int) -> bytes:
    """A PNG whose IHDR claims w x h pixels, followed by a tiny IDAT and IEND."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data))
            + kind
            + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
        )

    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", ihdr)
        + chunk(b"IDAT", zlib.compress(b"\0" * 64))
        + chunk(b"IEND", b"")
    )


def jpeg_bomb_header(w: int, h: int) -> bytes:
    """A real JPEG whose SOF0 frame header is patched to claim w x h pixels."""
    data = bytearray(jpeg_bytes())
    sof = data.index(b"\xff\xc0")
    data[sof + 5 : sof + 9] = struct.pack(">HH", h, w)
    return bytes(data)


def bad_inputs() -> dict[str, bytes]:
    """File name -> bytes of every bad-input case a build must survive."""
    good = jpeg_bytes()
    flipped_body = bytearray(good)
    for i in range(len(good) // 2, len(good) - 4, 7):
        flipped_body[i] ^= 0x10
    flipped_head = bytearray(good)
    flipped_head[0] ^= 0x01  # SOI marker broken: not identifiable as JPEG
    return {
        "empty.jpg": b"",
        "truncated.jpg": good[: len(good) // 2],
        "text.jpg": b"hello, this is not an image\n" * 4,
        "page.png": b"<!DOCTYPE html><html><body>404 Not Found</body></html>\n",
        "bitflip_body.jpg": bytes(flipped_body),
        "bitflip_head.jpg": bytes(flipped_head),
        "bomb.png": png_bomb_header(100_000, 100_000),
        "bomb.jpg": jpeg_bomb_header(65_000, 65_000),
    }


def copy_with_bad_inputs(src: Path, root: Path) -> Path:
    """A copy of the dataset ``src`` at ``root`` with every bad input in its first class."""
    shutil.copytree(src, root)
    for name, data in bad_inputs().items():
        (root / "circles" / f"zz_{name}").write_bytes(data)
    return root


def reference_rgb(path: Path) -> Image.Image:
    """Decode like the documented rules, written independently with Pillow and numpy."""
    from PIL import ImageOps

    im = ImageOps.exif_transpose(Image.open(path))
    if im.mode.startswith("I;16"):
        v = np.asarray(im).astype(np.float64)
        g = np.round(v / 257).astype(np.uint8)
        return Image.fromarray(np.dstack([g, g, g]))
    if im.mode in ("RGBA", "LA") or (im.mode == "P" and "transparency" in im.info):
        rgba = np.asarray(im.convert("RGBA")).astype(np.float64)
        a = rgba[..., 3:] / 255
        rgb = np.round(rgba[..., :3] * a + 255 * (1 - a))
        return Image.fromarray(rgb.astype(np.uint8))
    return im.convert("RGB")


@pytest.fixture(scope="module")
def folder_store(recs: list[Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The store of the class folders of the module's ``recs`` (``tests.precompute.packeddata``).

    The module defines ``recs``: the records its Parquet or WebDataset sources hold too.
    """
    root = tmp_path_factory.mktemp("folder")
    build_seq(write_folder(root / "src", recs), root / "out")
    return root / "out"


def seg_folder(root: Path, names: list[str], bad: str | None = None) -> Path:
    """A segmentation folder (``images/`` JPEGs, ``masks/`` PNGs of classes 0-3) of ``names``,
    and of ``bad``, whose image is cut short (its mask whole): a build stops or skips there."""
    for sub in ("images", "masks"):
        (root / sub).mkdir(parents=True)
    for i, name in enumerate([*names, *([bad] if bad else [])]):
        mask = np.zeros((30, 40), np.uint8)  # jpeg_bytes' size
        mask[2:6, 2:6] = 1 + i % 3
        Image.fromarray(mask).save(root / "masks" / f"{name}.png")
        (root / "images" / f"{name}.jpg").write_bytes(jpeg_bytes(seed=i))
    if bad:
        (root / "images" / f"{bad}.jpg").write_bytes(jpeg_bytes(seed=0)[:200])  # truncated
    return root


def build_seg(src: Path, out: Path, *args: str) -> int:
    """``precompute build`` of a :func:`seg_folder` at 8 px, in process; its exit status."""
    from precompute.cli import main

    try:
        main(["build", str(src), "--out", str(out), "--size", "8", "--mask-classes", "4",
              "--runner", "sequential", "--quiet", *args])  # fmt: skip
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0
