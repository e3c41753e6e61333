"""Benchmark StoreLoader from local disk against the same store in S3-compatible storage.

Run: ``.venv/bin/python -m benchmarks.suite.objstore`` (``--help`` for sizes). One run, same
store, three sources side by side, taking turns epoch by epoch (:mod:`benchmarks.runner`):

1. ``local``: the store on local disk (page cache hot after the warm-up), as the loader reads
   it by default; ``local pread+crc``: the same read as the object rows must do it, each chunk
   copied through the kernel (``io="pread"``) and its crc32c checked on every read.
2. ``s3``: the store in an S3-compatible server, every chunk a ranged GET (no local cache).
   Without ``--endpoint`` the server is moto's server mode started on 127.0.0.1 by this script
   (a single-process Python server: its own CPU is part of the measurement, so this row is a
   floor, not what a real object store gives).
3. ``s3+cache``: the same with a :class:`~loaders.store.readcache.ReadCache` on local disk,
   measured on epochs after the first (the cache holds the whole store): what epoch 2 costs.
4. ``s3 line rate``: the same reads from :mod:`benchmarks.suite.objstore.rangeserver`, a
   read-only S3-compatible server of the local store's folder that sends each answer with one
   ``sendall``: the loader's own CPU per sample when the server is not the bottleneck (moto
   sends slowly, and a slow sender wakes a reader many more times per byte).

The object rows read through the same byte-store interface as the local ones
(:mod:`precompute.storage`): ranged GETs on the loader's read threads, each received straight
into the batch rows (:mod:`precompute.storage.rawget`).

For each: samples/s, read bandwidth (MB/s of pixel bytes), host CPU ms/sample of this process
(the moto server runs in its own process and is not counted; obstore's own threads are), and
requests and bytes fetched per sample (the store's own counters). Also bytes per sample of each
format (JPEG and PNG inputs as generated, the stored sample with its crc32c and index
overhead). Setup happens outside the timed parts; each figure is over ``--runs`` epochs after a
warm-up epoch.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.environment import environment_line
from benchmarks.runner import Bench, Line, Row, Run, add_json_argument
from loaders import StoreLoader
from loaders.store.readcache import ReadCache
from precompute import BuildSpec
from precompute.format.layout import StoreLayout
from precompute.format.storecheck import expected_shard_size
from precompute.pipeline.writer import write_store_from_arrays
from precompute.sample import make_image
from precompute.storage.objupload import put_folder

__all__ = ["main"]


def _format_bytes(size: int, n: int = 32) -> dict[str, float]:
    """Bytes per sample: JPEG q90 and PNG of generated images, and the stored sample."""
    jpeg: list[int] = []
    png: list[int] = []
    for i in range(n):
        im = make_image(0, i, i % 4, (500, 375))  # about ImageNet's median resolution
        for fmt, out, kw in (("JPEG", jpeg, {"quality": 90}), ("PNG", png, {})):
            buf = io.BytesIO()
            im.save(buf, fmt, **kw)
            out.append(len(buf.getvalue()))
    layout = StoreLayout(4096, size, 1, 256, 32)
    stored = sum(expected_shard_size(layout, name, 0) or 0 for name in ("image", "label", "extent"))
    return {
        "jpeg_q90": statistics.mean(jpeg),
        "png": statistics.mean(png),
        "store_sample": stored / 256,
        "store_raw_pixels": size * size * 3,
    }


def _server(*argv: str) -> tuple[subprocess.Popen[bytes], str]:
    """Start ``python -m ARGV... PORT`` on a free port of 127.0.0.1; return it and its URL.

    In its own process: its CPU is not this process's.
    """
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", *argv, str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, url
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"{argv[0]} did not start")


def _counts(store: Any) -> tuple[int, int]:
    """Requests and bytes fetched so far by ``store`` (a local store counts none)."""
    return getattr(store, "requests", 0), getattr(store, "bytes_read", 0)


def _row(name: str, loader: StoreLoader) -> Row:
    """One epoch per call; records requests and bytes fetched per sample (``s3`` rows)."""
    store = loader.source.image.store

    def body(run: Run) -> int:
        loader.set_epoch(run.index)
        req0 = _counts(store)
        n = 0
        for batch in loader:
            n += len(batch["index"])
        now = _counts(store)
        reqs = (now[0] - req0[0], now[1] - req0[1])
        run.record("gets_per_sample", reqs[0] / n)
        run.record("bytes_fetched_per_sample", reqs[1] / n)
        return n

    return Row(name, body, show=("rate", "cpu_ms", "gets_per_sample"))


def _bandwidth(name: str, sample_bytes: float) -> Line:
    return Line(
        f"{name} read bandwidth (pixel bytes), MB/s:",
        lambda r: r[name].median("rate") * sample_bytes / 1e6,
        "{:.1f}",
    )


def main(argv: list[str] | None = None) -> None:
    """Run the benchmark and print one JSON object (and a table)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=512)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--chunk-samples", type=int, default=32)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--threads", type=int, default=8, help="loader num_threads (GETs in flight)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--endpoint", help="an S3-compatible endpoint (default: start moto)")
    ap.add_argument("--bucket", help="an existing bucket at --endpoint (moto: one is made)")
    add_json_argument(ap)
    args = ap.parse_args(argv)
    procs = []
    if args.endpoint is None:
        moto, args.endpoint = _server("moto.server", "-H", "127.0.0.1", "-p")
        procs.append(moto)
        os.environ.setdefault("AWS_ACCESS_KEY_ID", "bench")
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bench")
    os.environ["AWS_ENDPOINT_URL"] = args.endpoint
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    try:
        with Bench("objstore", args.json) as bench, tempfile.TemporaryDirectory() as tmp:
            fast, served = _server("benchmarks.suite.objstore.rangeserver", tmp)
            procs.append(fast)
            _run(args, Path(tmp), bench, served)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def _make_bucket(endpoint: str, bucket: str) -> None:
    """Create ``bucket`` on the moto server at ``endpoint`` (moto takes an unsigned request)."""
    import urllib.request

    urllib.request.urlopen(urllib.request.Request(f"{endpoint}/{bucket}", method="PUT")).close()


