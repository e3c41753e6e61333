"""The doctor's arithmetic: the feed rate each strategy could reach, from measured rates.

Pure functions of the doctor's measurements (:mod:`benchmarks.harness.doctor`): per-core
rates times the cores the workers would get, a read speed over the stored bytes of a sample,
the measured StoreLoader; each estimate names what it leaves out.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LEFT_OUT", "feed_rates"]

LEFT_OUT = "left out: collation, the host-to-device copy and the training step"


def feed_rates(
    dec: dict[str, Any],
    read: dict[str, Any],
    cores: int,
    size: int | None = None,
    has_gpu: bool = False,
    store_read: dict[str, Any] | None = None,
    store_loader: dict[str, Any] | None = None,
    workers: int | None = None,
    *,
    bytes_per_sample: int | None = None,
    gpu_decode: bool = True,
) -> dict[str, dict[str, Any]]:
    """Estimate samples/s each strategy could reach, with the arithmetic as text.

    Args:
        dec: :func:`decode_rate` figures.
        read: :func:`read_rate` of the source's files.
        cores: Usable cores.
        size: Stored side of an RGB image store (``size * size * 3`` bytes per sample) when
            ``bytes_per_sample`` is not given.
        has_gpu: Whether a GPU is present.
        store_read: :func:`read_rate` of the store's shard files, if a store was given.
        store_loader: :func:`loader_rate` of the store, if a store was given.
        workers: Workers/threads the strategies get (``run --workers``; default ``cores``).
        bytes_per_sample: Stored bytes of one sample (:func:`sample_bytes`).
        gpu_decode: Whether the workload has a DALI decoding graph (else no estimate).
    """
    workers = cores if workers is None else workers
    busy = max(1, min(workers, cores))  # workers beyond the cores add no decode throughput
    per = dec["pipeline_per_s"]
    nbytes = bytes_per_sample or (size or 64) ** 2 * 3
    src = store_read or read
    what = "store" if store_read else "source-file (a lower bound for a store)"
    out = {
        "workers": {
            "samples_per_s": per * busy,
            "arithmetic": f"{per:.0f} samples/s/core ({dec.get('pipeline', 'decode + augment')})"
            f" x {busy} cores ({workers} workers on {cores} cores); {LEFT_OUT}",
        },
        "precompute": {
            "samples_per_s": src["mb_per_s"] * 1e6 / nbytes,
            "arithmetic": f"{src['mb_per_s']:.0f} MB/s {what} read / {nbytes} B stored per "
            "sample; no decode",
        },
    }
    if store_loader:
        bound = out["precompute"]["samples_per_s"]
        out["precompute"] = {
            "samples_per_s": min(bound, store_loader["samples_per_s"]),
            "arithmetic": f"min({bound:.0f} read bound, {store_loader['samples_per_s']:.0f} "
            f"measured StoreLoader samples/s with {store_loader['augment']}, "
            f"{store_loader['threads']} threads, on the CPU); left out: the host-to-device "
            "copy and the training step",
        }
    else:
        out["precompute"]["arithmetic"] += (
            "; left out: augmentation (give --store to measure it) and the training step"
        )
    if not gpu_decode:
        return out
    if has_gpu:
        out["gpu-decode"] = {
            "samples_per_s": read["files_per_s"],
            "arithmetic": f"bounded by reading {read['files_per_s']:.0f} files/s; left out: "
            "the GPU's decode and augmentation speed (not measured here) and the training step",
        }
    else:
        rate = dec["decode_per_s"] * busy
        out["gpu-decode"] = {
            "samples_per_s": min(rate, read["files_per_s"]),
            "arithmetic": f"no GPU: DALI decodes on the CPU: min({dec['decode_per_s']:.0f} "
            f"decodes/s/core x {busy} threads, {read['files_per_s']:.0f} files/s read); left "
            "out: augmentation and the training step",
        }
    return out
