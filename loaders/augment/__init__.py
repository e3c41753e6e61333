"""On-device augmentation for :mod:`loaders`: crop+flip+resize, jitter, normalise, mixup.

The loader calls a policy as ``augment(images, extents, generator)`` and, optionally,
``mixup(images, labels, generator)``; all randomness comes from the generator it passes, so a
resumed run reproduces every batch. Policies are frozen dataclasses that round-trip through
``to_dict`` / :func:`augment_from_dict` (see ``docs/augment.md``).
"""

from loaders.augment.arrays.policy import BandNormalize
from loaders.augment.audio.policy import AudioAugment
from loaders.augment.crop import CropParams, center_crops, random_crops
from loaders.augment.errors import AugmentError
from loaders.augment.image.ops import (
    OPS,
    CenterCrop,
    ColorJitter,
    HorizontalFlip,
    Normalize,
    Op,
    RandomResizedCrop,
    op_from_dict,
    register_op,
)
from loaders.augment.image.pipeline import AUGMENTS, EvalAugment, TrainAugment, augment_from_dict
from loaders.augment.image.resample import crop_resample, grid_resample
from loaders.augment.mix import MixParams, Mixup, smooth_targets

__all__ = [
    "AUGMENTS",
    "OPS",
    "AudioAugment",
    "AugmentError",
    "BandNormalize",
    "CenterCrop",
    "ColorJitter",
    "CropParams",
    "EvalAugment",
    "HorizontalFlip",
    "MixParams",
    "Mixup",
    "Normalize",
    "Op",
    "RandomResizedCrop",
    "TrainAugment",
    "augment_from_dict",
    "center_crops",
    "crop_resample",
    "grid_resample",
    "op_from_dict",
    "random_crops",
    "register_op",
    "smooth_targets",
]
