"""Cache-hit latency with 1,000 stores in the catalog: in process and over HTTP.

    .venv/bin/python -m benchmarks.bench_service [--stores 1000] [--runs 300] [--images 64]

Setup (untimed): a tiny real image source, one tiny real store, and ``--stores`` catalog
entries (one per spec seed) whose store folders link to that store. Timed: ``get_or_build``
hits (fingerprint the source + key + catalog lookup + LRU touch), ``get(key)``, and over HTTP
(a ``python -m service`` subprocess on loopback, keep-alive client) ``POST /stores`` hits and
``GET /stores/{key}``. Prints median / p95 per path and the HTTP / in-process ratio.
Target: a hit answers in under 50 ms.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np

from precompute.sample import make_sample_dataset
from precompute.spec import BuildSpec
from precompute.writer import write_store_from_arrays
from service import Cache
from service.catalog import Entry, dir_size

SPEC = {"size": 16, "shard_samples": 8, "chunk_samples": 4}
TARGET_MS = 50.0


def _populate(root: Path, source: Path, stores: int) -> tuple[Cache, list[dict[str, int]]]:
    cache = Cache(root / "cache")
    template = root / "template"
    write_store_from_arrays(
        template, np.zeros((8, 16, 16, 3), np.uint8), np.arange(8), BuildSpec.from_dict(SPEC)
    )
    size = dir_size(template)
    specs = [{**SPEC, "seed": i} for i in range(stores)]
    for spec in specs:
        request = cache.request_for(source, spec)
        cache.layout.store(request.key).symlink_to(template, target_is_directory=True)
        cache.layout.write_entry(
            Entry(
                key=request.key,
                path=cache.layout.store(request.key),
                source=str(source),
                spec=request.spec.to_dict(),
                source_fingerprint=request.fingerprint,
                transform_version="1",
                format_version=1,
                size_bytes=size,
                num_samples=8,
                num_valid=8,
                created=time.time(),
                build_seconds=0.0,
            )
        )
    return cache, specs


def _time_ms(fn: Callable[[], object], runs: int, warmup: int = 20) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    return out


def _stats(name: str, ms: list[float], *, is_hit: bool = True) -> float:
    med = statistics.median(ms)
    p95 = float(np.percentile(ms, 95))
    verdict = ("ok" if p95 < TARGET_MS else "OVER TARGET") if is_hit else "not a hit; info"
    print(f"{name:<34} median {med:8.3f} ms   p95 {p95:8.3f} ms   ({len(ms)} runs, {verdict})")
    return med


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start_server(root: Path, source_root: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "service",
            "--root",
            str(root),
            "--source-root",
            str(source_root),
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{url}/healthz").raise_for_status()
            return proc, url
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"server did not start: {proc.communicate()[1].decode()[-2000:]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stores", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--images", type=int, default=64, help="files in the source")
    args = ap.parse_args()
    print(
        f"# bench_service: python {platform.python_version()}, {platform.platform()}, "
        f"{os.cpu_count()} cpus; {args.stores} stores, source of {args.images} images"
    )
    rng = random.Random(0)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        source = make_sample_dataset(
            base / "data" / "src", num_images=args.images, num_classes=4, size_range=(16, 32)
        )
        t0 = time.perf_counter()
        cache, specs = _populate(base, source, args.stores)
        setup_s = time.perf_counter() - t0
        print(f"# setup: catalog of {len(cache.list())} entries in {setup_s:.1f} s")
        keys = [cache.key_for(source, s) for s in specs]
        local = _stats(
            "in-process get_or_build hit",
            _time_ms(lambda: cache.get_or_build(source, rng.choice(specs)), args.runs),
        )
        _stats("in-process get(key) hit", _time_ms(lambda: cache.get(rng.choice(keys)), args.runs))
        _stats("in-process list() of all stores", _time_ms(cache.list, 10, warmup=2), is_hit=False)
        proc, url = _start_server(cache.root, base / "data")
        try:
            with httpx.Client(base_url=url, timeout=30) as client:

                def post_hit() -> None:
                    r = client.post("/stores", json={"source": "src", "spec": rng.choice(specs)})
                    if r.status_code != 200:
                        raise RuntimeError(f"expected a hit, got {r.status_code}: {r.text}")

                remote = _stats("HTTP POST /stores hit", _time_ms(post_hit, args.runs))
                _stats(
                    "HTTP GET /stores/{key}",
                    _time_ms(
                        lambda: client.get(f"/stores/{rng.choice(keys)}").raise_for_status(),
                        args.runs,
                    ),
                )
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    print(f"ratio HTTP POST hit / in-process get_or_build hit (medians): {remote / local:.2f}x")


if __name__ == "__main__":
    main()
