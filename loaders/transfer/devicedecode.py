"""JPEG fields decoded on the CUDA device, batched, by nvImageCodec.

With a CUDA device, a streamed array stored with the ``jpeg`` codec is not decoded by the
reader threads: each row of its host batch buffer holds the sample's JPEG stream
(:func:`loaders.store.coded.pack_runs`: u32 length, then the stream), and :class:`NvJpeg`
decodes the whole batch on the device in one call, where the host batch would have been
copied (:class:`~loaders.transfer.device.ToDevice`'s ``decoders``), on its side stream.

Why nvImageCodec: NVIDIA's maintained decoding library (DALI 2's decoders are built on it, and
``nostall[dali]`` installs it), batched, using the GPU's hardware JPEG engine where one exists
(A100, H100, H200: baseline streams with restart markers, as the ``jpeg`` codec writes) and its
CUDA decoder elsewhere, with output on the device that torch takes without a copy; it serves
any framework (the decoded batch is a torch tensor the JAX and TF bridges hand over as today).
Without CUDA or nvImageCodec the reader threads decode on the CPU (libjpeg-turbo), the same
pixels up to the IDCT's rounding (a GPU decoder may differ by a level or two); so does
``StoreLoader(jpeg_decoder="reader")`` on a GPU, and ``jpeg_decoder="device"`` refuses to open
where the device cannot decode instead of falling back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from loaders.store.coded import STREAM_HEAD

__all__ = ["JPEG_DECODERS", "NvJpeg", "device_decoders", "jpeg_route", "unpack"]

JPEG_DECODERS = ("auto", "device", "reader")  # StoreLoader's jpeg_decoder
INSTALL = "pip install nvidia-nvimgcodec-cu12, or -cu13: the CUDA of your torch"
NVJPEG = "pip install nvidia-nvjpeg-cu12, or nvidia-nvjpeg for CUDA 13"


def unpack(rows: np.ndarray) -> list[memoryview]:
    """The streams of packed rows (``(B, row bytes)`` uint8); empty for fill images.

    Raises:
        ValueError: A row's length does not fit in it (not a packed row).
    """
    out = []
    for row in rows:
        n = int.from_bytes(row[:STREAM_HEAD].tobytes(), "little")
        if STREAM_HEAD + n > len(row):
            raise ValueError(f"packed row claims a {n}-byte stream, it holds {len(row)} bytes")
        out.append(memoryview(row[STREAM_HEAD : STREAM_HEAD + n]))
    return out


class NvJpeg:  # CUDA only: constructed by device_decoders on a CUDA device
    """Decode packed JPEG rows into a ``(B, *shape)`` uint8 tensor on ``device``."""

    def __init__(self, device: torch.device, shape: tuple[int, ...], fill: int) -> None:
        from nvidia import nvimgcodec

        self._nv, self.device, self.shape, self.fill = nvimgcodec, device, shape, fill
        # the device's decoders only: without nvJPEG, nvImageCodec would decode on the CPU
        # (libjpeg-turbo) and copy, unseen; then decoding fails and says so instead
        gpu = (nvimgcodec.HW_GPU_ONLY, nvimgcodec.GPU_ONLY, nvimgcodec.HYBRID_CPU_GPU)
        backends = [nvimgcodec.Backend(kind) for kind in gpu]
        self._decoder = nvimgcodec.Decoder(device_id=device.index or 0, backends=backends)
        spec = nvimgcodec.ColorSpec.SRGB if shape[-1] == 3 else nvimgcodec.ColorSpec.GRAY
        self._params = nvimgcodec.DecodeParams(apply_exif_orientation=False, color_spec=spec)

    def __call__(self, host: np.ndarray, stream: Any) -> torch.Tensor:
        """Decode the batch ``host`` (packed rows) on ``stream``; fill images stay ``fill``."""
        streams = unpack(host.reshape(len(host), -1).view(np.uint8))
        out = torch.full((len(host), *self.shape), self.fill, dtype=torch.uint8, device=self.device)
        coded = [i for i, s in enumerate(streams) if len(s)]
        images = self._decoder.decode(
            [self._nv.CodeStream(bytes(streams[i])) for i in coded],
            params=self._params,
            cuda_stream=stream.cuda_stream,
        )
        for i, image in zip(coded, images, strict=True):
            if image is None:
                raise ValueError(
                    f"sample {i} of the batch: nvImageCodec's device decoders could not decode "
                    f"it (is nvJPEG installed? {NVJPEG}; or jpeg_decoder='reader')"
                )
            out[i] = torch.as_tensor(image, device=self.device).reshape(self.shape)
        return out


def _device_route(device: torch.device) -> str | None:
    """Why JPEG fields cannot be decoded on ``device`` (None: they can)."""
    if device.type != "cuda":
        return f"the loader's device is {device}, not a CUDA device"
    if not torch.cuda.is_available():
        return "torch.cuda.is_available() is False"
    try:
        import nvidia.nvimgcodec  # noqa: F401
    except ImportError:
        return f"nvImageCodec is not installed ({INSTALL})"
    return None


def jpeg_route(mode: str, device: torch.device, *, ram: bool = False) -> bool:
    """Whether a loader with ``jpeg_decoder=mode`` decodes its JPEG fields on ``device``.

    ``auto``: where ``device`` is CUDA and nvImageCodec is installed, else on the reader
    threads; ``device``: on the device, or refused; ``reader``: on the reader threads
    (libjpeg-turbo) always. With ``ram`` (rows read and decoded once, at open) never.

    Raises:
        ValueError: An unknown ``mode``, or ``device`` where the device cannot decode (no CUDA,
            no nvImageCodec, ``io="ram"``), naming why.
    """
    if mode not in JPEG_DECODERS:
        raise ValueError(f"jpeg_decoder must be one of {JPEG_DECODERS}, got {mode!r}")
    if mode == "reader":
        return False
    why = "io='ram' reads and decodes every chunk once, at open" if ram else None
    why = why or _device_route(device)
    if mode == "device" and why:
        raise ValueError(f"jpeg_decoder='device': {why}; 'auto' or 'reader' decode on the CPU")
    return why is None


def device_decoders(source: Any, device: torch.device) -> Mapping[str, NvJpeg]:
    """A device decoder per streamed ``jpeg`` array of ``source`` (CUDA, nvImageCodec).

    Each such array's reader is switched to packing streams (``reader.pack``); an array with
    a variant axis is decoded by the reader threads.
    """
    out = {}
    for name, reader in source.streams.items():
        codec = reader.meta.codec
        if codec is not None and codec.name == "jpeg" and source.variant_axis.isdisjoint({name}):
            reader.pack = True
            out[name] = NvJpeg(device, source.row_shape(name), int(reader.meta.fill_value))
    return out
