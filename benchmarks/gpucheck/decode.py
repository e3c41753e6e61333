"""The decode row: a JPEG store decoded on the device, on the CPU reader threads, and raw.

The check builds a second store of the same raw data with ``--codec image=jpeg:90``
(:func:`jpeg_build`) and measures three feeds alone, each the ``store-bf16`` feed's
``StoreLoader`` + ``TrainAugment`` + ``Mixup`` (float32 on the CPU) with the same threads:

* ``decode-raw``: the raw store (nothing to decode: the copy to the device only);
* ``decode-device``: the JPEG store, ``jpeg_decoder="device"``: each batch's streams packed
  by the reader threads and decoded on the device by nvImageCodec, batched;
* ``decode-cpu``: the JPEG store, ``jpeg_decoder="reader"``: libjpeg-turbo on the reader
  threads, the pixels copied to the device.

Where the device cannot decode (no CUDA, ``--cpu``, no nvImageCodec), ``decode-device`` is
``unavailable`` with the reason (:func:`loaders.transfer.devicedecode.jpeg_route`'s).
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar

import torch

from benchmarks.gpucheck.feeds import train_augment
from benchmarks.harness.sources import num_classes
from benchmarks.harness.strategies import RunConfig, Strategy, register
from benchmarks.harness.strategies.epochs import LoaderSource
from loaders.augment import Mixup

__all__ = ["CODEC", "DECODE_FEEDS", "DecodeFeed", "decode_configs", "jpeg_build"]

CODEC = "jpeg:90"
DECODE_FEEDS = ("decode-raw", "decode-device", "decode-cpu")


class DecodeFeed(Strategy):
    """StoreLoader + TrainAugment + Mixup over the raw store (``decoder`` None) or a JPEG one."""

    name = "decode-raw"
    needs_store = True
    description = "StoreLoader of the raw store + TrainAugment + Mixup (nothing to decode)"
    decoder: ClassVar[str | None] = None  # StoreLoader's jpeg_decoder (None: a raw store)

    def unavailable(self, cfg: RunConfig) -> str | None:
        """Why this feed cannot run here (the device route's reason, a missing decoder)."""
        from loaders.transfer.devicedecode import jpeg_route

        if self.decoder is not None:
            try:
                jpeg_route(self.decoder, torch.device(cfg.device))
            except ValueError as exc:
                return str(exc)
        return super().unavailable(cfg)

    def open(self, cfg: RunConfig) -> LoaderSource:
        """The StoreLoader over ``cfg.store``, decoding as :attr:`decoder` says."""
        from loaders.torch_loader import StoreLoader

        loader = StoreLoader(
            str(cfg.store),
            cfg.batch_size,
            device=cfg.device,
            seed=cfg.seed,
            augment=train_augment(cfg, bf16=torch.device(cfg.device).type == "cuda"),
            mixup=Mixup(num_classes=num_classes(cfg.data)),
            num_threads=cfg.threads,
            jpeg_decoder=self.decoder or "auto",  # a raw store has nothing to decode
        )
        return LoaderSource(
            loader, loader.source.info.num_valid, lambda b: (b["image"], b["target"])
        )


class DecodeDeviceFeed(DecodeFeed):
    """The JPEG store decoded on the device (nvImageCodec), batched."""

    name = "decode-device"
    description = "StoreLoader of the jpeg:90 store, decoded on the device by nvImageCodec"
    decoder = "device"


class DecodeCpuFeed(DecodeFeed):
    """The JPEG store decoded by libjpeg-turbo on the reader threads."""

    name = "decode-cpu"
    description = "StoreLoader of the jpeg:90 store, decoded on the CPU reader threads"
    decoder = "reader"
    requires = ("simplejpeg",)


for _feed in (DecodeFeed, DecodeDeviceFeed, DecodeCpuFeed):
    register(_feed)


def jpeg_build(data: str, work: Path, stored: int, seed: int) -> dict[str, Any]:
    """Build the JPEG store of ``data`` with the in-process runner; where, how long, its bytes."""
    from precompute.format.layout import open_store_info
    from precompute.format.storecheck import array_bytes
    from precompute.job import build
    from precompute.spec import BuildSpec

    given = {"size": stored, "mode": "center-crop", "seed": seed, "codecs": {"image": CODEC}}
    spec = BuildSpec.from_dict(given)
    out = work / "store-jpeg.zarr"
    t0 = time.perf_counter()
    build(data, str(out), spec, progress=False, runner="sequential")
    seconds = time.perf_counter() - t0
    info = open_store_info(out)  # the image's bytes per sample as precompute inspect says
    image = array_bytes(info.path, info.layout, ["image"])[0]
    return {
        "store": str(out),
        "codec": CODEC,
        "build_s": seconds,
        "image_bytes_per_sample": image.stored,
        "raw_bytes_per_sample": image.raw,  # one image decoded, every channel it has
    }


def decode_configs(run_cfg: RunConfig, jpeg_store: str) -> list[tuple[str, RunConfig]]:
    """Each decode feed with the store it reads: the raw one, or the JPEG one."""
    jpeg = replace(run_cfg, store=jpeg_store)
    return [("decode-raw", run_cfg), ("decode-device", jpeg), ("decode-cpu", jpeg)]
