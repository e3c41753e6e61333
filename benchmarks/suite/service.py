"""Cache-hit latency with 1,000 stores in the catalog: in process and over HTTP.

    .venv/bin/python -m benchmarks.suite.service [--stores 1000] [--runs 300] [--images 64]

Setup (untimed): a tiny real image source, one tiny real store, and ``--stores`` catalog
entries (one per spec seed) whose store folders link to that store. Timed: ``get_or_build``
hits (fingerprint the source + key + catalog lookup + LRU touch), ``get(key)``, and over HTTP
(a ``python -m service`` subprocess on loopback, keep-alive client) ``POST /stores`` hits and
``GET /stores/{key}``, each call one run (:mod:`benchmarks.runner`, paths taking turns, 20
warm-up calls). Prints min / median / max ms per call, the p95 of each path against the target
(a hit answers in under 50 ms) and the HTTP / in-process ratio.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np

from benchmarks.runner import Bench, Line, Results, Row, Run, add_json_argument
from precompute.pipeline.writer import write_store_from_arrays
from precompute.sample import make_sample_dataset
from precompute.spec import BuildSpec
from service import Cache
from service.cache.catalog import Entry, dir_size

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


def _row(name: str, call: Callable[[], object]) -> Row:
    def body(run: Run) -> int:
        call()
        return 1

    return Row(name, body, unit="call", show=("ms",))


def _p95(name: str, is_hit: bool = True) -> Line:
    def value(r: Results) -> float:
        return float(np.percentile(r[name].values("ms"), 95))

    def verdict(v: float) -> str:
        return ("ok" if v < TARGET_MS else "OVER TARGET") if is_hit else "(not a hit; info)"

    return Line(f"p95 {name}:", value, "{:.3f} ms", verdict)


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


GET_OR_BUILD = "in-process get_or_build hit"
POST = "HTTP POST /stores hit"


def main(argv: list[str] | None = None) -> None:
    """Populate a catalog, time cache hits in process and over HTTP, print the latencies."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stores", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--images", type=int, default=64, help="files in the source")
    add_json_argument(ap)
    args = ap.parse_args(argv)
    rng = random.Random(0)
    with Bench("service", args.json) as bench, tempfile.TemporaryDirectory() as tmp:
        bench.note(
            f"# bench_service: python {platform.python_version()}, {platform.platform()}, "
            f"{os.cpu_count()} cpus; {args.stores} stores, source of {args.images} images"
        )
        base = Path(tmp)
        source = make_sample_dataset(
            base / "data" / "src", num_images=args.images, num_classes=4, size_range=(16, 32)
        )
        t0 = time.perf_counter()
        cache, specs = _populate(base, source, args.stores)
        bench.note(
            f"# setup: catalog of {len(cache.list())} entries in {time.perf_counter() - t0:.1f} s"
        )
        keys = [cache.key_for(source, s) for s in specs]
        rows = [
            _row(GET_OR_BUILD, lambda: cache.get_or_build(source, rng.choice(specs))),
            _row("in-process get(key) hit", lambda: cache.get(rng.choice(keys))),
        ]
        lines = [_p95(row.name) for row in rows]
        local = bench.measure("in process", rows, runs=args.runs, warmup=20, lines=lines)
        listing = [_row("in-process list() of all stores", cache.list)]
        lines = [_p95(listing[0].name, is_hit=False)]
        bench.measure("in process, not a hit", listing, runs=10, warmup=2, lines=lines)
        proc, url = _start_server(cache.root, base / "data")
        try:
            with httpx.Client(base_url=url, timeout=30) as client:

                def post_hit() -> None:
                    r = client.post("/stores", json={"source": "src", "spec": rng.choice(specs)})
                    if r.status_code != 200:
                        raise RuntimeError(f"expected a hit, got {r.status_code}: {r.text}")

                rows = [
                    _row(POST, post_hit),
                    _row(
                        "HTTP GET /stores/{key}",
                        lambda: client.get(f"/stores/{rng.choice(keys)}").raise_for_status(),
                    ),
                ]
                ratio = Line(
                    "ratio HTTP POST hit / in-process get_or_build hit (medians):",
                    lambda r: r[POST].median("ms") / local[GET_OR_BUILD].median("ms"),
                    "{:.2f}x",
                )
                lines = [*(_p95(row.name) for row in rows), ratio]
                bench.measure("over HTTP", rows, runs=args.runs, warmup=20, lines=lines)
        finally:
            proc.terminate()
            proc.wait(timeout=30)


if __name__ == "__main__":
    main()
