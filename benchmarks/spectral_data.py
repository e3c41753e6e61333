"""A synthetic hyperspectral scene and the classic per-file Dataset baselines of issue 14.

:func:`make_scene` is deterministic in its arguments: an ``H x W x C`` float32 scene (the
shape of Indian Pines by default, 145 x 145 x 200) whose pixels belong to ``classes`` spatial
blobs (the nearest of ``classes`` seeded centres, on a smooth wobble so edges are not
straight), each class with its own smooth spectrum (a few Gaussian bumps over the band axis)
and Gaussian noise on top, and an ``H x W`` uint8 ground truth (class + 1, 0 = unlabelled for
about ``unlabelled`` of the pixels, in patches, as in the real scenes).

Writers give the files a user brings: :func:`write_scene` (``scene`` and ``gt`` as ``.mat``
(one variable each), ``.npy`` and ``.tif`` (one page per band)) and :func:`write_patches`
(one ``P x P x C`` file per labelled pixel in class folders, ``.npy`` or ``.mat``, plus
:func:`write_patch_memmap`: one ``.npy`` of all patches, the memmap reference).

The baselines load per item, as a training script without a store does:
:class:`ArrayFileDataset` (``np.load`` or ``scipy.io.loadmat`` of one file per item) and
:class:`MemmapDataset` (slices of one memory-mapped ``.npy``). Both return ``(C, P, P)``
float32 tensors and int64 labels.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset

from benchmarks.errors import BenchConfigError

__all__ = [
    "ArrayFileDataset",
    "MemmapDataset",
    "make_scene",
    "write_patch_memmap",
    "write_patches",
    "write_scene",
]


def _spectra(rng: np.random.Generator, classes: int, bands: int) -> np.ndarray:
    """``(classes, bands)`` smooth spectra: a base level plus three Gaussian bumps each."""
    x = np.linspace(0.0, 1.0, bands)
    base = rng.uniform(0.2, 0.6, size=(classes, 1))
    centre = rng.uniform(0.0, 1.0, size=(classes, 3, 1))
    width = rng.uniform(0.03, 0.2, size=(classes, 3, 1))
    height = rng.uniform(0.1, 0.5, size=(classes, 3, 1))
    bumps = (height * np.exp(-0.5 * ((x - centre) / width) ** 2)).sum(axis=1)
    return np.asarray(base + bumps)


def _blobs(rng: np.random.Generator, height: int, width: int, classes: int) -> np.ndarray:
    """``(H, W)`` class of each pixel: the nearest of ``classes`` centres, edges wobbled."""
    rows, cols = np.mgrid[0:height, 0:width].astype(np.float64)
    wobble = 4.0 * np.sin(rows / 7.0 + rng.uniform(0, 6)) * np.cos(cols / 9.0)
    centres = rng.uniform(0, 1, size=(classes, 2)) * (height, width)
    d = (rows[None] + wobble - centres[:, 0, None, None]) ** 2
    d = d + (cols[None] - wobble - centres[:, 1, None, None]) ** 2
    return np.asarray(np.argmin(d, axis=0))


def make_scene(
    height: int = 145,
    width: int = 145,
    bands: int = 200,
    classes: int = 16,
    seed: int = 0,
    noise: float = 0.02,
    unlabelled: float = 0.5,
) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(scene, gt)``: ``(H, W, bands)`` float32 and ``(H, W)`` uint8 (class + 1).

    Raises:
        BenchConfigError: ``classes`` outside ``[1, 254]`` or ``unlabelled`` outside ``[0, 1)``.
    """
    if not 1 <= classes <= 254:
        raise BenchConfigError(f"classes must be in [1, 254], got {classes}")
    if not 0.0 <= unlabelled < 1.0:
        raise BenchConfigError(f"unlabelled must be in [0, 1), got {unlabelled}")
    rng = np.random.default_rng(seed)
    label = _blobs(rng, height, width, classes)
    scene = _spectra(rng, classes, bands)[label]
    scene += rng.normal(0.0, noise, size=scene.shape)
    coarse = rng.uniform(size=(-(-height // 5), -(-width // 5)))  # unlabelled in 5 x 5 tiles
    hidden = np.kron(coarse, np.ones((5, 5)))[:height, :width] < unlabelled
    gt = np.where(hidden, 0, label + 1).astype(np.uint8)
    return scene.astype(np.float32), gt


def write_scene(folder: str | os.PathLike[str], scene: np.ndarray, gt: np.ndarray) -> list[Path]:
    """Write ``scene.{mat,npy,tif}`` and ``gt.{mat,npy,tif}``; return their paths.

    A ``.mat`` holds one variable (``scene`` / ``gt``); a ``.tif`` one page per band.
    """
    import scipy.io
    import tifffile

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, value in (("scene", scene), ("gt", gt)):
        scipy.io.savemat(out / f"{name}.mat", {name: value})
        np.save(out / f"{name}.npy", value)
        pages = np.moveaxis(value, 2, 0) if value.ndim == 3 else value
        tifffile.imwrite(out / f"{name}.tif", pages, photometric="minisblack")
        paths += [out / f"{name}.{ext}" for ext in ("mat", "npy", "tif")]
    return paths


def _patches(
    scene: np.ndarray, gt: np.ndarray, patch: int
) -> list[tuple[np.ndarray, int, int, int]]:
    from precompute.arrays.scene import scene_patches

    return [(p.values, p.label, p.row, p.col) for p in scene_patches(scene, gt, patch)]


def write_patches(
    folder: str | os.PathLike[str], scene: np.ndarray, gt: np.ndarray, patch: int, fmt: str = "npy"
) -> list[Path]:
    """Write one patch file per labelled pixel: ``FOLDER/<label>/<row>_<col>.<fmt>``.

    Raises:
        BenchConfigError: ``fmt`` is not ``npy`` or ``mat``.
    """
    import scipy.io

    if fmt not in ("npy", "mat"):
        raise BenchConfigError(f"fmt must be 'npy' or 'mat', got {fmt!r}")
    paths = []
    for values, label, row, col in _patches(scene, gt, patch):
        path = Path(folder) / f"{label:02d}" / f"{row:03d}_{col:03d}.{fmt}"
        path.parent.mkdir(parents=True, exist_ok=True)
        if fmt == "npy":
            np.save(path, values)
        else:
            scipy.io.savemat(path, {"patch": values})
        paths.append(path)
    return paths


def write_patch_memmap(
    path: str | os.PathLike[str], scene: np.ndarray, gt: np.ndarray, patch: int
) -> np.ndarray:
    """Write all patches as one ``(N, P, P, C)`` ``.npy`` at ``path``; return the labels."""
    found = _patches(scene, gt, patch)
    out = np.lib.format.open_memmap(
        os.fspath(path), "w+", scene.dtype, (len(found), patch, patch, scene.shape[2])
    )
    for i, (values, _, _, _) in enumerate(found):
        out[i] = values
    out.flush()
    del out
    return np.array([label for _, label, _, _ in found], dtype=np.int64)


def _tensor(values: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(np.moveaxis(values, -1, 0), dtype=np.float32))


class ArrayFileDataset(Dataset[tuple[torch.Tensor, int]]):
    """One file per item, read with ``np.load`` or ``scipy.io.loadmat`` in ``__getitem__``.

    Args:
        root: The folder :func:`write_patches` wrote (``<label>/<file>``).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        files = sorted(p for p in Path(root).glob("*/*") if p.suffix in (".npy", ".mat"))
        self.files = files
        self.labels = [int(p.parent.name) for p in files]

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        path = self.files[index]
        if path.suffix == ".npy":
            values = np.load(path)
        else:
            import scipy.io

            values = scipy.io.loadmat(path, variable_names=["patch"])["patch"]
        return _tensor(values), self.labels[index]


class MemmapDataset(Dataset[tuple[torch.Tensor, int]]):
    """Items sliced from one memory-mapped ``(N, P, P, C)`` ``.npy`` (opened lazily per worker)."""

    def __init__(self, path: str | os.PathLike[str], labels: np.ndarray) -> None:
        self.path = os.fspath(path)
        self.labels = labels
        self._data: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        if self._data is None:
            self._data = np.load(self.path, mmap_mode="r")
        return _tensor(self._data[index]), int(self.labels[index])