def _line_rate(endpoint: str, url: str, **kw: Any) -> StoreLoader:
    """A loader of ``url`` on the line-rate server at ``endpoint``.

    A bucket's object store is opened at its first use, from the environment of that moment:
    so ``AWS_ENDPOINT_URL`` names this server while its loader opens, and the other one after.
    """
    other = os.environ["AWS_ENDPOINT_URL"]
    os.environ["AWS_ENDPOINT_URL"] = endpoint
    try:
        return StoreLoader(url, **kw)
    finally:
        os.environ["AWS_ENDPOINT_URL"] = other


def _run(args: argparse.Namespace, tmp: Path, bench: Bench, served: str) -> None:
    n, s = args.samples, args.size
    images = np.random.default_rng(0).integers(0, 256, (n, s, s, 3), dtype=np.uint8)
    spec = BuildSpec(size=s, chunk_samples=args.chunk_samples, shard_samples=8 * args.chunk_samples)
    local = tmp / "served" / "store"  # the line-rate server serves s3://served/store from here
    write_store_from_arrays(local, images, np.arange(n) % 10, spec)
    bucket = args.bucket or f"bench-{os.getpid()}"
    if args.bucket is None:
        _make_bucket(args.endpoint, bucket)
    url = f"s3://{bucket}/store.zarr"
    put_folder(local, url)
    sample_bytes = float(s * s * 3)
    kw = {"batch_size": args.batch, "num_threads": args.threads, "prefetch": 2, "seed": 0}
    loaders = {
        "local": StoreLoader(local, **kw),
        "local pread+crc": StoreLoader(local, io="pread", verify="always", **kw),
        "s3": StoreLoader(url, **kw),
        "s3+cache": StoreLoader(url, read_cache=ReadCache(tmp / "cache", 64 << 30), **kw),
        "s3 line rate": _line_rate(served, "s3://served/store", **kw),
    }
    bench.note(environment_line(), f"args: {json.dumps(vars(args), default=str)}")
    try:
        rows = [_row(name, loader) for name, loader in loaders.items()]
        lines = [_bandwidth(name, sample_bytes) for name in loaders]
        bench.measure("StoreLoader epochs by source", rows, runs=args.runs, lines=lines)
    finally:
        for loader in loaders.values():
            loader.close()
    sizes = _format_bytes(s)
    bench.note("bytes per sample: " + json.dumps(sizes))
