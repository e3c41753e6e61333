"""``doctor``'s codec advice: is a raw store I/O-bound on this storage, and which codec to use.

The storage's read speed is the doctor's own measurement (the data folder read whole, its page
cache dropped where possible). A few of the user's images, centre-cropped to the stored size,
are encoded with the ``jpeg:90`` and ``zstd:3`` chunk codecs (:mod:`precompute.format.codecs`):
their bytes per sample are measured, not assumed. A raw store is I/O-bound when the storage
delivers fewer raw samples per second than the loader can serve; a coded one then reads
``raw / coded`` times more samples per second, up to what its decode costs (on a GPU the device
decodes; on the CPU, the cores measured by the doctor's decode figure).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["codec_advice"]


def _sample_bytes(paths: list[Path], size: int, codec: str) -> float:
    """Mean stored bytes per sample of ``codec`` over (up to 8 of) ``paths`` at ``size``."""
    from benchmarks.common import center_crop
    from precompute.format.codecs import CodecSpec

    spec = CodecSpec.from_dict(codec)
    sizes = [len(spec.codec.encode(center_crop(p, size)[None], spec.options, 0)) for p in paths[:8]]
    return float(np.mean(sizes)) if sizes else float(size * size * 3)


def codec_advice(
    paths: list[Path], size: int, read_mb_s: float, serve_per_s: float, gpu: bool
) -> list[str]:
    """Lines saying whether a raw store of ``size`` px is I/O-bound here, and what to do.

    Args:
        paths: Image files of the user's data (a few are encoded).
        size: The stored side length.
        read_mb_s: The storage's measured read speed.
        serve_per_s: Samples/s the loader can serve when bytes are free (its measured rate, or
            the CPU decode-and-augment rate times the cores).
        gpu: A CUDA device decodes JPEG fields (else the reader threads do, on the CPU).
    """
    raw = float(size * size * 3)
    jpeg = _sample_bytes(paths, size, "jpeg:90")
    zstd = _sample_bytes(paths, size, "zstd:3")
    raw_rate, jpeg_rate = read_mb_s * 1e6 / raw, read_mb_s * 1e6 / jpeg
    lines = [
        f"storage: {read_mb_s:.0f} MB/s: a raw store at {size} px ({raw / 1024:.0f} KiB/sample) "
        f"reads at most {raw_rate:.0f} samples/s from it; the loader serves {serve_per_s:.0f}/s"
    ]
    if raw_rate >= serve_per_s:
        lines.append("  raw is not I/O-bound here: keep the store raw (no decode on the way)")
        return lines
    where = "on the GPU" if gpu else "on the CPU (reader threads)"
    lines += [
        f"  raw is I/O-bound here ({serve_per_s / raw_rate:.1f}x short): build with "
        f"--codec image=jpeg:90 ({jpeg / 1024:.1f} KiB/sample on your images, "
        f"{raw / jpeg:.1f}x smaller: up to {jpeg_rate:.0f} samples/s from this storage, decoded "
        f"{where})",
        f"  lossless instead: --codec image=zstd:3 ({raw / zstd:.1f}x smaller on your images); "
        "masks: mask=zstd:3",
    ]
    return lines


def advice_for(res: dict[str, Any], paths: list[Path]) -> list[str]:
    """:func:`codec_advice` from the doctor's figures (its store's loader rate if measured)."""
    loader = res.get("store_loader") or {}
    serve = loader.get("samples_per_s") or res["decode"]["pipeline_per_s"] * res["workers"]
    size = loader.get("size") or res["size"]
    gpu = bool(res["environment"]["gpu"].get("name"))
    return codec_advice(paths, size, res["read"]["mb_per_s"], serve, gpu)
