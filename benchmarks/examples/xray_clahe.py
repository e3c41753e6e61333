"""CLAHE on landmark X-rays, done once in the build: the user's own preprocessing, keyed.

``python -m benchmarks.examples.xray_clahe [--quick] [--work DIR]``:

1. writes grey "X-rays" with landmarks and their ``image,keypoints`` manifest
   (:func:`benchmarks.fields_data.make_landmarks`), as the landmarks example does;
2. builds them twice with ``--channels 1`` (the scans are grey: a third of the bytes), once
   as they are and once with :func:`clahe` as the build's transform, at ``decoded`` (on the
   full-resolution scan, before the resize): ``precompute build landmarks.csv --channels 1
   --transform benchmarks.examples.xray_clahe:clahe --transform-args '{"clip_limit": 2.0}'
   --transform-at decoded``;
3. prints the local contrast of both stores (the mean over samples of the standard deviation
   in 8 x 8 tiles), the transform and its fingerprint as ``inspect`` shows them, that the
   landmarks are stored identically (a transform of the pixels leaves the points alone), and
   that the same build again is the same store (its identity: the function's source).

:func:`clahe` uses the user's OpenCV (``cv2.createCLAHE``) or scikit-image
(``skimage.exposure.equalize_adapthist``), whichever is installed: neither is a dependency of
nostall. It takes 8- and 16-bit grey (a ``--bit-depth 16`` store's scans too).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from benchmarks.examples.stores import work_folder
from benchmarks.fields_data import make_landmarks
from precompute.format.layout import open_store_info
from precompute.format.summary import store_summary
from precompute.job import build
from precompute.sources.resolve import infer_fields
from precompute.spec import BuildSpec

__all__ = ["clahe", "local_contrast", "main"]

SIZE = 96


def _equalize(grey: np.ndarray, clip_limit: float, tiles: int) -> np.ndarray:
    """CLAHE of a 2-D uint8/uint16 image by the user's library: cv2, else scikit-image."""
    try:
        import cv2

        return np.asarray(cv2.createCLAHE(clip_limit, (tiles, tiles)).apply(grey))
    except ImportError:
        pass
    try:
        from skimage import exposure
    except ImportError:
        raise ImportError(
            "this example's transform needs OpenCV or scikit-image: pip install "
            "opencv-python-headless (or scikit-image)"
        ) from None
    top = np.iinfo(grey.dtype).max
    out = exposure.equalize_adapthist(grey, kernel_size=max(grey.shape) // tiles,
                                      clip_limit=clip_limit / 100)  # fmt: skip
    equalized: np.ndarray = np.rint(out * top).astype(grey.dtype)
    return equalized


def clahe(
    sample: dict[str, Any], key: str, *, clip_limit: float = 2.0, tiles: int = 8
) -> dict[str, Any]:
    """The build's transform: CLAHE on the sample's grey ``image``; every other field as is.

    At ``decoded`` the image is ``(H, W, 1)`` (a grey scan, as decoded; 16-bit kept) or
    ``(H, W, 3)`` (a colour file: equalised on its grey); it returns the same frame.
    """
    image = sample["image"]
    grey = image[..., 0] if image.shape[-1] == 1 else image.mean(axis=2).astype(image.dtype)
    sample["image"] = _equalize(np.ascontiguousarray(grey), clip_limit, tiles)[..., None]
    return sample


def local_contrast(images: np.ndarray, tile: int = 8) -> float:
    """The mean standard deviation of ``tile x tile`` tiles of ``(N, H, W, C)`` images."""
    n, h, w = images.shape[:3]
    cut = images[:, : h - h % tile, : w - w % tile, 0].astype(np.float64)
    tiles = cut.reshape(n, h // tile, tile, w // tile, tile).transpose(0, 1, 3, 2, 4)
    return float(tiles.reshape(n, h // tile, w // tile, -1).std(axis=-1).mean())


def _store(manifest: Path, out: Path, **transform: Any) -> dict[str, Any]:
    """Build the manifest's image + keypoints with a grey image field (``--channels 1``)."""
    fields = infer_fields(str(manifest), {"image": {"channels": 1}})
    spec = BuildSpec(size=SIZE, mode="letterbox", fields=fields)
    return build(str(manifest), str(out), spec, progress=False, **transform)


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    """Run the example; return the local contrast of both stores."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="12 scans instead of 96.")
    parser.add_argument("--work", type=Path, help="Working folder (default: a temporary one).")
    parser.add_argument("--clip-limit", type=float, default=2.0)
    args = parser.parse_args(argv)
    with work_folder(args.work) as work:
        manifest = make_landmarks(work / "xrays", 12 if args.quick else 96, size=SIZE, seed=3)
        plain = work / "plain.zarr"
        _store(manifest, plain)
        transform = {
            "transform": clahe,
            "transform_args": {"clip_limit": args.clip_limit},
            "transform_at": "decoded",
        }
        first = _store(manifest, work / "clahe.zarr", **transform)
        again = _store(manifest, work / "clahe.zarr", **transform)
        out = {
            name: local_contrast(np.asarray(zarr.open_array(str(store / "image"))[:]))
            for name, store in (("plain", plain), ("clahe", work / "clahe.zarr"))
        }
        same = np.array_equal(
            zarr.open_array(str(plain / "keypoints"))[:],
            zarr.open_array(str(work / "clahe.zarr" / "keypoints"))[:],
        )
        info = open_store_info(work / "clahe.zarr")
        print(next(x for x in store_summary(info.path).splitlines() if x.startswith("transf")))
        print(
            f"local contrast (std in 8x8 tiles): {out['plain']:.2f} as scanned, "
            f"{out['clahe']:.2f} with CLAHE ({out['clahe'] / out['plain']:.2f}x)"
        )
        print(f"landmarks stored identically: {same}")
        print(f"the same build again is the same store: {again['spec_hash'] == first['spec_hash']}")
    return out


if __name__ == "__main__":
    main()
