"""Segmentation (image + mask): one random resized crop and flip for the image and its mask.

Every strategy serves the image float32 ``[B, C, S, S]`` normalised (bilinear; C: its stored
channels) and the mask ``[B, S, S]`` of class ids (nearest-neighbour, never blended; the ignore
index where padding shows). The model consumer trains a small U-Net with cross-entropy that
skips the ignore index. ``gpu-decode`` decodes both files with DALI
(:mod:`benchmarks.harness.native.dali_masks`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from benchmarks.errors import NotApplicable
from benchmarks.harness.workloads import Transform, register_workload
from benchmarks.harness.workloads.classify import local_files
from benchmarks.harness.workloads.crops import crop_mask, crop_pixels, random_resized_crop_box
from benchmarks.harness.workloads.nets import UNet
from benchmarks.harness.workloads.pixels import ImageWorkload

__all__ = ["Segment"]


@register_workload
class Segment(ImageWorkload):
    """Semantic segmentation."""

    name = "segmentation"
    kinds = ("image", "mask")
    task = "segmentation (image + mask)"
    engines = ("gpu-decode",)
    mixes = "a mask per pixel, not one class label per sample, to mix"
    classic_text = (
        "decode image and mask (Pillow), one random resized crop + flip for both (bilinear / "
        "nearest), normalise per item"
    )

    @property
    def store_text(self) -> str:
        """The store loaders' augmentation."""
        return f"TrainAugment({self.size} px: one crop + flip for image and mask, normalise)"

    @property
    def mask_options(self) -> Mapping[str, Any]:
        """The mask field's options (``classes``, ``ignore_index``, ``colormap``)."""
        return dict(self.plan.field_spec(self.target).options)

    def classic(self, seed: int) -> Transform:
        """Decode both, crop and flip them together, normalise the image."""
        image, mask, size = self.input, self.target, self.hw

        def transform(values: Mapping[str, Any], rng: np.random.Generator) -> Any:
            pixels, ids = values[image], values[mask]
            box = random_resized_crop_box(rng, pixels.shape[1], pixels.shape[0])
            flip = bool(rng.random() < 0.5)
            x = crop_pixels(pixels, box, size, flip)
            return torch.from_numpy(x), torch.from_numpy(crop_mask(ids, box, size, flip))

        return transform

    def store_augment(self, threads: int) -> Any:
        """``TrainAugment`` at the run's size (the loader moves the mask with the image)."""
        from loaders.augment import TrainAugment

        return TrainAugment(size=self.hw, threads=threads)

    def model(self) -> tuple[nn.Module, Callable[[torch.Tensor, torch.Tensor], Any]]:
        """A two-level U-Net; cross-entropy without the ignore index."""
        opts = self.mask_options
        ignore = int(opts.get("ignore_index", 255))

        def loss(out: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return nn.functional.cross_entropy(out, mask.long(), ignore_index=ignore)

        return UNet(self.channels, int(opts["classes"])), loss

    def served(self) -> str:
        """What a batch holds."""
        (h, w), opts = self.hw, self.mask_options
        return (
            f"{self.image_text()}, {self.target} [B, {h}, {w}] "
            f"class ids 0..{int(opts['classes']) - 1} (ignore {opts.get('ignore_index', 255)})"
        )

    def gpu_decode(self, cfg: Any) -> Any:
        """DALI decodes image and mask; one crop and flip for both (3 channels, 8 bits)."""
        from benchmarks.harness.native.dali_masks import mask_source

        self.pixels.refuse("the DALI image + mask graph")
        cfg.square("the DALI image + mask graph")
        files = (local_files(self.plan, self.input), local_files(self.plan, self.target))
        items = self.plan.source.items
        labels = [[int(item.value(name)) for item in items] for name in self.carried]
        return mask_source(*files, self.mask_options, cfg, labels)

    def tf_native(self, cfg: Any) -> Any:
        """None: see the reason."""
        raise NotApplicable(
            "tf.data has no mask decoding: tf.io.decode_png expands a palette mask into its "
            "colours and knows no colour map, so class ids need the build's mask decoder "
            "(a tf.py_function: the workers' work on TensorFlow's threads); tf-store serves "
            "the masks"
        )
