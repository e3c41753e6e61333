"""Windowing of 16-bit CT-like scans: the range kept (``--bit-depth 16``), windows in the build.

``python -m benchmarks.examples.ct_window [--quick] [--work DIR]``:

1. writes CT-like slices as 16-bit grey PNGs: Hounsfield units stored as ``HU + 1024``
   (air -1000, fat -100, soft tissue 40, a lesion 70, bone 700, with noise), in two classes
   (with and without the lesion);
2. builds them three ways:

   * as before this option existed (8 bits: ``round(v / 257)``): soft tissue (1064) and the
     lesion (1094) become the same 4 of 255;
   * ``--bit-depth 16 --channels 1``: every value kept (``uint16``), to window on the device
     or later;
   * with :func:`window` as the build's transform at ``decoded`` (on the 16-bit values, before
     the resize): three clinical windows as the three 8-bit channels
     (``precompute build slices/ --transform benchmarks.examples.ct_window:window
     --transform-at decoded``);

3. prints, for each store, how many grey levels apart soft tissue and the lesion are stored,
   and the stores' bytes per sample.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import zarr
from PIL import Image

from benchmarks.examples.stores import work_folder
from precompute.fields import FieldSpec
from precompute.job import build
from precompute.spec import BuildSpec

__all__ = ["WINDOWS", "main", "make_slices", "window"]

OFFSET = 1024  # stored value = HU + 1024 (a common CT convention)
SIZE = 64
TISSUE = {"air": -1000, "fat": -100, "soft": 40, "lesion": 70, "bone": 700}
# (level, width) in HU: soft tissue, a narrow liver/lesion window, bone
WINDOWS = ((40, 400), (60, 100), (400, 1800))


def make_slices(root: Path, n: int, seed: int = 0) -> Path:
    """``n`` 16-bit PNG slices in class folders ``lesion/`` and ``clear/``; return ``root``."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:SIZE, 0:SIZE] + 0.5
    for i in range(n):
        cls = "lesion" if i % 2 else "clear"
        hu = np.full((SIZE, SIZE), TISSUE["air"], np.float64)
        body = ((xx - 32) / 26) ** 2 + ((yy - 32) / 22) ** 2 < 1
        hu[body] = TISSUE["fat"]
        hu[((xx - 32) / 22) ** 2 + ((yy - 32) / 18) ** 2 < 1] = TISSUE["soft"]
        hu[(xx - 32) ** 2 + (yy - 44) ** 2 < 16] = TISSUE["bone"]
        if cls == "lesion":
            cx, cy = rng.uniform(22, 42), rng.uniform(20, 32)
            hu[(xx - cx) ** 2 + (yy - cy) ** 2 < 20] = TISSUE["lesion"]
        hu += rng.normal(0, 5, hu.shape)
        (root / cls).mkdir(parents=True, exist_ok=True)
        values = np.clip(np.rint(hu + OFFSET), 0, 65535).astype(np.uint16)
        Image.fromarray(values).save(root / cls / f"{i:04d}.png")
    return root


def window(
    sample: dict[str, Any], key: str, *, windows: Sequence[Sequence[float]] = WINDOWS
) -> dict[str, Any]:
    """The build's transform: each ``(level, width)`` HU window as one 8-bit channel.

    At ``decoded`` a 16-bit scan's ``image`` is ``(H, W, 1)`` uint16, the values as stored in
    the file (``HU + 1024``); the result is ``(H, W, len(windows))`` uint8.
    """
    hu = sample["image"][..., 0].astype(np.float64) - OFFSET
    planes = []
    for level, width in windows:
        low = level - width / 2
        planes.append(np.rint(np.clip((hu - low) / width, 0, 1) * 255).astype(np.uint8))
    sample["image"] = np.stack(planes, axis=2)
    return sample


def _apart(store: Path, channel: int = 0) -> float:
    """Grey levels between the lesion's and soft tissue's median (lesion slices' centres)."""
    image = np.asarray(zarr.open_array(str(store / "image"))[:])
    labels = np.asarray(zarr.open_array(str(store / "label"))[:])
    lesion = image[labels == 1][..., channel].astype(np.float64)  # class folders: clear, lesion
    soft = np.median(lesion[:, 30:34, 28:36])  # the soft tissue around the body's centre
    top = np.percentile(lesion[:, 16:36, 18:46], 99)  # the brightest soft-tissue pixels
    return float(top - soft)


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    """Run the example; return the levels between lesion and soft tissue in each store."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="8 slices instead of 64.")
    parser.add_argument("--work", type=Path, help="Working folder (default: a temporary one).")
    args = parser.parse_args(argv)
    with work_folder(args.work) as work:
        src = make_slices(work / "slices", 8 if args.quick else 64)
        kw: dict[str, Any] = {"progress": False}
        stores = {
            "8 bits (round(v / 257))": work / "eight.zarr",
            "--bit-depth 16": work / "sixteen.zarr",
            "transform window (3 windows, 8 bits)": work / "windowed.zarr",
        }
        names = list(stores.values())
        build(str(src), str(names[0]), BuildSpec(size=SIZE), **kw)
        wide = FieldSpec("image", "image", {"channels": 1, "bit_depth": 16})
        spec = BuildSpec(size=SIZE, fields=(wide, FieldSpec("label", "label", {"classes": 2})))
        build(str(src), str(names[1]), spec, **kw)
        build(str(src), str(names[2]), BuildSpec(size=SIZE), transform=window,
              transform_at="decoded", **kw)  # fmt: skip
        out = {}
        for what, store in stores.items():
            out[what] = _apart(store, 1 if "window" in what else 0)
            per = np.asarray(zarr.open_array(str(store / "image"))[:1]).nbytes
            scale = "of 65535" if "16" in what else "of 255"
            print(f"{what:40s} lesion vs soft tissue: {out[what]:8.1f} levels {scale}, "
                  f"{per} bytes/sample")  # fmt: skip
    return out


if __name__ == "__main__":
    main()
