"""The on-line augmentation policy of the DALI loaders, and its per-batch random parameters.

DALI's own operator RNG cannot be saved and restored, so the loaders never use it: every random
number (crop window, flip, colour factors) is drawn here by the one crop sampler
(:mod:`precompute.cropsampler`) from the key :func:`loaders.batching.order.batch_seed`
``(seed, epoch, rank, batch)``, and fed to DALI as per-sample argument inputs. That makes the
augmentation a pure
function of the position in the stream, mid-epoch resume exact, and the crops, flips and
colour factors the same as ``StoreLoader`` with the same policy draws for the same batch
(its generator is seeded with that key). Defaults are the ``dali`` entry of
:data:`precompute.policy.POLICIES`, valid ranges its ``BOUNDS``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from loaders.augment.errors import AugmentError
from loaders.batching.order import batch_seed
from precompute import cropsampler
from precompute.policy import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    POLICIES,
    Policy,
    check_bounded,
    check_bounded_pair,
    check_rgb,
)

__all__ = ["DTYPES", "LAYOUTS", "BatchParams", "DaliAugment", "batch_params", "draw_batch_params"]

DTYPES = ("float32", "float16", "bfloat16", "uint8")
LAYOUTS = ("CHW", "HWC")
_DALI = POLICIES["dali"]


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
    scale: tuple[float, float] | None = _DALI.scale
    ratio: tuple[float, float] = _DALI.ratio
    attempts: int = _DALI.attempts
    center: float | None = None
    flip: float = _DALI.flip
    brightness: float = _DALI.jitter[0]
    contrast: float = _DALI.jitter[1]
    saturation: float = _DALI.jitter[2]
    mean: tuple[float, float, float] = IMAGENET_MEAN
    std: tuple[float, float, float] = IMAGENET_STD
    dtype: str = "float32"
    layout: str = "CHW"
    channels_last: bool = False

    def __post_init__(self) -> None:
        if self.size is not None and not (isinstance(self.size, int) and self.size >= 1):
            raise AugmentError(f"size must be a positive int or None, got {self.size!r}")
        self._check_crop()
        flip = 0.5 if self.flip is True else 0.0 if self.flip is False else self.flip
        object.__setattr__(self, "flip", float(_check(check_bounded, "flip", flip)))
        for name in ("brightness", "contrast", "saturation"):
            value = _check(check_bounded, name, getattr(self, name), "jitter")
            object.__setattr__(self, name, float(value))
        object.__setattr__(self, "mean", _check(check_rgb, "mean", self.mean))
        object.__setattr__(self, "std", _check(check_rgb, "std", self.std))
        if self.dtype not in DTYPES:
            raise AugmentError(f"dtype must be one of {DTYPES}, got {self.dtype!r}")
        if self.layout not in LAYOUTS:
            raise AugmentError(f"layout must be one of {LAYOUTS}, got {self.layout!r}")

    def _check_crop(self) -> None:
        """Check (and normalise) the random resized crop or the centre crop."""
        _check(check_bounded, "attempts", self.attempts)
        if not isinstance(self.attempts, int):
            raise AugmentError(f"attempts must be an integer, got {self.attempts!r}")
        if self.center is not None:
            _check(check_bounded, "center", self.center)
            if self.scale is not None:
                raise AugmentError(
                    "center needs scale=None (a centre crop replaces the random one), got "
                    f"center={self.center!r} scale={self.scale!r}"
                )
        if self.scale is not None:
            object.__setattr__(self, "scale", _check(check_bounded_pair, "scale", self.scale))
        object.__setattr__(self, "ratio", _check(check_bounded_pair, "ratio", self.ratio))

    @classmethod
    def identity(cls, size: int | None = None) -> DaliAugment:
        """Return the raw policy: uint8 NHWC, only resized (no crop, flip, colour, normalise).

        This is what a loader serves with ``augment=None``, as ``StoreLoader`` does.
        """
        return cls(
            size=size,
            scale=None,
            flip=False,
            mean=(0.0, 0.0, 0.0),
            std=(1.0, 1.0, 1.0),
            dtype="uint8",
            layout="HWC",
        )

    @cached_property
    def policy(self) -> Policy:
        """The crop, flip and jitter ranges, as the crop sampler takes them.

        Built on first use and kept (the spec is frozen), not once per batch.
        """
        return Policy(
            scale=self.scale or _DALI.scale,  # drawn but unused without a random crop
            ratio=self.ratio,
            attempts=self.attempts,
            flip=self.flip,
            jitter=(self.brightness, self.contrast, self.saturation),
        )

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


def _check(check: Any, name: str, value: Any, bound: str | None = None) -> Any:
    return check(name, value, bound or name, AugmentError)


def batch_params(
    aug: DaliAugment, hw: npt.ArrayLike, key: int, offset: npt.ArrayLike | None = None
) -> BatchParams:
    """Draw the augmentation parameters of one batch from the sampler key ``key``.

    Args:
        aug: The policy.
        hw: (n, 2) height and width of each input image (or of its valid region).
        key: Sampler key (:func:`draw_batch_params` uses :func:`loaders.batching.order.batch_seed`).
        offset: Optional (n, 2) top-left of the valid region inside each image.
    """
    extents = cropsampler.as_extents(hw, offset)
    d = cropsampler.draw(cropsampler.generator(key), len(extents), aug.policy)
    if aug.scale is not None:
        box = cropsampler.random_boxes(extents, d, aug.ratio)
    elif aug.center is not None:
        box = cropsampler.center_boxes(extents, (1, 1), aug.center)
    else:
        box = extents
    return BatchParams(
        roi_start=box[:, :2].astype(np.int32),
        roi_end=(box[:, :2] + box[:, 2:]).astype(np.int32),
        mirror=d.flip.astype(np.int32),
        brightness=d.factors[:, 0].copy(),
        contrast=d.factors[:, 1].copy(),
        saturation=d.factors[:, 2].copy(),
    )


def draw_batch_params(
    aug: DaliAugment,
    hw: npt.ArrayLike,
    *,
    seed: int,
    epoch: int,
    rank: int,
    batch: int,
    offset: npt.ArrayLike | None = None,
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
    return batch_params(aug, hw, batch_seed(seed, epoch, rank, batch), offset)
