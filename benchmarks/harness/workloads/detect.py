"""Detection (image + boxes): one random resized crop and flip for the image and its boxes.

Every strategy serves the image float32 ``[B, C, S, S]`` normalised (C: its stored channels)
and the boxes float32 ``[B, N, 5]`` ``(x0, y0, x1, y1, class)`` in the output frame, the boxes
kept first and the other rows ``-1``: mapped exactly by the crop, clipped to it, and dropped
when a box keeps less than the field's ``min_visibility`` of its area. The model consumer
trains a centre heatmap per class at stride 4 (binary cross-entropy).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from benchmarks.errors import NotApplicable
from benchmarks.harness.workloads import Transform, register_workload
from benchmarks.harness.workloads.crops import crop_boxes, crop_pixels, random_resized_crop_box
from benchmarks.harness.workloads.nets import HeatmapNet
from benchmarks.harness.workloads.pixels import ImageWorkload

__all__ = ["Detect", "centre_heatmap"]

STRIDE = 4


def centre_heatmap(boxes: torch.Tensor, classes: int, side: int | tuple[int, int]) -> torch.Tensor:
    """``[B, classes, H, W]`` with 1 at each kept box's centre cell (stride 4), else 0.

    ``side``: the heatmap's side, or its ``(H, W)``.
    """
    h, w = (side, side) if isinstance(side, int) else side
    out = torch.zeros(boxes.shape[0], classes, h, w, device=boxes.device)
    b, n = torch.nonzero(boxes[..., 4] >= 0, as_tuple=True)
    rows = boxes[b, n]
    cx = ((rows[:, 0] + rows[:, 2]) / (2 * STRIDE)).long().clamp(0, w - 1)
    cy = ((rows[:, 1] + rows[:, 3]) / (2 * STRIDE)).long().clamp(0, h - 1)
    out[b, rows[:, 4].long().clamp(0, classes - 1), cy, cx] = 1.0
    return out


@register_workload
class Detect(ImageWorkload):
    """Object detection."""

    name = "detection"
    kinds = ("image", "boxes")
    task = "detection (image + boxes)"
    mixes = "boxes, not one class label per sample, to mix"
    classic_text = (
        "decode (Pillow), one random resized crop + flip for the image and its boxes (clipped, "
        "dropped under min_visibility), normalise per item"
    )

    @property
    def options(self) -> Mapping[str, Any]:
        """The boxes field's options (``classes``, ``max_boxes``, ``min_visibility``)."""
        return dict(self.plan.field_spec(self.target).options)

    @property
    def store_text(self) -> str:
        """The store loaders' augmentation."""
        return f"TrainAugment({self.size} px: one crop + flip for image and boxes, normalise)"

    def classic(self, seed: int) -> Transform:
        """Decode, crop and flip the image with its boxes, normalise."""
        image, boxes, size = self.input, self.target, self.hw
        keep, vis = int(self.options["max_boxes"]), float(self.options["min_visibility"])

        def transform(values: Mapping[str, Any], rng: np.random.Generator) -> Any:
            pixels = values[image]
            box = random_resized_crop_box(rng, pixels.shape[1], pixels.shape[0])
            flip = bool(rng.random() < 0.5)
            x = crop_pixels(pixels, box, size, flip)
            y = crop_boxes(np.asarray(values[boxes]), box, size, flip, vis, keep)
            return torch.from_numpy(x), torch.from_numpy(y)

        return transform

    def store_augment(self, threads: int) -> Any:
        """``TrainAugment`` at the run's size (the loader moves the boxes with the pixels)."""
        from loaders.augment import TrainAugment

        return TrainAugment(size=self.hw, threads=threads)

    def model(self) -> tuple[nn.Module, Callable[[torch.Tensor, torch.Tensor], Any]]:
        """A stride-4 centre heatmap net; binary cross-entropy against the box centres."""
        classes = int(self.options["classes"])

        def loss(out: torch.Tensor, boxes: torch.Tensor) -> torch.Tensor:
            target = centre_heatmap(boxes, classes, (out.shape[-2], out.shape[-1]))
            return nn.functional.binary_cross_entropy_with_logits(out, target)

        return HeatmapNet(self.channels, classes), loss

    def gpu_decode(self, cfg: Any) -> Any:
        """None: see the reason."""
        raise NotApplicable(
            "DALI's box ops crop by IoU constraints (fn.random_bbox_crop, SSD's crop), not by "
            "the random resized crop every other strategy draws: no like-for-like graph"
        )

    def tf_native(self, cfg: Any) -> Any:
        """None: see the reason."""
        raise NotApplicable(
            "tf.data has no op that moves, clips and drops boxes with a random resized crop; a "
            "tf.data user maps them in a tf.py_function (the workers' work on TensorFlow's "
            "threads); tf-store serves the boxes"
        )

    def served(self) -> str:
        """What a batch holds."""
        (h, w), o = self.hw, self.options
        return (
            f"{self.image_text()}, {self.target} float32 [B, {o['max_boxes']}, 5] (x0, x1 in "
            f"0..{w}, y0, y1 in 0..{h}, class 0..{o['classes'] - 1}; "
            "rows past the kept boxes -1)"
        )
