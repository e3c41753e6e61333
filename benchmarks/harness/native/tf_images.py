"""``tf-native`` for images: the ``tf.data`` pipeline a Keras user writes for class folders.

``from_tensor_slices((paths, labels))``, ``shuffle`` over every file each epoch, then in
``map(num_parallel_calls=AUTOTUNE)``: ``tf.io.read_file``, ``tf.io.decode_image`` at the stored
channels and depth (``uint16`` at ``--bit-depth 16``: a 16-bit PNG keeps its values, an 8-bit
file is widened by TensorFlow), a random resized crop drawn by
``tf.image.stateless_sample_distorted_bounding_box`` with the ranges of the ``online`` policy
(as ``TrainAugment``'s and the ``workers``'), the crop resized bilinear to the output size, a
random flip, the ImageNet normalisation (16-bit pixels scaled by 255/65535 first, one channel
with the first mean and std, as the store loaders), CHW; ``batch(drop_remainder=True)`` and
``prefetch(AUTOTUNE)``. Each epoch is a new iterator of the same dataset, as Keras ``fit``
iterates it. Files ``tf.io.decode_image`` cannot read (TIFF, ...) are left out and named in the
report.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from benchmarks.errors import one_line
from benchmarks.harness.native.files import first_failing, image_format, split_files
from precompute.policy import ATTEMPTS, IMAGENET_MEAN, IMAGENET_STD, POLICIES, RATIO

__all__ = ["TF_IMAGE_FORMATS", "image_source"]

TF_IMAGE_FORMATS = ("JPEG", "PNG", "GIF", "BMP", "WEBP")


def _refuse(path: str) -> str | None:
    fmt = image_format(path)
    return None if fmt in TF_IMAGE_FORMATS else fmt


def _decode(tf: Any, data: Any, pixels: Any) -> Any:
    """``tf.io.decode_image`` of ``data`` at ``pixels``' channels and depth (HWC)."""
    dtype = tf.uint16 if pixels.bits == 16 else tf.uint8
    return tf.io.decode_image(data, channels=pixels.channels, dtype=dtype, expand_animations=False)


def _decode_error(tf: Any, pixels: Any) -> Any:
    """``probe(path)``: why ``tf.io.decode_image`` cannot decode ``path``, or None."""

    def probe(path: str) -> str | None:
        try:
            _decode(tf, tf.io.read_file(path), pixels)
        except tf.errors.OpError as exc:
            return one_line(exc)
        return None

    return probe


def crop_resize(tf: Any, img: Any, seed: Any, size: tuple[int, int]) -> tuple[Any, Any, Any]:
    """A random resized crop of ``img`` (HWC) to ``size`` ``(height, width)``.

    Returns:
        ``(pixels float32, begin, extent)``.
    """
    begin, extent, _ = tf.image.stateless_sample_distorted_bounding_box(
        tf.shape(img),
        bounding_boxes=tf.zeros([1, 0, 4]),
        seed=seed,
        area_range=POLICIES["online"].scale,
        aspect_ratio_range=RATIO,
        max_attempts=ATTEMPTS,
        use_image_if_no_bounding_boxes=True,
    )
    crop = tf.slice(img, begin, extent)
    return tf.image.resize(crop, list(size), method="bilinear"), begin, extent


def _load(tf: Any, size: tuple[int, int], pixels: Any) -> Any:
    c = pixels.channels
    mean = tf.constant(np.asarray(IMAGENET_MEAN, np.float32)[:c] * 255)
    std = tf.constant(np.asarray(IMAGENET_STD, np.float32)[:c] * 255)
    scale = 255.0 / 65535.0 if pixels.bits == 16 else 1.0

    def load(path: Any, label: Any, seed: Any) -> tuple[Any, Any]:
        img = _decode(tf, tf.io.read_file(path), pixels)
        out, _, _ = crop_resize(tf, img, seed, size)
        out = out * scale if scale != 1.0 else out
        out = tf.image.stateless_random_flip_left_right(out, seed=seed + 1)
        return tf.transpose((out - mean) / std, [2, 0, 1]), label

    return load


def image_source(paths: Sequence[str], labels: Sequence[int], cfg: Any, pixels: Any = None) -> Any:
    """The ``tf-native`` epoch source of ``paths`` (local image files) and their labels.

    ``pixels``: the stored form (:class:`~benchmarks.harness.workloads.pixels.PixelForm`;
    None: three 8-bit channels).

    Raises:
        NotApplicable: ``tf.io.decode_image`` reads none of the files.
    """
    import tensorflow as tf

    from benchmarks.harness.strategies.epochs import TfSource
    from benchmarks.harness.workloads.pixels import PixelForm

    pixels = pixels or PixelForm()

    split = split_files(paths, _refuse, "tf.io.decode_image")
    kept = list(split.kept)
    files = tf.constant([paths[i] for i in kept])
    labs = tf.constant([labels[i] for i in kept], tf.int64)
    seeds = tf.data.Dataset.random(seed=cfg.seed, rerandomize_each_iteration=True).batch(2)
    ds = tf.data.Dataset.zip((tf.data.Dataset.from_tensor_slices((files, labs)), seeds))
    ds = ds.shuffle(len(kept), seed=cfg.seed, reshuffle_each_iteration=True)
    ds = ds.map(
        lambda pl, s: _load(tf, cfg.hw, pixels)(*pl, s), num_parallel_calls=tf.data.AUTOTUNE
    )
    ds = ds.batch(cfg.batch_size, drop_remainder=True).prefetch(tf.data.AUTOTUNE)

    def make(epoch: int) -> Iterator[Any]:
        return iter(ds)

    import torch

    served = [paths[i] for i in kept]

    def culprit() -> str | None:
        return first_failing(served, _decode_error(tf, pixels))

    note = split.note()
    return TfSource(make, len(kept), torch.device(cfg.device), note, loader=ds, culprit=culprit)
