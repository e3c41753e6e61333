"""A scene and its ground truth as patches, and a spatially disjoint train/test split.

**Patches** (:func:`scene_patches`): one ``P x P x C`` patch per labelled pixel (ground truth
``> 0``), in row-major order of the centre pixels, with label ``gt - 1`` (0 means unlabelled
and is left out) and the centre's ``(row, col)``. The patch of pixel ``(r, c)`` covers rows
``r - P // 2 .. r - P // 2 + P - 1`` (columns likewise): for odd ``P`` the pixel is the exact
centre; for even ``P`` it is the lower-right of the four central pixels (index ``P // 2`` of
the patch). Outside the scene the values are mirrored without repeating the border pixel
(numpy's ``reflect``), so a patch is made of scene values only.

**Split** (:func:`block_split`): with overlapping patches, a pixel-random split leaks: the
test pixel next to a training pixel is inside the training patch (and its spectrum in the
training data), so test accuracy measures memorised neighbours, not generalisation. The
scene is cut into ``block x block`` squares; whole squares go to ``test`` (in an order drawn
from ``seed``) until they hold at least ``test_fraction`` of the labelled pixels. It is a
pure function of its arguments. A patch's pixels may still cross a block edge: a training
patch centred within ``P // 2`` of a test square contains test pixels (not their labels).
``guard=g`` marks every training pixel within ``g`` pixels (Chebyshev) of a test pixel
``guard`` (use neither for training nor testing): ``g = P // 2`` keeps test centres out of
training patches, ``g = P - 1`` makes training and test patches share no pixel at all.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

from precompute.errors import SourceError, SpecError

__all__ = ["Patch", "block_split", "check_scene", "scene_patches"]


class Patch(NamedTuple):
    """One patch: ``values`` ``(P, P, C)`` of the scene's dtype, ``label`` = gt - 1, centre."""

    values: np.ndarray
    label: int
    row: int
    col: int


def check_scene(scene: np.ndarray, gt: np.ndarray, where: str = "scene") -> np.ndarray:
    """Return the ground truth as int64 classes, refusing a scene or ground truth that is bad.

    The scene must be ``(H, W, C)`` and the ground truth ``(H, W)`` of integers >= 0; a float
    ground truth (as many ``.mat`` files store it) is taken when every value is a finite
    whole number >= 0.

    Raises:
        SourceError: Naming ``where`` and both shapes, or the first bad value and its pixel.
    """
    if scene.ndim != 3:
        raise SourceError(f"{where}: the scene must be (H, W, C), got shape {list(scene.shape)}")
    if gt.ndim != 2 or gt.shape != scene.shape[:2]:
        raise SourceError(
            f"{where}: the ground truth is {list(gt.shape)} but the scene is "
            f"{list(scene.shape[:2])} (H, W)"
        )
    if gt.dtype.kind not in "iubf":
        raise SourceError(f"{where}: ground truth must hold integers >= 0, got dtype {gt.dtype}")
    with np.errstate(invalid="ignore"):
        bad = gt < 0 if gt.dtype.kind != "f" else ~np.isfinite(gt) | (gt < 0) | (gt != np.floor(gt))
    if bad.any():
        row, col = (int(i) for i in np.unravel_index(int(np.argmax(bad)), gt.shape))
        raise SourceError(
            f"{where}: ground truth must hold integers >= 0, got {gt[row, col].item()!r} at "
            f"pixel (row {row}, col {col}) ({gt.dtype})"
        )
    if gt.dtype.kind == "f" and gt.size and gt.max() >= 2**53:
        raise SourceError(f"{where}: ground truth class {gt.max().item()!r} is too large")
    return gt.astype(np.int64)


def _positive(name: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SpecError(f"{name} must be a positive integer, got {value!r}")


def scene_patches(
    scene: np.ndarray, gt: np.ndarray, patch: int, where: str = "scene"
) -> Iterator[Patch]:
    """Yield the patch of every labelled pixel of ``gt``, row-major.

    Args:
        scene: ``(H, W, C)`` values.
        gt: ``(H, W)`` integer classes, 0 = unlabelled.
        patch: The patch side ``P``.
        where: Names the scene in errors (its file).

    Raises:
        SourceError: The shapes disagree, or ``gt`` is not non-negative integers.
        SpecError: ``patch`` is not a positive integer.
    """
    gt = check_scene(scene, gt, where)
    _positive("patch", patch)
    half = patch // 2
    padded = np.pad(scene, ((half, patch - 1 - half), (half, patch - 1 - half), (0, 0)), "reflect")
    padded.setflags(write=False)
    rows, cols = np.nonzero(gt > 0)
    for r, c in zip(rows.tolist(), cols.tolist(), strict=True):
        yield Patch(padded[r : r + patch, c : c + patch], int(gt[r, c]) - 1, r, c)


def _test_blocks(labelled: np.ndarray, block: int, test_fraction: float, seed: int) -> np.ndarray:
    """``(rows, cols)`` of blocks, True for a test block."""
    h, w = labelled.shape
    nr, nc = -(-h // block), -(-w // block)
    counts = np.zeros((nr * block, nc * block), np.int64)
    counts[:h, :w] = labelled
    counts = counts.reshape(nr, block, nc, block).sum(axis=(1, 3)).ravel()
    order = np.random.default_rng(seed).permutation(nr * nc)
    order = order[counts[order] > 0]
    taken = np.cumsum(counts[order])
    need = int(np.searchsorted(taken, test_fraction * counts.sum() - 1e-9)) + 1
    test = np.zeros(nr * nc, bool)
    test[order[: need if test_fraction > 0 else 0]] = True
    return test.reshape(nr, nc)


def block_split(
    gt: np.ndarray, block: int, test_fraction: float, seed: int, guard: int = 0
) -> np.ndarray:
    """Assign every pixel to ``train``, ``test`` (or ``guard``) by square blocks.

    Args:
        gt: ``(H, W)`` integer classes, 0 = unlabelled (only labelled pixels are counted).
        block: The side of the squares.
        test_fraction: The least fraction of labelled pixels that goes to ``test``
            (``0 <= f < 1``); whole blocks are taken, so it is usually exceeded a little.
        seed: Draws the order in which blocks go to ``test``.
        guard: Training pixels within this many pixels of a test pixel become ``guard``.

    Returns:
        ``(H, W)`` array of ``"train"``/``"test"``/``"guard"`` strings.

    Raises:
        SpecError: A bad ``block``, ``test_fraction`` or ``guard``, or ``gt`` not 2-D.
    """
    if gt.ndim != 2:
        raise SpecError(f"ground truth must be (H, W), got shape {list(gt.shape)}")
    _positive("block", block)
    if not 0.0 <= test_fraction < 1.0:
        raise SpecError(f"test_fraction must be in [0, 1), got {test_fraction!r}")
    if isinstance(guard, bool) or not isinstance(guard, int) or guard < 0:
        raise SpecError(f"guard must be an integer >= 0, got {guard!r}")
    test_blocks = _test_blocks(gt > 0, block, test_fraction, seed)
    test = np.kron(test_blocks, np.ones((block, block), bool))[: gt.shape[0], : gt.shape[1]]
    out = np.where(test, "test", "train").astype("<U5")
    if guard and test.any():
        from scipy.ndimage import maximum_filter

        near = maximum_filter(test, size=2 * guard + 1, mode="constant", cval=False)
        out[near & ~test] = "guard"
    return out
