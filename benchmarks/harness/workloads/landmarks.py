"""Landmarks (image + keypoints): one random resized crop for the image and its points.

Every strategy serves the image float32 ``[B, C, S, S]`` normalised and the points float32
``[B, P, 3]`` ``(x, y, visible)`` in the output frame, mapped exactly by the crop; a point the
crop leaves out gets visibility 0. A flip is drawn only when the keypoints field records
left/right pairs (``--flip-pairs``; they swap under a flip), as ``TrainAugment`` requires.
The model consumer regresses the points (mean squared error over the visible ones).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from benchmarks.errors import NotApplicable
from benchmarks.harness.workloads import Transform, register_workload
from benchmarks.harness.workloads.crops import crop_pixels, crop_points, random_resized_crop_box
from benchmarks.harness.workloads.nets import ConvNet
from benchmarks.harness.workloads.pixels import ImageWorkload

__all__ = ["Landmarks"]


@register_workload
class Landmarks(ImageWorkload):
    """Landmark regression."""

    name = "landmarks"
    kinds = ("image", "keypoints")
    task = "landmarks (image + keypoints)"
    mixes = "points, not one class label per sample, to mix"
    classic_text = (
        "decode (Pillow), one random resized crop (+ flip with the flip pairs) for the image "
        "and its points, normalise per item"
    )

    @property
    def pairs(self) -> tuple[tuple[int, int], ...]:
        """The keypoints' left/right pairs (empty: no flip)."""
        opts = self.plan.field_spec(self.target).options
        return tuple((int(a), int(b)) for a, b in opts.get("flip_pairs") or ())

    @property
    def store_text(self) -> str:
        """The store loaders' augmentation."""
        flip = "flip with the pairs" if self.pairs else "no flip (no flip pairs)"
        return f"TrainAugment({self.size} px: one crop for image and points, {flip}, normalise)"

    def classic(self, seed: int) -> Transform:
        """Decode, crop image and points together (flip only with pairs), normalise."""
        image, points, size, pairs = self.input, self.target, self.hw, self.pairs

        def transform(values: Mapping[str, Any], rng: np.random.Generator) -> Any:
            pixels = values[image]
            box = random_resized_crop_box(rng, pixels.shape[1], pixels.shape[0])
            flip = bool(pairs) and bool(rng.random() < 0.5)
            x = crop_pixels(pixels, box, size, flip)
            y = crop_points(np.asarray(values[points]), box, size, flip, pairs)
            return torch.from_numpy(x), torch.from_numpy(y)

        return transform

    def store_augment(self, threads: int) -> Any:
        """``TrainAugment`` at the run's size, flipping only with flip pairs."""
        from loaders.augment import TrainAugment

        extra: dict[str, Any] = {} if self.pairs else {"flip": None}
        return TrainAugment(size=self.hw, threads=threads, **extra)

    def model(self) -> tuple[nn.Module, Callable[[torch.Tensor, torch.Tensor], Any]]:
        """A strided CNN regressing ``2 P`` coordinates; MSE over the visible points."""
        count = int(self.plan.field_spec(self.target).options["points"])
        h, w = self.hw

        def loss(out: torch.Tensor, xyv: torch.Tensor) -> torch.Tensor:
            pred = out.view(-1, count, 2)
            seen, frame = xyv[..., 2:3], xyv.new_tensor([w, h])
            err = (pred - xyv[..., :2] / frame).square() * seen
            return err.sum() / seen.sum().clamp(min=1.0)

        return ConvNet(self.channels, 2 * count), loss

    def gpu_decode(self, cfg: Any) -> Any:
        """None: see the reason."""
        raise NotApplicable(
            "no DALI graph here moves keypoints with the crop: DALI's fn.coord_transform "
            "takes one matrix per sample, which the host would draw, and leaves the "
            "visibility of points the crop cuts to the caller"
        )

    def tf_native(self, cfg: Any) -> Any:
        """None: see the reason."""
        raise NotApplicable(
            "tf.data has no op that maps keypoints through a random resized crop and marks "
            "those it cuts; a tf.data user maps them in a tf.py_function (the workers' work "
            "on TensorFlow's threads); tf-store serves the points"
        )

    def served(self) -> str:
        """What a batch holds."""
        (h, w), count = self.hw, self.plan.field_spec(self.target).options["points"]
        return (
            f"{self.image_text()}, {self.target} float32 [B, {count}, 3] (x in 0..{w}, y in "
            f"0..{h} where visible, visible 0/1)"
        )
