"""``bench doctor``: what this machine can feed, measured in seconds, with the arithmetic shown.

The same checks for every kind of data the build takes (the source listed and decoded as
``precompute build`` does; the per-sample work the run's workload does,
:mod:`benchmarks.harness.workloads`): cores, GPU, the decode cost of a sample on one core
(plain, with the kinds' decoders: Pillow, soundfile + soxr + log-mel, numpy; and with the
``workers`` strategy's augmentation), the read speed of the source's files (page cache dropped
first where the OS allows, so it is close to a cold read), the read speed of a store, the
StoreLoader with the ``precompute`` strategy's augmentation, the feed rate each strategy
could reach with the workers ``run`` would give it, and whether a raw store of the source would
be I/O-bound on this storage and which codec each field should be stored with, measured on a
few of the user's samples (:mod:`benchmarks.codecadvice`). Every estimate names what it leaves
out.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.codecadvice import SAMPLES, advice_for, advice_lines
from benchmarks.environment import environment
from benchmarks.errors import BenchmarkError
from benchmarks.harness.feed_rates import feed_rates
from benchmarks.harness.stored import read_weight, store_files, store_sample

__all__ = [
    "decode_rate",
    "doctor",
    "feed_rates",
    "format_doctor",
    "loader_rate",
    "read_rate",
    "sample_bytes",
]


def _drop_cache(path: str) -> bool:
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


def read_rate(paths: list[Path] | list[str], *, cold: bool = True) -> dict[str, Any]:
    """Read ``paths`` whole and return MB/s and files/s (page cache dropped first if ``cold``)."""
    dropped = all(_drop_cache(str(p)) for p in paths) if cold else False
    t0 = time.perf_counter()
    nbytes = sum(len(Path(p).read_bytes()) for p in paths)
    secs = max(time.perf_counter() - t0, 1e-9)
    return {
        "files": len(paths),
        "bytes": nbytes,
        "seconds": secs,
        "mb_per_s": nbytes / secs / 1e6,
        "files_per_s": len(paths) / secs,
        "cache_dropped": dropped,
    }


def _source_files(plan: Any, count: int) -> list[str]:
    """The distinct local files of the first ``count`` items (a scene's file once)."""
    out: dict[str, None] = {}
    for item in plan.source.items[:count]:
        for _, key in item.files:
            path = plan.source.locate(key.split("#", 1)[0])
            if os.path.isfile(path):
                out[path] = None
    return list(out)


def decode_rate(plan: Any, workload: Any, count: int) -> dict[str, Any]:
    """Decode ``count`` samples on one core: plain, and with the ``workers`` per-item work.

    One core is one thread: torch, BLAS and OpenMP run one thread each meanwhile, as in a
    DataLoader worker (:func:`precompute.runtime.threads.one_thread_pools`).

    Raises:
        BenchmarkError: A sample cannot be decoded, naming its file.
    """
    from precompute.runtime.threads import one_thread_pools

    with one_thread_pools():
        return _decode_rate(plan, workload, count)


def _decode_rate(plan: Any, workload: Any, count: int) -> dict[str, Any]:
    from benchmarks.harness.workloads.items import decoded_values

    n = min(count, len(plan))
    try:
        t0 = time.perf_counter()
        for i in range(n):
            decoded_values(plan, i)
        decode_s = max(time.perf_counter() - t0, 1e-9)
    except BenchmarkError as exc:
        raise BenchmarkError(
            f"{exc}; doctor decodes every sample it times: fix or remove it"
        ) from exc
    transform = workload.item_transform(0)
    t0 = time.perf_counter()
    for i in range(n):
        transform(decoded_values(plan, i), np.random.default_rng([0, 0, i]))
    full_s = max(time.perf_counter() - t0, 1e-9)
    return {
        "samples": n,
        "decode_per_s": n / decode_s,
        "pipeline_per_s": n / full_s,
        "pipeline": workload.classic_text,
    }


def sample_bytes(plan: Any) -> int:
    """Raw bytes of one sample: every field's storage at the spec's size, decoded."""
    from precompute.format.arrays import sample_nbytes  # the raw of inspect's ratios

    size = plan.spec.size
    total = 0
    for f in plan.fields:
        st = f.storage(size)
        total += sample_nbytes(st.shape, np.dtype(st.dtype).itemsize)
    return total


def doctor(
    data: str,
    *,
    store: str | None = None,
    size: int | str = 64,
    max_files: int = 200,
    workers: int | None = None,
    batch_size: int = 64,
    spec: Any = None,
    torch_threads: int | None = None,
) -> dict[str, Any]:
    """Run every check and return the figures (JSON-ready).

    Args:
        data: The source, as ``precompute build`` takes it.
        store: A store to measure read speed and the StoreLoader on.
        size: Output crop side or ``"WxH"`` frame, as ``run --size`` (when ``spec`` is None).
        max_files: Samples of ``data`` decoded and whose files are read.
        workers: Workers/threads the strategies get, as ``run --workers`` (default: cores).
        batch_size: Batch size of the StoreLoader measurement, as ``run --batch-size``.
        spec: The build spec (``precompute build``'s flags); None: images at ``size``.
        torch_threads: torch's intra-op threads while the StoreLoader is measured, as ``run
            --torch-threads`` (None: ``run``'s default). The decode per core runs every
            native thread pool at one thread.
    """
    from benchmarks.harness.consumers import TorchThreads, torch_threads_of
    from benchmarks.harness.sources import plan_source
    from benchmarks.harness.workloads import choose
    from precompute.spec import BuildSpec

    env = environment()
    cores = env["cores_usable"]
    workers = cores if workers is None else workers
    plan = plan_source(data, spec if spec is not None else BuildSpec(size=size))
    workload = choose(plan)
    read = read_rate(_source_files(plan, max_files))
    dec = decode_rate(plan, workload, max_files)
    store_read = read_rate(store_files(store)) if store else None
    pool = TorchThreads.choose(torch_threads, cores, workers)  # as run's
    with torch_threads_of(pool.threads):
        store_loader = loader_rate(store, batch_size, workload, workers=workers) if store else None
    has_gpu = bool(env["gpu"].get("name"))
    nbytes = sample_bytes(plan)
    sample = store_sample(store) if store else None  # its codecs and bytes, as inspect reads
    weight = read_weight(sample, nbytes)
    rates = feed_rates(dec, read, cores, None, has_gpu, store_read, store_loader, workers,
                       bytes_per_sample=round(weight["bytes"]),
                       gpu_decode=workload.has_engine("gpu-decode"))  # fmt: skip
    res: dict[str, Any] = {
        "environment": env,
        "data": data,
        "workload": workload.title,
        "left_out": workload.left_out_text(),
        "size": plan.spec.size,
        "stored": workload.stored,
        "bytes_per_sample": weight,
        "store": sample,
        "workers": workers,
        "torch_threads": {"threads": pool.threads, "policy": pool.text},
        "read": read,
        "decode": dec,
        "store_read": store_read,
        "store_loader": store_loader,
        "feed_rates": rates,
    }
    res["codec_advice"] = advice_for(res, plan, nbytes, min(max_files, SAMPLES))
    return res


def loader_rate(
    store: str,
    batch_size: int = 64,
    workload: Any = None,
    max_batches: int = 50,
    *,
    size: int | str = 64,
    workers: int = 2,
) -> dict[str, Any]:
    """Measure StoreLoader as the ``precompute`` strategy runs it, augmentation included.

    Uses the ``workload``'s augmentation (``TrainAugment`` at ``size`` without one) and
    ``workers`` threads (as ``run --workers``) on the CPU, over up to ``max_batches`` batches
    after a first one.
    """
    from benchmarks.harness.stored import fields_text
    from loaders import StoreLoader
    from loaders.augment import TrainAugment
    from precompute.checks import size_hw
    from precompute.format.layout import open_store_info

    info = open_store_info(store)
    threads = min(64, max(1, workers))
    augment = (
        workload.store_augment(threads)
        if workload is not None
        else TrainAugment(size=size_hw(size), threads=threads)
    )
    loader = StoreLoader(
        store,
        min(batch_size, max(1, info.num_valid)),
        augment=augment,
        num_threads=threads,
        drop_last=False,
    )
    it = iter(loader)
    t_first = time.perf_counter()
    first = next(it, None)  # warm-up: threads start, first chunks read
    n, t0 = 0, time.perf_counter()
    for _, batch in zip(range(max_batches), it, strict=False):
        n += int(batch["index"].shape[0])
    if n == 0 and first is not None:  # a one-batch store: measure that batch
        n, t0 = int(first["index"].shape[0]), t_first
    secs = max(time.perf_counter() - t0, 1e-9)
    loader.close()
    what = workload.store_text if workload is not None else f"TrainAugment({size} px)"
    return {
        "samples": n,
        "seconds": secs,
        "samples_per_s": n / secs,
        "size": info.layout.size,
        "stored": fields_text(info.fields, info.layout.size),
        "augment": what,
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
        f"workload: {res['workload']} of {res['data']} (stored sample: {res['stored']})",
        f"decode (1 core, 1 thread, {dec['samples']} samples): {dec['decode_per_s']:.0f} "
        f"samples/s plain, {dec['pipeline_per_s']:.0f} samples/s with the workers' work "
        f"({dec['pipeline']})",
        f"read source files: {read['mb_per_s']:.1f} MB/s, {read['files_per_s']:.0f} files/s "
        f"({read['files']} files, {_cache_text(read)})",
    ]
    lines[3:3] = [f"WARNING: {res['left_out']}"] if res.get("left_out") else []
    if res.get("store_read"):
        s = res["store_read"]
        lines.append(f"read store: {s['mb_per_s']:.1f} MB/s ({s['files']} shard files)")
    if res.get("store"):
        s = res["store"]
        lines.append(
            f"store's fields (its metadata): {s['codecs']} per sample; a read fetches "
            f"{s['bytes_per_sample']:.0f} B/sample (every array's files over its "
            f"{s['samples']} samples)"
        )
    if res.get("store_loader"):
        s = res["store_loader"]
        lines.append(
            f"StoreLoader with {s['augment']}, {s['threads']} threads: "
            f"{s['samples_per_s']:.0f} samples/s ({s['samples']} samples timed; the store "
            f"holds {s['stored']})"
        )
    if res.get("torch_threads"):
        t = res["torch_threads"]
        lines.append(f"torch threads beside the StoreLoader: {t['threads']} ({t['policy']})")
    lines.append(f"feed rate each strategy could reach with {res['workers']} workers/threads:")
    lines += [
        f"  {name}: {v['samples_per_s']:.0f} samples/s = {v['arithmetic']}"
        for name, v in res["feed_rates"].items()
    ]
    if res.get("codec_advice"):
        lines += advice_lines(res["codec_advice"])
    return "\n".join(lines)
