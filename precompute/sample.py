"""A deterministic, real-looking sample image dataset (JPEG and PNG in class folders).

Used by ``precompute demo``, the tests and the benchmarks of every package. Each image is a
class-dependent picture (a colour gradient whose hue depends on the class, a class-specific
shape, and noise) encoded as real JPEG or PNG bytes. A few images use unusual modes so decoders
are exercised: grayscale ``L``, ``LA``, ``RGBA``, palette ``P``, CMYK JPEG, 16-bit ``I;16`` PNG
and EXIF-rotated JPEGs.

The dataset is a pure function of its arguments: the same seed gives the same bytes.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

__all__ = ["CLASS_NAMES", "ODD_MODES", "make_image", "make_sample_dataset"]

# Sorted, so that the class-folder label (index in sorted order) equals the generator's label.
CLASS_NAMES = ("circles", "crosses", "dots", "rings", "squares", "stripes", "triangles", "waves")
# One image in ``_ODD_EVERY`` uses one of these encodings, cycling through them.
ODD_MODES = ("L", "RGBA", "P", "CMYK", "I;16", "EXIF", "LA")
_ODD_EVERY = 5
_EXIF_ORIENTATION = 0x0112


def _class_name(label: int, num_classes: int) -> str:
    if num_classes <= len(CLASS_NAMES):
        return CLASS_NAMES[label]
    return f"class_{label:03d}"


def _gradient(rng: np.random.Generator, h: int, w: int, label: int, num_classes: int) -> np.ndarray:
    """Return an (h, w, 3) float image: a two-colour gradient with a class-dependent hue."""
    hue = (label + rng.uniform(-0.15, 0.15)) / max(num_classes, 1)
    base = np.array([np.cos(2 * np.pi * (hue + k / 3)) for k in range(3)]) * 90 + 140
    other = base[::-1] * rng.uniform(0.4, 0.9)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    angle = rng.uniform(0, 2 * np.pi)
    t = (np.cos(angle) * xx / w + np.sin(angle) * yy / h + 1) / 2
    out: np.ndarray = base * (1 - t[..., None]) + other * t[..., None]
    return out


def _draw_shape(img: Image.Image, rng: np.random.Generator, label: int) -> None:
    """Draw the class's shape in a random place and colour."""
    draw = ImageDraw.Draw(img)
    w, h = img.size
    cx, cy = rng.uniform(0.3, 0.7) * w, rng.uniform(0.3, 0.7) * h
    r = rng.uniform(0.15, 0.3) * min(w, h)
    colour = tuple(int(c) for c in rng.integers(0, 256, 3))
    box = (cx - r, cy - r, cx + r, cy + r)
    kind = CLASS_NAMES[label % len(CLASS_NAMES)]
    if kind == "circles":
        draw.ellipse(box, fill=colour)
    elif kind == "squares":
        draw.rectangle(box, fill=colour)
    elif kind == "triangles":
        draw.polygon([(cx, cy - r), (cx - r, cy + r), (cx + r, cy + r)], fill=colour)
    elif kind == "stripes":
        for y in range(0, h, max(2, int(r / 3))):
            draw.line([(0, y), (w, y)], fill=colour, width=max(1, int(r / 8)))
    elif kind == "rings":
        draw.ellipse(box, outline=colour, width=max(2, int(r / 4)))
    elif kind == "crosses":
        draw.line([(cx - r, cy - r), (cx + r, cy + r)], fill=colour, width=max(2, int(r / 4)))
        draw.line([(cx - r, cy + r), (cx + r, cy - r)], fill=colour, width=max(2, int(r / 4)))
    elif kind == "dots":
        for _ in range(12):
            dx, dy = rng.uniform(0, w), rng.uniform(0, h)
            draw.ellipse((dx - r / 5, dy - r / 5, dx + r / 5, dy + r / 5), fill=colour)
    else:
        pts = [(x, cy + r * np.sin(x / max(r, 1) * 2)) for x in range(0, w, 2)]
        draw.line(pts, fill=colour, width=max(2, int(r / 5)))


