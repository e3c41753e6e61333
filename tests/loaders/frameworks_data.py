"""Small real stores the framework tests train on, built without Ray (``runner="sequential"``).

The image store is a class-folder JPEG/PNG dataset of ``precompute.sample`` (every class its own
colour gradient and shape, so a tiny model learns it in a few epochs); the audio store is log-mel
spectrograms of ``benchmarks.audio_data`` clips (each class its own sound).
"""

from __future__ import annotations

from pathlib import Path

from benchmarks.audio_data import make_audio_dataset
from precompute.fields import FieldSpec
from precompute.job import build
from precompute.sample import make_sample_dataset
from precompute.spec import BuildSpec

__all__ = ["AUDIO_CLIPS", "CLASSES", "IMAGES", "audio_store", "image_store"]

IMAGES = 96
AUDIO_CLIPS = 48
CLASSES = 4


def image_store(root: Path) -> Path:
    """A v1 store of ``IMAGES`` 16 px images in ``CLASSES`` classes (``image``, ``label``)."""
    make_sample_dataset(root / "images", IMAGES, num_classes=CLASSES, size_range=(24, 40))
    spec = BuildSpec(size=16, shard_samples=32, chunk_samples=8, seed=0)
    build(
        str(root / "images"), str(root / "image_store"), spec, progress=False, runner="sequential"
    )
    return root / "image_store"


def audio_store(root: Path) -> Path:
    """A v2 store of ``AUDIO_CLIPS`` log-mel clips (``audio`` float16 ``[32, 51]``, ``label``)."""
    make_audio_dataset(root / "clips", AUDIO_CLIPS, CLASSES, 0, (0.3, 0.8))
    opts = {"clip_seconds": 0.5, "representation": "logmel", "n_mels": 32}
    fields = (FieldSpec("audio", "audio", opts), FieldSpec("label", "label"))
    spec = BuildSpec(size=8, shard_samples=16, chunk_samples=4, seed=1, fields=fields)
    build(str(root / "clips"), str(root / "audio_store"), spec, progress=False, runner="sequential")
    return root / "audio_store"
