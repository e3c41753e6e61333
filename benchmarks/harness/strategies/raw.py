"""The strategies that read the raw files with another engine: DALI, ``tf.data``, numpy memmap.

What each runs is the workload's own (:mod:`benchmarks.harness.workloads`): the decoders and
the graph differ per kind of data, and a workload without one raises
:class:`~benchmarks.errors.NotApplicable` with its reason, which the report shows.

* ``gpu-decode``: DALI decodes the raw files (images: ``loaders.dali.JpegLoader``; masks and
  audio: the workload's DALI graph). With CUDA, images decode on the ``mixed`` (nvJPEG)
  device; without one DALI decodes on its CPU threads (``device_id=None``).
* ``tf-native``: the ``tf.data`` pipeline a TensorFlow user runs today: ``tf.io.read_file``,
  TensorFlow's own decoders and ops in ``map(num_parallel_calls=AUTOTUNE)``, ``batch``,
  ``prefetch(AUTOTUNE)``; files its decoders cannot read are counted and named.
* ``memmap``: array samples read batch by batch from a numpy memmap of the source, with the
  same augmentation in numpy (the reference read of spectral cubes).
"""

from __future__ import annotations

from typing import Any

from benchmarks.harness.strategies import RunConfig, Strategy, register

__all__ = ["GpuDecodeStrategy", "MemmapStrategy", "TfNativeStrategy"]


@register
class GpuDecodeStrategy(Strategy):
    """DALI decodes the raw files (nvJPEG and GPU ops with CUDA, its CPU decoders without)."""

    name = "gpu-decode"
    description = "DALI decodes the raw files (mixed/GPU with CUDA, its CPU decoders here)"
    requires = ("nvidia.dali",)

    def open(self, cfg: RunConfig) -> Any:
        """Return the workload's DALI epoch source (NotApplicable: it has none)."""
        return cfg.workload.gpu_decode(cfg)


@register
class TfNativeStrategy(Strategy):
    """The ``tf.data`` pipeline of TensorFlow's own file reads, decoders and ops."""

    name = "tf-native"
    description = "tf.data: tf.io.read_file + TensorFlow decoders/ops, map AUTOTUNE, prefetch"
    requires = ("tensorflow",)

    def open(self, cfg: RunConfig) -> Any:
        """Return the workload's ``tf.data`` epoch source (NotApplicable: it has none)."""
        return cfg.workload.tf_native(cfg)


@register
class MemmapStrategy(Strategy):
    """Array samples read from a numpy memmap of the source on the training thread."""

    name = "memmap"
    description = "numpy memmap of the source, batches gathered and augmented in numpy"

    def open(self, cfg: RunConfig) -> Any:
        """Return the workload's memmap epoch source (NotApplicable: encoded files)."""
        return cfg.workload.memmap(cfg)
