"""Image classification (image + label): random resized crop, flip, normalise; class labels.

Every strategy serves ``image`` float32 ``[B, C, S, S]`` normalised by the ImageNet mean/std
(C the stored channels, :mod:`.pixels`) and ``label`` int64 ``[B]``. The raw-file pipelines:
DALI's ``JpegLoader`` (``gpu-decode``; three 8-bit channels only) and a ``tf.data`` pipeline
of ``tf.io.decode_image`` at the stored channels and depth (``tf-native``), both for class
folders and ``path,label`` manifests of local files.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from torch import nn

from benchmarks.errors import NotApplicable
from benchmarks.harness.workloads import Transform, register_workload
from benchmarks.harness.workloads.crops import crop_pixels, random_resized_crop_box
from benchmarks.harness.workloads.nets import ConvNet
from benchmarks.harness.workloads.pixels import ImageWorkload

__all__ = ["Classify", "local_files"]


def local_files(plan: Any, field: str) -> list[str]:
    """The local path of ``field``'s file of every item.

    Raises:
        NotApplicable: An item's file is not a local file (a URL, a Parquet cell, a tar member).
    """
    import os

    paths = [plan.source.locate(item.file(field)) for item in plan.source.items]
    bad = next((p for p in paths if not os.path.isfile(p)), None)
    if bad is not None:
        raise NotApplicable(
            f"it reads local files by path, and {bad!r} is not one (a URL, a Parquet cell or a "
            "tar member)"
        )
    return paths


@register_workload
class Classify(ImageWorkload):
    """Image classification."""

    name = "classification"
    kinds = ("image", "label")
    task = "image classification"
    engines = ("gpu-decode", "tf-native")
    classic_text = "decode (Pillow), random resized crop + flip + normalise per item"

    @property
    def store_text(self) -> str:
        """The store loaders' augmentation."""
        return f"TrainAugment({self.size} px: random resized crop + flip + normalise)"

    def classic(self, seed: int) -> Transform:
        """Decode, RRC, flip, normalise; the label as is."""
        image, label, size = self.input, self.target, self.hw

        def transform(values: Mapping[str, Any], rng: np.random.Generator) -> Any:
            pixels = values[image]
            box = random_resized_crop_box(rng, pixels.shape[1], pixels.shape[0])
            x = crop_pixels(pixels, box, size, bool(rng.random() < 0.5))
            return torch.from_numpy(x), torch.tensor(int(values[label]))

        return transform

    def store_augment(self, threads: int) -> Any:
        """``TrainAugment`` at the run's size."""
        from loaders.augment import TrainAugment

        return TrainAugment(size=self.hw, threads=threads)

    def store_mixup(self) -> dict[str, Any]:
        """``Mixup`` (blend only, no label smoothing), as every other strategy mixes."""
        from benchmarks.harness.sources import num_classes
        from loaders.augment import Mixup

        if not self.mixup:
            return {}
        classes = num_classes(self.plan)
        return {"mixup": Mixup(classes, mixup_alpha=self.mixup, cutmix_alpha=0.0,
                               label_smoothing=0.0)}  # fmt: skip

    @property
    def store_target(self) -> str:
        """``target`` with mixup (soft targets), else the label field."""
        return "target" if self.mixup else self.target

    def model(self) -> tuple[nn.Module, Callable[[torch.Tensor, torch.Tensor], Any]]:
        """A small strided CNN; cross-entropy."""
        from benchmarks.harness.sources import num_classes

        return ConvNet(self.channels, num_classes(self.plan)), nn.functional.cross_entropy

    def served(self) -> str:
        """What a batch holds."""
        return f"{self.image_text()}, {self.target} int64 [B]"

    def gpu_decode(self, cfg: Any) -> Any:
        """DALI's ``JpegLoader`` over the class folders or manifest."""
        from benchmarks.harness.strategies import MEAN, STD
        from benchmarks.harness.strategies.epochs import LoaderSource
        from loaders.dali import DaliAugment, JpegLoader

        self.pixels.refuse("JpegLoader")
        side = cfg.square("JpegLoader")
        if self.plan.spec.fields:  # a source of named fields: not class folders
            raise NotApplicable("JpegLoader reads class folders and path,label manifests")
        self.one_label("JpegLoader")
        local_files(self.plan, self.input)
        loader = JpegLoader(
            cfg.data,
            cfg.batch_size,
            side,
            augment=DaliAugment(size=side, mean=MEAN, std=STD),
            device=cfg.device,
            shuffle=True,
            seed=cfg.seed,
            drop_last=True,
            num_threads=cfg.threads,
        )
        return LoaderSource(loader, loader.num_samples)

    def tf_native(self, cfg: Any) -> Any:
        """``tf.io.read_file`` + ``tf.io.decode_image`` + crop/flip/normalise in ``tf.data``."""
        from benchmarks.harness.native.tf_images import image_source

        self.one_label("the tf.data pipeline")
        labels = [int(item.value(self.target)) for item in self.plan.source.items]
        return image_source(local_files(self.plan, self.input), labels, cfg, self.pixels)
