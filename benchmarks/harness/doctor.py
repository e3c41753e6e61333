"""``bench doctor``: what this machine can feed, measured in seconds, with the arithmetic shown.

Checks: cores, GPU, Pillow decode speed per core (and decode + random resized crop, the
``workers`` per-sample cost), read speed of the data folder (page cache dropped first where the
OS allows, so it is close to a cold read), read speed of a store, the StoreLoader with the
``precompute`` strategy's augmentation, and the feed rate each strategy could reach with the
workers ``run`` would give it. Every estimate names what it leaves out.
"""

from __future__ import annotations

import io
import os
import time
from pathlib import Path
from typing import Any

from PIL import Image

from benchmarks.environment import environment
from benchmarks.errors import BenchmarkError
from benchmarks.harness.sources import list_items

__all__ = ["decode_rate", "doctor", "feed_rates", "format_doctor", "loader_rate", "read_rate"]


def _drop_cache(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        return True
    except (OSError, AttributeError):
        return False
    finally:
        os.close(fd)


def read_rate(paths: list[Path], *, cold: bool = True) -> dict[str, Any]:
    """Read ``paths`` whole and return MB/s and files/s (page cache dropped first if ``cold``)."""
    dropped = all(_drop_cache(p) for p in paths) if cold else False
    t0 = time.perf_counter()
    nbytes = sum(len(p.read_bytes()) for p in paths)
    secs = max(time.perf_counter() - t0, 1e-9)
    return {
        "files": len(paths),
        "bytes": nbytes,
        "seconds": secs,
        "mb_per_s": nbytes / secs / 1e6,
        "files_per_s": len(paths) / secs,
        "cache_dropped": dropped,
    }


def decode_rate(paths: list[Path], size: int) -> dict[str, Any]:
    """Decode ``paths`` on one core: plain decode, and decode + RRC/flip/normalise to ``size``."""
    from benchmarks.harness.strategy_workers import PillowTrainDataset

    blobs = [p.read_bytes() for p in paths]  # read first: measure decoding only
    t0 = time.perf_counter()
    for path, blob in zip(paths, blobs, strict=True):
        try:
            with Image.open(io.BytesIO(blob)) as im:
                im.convert("RGB")
        except (OSError, ValueError, Image.DecompressionBombError) as exc:
            raise BenchmarkError(
                f"{path}: not a readable image ({type(exc).__name__}: {exc}); doctor decodes "
                "every file it times: fix or remove it"
            ) from exc
    decode_s = max(time.perf_counter() - t0, 1e-9)
    ds = PillowTrainDataset(paths, [0] * len(paths), size, seed=0)
    t0 = time.perf_counter()
    for i in range(len(paths)):
        ds[(0, i)]
    full_s = max(time.perf_counter() - t0, 1e-9)
    return {
        "images": len(paths),
        "decode_per_s": len(paths) / decode_s,
        "pipeline_per_s": len(paths) / full_s,
    }


def _store_files(store: str) -> list[Path]:
    return sorted(
        p for p in (Path(store) / "image").rglob("*") if p.is_file() and p.name != "zarr.json"
    )


LEFT_OUT = "left out: collation, the host-to-device copy and the training step"


def feed_rates(
    dec: dict[str, Any],
    read: dict[str, Any],
    cores: int,
    size: int,
    has_gpu: bool,
    store_read: dict[str, Any] | None = None,
    store_loader: dict[str, Any] | None = None,
    workers: int | None = None,
) -> dict[str, dict[str, Any]]:
    """Estimate samples/s each strategy could reach, with the arithmetic as text.

    Args:
        dec: :func:`decode_rate` figures.
        read: :func:`read_rate` of the data folder.
        cores: Usable cores.
        size: Stored side length of the store's samples.
        has_gpu: Whether a GPU is present.
        store_read: :func:`read_rate` of the store's shard files, if a store was given.
        store_loader: :func:`loader_rate` of the store, if a store was given.
        workers: Workers/threads the strategies get (``run --workers``; default ``cores``).
    """
    workers = cores if workers is None else workers
    busy = max(1, min(workers, cores))  # workers beyond the cores add no decode throughput
    per = dec["pipeline_per_s"]
    sample_bytes = size * size * 3
    src = store_read or read
    what = "store" if store_read else "data-folder (small files: a lower bound for a store)"
    out = {
        "workers": {
            "samples_per_s": per * busy,
            "arithmetic": f"{per:.0f} samples/s/core (decode+RRC+flip+normalise) x "
            f"{busy} cores ({workers} workers on {cores} cores); "
            f"{LEFT_OUT}",
        },
        "precompute": {
            "samples_per_s": src["mb_per_s"] * 1e6 / sample_bytes,
            "arithmetic": f"{src['mb_per_s']:.0f} MB/s {what} read / "
            f"{sample_bytes} B per {size}x{size}x3 sample; no decode",
        },
    }
    if store_loader:
        bound = out["precompute"]["samples_per_s"]
        out["precompute"] = {
            "samples_per_s": min(bound, store_loader["samples_per_s"]),
            "arithmetic": f"min({bound:.0f} read bound, {store_loader['samples_per_s']:.0f} "
            f"measured StoreLoader samples/s with TrainAugment (RRC+flip+"
            f"normalise, {store_loader['threads']} threads) on the CPU); "
            "left out: the host-to-device copy and the training step",
        }
    else:
        out["precompute"]["arithmetic"] += (
            "; left out: augmentation (give --store to measure it) and the training step"
        )
    if has_gpu:
        out["gpu-decode"] = {
            "samples_per_s": read["files_per_s"],
            "arithmetic": f"bounded by reading {read['files_per_s']:.0f} "
            "files/s; left out: nvJPEG decode and augmentation "
            "speed (not measured here) and the training step",
        }
    else:
        rate = dec["decode_per_s"] * busy
        out["gpu-decode"] = {
            "samples_per_s": min(rate, read["files_per_s"]),
            "arithmetic": f"no GPU: DALI decodes on the CPU: min("
            f"{dec['decode_per_s']:.0f} decodes/s/core x {busy} "
            f"threads, {read['files_per_s']:.0f} files/s read); "
            "left out: augmentation and the training step",
        }
    return out


def doctor(
    data: str,
    *,
    store: str | None = None,
    size: int = 64,
    max_files: int = 200,
    workers: int | None = None,
    batch_size: int = 64,
) -> dict[str, Any]:
    """Run every check and return the figures (JSON-ready).

    Args:
        data: Raw dataset.
        store: A store to measure read speed and the StoreLoader on.
        size: Output crop size, as ``run --size``.
        max_files: Files of ``data`` decoded and read.
        workers: Workers/threads the strategies get, as ``run --workers`` (default: cores).
        batch_size: Batch size of the StoreLoader measurement, as ``run --batch-size``.
    """
    env = environment()
    cores = env["cores_usable"]
    workers = cores if workers is None else workers
    paths = list_items(data)[0][:max_files]
    read = read_rate(paths)
    dec = decode_rate(paths, size)
    store_read = read_rate(_store_files(store)) if store else None
    store_loader = loader_rate(store, batch_size, size=size, workers=workers) if store else None
    stored = store_loader["size"] if store_loader else size
    has_gpu = bool(env["gpu"].get("name"))
    rates = feed_rates(dec, read, cores, stored, has_gpu, store_read, store_loader, workers)
    res = {
        "environment": env,
        "data": data,
        "size": size,
        "workers": workers,
        "read": read,
        "decode": dec,
        "store_read": store_read,
        "store_loader": store_loader,
        "feed_rates": rates,
    }
    from benchmarks.codecadvice import advice_for  # raw I/O-bound? which codec

    res["codec_advice"] = advice_for(res, paths)
    return res


def loader_rate(
    store: str, batch_size: int = 64, max_batches: int = 50, *, size: int = 64, workers: int = 2
) -> dict[str, Any]:
    """Measure StoreLoader as the ``precompute`` strategy runs it, augmentation included.

    Uses :class:`loaders.augment.TrainAugment` at ``size`` and ``workers`` threads (as
    ``run --workers``) on the CPU, over up to ``max_batches`` batches after a first one.
    """
    from loaders import StoreLoader
    from loaders.augment import TrainAugment
    from precompute.format.layout import open_store_info

    info = open_store_info(store)
    threads = min(64, max(1, workers))
    loader = StoreLoader(
        store,
        min(batch_size, max(1, info.num_valid)),
        augment=TrainAugment(size=(size, size), threads=threads),
        num_threads=threads,
        drop_last=False,
    )
    it = iter(loader)
    t_first = time.perf_counter()
    first = next(it, None)  # warm-up: threads start, first chunks read
    n, t0 = 0, time.perf_counter()
    for _, batch in zip(range(max_batches), it, strict=False):
        n += int(batch["label"].shape[0])
    if n == 0 and first is not None:  # a one-batch store: measure that batch
        n, t0 = int(first["label"].shape[0]), t_first
    secs = max(time.perf_counter() - t0, 1e-9)
    return {
        "samples": n,
        "seconds": secs,
        "samples_per_s": n / secs,
        "size": info.layout.size,
        "augment": f"TrainAugment({size} px)",
        "threads": threads,
    }


def _cache_text(read: dict[str, Any]) -> str:
    return "page cache dropped first" if read["cache_dropped"] else "may be cached"


def format_doctor(res: dict[str, Any]) -> str:
    """Return the doctor's figures as text."""
    env, read, dec = res["environment"], res["read"], res["decode"]
    gpu = env["gpu"]
    lines = [
        f"CPU: {env['cpu']}, {env['cores_usable']} usable cores, {env['memory_gib']} GiB",
        f"GPU: {gpu.get('name') or 'none'} ({gpu.get('nvml')})",
        f"decode (1 core, {dec['images']} images of {res['data']}): "
        f"{dec['decode_per_s']:.0f} images/s plain, {dec['pipeline_per_s']:.0f} samples/s with "
        f"RRC+flip+normalise to {res['size']} px",
        f"read data folder: {read['mb_per_s']:.1f} MB/s, {read['files_per_s']:.0f} files/s "
        f"({read['files']} files, {_cache_text(read)})",
    ]
    if res.get("store_read"):
        s = res["store_read"]
        lines.append(f"read store: {s['mb_per_s']:.1f} MB/s ({s['files']} shard files)")
    if res.get("store_loader"):
        s = res["store_loader"]
        lines.append(
            f"StoreLoader with {s['augment']}, {s['threads']} threads: "
            f"{s['samples_per_s']:.0f} samples/s ({s['samples']} samples timed, stored at "
            f"{s['size']} px)"
        )
    lines.append(f"feed rate each strategy could reach with {res['workers']} workers/threads:")
    lines += [
        f"  {name}: {v['samples_per_s']:.0f} samples/s = {v['arithmetic']}"
        for name, v in res["feed_rates"].items()
    ]
    lines += res.get("codec_advice", [])
    return "\n".join(lines)
