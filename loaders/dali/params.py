"""The on-line augmentation policy of the DALI loaders, and its per-batch random parameters.

DALI's own operator RNG cannot be saved and restored, so the loaders never use it: every random
number (crop window, flip, colour factors) is drawn here, from a generator keyed by
``(seed, epoch, rank, batch)``, and fed to DALI as per-sample argument inputs. That makes the
augmentation a pure function of the position in the stream, and mid-epoch resume exact.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

__all__ = ["DTYPES", "LAYOUTS", "BatchParams", "DaliAugment", "draw_batch_params"]

DTYPES = ("float32", "float16", "bfloat16", "uint8")
LAYOUTS = ("CHW", "HWC")
_AUG_KEY = 0xDA1


def _pair(name: str, value: tuple[float, float], lo: float, hi: float) -> tuple[float, float]:
    a, b = (float(v) for v in value)
    if not lo <= a <= b <= hi:
        raise ValueError(f"{name} must satisfy {lo} <= low <= high <= {hi}, got {value!r}")
    return (a, b)


@dataclass(frozen=True)
class DaliAugment:
    """On-device augmentation, as data.

    Attributes:
        size: Output side length; None keeps the input size (stores only).
        scale: Random resized crop area range; None disables the crop (plain resize).
        ratio: Random resized crop aspect-ratio range (width / height).
        attempts: Random resized crop candidates per sample before the centre fallback.
        center: Deterministic centre crop instead (evaluation): the crop side is this
            fraction of the short side (e.g. 224/256); needs ``scale=None``.
        flip: Probability of a horizontal flip (True means 0.5).
        brightness: Brightness factor drawn from [1-b, 1+b]; 0 disables.
        contrast: Contrast factor drawn from [1-c, 1+c]; 0 disables.
        saturation: Saturation factor drawn from [1-s, 1+s]; 0 disables.
        mean: Per-channel mean in [0, 1] pixel units, subtracted after scaling to [0, 1].
        std: Per-channel std in [0, 1] pixel units.
        dtype: Output dtype: ``float32``, ``float16``, ``bfloat16`` (cast by torch) or
            ``uint8`` (uint8 skips normalising).
        layout: ``CHW`` (batches are B, 3, H, W) or ``HWC`` (B, H, W, 3).
        channels_last: With ``CHW``: a (B, 3, H, W) tensor in ``torch.channels_last`` memory.
    """

    size: int | None = 224
    scale: tuple[float, float] | None = (0.08, 1.0)
    ratio: tuple[float, float] = (3 / 4, 4 / 3)
    attempts: int = 10
    center: float | None = None
    flip: float = 0.5
    brightness: float = 0.0
    contrast: float = 0.0
    saturation: float = 0.0
    mean: tuple[float, float, float] = (0.485, 0.456, 0.406)
    std: tuple[float, float, float] = (0.229, 0.224, 0.225)
    dtype: str = "float32"
    layout: str = "CHW"
    channels_last: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "flip", 0.5 if self.flip is True else float(self.flip))
        if not 0.0 <= self.flip <= 1.0:
            raise ValueError(f"flip must be a probability in [0, 1], got {self.flip!r}")
        if not (isinstance(self.attempts, int) and 1 <= self.attempts <= 64):
            raise ValueError(f"attempts must be an integer in [1, 64], got {self.attempts!r}")
        if self.center is not None and (self.scale is not None or not 0 < self.center <= 1):
            raise ValueError(f"center must lie in (0, 1] and needs scale=None, got "
                             f"center={self.center!r} scale={self.scale!r}")
        if self.size is not None and not (isinstance(self.size, int) and self.size >= 1):
            raise ValueError(f"size must be a positive int or None, got {self.size!r}")
        if self.scale is not None:
            object.__setattr__(self, "scale", _pair("scale", self.scale, 1e-4, 1.0))
        object.__setattr__(self, "ratio", _pair("ratio", self.ratio, 1e-2, 1e2))
        for name in ("brightness", "contrast", "saturation"):
            if not 0.0 <= float(getattr(self, name)) <= 1.0:
                raise ValueError(f"{name} must lie in [0, 1], got {getattr(self, name)!r}")
        if len(self.mean) != 3 or len(self.std) != 3 or min(self.std) <= 0:
            raise ValueError(f"mean/std need 3 values, std > 0; got {self.mean!r}, {self.std!r}")
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {DTYPES}, got {self.dtype!r}")
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}, got {self.layout!r}")

    @classmethod
    def identity(cls, size: int | None = None) -> DaliAugment:
        """Return the raw policy: uint8 NHWC, only resized (no crop, flip, colour, normalise).

        This is what a loader serves with ``augment=None``, as ``StoreLoader`` does.
        """
        return cls(size=size, scale=None, flip=False, mean=(0.0, 0.0, 0.0),
                   std=(1.0, 1.0, 1.0), dtype="uint8", layout="HWC")

    @property
    def crops(self) -> bool:
        """Whether each sample is cropped (random resized or centre crop) before resizing."""
        return self.scale is not None or self.center is not None


@dataclass(frozen=True)
class BatchParams:
    """Per-sample DALI argument inputs of one batch (all arrays have one row per sample)."""

    roi_start: npt.NDArray[np.int32]  # (n, 2) crop top-left (y, x) in input pixels
    roi_end: npt.NDArray[np.int32]  # (n, 2) crop bottom-right (y, x), exclusive
    mirror: npt.NDArray[np.int32]  # (n,) 1 = flip horizontally
    brightness: npt.NDArray[np.float32]  # (n,)
    contrast: npt.NDArray[np.float32]  # (n,)
    saturation: npt.NDArray[np.float32]  # (n,)


def _rng(seed: int, epoch: int, rank: int, batch: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(
        [seed, _AUG_KEY, epoch, rank, batch])))


def _crop_boxes(rng: np.random.Generator, hw: npt.NDArray[np.int64], aug: DaliAugment
                ) -> npt.NDArray[np.float64]:
    """Return (n, 4) crop boxes ``(top, left, height, width)``: torchvision's RandomResizedCrop."""
    n = len(hw)
    h, w = hw[:, 0:1].astype(np.float64), hw[:, 1:2].astype(np.float64)
    if aug.scale is None:
        if aug.center is None:
            return np.concatenate([np.zeros((n, 2)), h, w], axis=1)
        side = np.maximum(1.0, np.round(np.minimum(h, w) * aug.center))
        return np.concatenate([(h - side) // 2, (w - side) // 2, side, side], axis=1)
    area = h * w * rng.uniform(*aug.scale, size=(n, aug.attempts))
    log_r = rng.uniform(math.log(aug.ratio[0]), math.log(aug.ratio[1]), size=(n, aug.attempts))
    cw, ch = np.round(np.sqrt(area * np.exp(log_r))), np.round(np.sqrt(area / np.exp(log_r)))
    ok = (cw > 0) & (ch > 0) & (cw <= w) & (ch <= h)
    u = rng.uniform(size=(n, 2))
    first = ok.argmax(axis=1)
    rows = np.arange(n)
    ch, cw = ch[rows, first], cw[rows, first]
    # Fallback (no try fits): the largest centre crop with the ratio clamped into range.
    fb_w = np.minimum(w[:, 0], np.round(h[:, 0] * aug.ratio[1]))
    fb_h = np.minimum(h[:, 0], np.round(w[:, 0] / aug.ratio[0]))
    fit = ok.any(axis=1)
    ch, cw = np.where(fit, ch, fb_h), np.where(fit, cw, fb_w)
    top = np.where(fit, np.floor(u[:, 0] * (h[:, 0] - ch + 1)), (h[:, 0] - ch) // 2)
    left = np.where(fit, np.floor(u[:, 1] * (w[:, 0] - cw + 1)), (w[:, 0] - cw) // 2)
    return np.stack([top, left, ch, cw], axis=1)


def _factors(rng: np.random.Generator, strength: float, n: int) -> npt.NDArray[np.float32]:
    return rng.uniform(1 - strength, 1 + strength, size=n).astype(np.float32)


def draw_batch_params(aug: DaliAugment, hw: npt.NDArray[np.int64], *, seed: int, epoch: int,
                      rank: int, batch: int, offset: npt.NDArray[np.int64] | None = None
                      ) -> BatchParams:
    """Draw the augmentation parameters of one batch (a pure function of its arguments).

    Args:
        aug: The policy.
        hw: (n, 2) height and width of each input image (or of its valid region).
        seed: Loader seed.
        epoch: Epoch number.
        rank: Rank of this process.
        batch: Batch number within the epoch.
        offset: Optional (n, 2) top-left of the valid region inside each image.
    """
    hw = np.asarray(hw, dtype=np.int64).reshape(-1, 2)
    n = len(hw)
    rng = _rng(seed, epoch, rank, batch)
    box = _crop_boxes(rng, hw, aug)
    start = box[:, :2] + (0 if offset is None else np.asarray(offset).reshape(-1, 2))
    mirror = rng.random(size=n) < aug.flip
    return BatchParams(
        roi_start=start.astype(np.int32),
        roi_end=(start + box[:, 2:]).astype(np.int32),
        mirror=mirror.astype(np.int32),
        brightness=_factors(rng, aug.brightness, n),
        contrast=_factors(rng, aug.contrast, n),
        saturation=_factors(rng, aug.saturation, n),
    )