def make_image(
    seed: int, index: int, label: int, size: tuple[int, int], num_classes: int = 4
) -> Image.Image:
    """Return the RGB picture of sample ``index`` (a pure function of the arguments).

    Args:
        seed: Dataset seed.
        index: Sample index within the dataset.
        label: Class index; decides hue and shape.
        size: ``(width, height)`` in pixels.
        num_classes: Number of classes (spreads the hues).
    """
    rng = np.random.default_rng([seed, index])
    w, h = size
    pixels = _gradient(rng, h, w, label, num_classes)
    img = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8), "RGB")
    _draw_shape(img, rng, label)
    noisy = np.asarray(img, dtype=np.int16) + rng.normal(0, 6, (h, w, 3)).astype(np.int16)
    return Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8), "RGB")


def _odd_mode(index: int) -> str | None:
    if index % _ODD_EVERY != 2:
        return None
    return ODD_MODES[(index // _ODD_EVERY) % len(ODD_MODES)]


def _save(img: Image.Image, stem: Path, index: int, rng: np.random.Generator) -> Path:
    """Encode ``img`` as JPEG or PNG (possibly in an odd mode) and return the written path."""
    mode = _odd_mode(index)
    if mode == "L":
        path = stem.with_suffix(".jpg")
        img.convert("L").save(path, quality=90)
    elif mode in ("RGBA", "LA"):
        alpha = Image.fromarray(rng.integers(96, 256, (img.height, img.width), dtype=np.uint8))
        out = img.convert(mode)
        out.putalpha(alpha)
        path = stem.with_suffix(".png")
        out.save(path)
    elif mode == "P":
        path = stem.with_suffix(".png")
        img.quantize(colors=64, dither=Image.Dither.NONE).save(path)
    elif mode == "CMYK":
        path = stem.with_suffix(".jpg")
        img.convert("CMYK").save(path, quality=90)
    elif mode == "I;16":
        path = stem.with_suffix(".png")
        wide = np.asarray(img.convert("L"), dtype=np.uint16) * 257
        Image.fromarray(wide).save(path)  # 16-bit grayscale PNG (mode I;16)
    elif mode == "EXIF":
        path = stem.with_suffix(".jpg")
        exif = Image.Exif()
        exif[_EXIF_ORIENTATION] = int(rng.choice([3, 6, 8]))  # 180, 270 or 90 degrees
        img.save(path, quality=90, exif=exif.tobytes())
    elif index % 3 == 0:
        path = stem.with_suffix(".png")
        img.save(path, compress_level=1)
    else:
        path = stem.with_suffix(".jpg")
        img.save(path, quality=int(rng.integers(75, 96)))
    return path


def make_sample_dataset(
    root: str | Path,
    num_images: int = 300,
    num_classes: int = 4,
    size_range: tuple[int, int] = (96, 320),
    seed: int = 0,
    *,
    manifest: bool = False,
) -> Path:
    """Write a class-folder image dataset under ``root`` and return ``root``.

    Images are written as ``root/<class_name>/NNNN.jpg|png``; sample ``i`` has label
    ``i % num_classes`` and a random width and height in ``size_range``. With
    ``manifest=True`` a ``root/manifest.csv`` (header ``path,label``, paths relative to
    ``root``) is written too.

    Raises:
        ValueError: A count or the size range is invalid.
    """
    lo, hi = size_range
    if num_images < 1 or num_classes < 1:
        raise ValueError(
            f"num_images and num_classes must be >= 1, got {num_images}, {num_classes}"
        )
    if not 1 <= lo <= hi:
        raise ValueError(f"size_range must satisfy 1 <= low <= high, got {size_range!r}")
    root = Path(root)
    rows: list[tuple[str, int]] = []
    for index in range(num_images):
        label = index % num_classes
        folder = root / _class_name(label, num_classes)
        folder.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng([seed, index, 1])
        size = (int(rng.integers(lo, hi + 1)), int(rng.integers(lo, hi + 1)))
        img = make_image(seed, index, label, size, num_classes)
        path = _save(img, folder / f"{index:04d}", index, rng)
        rows.append((path.relative_to(root).as_posix(), label))
    if manifest:
        with open(root / "manifest.csv", "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["path", "label"])
            writer.writerows(rows)
    return root
